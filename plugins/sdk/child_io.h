// Exec I/O for a child process: the one pump between the streams of an
// ExecStreamingDriver call (exec.h) and the descriptors of the command a
// driver started for it, on pipes or on a pseudo-terminal. The exec, sandbox
// and mock drivers all use it; a third-party C++ driver should too (see
// README.md, "Exec I/O for a child process").
//
//   plugin::ChildStdio stdio;
//   stdio.stdin_fd = std::move(stdin_write_end);   // or stdio.terminal =
//   stdio.stdout_fd = std::move(stdout_read_end);  //   the PTY's master
//   stdio.stderr_fd = std::move(stderr_read_end);
//   plugin::ChildIoOptions child;
//   child.exit_fd = pidfd;  // readable once the command has ended
//   child.kill = [&] { PidfdSendSignal(pidfd, SIGKILL); };
//   absl::Status pumped =
//       plugin::PumpChildIo(options, std::move(stdio), child);
//   // then reap the command (waitid on the pidfd) and return how it ended.
//
// What it does, so that every driver behaves alike:
// - stdin: options.in is copied to the command on a thread of the pump's
//   own (ExecStdin::Read blocks). At the end of stdin a pipe's write end is
//   closed; a terminal, which has no half-close, is sent its end-of-file
//   character, VEOF as tcgetattr(3) reads it from the terminal (not a
//   hard-coded ^D), unless VEOF is disabled. No stdin (options.in null): the
//   pipe is closed at once. Once a write fails (the command closed its
//   stdin, or exited), nothing more is written, but stdin is still read to
//   its end and dropped, so that the caller's stream never stalls behind
//   it (stdin and resizes share one stream). SIGPIPE is blocked on that
//   thread: a write to a closed pipe fails with EPIPE instead of killing
//   the process.
// - stdout and stderr (or the terminal's one output, to options.out) are
//   read as they come and written to options.out and options.err (null:
//   read and dropped) until both have ended (EOF; EIO on a terminal whose
//   last holder closed it) and the command has ended. A process the
//   command left behind may hold its output open: once the command has
//   ended, `drain_grace` bounds how long output is waited for (it is read
//   as long as it keeps coming within that).
// - resizes: the latest size pending in options.resizes is applied as it
//   comes: TIOCSWINSZ on the terminal, or ChildIoOptions::resize.
// - the end: options.cancel cancelled, `deadline` passed, or a Write to
//   options.out or options.err failed (the caller is gone), before the
//   command ended: ChildIoOptions::kill is called and the pump returns at
//   once, without waiting for the command to die.
// Every descriptor runs non-blocking under poll(2); nothing spins. Every
// descriptor in ChildStdio is closed by the time the pump returns.

#ifndef PLUGINS_SDK_CHILD_IO_H_
#define PLUGINS_SDK_CHILD_IO_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "plugins/sdk/exec.h"

namespace berth::plugin {

// The driver's ends of the command's stdio: three pipes, or a terminal.
// The pump takes them and closes them all.
struct ChildStdio {
  // Pipes: the write end of the command's stdin (none: the command has its
  // stdin elsewhere, say /dev/null) and the read ends of its stdout and
  // stderr.
  base::UniqueFd stdin_fd;
  base::UniqueFd stdout_fd;
  base::UniqueFd stderr_fd;
  // Or the master of the pseudo-terminal the command runs on (its stdin,
  // stdout and stderr): stdin goes in, everything comes out to
  // ExecOptions::out, resizes are applied to it. Not with the pipes.
  base::UniqueFd terminal;
};

// The command, beyond its stdio.
struct ChildIoOptions {
  // Polls readable (POLLIN) once the command has ended: its pidfd, or the
  // read end of a pipe it writes its last word to or holds until it ends.
  // The pump neither reads nor closes it.
  int exit_fd = -1;
  // Without an exit_fd: true once the command has ended (say, waitid with
  // WNOHANG | WNOWAIT). Asked every kChildExitPollInterval.
  std::function<bool()> has_exited;
  // Called once, on the pump's thread, when the command is seen to have
  // ended, before the rest of its output is read: e.g. to reap it and to
  // kill what it left in its process group.
  std::function<void()> on_exit;
  // Stops the command (SIGKILL, say) when the pump ends before it did:
  // cancelled, past the deadline, or the caller gone. Need not wait for it.
  std::function<void()> kill;
  // Applies a terminal size, for a command whose terminal the driver
  // reaches otherwise (through a proxy, say). Called on the pump's thread:
  // keep it short. Unset: TIOCSWINSZ on ChildStdio::terminal (sizes of 0 by
  // 0 skipped); without a terminal either, resizes are not taken.
  std::function<void(const TerminalSize&)> resize;
  // A command still running at the deadline is killed. Once it has ended
  // the deadline only bounds how long the rest of its output is read.
  absl::Time deadline = absl::InfiniteFuture();
  // Once the command has ended, how long its output may stay silent before
  // the pump stops waiting for its end. Infinite: until its end.
  absl::Duration drain_grace = absl::InfiniteDuration();
};

// How often ChildIoOptions::has_exited is asked.
inline constexpr absl::Duration kChildExitPollInterval = absl::Milliseconds(50);

// Pumps `options` (in, out, err, resizes, cancel; each may be null) to and
// from the command until it has ended and its output is read (see the top
// of this file). Returns
//   OK                 the command ended and its output was read;
//   CANCELLED          options.cancel was cancelled (the command killed
//                      unless it had ended);
//   DEADLINE_EXCEEDED  the deadline passed before it ended (killed);
//   UNAVAILABLE        a Write to options.out or options.err failed: the
//                      caller is gone (killed unless it had ended);
//   INVALID_ARGUMENT   both pipes and a terminal given, or neither
//                      exit_fd nor has_exited (killed);
//   another error      setting up or poll(2) failed (killed unless it had
//                      ended).
// Either way it has not reaped the command (unless on_exit or kill did):
// the driver waits for it and says how it ended.
absl::Status PumpChildIo(const ExecOptions& options, ChildStdio stdio,
                         const ChildIoOptions& child);

// TIOCSWINSZ on `terminal` (a pseudo-terminal's master or slave); nothing
// for a size of 0 by 0.
absl::Status SetTerminalSize(int terminal, const TerminalSize& size);

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_CHILD_IO_H_
