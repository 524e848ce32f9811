// What berth-stats (and, for one core's MHz, the built-in drivers) read about
// the host itself: one core's MHz, the CPU counters of /proc/stat and the
// memory of /proc/meminfo.

#ifndef SERVICES_COMMON_STATS_HOST_INFO_H_
#define SERVICES_COMMON_STATS_HOST_INFO_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {
namespace stats {

// The MHz of one core: the first "cpu MHz" line of <proc_root>/cpuinfo
// (x86), else <sys_root>/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq
// (kHz; most other architectures). NOT_FOUND naming both files if neither
// has it.
absl::StatusOr<double> HostCpuMhz(const std::string& proc_root,
                                  const std::string& sys_root = "/sys");

// The aggregate "cpu" line of /proc/stat, in clock ticks, and the number of
// "cpuN" lines (online cores).
struct HostCpuTimes {
  uint64_t busy = 0;   // everything but idle and iowait
  uint64_t total = 0;  // user .. steal (guest time is within user)
  uint32_t cores = 0;
};

// Reads <proc_root>/stat. Errors name the file.
absl::StatusOr<HostCpuTimes> ReadHostCpuTimes(const std::string& proc_root);

// CPU use between two readings, in percent of one core (a fully busy host of
// N cores reads N x 100). 0 if no tick passed.
double HostCpuPercent(const HostCpuTimes& before, const HostCpuTimes& after);

struct HostMemory {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
};

// MemTotal and MemAvailable of <proc_root>/meminfo. Errors name the file.
absl::StatusOr<HostMemory> ReadHostMemory(const std::string& proc_root);

}  // namespace stats
}  // namespace berth

#endif  // SERVICES_COMMON_STATS_HOST_INFO_H_
