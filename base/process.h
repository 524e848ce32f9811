// Linux process plumbing: /proc/PID/stat, process identity (a pid and its
// start time, so that a reused pid is never taken for the process that had
// it), pidfds, wait statuses, argv/envp arrays.

#ifndef BASE_PROCESS_H_
#define BASE_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::base {

// What /proc/PID/stat says of a process.
struct ProcStat {
  char state = '?';          // field 3: R, S, D, Z (zombie), X (dead), ...
  pid_t parent = 0;          // field 4
  pid_t pgrp = 0;            // field 5
  uint64_t utime_ticks = 0;  // field 14: user time, in clock ticks
  uint64_t stime_ticks = 0;  // field 15: system time, in clock ticks
  uint64_t start_time = 0;   // field 22: clock ticks after boot
};

// Parses the content of a /proc/PID/stat file (the command name, field 2,
// may hold spaces and parentheses). INVALID_ARGUMENT quoting it when
// malformed.
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view content);

// Reads /proc/PID/stat under `proc_root`. NOT_FOUND when there is no such
// process (also when it went between open and read).
absl::StatusOr<ProcStat> ReadProcStat(pid_t pid,
                                      const std::string& proc_root = "/proc");

// A process as it can be found again after a restart of whoever started it.
struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_time = 0;  // clock ticks after boot, from /proc/PID/stat

  // The identity of the live process `pid`; NOT_FOUND without one.
  static absl::StatusOr<ProcessIdentity> Of(pid_t pid);
  // Whether this process still runs: the pid is taken by a process of the
  // same start time that is neither a zombie nor dead.
  bool IsAlive() const;
};

// pidfd_open(2) (pidfds are close-on-exec). The fd, or -1 with errno set.
int PidfdOpen(pid_t pid);
// pidfd_send_signal(2). 0, or -1 with errno set.
int PidfdSendSignal(int pidfd, int signal);

// "exited with code 3", "was killed by signal 9 (Killed)" for a wait status.
std::string DescribeWaitStatus(int wait_status);

// `strings` as the NULL-terminated array execve(2) takes; the pointers are
// into `strings`, which must outlive the array.
std::vector<char*> CStrings(std::vector<std::string>& strings);

}  // namespace berth::base

#endif  // BASE_PROCESS_H_
