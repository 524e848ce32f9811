// Starting berth-task-init: as a task's PID 1 in new namespaces (run), or as
// the helper that runs one command inside a task (exec).

#ifndef SERVICES_DRIVER_COMMON_LAUNCHER_H_
#define SERVICES_DRIVER_COMMON_LAUNCHER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "services/driver/common/init_spec.h"

namespace berth::driver_common {

// One line of /proc/PID/uid_map or gid_map: ids [container_id, +size) in
// the namespace are host ids [host_id, +size).
struct IdMapLine {
  uint32_t container_id = 0;
  uint32_t host_id = 0;
  uint32_t size = 0;
};

// A user namespace's maps (Isolation.user_namespace, resolved). The uid and
// gid maps must not be empty; the init becomes root of the namespace
// (container id 0, which the maps should hold).
struct UserNamespaceMaps {
  std::vector<IdMapLine> uid;
  std::vector<IdMapLine> gid;
};

// How many descriptors StartInit passes on at most.
inline constexpr int kMaxPassedFds = 64;

// "CONTAINER HOST SIZE\n" per line, what the kernel takes in one write.
std::string FormatIdMap(const std::vector<IdMapLine>& lines);

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
//
// With `userns`, the init is also in a new user namespace (which then owns
// the other new namespaces, so that the init, root in it, can mount there)
// whose maps this process writes before the init goes on. The init, having
// no privilege over the host's cgroups and network namespaces, could not
// join them: this process does it for it, so `spec.cgroup_procs` and
// `spec.netns` are done here and not given to the init (the pid is written
// to each cgroup.procs; the clone is made from a thread in the network
// namespace), with the init's errors for them ("joining cgroup PATH").
// The init is executed through a descriptor this process opened, so that
// `init_path`'s directories need not be searchable by the mapped ids.
//
// `passed_fds` (at most kMaxPassedFds) are the init's kInitFirstPassedFd,
// kInitFirstPassedFd + 1, ... in order (what the spec's *_fd fields name).
//
// `spawned`, when given, is called with the init's pid as soon as it exists,
// before the wait for its report (in a user namespace, before the init goes
// on at all): a caller that may be killed meanwhile records the pid there.
// The init does not start the task's program before `spawned` returned OK:
// it waits for a byte on its go socket (InitSpec::go_fd, set here to
// kInitGoFd), which this process writes then. An error from `spawned`
// fails the start: the go socket is closed unwritten (an init reading end
// of file exits without starting the program), and the init is killed and
// reaped. A caller killed before it wrote the go leaves an init that does
// the same.
absl::StatusOr<StartedInit> StartInit(
    const std::string& init_path, const InitSpec& spec, int stderr_fd,
    absl::Duration timeout, const UserNamespaceMaps* userns = nullptr,
    const std::vector<int>& passed_fds = {},
    const std::function<absl::Status(pid_t)>& spawned = nullptr);

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
