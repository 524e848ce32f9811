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

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view content) {
  // "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
  const size_t close = content.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError("no \")\" in a /proc stat line");
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(content.substr(close + 1), ' ', absl::SkipWhitespace());
  // fields[0] is field 3 (state): field N is fields[N - 3].
  if (fields.size() < 20) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a /proc stat line has ", fields.size() + 2, " fields, not 22"));
  }
  ProcStat stat;
  stat.state = fields[0].empty() ? '?' : fields[0][0];
  int pgrp = 0;
  if (!absl::SimpleAtoi(fields[5 - 3], &pgrp) ||
      !absl::SimpleAtoi(fields[14 - 3], &stat.utime_ticks) ||
      !absl::SimpleAtoi(fields[15 - 3], &stat.stime_ticks) ||
      !absl::SimpleAtoi(fields[22 - 3], &stat.start_ticks)) {
    return absl::InvalidArgumentError("a /proc stat line has a bad number");
  }
  stat.pgrp = pgrp;
  return stat;
}

absl::StatusOr<ProcStat> ReadProcStat(pid_t pid) {
  absl::StatusOr<std::string> content =
      ReadSmallFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!content.ok() || content->empty()) {
    return absl::NotFoundError(absl::StrCat("no process ", pid));
  }
  absl::StatusOr<ProcStat> stat = ParseProcStat(*content);
  if (!stat.ok()) {
    return absl::InternalError(
        absl::StrCat("/proc/", pid, "/stat: ", stat.status().message()));
  }
  return stat;
}

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
