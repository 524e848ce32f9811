// Starting berth-shim, the process outside the sandbox that carries one
// sandboxed process's stdio, signals and exit code through berth-proxy
// (services/shim/README.md): one per task (its output into the task's log
// files) and one per exec (its stdio on pipes the driver pumps). The token
// that ties the shim to its process goes in its environment, never on its
// command line.

#ifndef SERVICES_DRIVER_SANDBOX_SHIM_LAUNCHER_H_
#define SERVICES_DRIVER_SANDBOX_SHIM_LAUNCHER_H_

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "plugins/sdk/exec.h"

namespace berth::sandbox_driver {

// A started shim: a child of this process, and a pidfd of it (close-on-exec)
// to wait for it and signal it. The pidfd stays an int, not a
// base::UniqueFd, until exec.cc (being rewritten) takes one.
struct Shim {
  pid_t pid = -1;
  int pidfd = -1;
};

// Where a shim writes its process's output: rotated files in a directory,
// or (empty log_dir) its own stdout and stderr.
// With `attach_fd` (a listening Unix socket, the task's attach socket) the
// shim serves attached callers on it (its descriptor 3, --attach_fd=3), and
// with `attach_stdin` takes the process's stdin from them.
struct ShimOutput {
  std::string log_dir;
  uint64_t max_file_bytes = 0;
  uint32_t max_files = 0;
  int attach_fd = -1;
  bool attach_stdin = false;
};

// Starts berth-shim with the token in its environment (never on its command
// line) and the given stdio.
absl::StatusOr<Shim> StartShim(const std::string& shim_path,
                               const std::string& proxy_socket,
                               const std::string& token, int stdin_fd,
                               int stdout_fd, int stderr_fd,
                               const ShimOutput& output = {});

// Kills the shim (SIGKILL), reaps it and closes its pidfd; nothing when it
// has no pidfd.
void KillAndReap(Shim& shim);

// How a shim's wait status maps to the process's end: its exit code, or
// 128+N read as signal N (ambiguous: the agent's WaitProcess is asked
// first); a shim killed itself by a signal reports that.
plugin::ExitStatus ShimExit(const siginfo_t& info);

}  // namespace berth::sandbox_driver

#endif  // SERVICES_DRIVER_SANDBOX_SHIM_LAUNCHER_H_
