// What the mock driver reads of processes in /proc.

#ifndef PLUGINS_EXAMPLES_MOCK_DRIVER_PROCFS_H_
#define PLUGINS_EXAMPLES_MOCK_DRIVER_PROCFS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::mock {

// Fields of /proc/<pid>/stat (proc(5)).
struct ProcStat {
  char state = '?';          // field 3: R, S, Z, ...
  pid_t pgrp = 0;            // field 5
  uint64_t utime_ticks = 0;  // field 14, in clock ticks
  uint64_t stime_ticks = 0;  // field 15
  uint64_t start_ticks = 0;  // field 22: start time after boot, in ticks
};

// Parses the content of a /proc/<pid>/stat file.
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view content);

// /proc/<pid>/stat of a process; NOT_FOUND naming the pid if there is none.
absl::StatusOr<ProcStat> ReadProcStat(pid_t pid);

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
