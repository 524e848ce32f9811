#include "plugins/examples/mock_driver/procfs.h"

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth::mock {
namespace {

// The whole of a file, NOT_FOUND if it cannot be opened.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace

absl::StatusOr<uint64_t> ReadVmRssBytes(pid_t pid) {
  absl::StatusOr<std::string> content =
      ReadSmallFile(absl::StrCat("/proc/", pid, "/status"));
  if (!content.ok()) return content.status();
  for (absl::string_view line : absl::StrSplit(*content, '\n')) {
    if (!absl::ConsumePrefix(&line, "VmRSS:")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, "kB");
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) {
      return absl::InternalError(
          absl::StrCat("/proc/", pid, "/status: bad VmRSS line"));
    }
    return kib * 1024;
  }
  return absl::NotFoundError(
      absl::StrCat("/proc/", pid, "/status has no VmRSS"));
}

int64_t ClockTicksPerSecond() {
  static const int64_t ticks = [] {
    const long value = sysconf(_SC_CLK_TCK);
    return value > 0 ? static_cast<int64_t>(value) : int64_t{100};
  }();
  return ticks;
}

double CpuCoreMhz() {
  static const double mhz = [] {
    absl::StatusOr<std::string> cpuinfo = ReadSmallFile("/proc/cpuinfo");
    if (cpuinfo.ok()) {
      for (absl::string_view line : absl::StrSplit(*cpuinfo, '\n')) {
        if (!absl::StartsWith(line, "cpu MHz")) continue;
        const size_t colon = line.find(':');
        double value = 0;
        if (colon != absl::string_view::npos &&
            absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(colon + 1)),
                             &value) &&
            value > 0) {
          return value;
        }
      }
    }
    absl::StatusOr<std::string> max_khz =
        ReadSmallFile("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
    double khz = 0;
    if (max_khz.ok() &&
        absl::SimpleAtod(absl::StripAsciiWhitespace(*max_khz), &khz) &&
        khz > 0) {
      return khz / 1000;
    }
    return 0.0;
  }();
  return mhz;
}

}  // namespace berth::mock
