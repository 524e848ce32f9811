// Small Linux process helpers of the plugin host: spawning, pidfds,
// /proc/PID/stat and wait statuses. Internal to //plugins/host (and the
// conformance suite, which runs plugins without the cookie).

#ifndef PLUGINS_HOST_PROCESS_UTIL_H_
#define PLUGINS_HOST_PROCESS_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::plugin::host::internal {

// What /proc/PID/stat says of a process.
struct ProcStat {
  char state = '?';         // field 3: R, S, D, Z (zombie), X (dead), ...
  uint64_t start_time = 0;  // field 22: clock ticks after boot
};

// Reads /proc/PID/stat. NOT_FOUND when there is no such process.
absl::StatusOr<ProcStat> ReadProcStat(pid_t pid);

// Parses the content of a /proc/PID/stat file (the command name, field 2, may
// hold spaces and parentheses). INVALID_ARGUMENT quoting it when malformed.
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view content);

// pidfd_open(2) with O_CLOEXEC semantics (pidfds are always close-on-exec).
// Returns the fd, or -1 with errno set.
int PidfdOpen(pid_t pid);

// pidfd_send_signal(2). Returns 0, or -1 with errno set.
int PidfdSendSignal(int pidfd, int signal);

// "exited with code 3", "was killed by signal 9 (Killed)" for a wait status.
std::string DescribeWaitStatus(int wait_status);

// An error of code `code` (from errno `err`) saying "WHAT: strerror(err)".
absl::Status ErrnoError(int err, absl::string_view what);

// Starts `binary` with stdin from `stdin_fd` (/dev/null when -1), stdout and
// stderr into the write ends given, `env` as its whole environment, its own
// process group, default signal dispositions and mask, and no other file
// descriptor. `etxtbsy_retries` times it tries again, after 20, 40, ... ms,
// while exec fails with ETXTBSY (the binary being installed, or its write fd
// copied into another thread's child).
absl::StatusOr<pid_t> Spawn(const std::string& binary,
                            const std::vector<std::string>& args,
                            std::vector<std::string> env, int stdin_fd,
                            int stdout_fd, int stderr_fd,
                            int etxtbsy_retries = 0);

}  // namespace berth::plugin::host::internal

#endif  // PLUGINS_HOST_PROCESS_UTIL_H_
