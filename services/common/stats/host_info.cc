#include "services/common/stats/host_info.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/common/stats/kept_file.h"

namespace berth {
namespace stats {
namespace {

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  absl::StatusOr<KeptFile> file = KeptFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<absl::string_view> content = file->Read();
  if (!content.ok()) return content.status();
  return std::string(*content);
}

}  // namespace

absl::StatusOr<double> HostCpuMhz(const std::string& proc_root,
                                  const std::string& sys_root) {
  const std::string cpuinfo = absl::StrCat(proc_root, "/cpuinfo");
  absl::StatusOr<std::string> content = ReadAll(cpuinfo);
  if (content.ok()) {
    for (absl::string_view line : absl::StrSplit(*content, '\n')) {
      if (!absl::StartsWith(line, "cpu MHz")) continue;
      const size_t colon = line.find(':');
      if (colon == absl::string_view::npos) continue;
      double mhz = 0;
      if (absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(colon + 1)),
                           &mhz) &&
          mhz > 0) {
        return mhz;
      }
    }
  }
  const std::string cpufreq = absl::StrCat(
      sys_root, "/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  absl::StatusOr<std::string> khz_text = ReadAll(cpufreq);
  uint64_t khz = 0;
  if (khz_text.ok() &&
      absl::SimpleAtoi(absl::StripAsciiWhitespace(*khz_text), &khz) &&
      khz > 0) {
    return static_cast<double>(khz) / 1000.0;
  }
  return absl::NotFoundError(
      absl::StrCat("cannot find a core's MHz: no \"cpu "
                   "MHz\" line in ",
                   cpuinfo, " and no number in ", cpufreq));
}

absl::StatusOr<HostCpuTimes> ReadHostCpuTimes(const std::string& proc_root) {
  const std::string path = absl::StrCat(proc_root, "/stat");
  absl::StatusOr<std::string> content = ReadAll(path);
  if (!content.ok()) return content.status();
  HostCpuTimes times;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(*content, '\n')) {
    if (absl::StartsWith(line, "cpu ")) {
      std::vector<uint64_t> values;
      for (absl::string_view field : absl::StrSplit(
               line.substr(4), absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
        uint64_t value = 0;
        if (!absl::SimpleAtoi(field, &value)) break;
        values.push_back(value);
      }
      if (values.size() < 4) {
        return absl::InternalError(
            absl::StrCat("cannot parse the cpu line of ", path));
      }
      // user nice system idle iowait irq softirq steal [guest guest_nice]
      const size_t counted = std::min<size_t>(values.size(), 8);
      for (size_t i = 0; i < counted; ++i) times.total += values[i];
      const uint64_t idle = values[3] + (values.size() > 4 ? values[4] : 0);
      times.busy = times.total - idle;
      found = true;
    } else if (absl::StartsWith(line, "cpu") && line.size() > 3 &&
               absl::ascii_isdigit(line[3])) {
      ++times.cores;
    }
  }
  if (!found) {
    return absl::InternalError(absl::StrCat("no cpu line in ", path));
  }
  return times;
}

double HostCpuPercent(const HostCpuTimes& before, const HostCpuTimes& after) {
  if (after.total <= before.total) return 0;
  const uint64_t busy =
      after.busy >= before.busy ? after.busy - before.busy : 0;
  return static_cast<double>(busy) * 100.0 * after.cores /
         static_cast<double>(after.total - before.total);
}

absl::StatusOr<HostMemory> ReadHostMemory(const std::string& proc_root) {
  const std::string path = absl::StrCat(proc_root, "/meminfo");
  absl::StatusOr<std::string> content = ReadAll(path);
  if (!content.ok()) return content.status();
  std::optional<uint64_t> total;
  std::optional<uint64_t> available;
  const KeyedField fields[] = {{"MemTotal:", &total},
                               {"MemAvailable:", &available}};
  ParseFlatKeyed(*content, fields);
  if (!total || !available) {
    return absl::InternalError(
        absl::StrCat("no MemTotal or MemAvailable line in ", path));
  }
  return HostMemory{*total * 1024, *available * 1024};
}

}  // namespace stats
}  // namespace berth
