// Running one command inside a running task (ExecTask, ExecTaskStreaming):
// berth-task-init exec joins the task's cgroup and namespaces and runs it,
// with a pseudo-terminal when asked, else pipes; plugin::PumpChildIo copies
// stdin in and stdout/stderr out until the command has ended and its output
// is drained, applying terminal resizes as they come.

#ifndef SERVICES_DRIVER_EXEC_EXEC_SESSION_H_
#define SERVICES_DRIVER_EXEC_EXEC_SESSION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "plugins/sdk/exec.h"
#include "services/driver/common/init_spec.h"

namespace berth::exec_driver {

// The task to run in: a pidfd of its init, and the identity, directory,
// environment and cgroup (cgroup_procs) the command gets.
struct ExecTarget {
  int init_pidfd = -1;
  driver_common::InitSpec identity;
};

// Runs options.command in the task, its I/O carried by plugin::PumpChildIo
// (plugins/sdk/child_io.h). options.in, options.resizes and options.cancel
// may be null (no stdin, no resizes, no cancellation). Returns how the
// command ended once it has and all its output was written (output a
// background process it left still writes is read until it has been silent
// for `drain_grace`). Errors: INVALID_ARGUMENT naming command[0]
// when it could not be executed; CANCELLED (the command killed) when
// options.cancel is cancelled or an output's Write fails; DEADLINE_EXCEEDED
// (the command killed) at `deadline`.
absl::StatusOr<plugin::ExitStatus> RunInTask(
    const std::string& init_path, const ExecTarget& target,
    const plugin::ExecOptions& options, absl::Time deadline,
    absl::Duration drain_grace = absl::Milliseconds(250));

}  // namespace berth::exec_driver

#endif  // SERVICES_DRIVER_EXEC_EXEC_SESSION_H_
