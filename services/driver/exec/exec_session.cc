#include "services/driver/exec/exec_session.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "plugins/sdk/child_io.h"
#include "services/driver/common/launcher.h"

namespace berth::exec_driver {

using ::berth::driver_common::DecodeInitReport;
using ::berth::driver_common::InitReport;
using ::berth::driver_common::InitSpec;
using ::berth::driver_common::StartedHelper;
using ::berth::driver_common::StartExecHelper;

namespace {

// Pipes this large: a stream of many frames costs fewer system calls and
// wake-ups.
constexpr int kPipeBytes = 1 << 20;

absl::Status Errno(absl::string_view what) {
  return absl::ErrnoToStatus(errno, what);
}

}  // namespace

absl::StatusOr<plugin::ExitStatus> RunInTask(const std::string& init_path,
                                             const ExecTarget& target,
                                             const plugin::ExecOptions& options,
                                             absl::Time deadline,
                                             absl::Duration drain_grace) {
  if (options.command.empty()) {
    return absl::InvalidArgumentError("command is empty");
  }
  InitSpec spec = target.identity;
  spec.path = options.command[0];
  spec.args = options.command;
  spec.tty = options.tty;

  // Ours: the terminal, or stdin's write end and the output's read ends.
  // Theirs: closed once the helper has them.
  plugin::ChildStdio ours;
  base::UniqueFd their_in, their_out, their_err;
  if (options.tty) {
    ours.terminal.reset(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!ours.terminal) return Errno("opening a pseudo-terminal");
    if (grantpt(ours.terminal.get()) != 0 ||
        unlockpt(ours.terminal.get()) != 0) {
      return Errno("unlocking the pseudo-terminal");
    }
    char name[128];
    if (ptsname_r(ours.terminal.get(), name, sizeof(name)) != 0) {
      return Errno("naming the pseudo-terminal");
    }
    their_in.reset(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!their_in) return Errno(absl::StrCat("opening ", name));
    (void)plugin::SetTerminalSize(ours.terminal.get(), options.terminal_size);
  } else {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) return Errno("pipe2");
    their_in.reset(in[0]);
    ours.stdin_fd.reset(in[1]);
    if (pipe2(out, O_CLOEXEC) != 0) return Errno("pipe2");
    ours.stdout_fd.reset(out[0]);
    their_out.reset(out[1]);
    if (pipe2(err, O_CLOEXEC) != 0) return Errno("pipe2");
    ours.stderr_fd.reset(err[0]);
    their_err.reset(err[1]);
    // Best effort: the system's pipe-max-size may be lower.
    for (int fd : {in[1], out[0], err[0]}) fcntl(fd, F_SETPIPE_SZ, kPipeBytes);
  }
  const int child_in = their_in.get();
  const int child_out = their_out ? their_out.get() : child_in;
  const int child_err = their_err ? their_err.get() : child_in;
  absl::StatusOr<StartedHelper> helper = StartExecHelper(
      init_path, spec, target.init_pidfd, child_in, child_out, child_err);
  if (!helper.ok()) return helper.status();
  their_in.reset();
  their_out.reset();
  their_err.reset();
  const base::UniqueFd report_fd(helper->report_fd);

  // The helper reports as it ends; killing it kills the command
  // (PR_SET_PDEATHSIG).
  plugin::ChildIoOptions child;
  child.exit_fd = report_fd.get();
  child.kill = [pid = helper->pid] { kill(pid, SIGKILL); };
  child.deadline = deadline;
  child.drain_grace = drain_grace;
  const absl::Status pumped =
      plugin::PumpChildIo(options, std::move(ours), child);
  int helper_status = 0;
  while (waitpid(helper->pid, &helper_status, 0) < 0 && errno == EINTR) {
  }
  if (absl::IsUnavailable(pumped)) {
    return absl::CancelledError("the exec stream is gone");
  }
  if (absl::IsDeadlineExceeded(pumped)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "command \"", options.command[0], "\" ran past its timeout"));
  }
  if (!pumped.ok()) return pumped;

  absl::StatusOr<std::string> report_line =
      base::ReadAll(report_fd.get(), "the exec helper's report");
  InitReport report;
  if (!report_line.ok() || !DecodeInitReport(*report_line, &report)) {
    return absl::InternalError(absl::StrCat(
        "the exec helper ", init_path, " ended without a report (\"",
        report_line.ok() ? *report_line : report_line.status().ToString(),
        "\")"));
  }
  if (report.kind == InitReport::Kind::kFailed) {
    const std::string message =
        absl::StrCat(report.what, ": ", std::strerror(report.error_number));
    if (absl::StartsWith(report.what, "executing")) {
      return absl::InvalidArgumentError(
          absl::StrCat("command[0] \"", options.command[0], "\": ", message));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("running in the task: ", message));
  }
  plugin::ExitStatus status;
  if (WIFEXITED(report.wait_status)) {
    status.exit_code = WEXITSTATUS(report.wait_status);
  } else if (WIFSIGNALED(report.wait_status)) {
    status.signal = WTERMSIG(report.wait_status);
  }
  return status;
}

}  // namespace berth::exec_driver
