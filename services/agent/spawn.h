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

// Forks and executes `spec` (valid: ValidateProcessSpec) with an empty
// signal mask and default signal handlers, in a new session (the terminal
// its controlling one), a program without '/' looked up in the PATH of
// spec.env. Returns once the child has executed its program, or failed to:
// NOT_FOUND for a program that is not there, INVALID_ARGUMENT naming
// process.args[0], process.cwd or process.user otherwise, INTERNAL for the
// stdio; an error making descriptors or forking names the call. `*forked`
// says whether a child was made: the caller reaps it, also after an error
// (it has then exited 127).
absl::StatusOr<SpawnedProcess> SpawnProcess(const v1::ProcessSpec& spec,
                                            bool* forked);

// Sets the size of the terminal behind `fd`.
void SetWindowSize(int fd, const v1::TerminalSize& size);

}  // namespace berth::agent

#endif  // SERVICES_AGENT_SPAWN_H_
