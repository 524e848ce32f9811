// Starting berth-task-init: as a task's PID 1 in new namespaces (run), or as
// the helper that runs one command inside a task (exec).

#ifndef SERVICES_DRIVER_COMMON_LAUNCHER_H_
#define SERVICES_DRIVER_COMMON_LAUNCHER_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "services/driver/common/init_spec.h"

namespace berth::driver_common {

struct StartedInit {
  pid_t pid = -1;
  // A pidfd of the init (close-on-exec).
  base::UniqueFd pidfd;
};

// Starts `init_path` run as PID 1 of new pid, mount, ipc and uts namespaces,
// with `spec` on its fd 3 and `stderr_fd` as its stderr, and waits (up to
// `timeout`) until it reports that the task's program was executed. The
// init is a child of the calling process: reap it (waitid on the pidfd).
// On failure the init is killed and reaped, and the error says what failed:
// the report's step and errno ("executing /bin/x: Permission denied"), with
// the status code errno calls for (ENOENT: NOT_FOUND, EACCES:
// PERMISSION_DENIED, ...). The error's message starts with the step so that
// the caller can name the field.
absl::StatusOr<StartedInit> StartInit(const std::string& init_path,
                                      const InitSpec& spec, int stderr_fd,
                                      absl::Duration timeout);

// The exec helper, started: its pid (a child of the caller) and the read end
// of its report pipe, which the caller owns (an int until exec_session.cc,
// being rewritten, takes a base::UniqueFd).
struct StartedHelper {
  pid_t pid = -1;
  int report_fd = -1;
};

// Starts `init_path` exec with `spec` on fd 3, the report pipe on fd 4, a
// dup of `target_pidfd` (the task's init) on fd 5, and stdin, stdout and
// stderr from the fds given (they may be the same fd, e.g. a terminal).
absl::StatusOr<StartedHelper> StartExecHelper(const std::string& init_path,
                                              const InitSpec& spec,
                                              int target_pidfd, int stdin_fd,
                                              int stdout_fd, int stderr_fd);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_LAUNCHER_H_
