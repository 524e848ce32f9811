// Starting a process of a container (agent_service.h): its program in a
// session of its own, its stdio on pipes or on a new pseudo-terminal, as the
// user and in the directory its ProcessSpec gives; errors name the field of
// the ProcessSpec at fault.

#ifndef SERVICES_AGENT_SPAWN_H_
#define SERVICES_AGENT_SPAWN_H_

#include <sys/types.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"

namespace berth::agent {

// A child that has executed its program.
struct SpawnedProcess {
  pid_t pid = -1;
  // Our ends, non-blocking and close-on-exec: stdin (the pipe's write end,
  // or the terminal), stdout (or the terminal) and stderr (none with a
  // terminal).
  base::UniqueFd in_fd;
  base::UniqueFd out_fd;
  base::UniqueFd err_fd;
};

// INVALID_ARGUMENT naming the field: process.args empty, or an entry of
// process.env that is not KEY=VALUE.
absl::Status ValidateProcessSpec(const v1::ProcessSpec& spec);

// Where a process is made: in the namespaces of its container's holder
// (container_ns.h), or (-1) in the agent's own.
struct SpawnPlace {
  int holder_pidfd = -1;
  int pid_ns = -1;
  int mount_ns = -1;
};

// Forks and executes `spec` (valid: ValidateProcessSpec) with an empty
// signal mask and default signal handlers, in a new session (the terminal
// its controlling one), a program without '/' looked up in the PATH of
// spec.env. Returns once the child has executed its program, or failed to:
// NOT_FOUND for a program that is not there, INVALID_ARGUMENT naming
// process.args[0], process.cwd or process.user otherwise, INTERNAL for the
// stdio; an error making descriptors or forking names the call. `*forked`
// says whether a child was made: the caller reaps it, also after an error
// (it has then exited 127).
//
// In `place`'s pid and mount namespaces when given (FAILED_PRECONDITION
// when the holder is gone). spec.privileges, when
// enabled, is applied last before the directory is changed and the program
// executed (driver_common::DropPrivileges: the user, capabilities,
// no_new_privs, the seccomp filter); its failure is INVALID_ARGUMENT naming
// process.privileges and the step.
absl::StatusOr<SpawnedProcess> SpawnProcess(const v1::ProcessSpec& spec,
                                            bool* forked,
                                            const SpawnPlace& place = {});

// Sets the size of the terminal behind `fd`.
void SetWindowSize(int fd, const v1::TerminalSize& size);

}  // namespace berth::agent

#endif  // SERVICES_AGENT_SPAWN_H_
