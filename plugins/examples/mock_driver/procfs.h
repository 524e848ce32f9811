// What the mock driver reads of processes in /proc.

#ifndef PLUGINS_EXAMPLES_MOCK_DRIVER_PROCFS_H_
#define PLUGINS_EXAMPLES_MOCK_DRIVER_PROCFS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/process.h"

namespace berth::mock {

// /proc/<pid>/stat: base::ReadProcStat (base/process.h).
using ::berth::base::ProcStat;
using ::berth::base::ReadProcStat;

// VmRSS of /proc/<pid>/status in bytes; NOT_FOUND if the process or the
// line is missing (a zombie has none).
absl::StatusOr<uint64_t> ReadVmRssBytes(pid_t pid);

// Clock ticks per second (sysconf(_SC_CLK_TCK)).
int64_t ClockTicksPerSecond();

// The MHz of one core: "cpu MHz" of /proc/cpuinfo, else cpuinfo_max_freq of
// cpu0 in sysfs; 0 if neither says. Read once.
double CpuCoreMhz();

}  // namespace berth::mock

#endif  // PLUGINS_EXAMPLES_MOCK_DRIVER_PROCFS_H_
