// Fuzzes the text parsers of the stats collectors: /proc/self/mountinfo
// (ParseCgroupMounts), /proc/PID/stat (base::ParseProcStat), flat-keyed
// files (cpu.stat, memory.stat, cpuacct.stat, /proc/PID/status,
// /proc/meminfo: ParseFlatKeyed) and single-number files (memory.current,
// pids.max: ParseSingleNumber), and cgroup paths (CleanCgroupPath). The
// first byte chooses the parser (its value modulo 5, in that order), the rest
// is the file's content.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/process.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/stats/collector.h"
#include "services/common/stats/kept_file.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

using ::berth::stats::CgroupMounts;
namespace pb = ::berth::stats::v1;

void Check(bool condition) {
  if (!condition) std::abort();
}

bool AtOrBelow(absl::string_view path, absl::string_view root) {
  if (root == "/") return true;
  return path == root ||
         (absl::StartsWith(path, root) && path.size() > root.size() &&
          path[root.size()] == '/');
}

void FuzzMountinfo(absl::string_view text) {
  for (absl::string_view root : {"/sys/fs/cgroup", "/sys/fs/cgroup/", "/"}) {
    const CgroupMounts mounts = berth::stats::ParseCgroupMounts(text, root);
    const std::string normalized =
        root == "/" ? "/" : std::string(absl::StripSuffix(root, "/"));
    for (const auto& [controller, point] : mounts.v1) {
      Check(!controller.empty());
      Check(AtOrBelow(point, normalized));
      Check(mounts.V1Mount(controller) == point);
    }
    if (!mounts.v2.empty()) Check(AtOrBelow(mounts.v2, normalized));
    const bool v1 = !mounts.v1.empty(), v2 = !mounts.v2.empty();
    Check(mounts.layout == (v1 && v2 ? pb::CGROUP_LAYOUT_HYBRID
                            : v1     ? pb::CGROUP_LAYOUT_V1
                            : v2     ? pb::CGROUP_LAYOUT_V2
                                     : pb::CGROUP_LAYOUT_NONE));
  }
}

void FuzzProcStat(absl::string_view text) {
  absl::StatusOr<berth::base::ProcStat> stat = berth::base::ParseProcStat(text);
  if (!stat.ok()) {
    Check(absl::IsInvalidArgument(stat.status()));
    return;
  }
  // The fields follow the command name's closing parenthesis.
  Check(text.find(')') != absl::string_view::npos);
}

// Whether `key` starts a line of `text` followed by a blank.
bool HasKeyLine(absl::string_view text, absl::string_view key) {
  for (size_t at = 0; at <= text.size();) {
    const absl::string_view line = text.substr(at);
    if (absl::StartsWith(line, key) && line.size() > key.size() &&
        (line[key.size()] == ' ' || line[key.size()] == '\t')) {
      return true;
    }
    const size_t newline = text.find('\n', at);
    if (newline == absl::string_view::npos) break;
    at = newline + 1;
  }
  return false;
}

void FuzzFlatKeyed(absl::string_view text) {
  static constexpr const char* kKeys[] = {
      // /proc/PID/status, /proc/meminfo
      "VmRSS:", "VmSwap:", "Threads:", "MemTotal:", "MemAvailable:",
      // cpuacct.stat, cpu.stat (v1 and v2)
      "user", "system", "nr_throttled", "throttled_time", "usage_usec",
      "user_usec", "system_usec", "throttled_usec",
      // memory.stat (v1 and v2)
      "rss", "cache", "swap", "mapped_file", "total_rss", "total_cache",
      "total_swap", "total_mapped_file", "anon", "file", "file_mapped",
      "kernel", ""};
  constexpr size_t kCount = sizeof(kKeys) / sizeof(kKeys[0]);
  std::optional<uint64_t> values[kCount];
  std::vector<berth::stats::KeyedField> fields;
  for (size_t i = 0; i < kCount; ++i) fields.push_back({kKeys[i], &values[i]});
  berth::stats::ParseFlatKeyed(text, fields);
  for (size_t i = 0; i < kCount; ++i) {
    if (values[i].has_value()) Check(HasKeyLine(text, kKeys[i]));
  }
  // A single key stops at its first line; it finds one when the whole set
  // does.
  std::optional<uint64_t> rss;
  const berth::stats::KeyedField one[] = {{"VmRSS:", &rss}};
  berth::stats::ParseFlatKeyed(text, one);
  Check(rss.has_value() == values[0].has_value());
}

void FuzzSingleNumber(absl::string_view text) {
  absl::StatusOr<uint64_t> number =
      berth::stats::ParseSingleNumber(text, "memory.current");
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (!number.ok()) {
    Check(absl::IsInvalidArgument(number.status()));
    Check(absl::StrContains(number.status().message(), "memory.current"));
    return;
  }
  // The number, as written (leading zeros aside).
  absl::string_view digits = trimmed;
  while (digits.size() > 1 && digits[0] == '0') digits.remove_prefix(1);
  Check(absl::StrCat(*number) == digits);
}

void FuzzCgroupPath(absl::string_view text) {
  absl::StatusOr<std::string> path = berth::stats::CleanCgroupPath(text);
  if (!path.ok()) {
    Check(absl::IsInvalidArgument(path.status()));
    return;
  }
  Check(absl::StartsWith(*path, "/"));
  Check(!absl::StrContains(*path, "//"));
  Check(*path == "/" || !absl::EndsWith(*path, "/"));
  for (absl::string_view part : absl::StrSplit(*path, '/')) {
    Check(part != "." && part != "..");
  }
  // Clean paths stay as they are.
  absl::StatusOr<std::string> again = berth::stats::CleanCgroupPath(*path);
  Check(again.ok() && *again == *path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view text = berth::fuzz::AsText(data, size).substr(1);
  switch (data[0] % 5) {
    case 0:
      FuzzMountinfo(text);
      break;
    case 1:
      FuzzProcStat(text);
      break;
    case 2:
      FuzzFlatKeyed(text);
      break;
    case 3:
      FuzzSingleNumber(text);
      break;
    default:
      FuzzCgroupPath(text);
      break;
  }
  return 0;
}
