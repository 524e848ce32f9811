#include "services/driver/exec/exec_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/driver/common/launcher.h"

namespace berth::exec_driver {

using ::berth::driver_common::DecodeInitReport;
using ::berth::driver_common::InitReport;
using ::berth::driver_common::InitSpec;
using ::berth::driver_common::StartedHelper;
using ::berth::driver_common::StartExecHelper;

namespace {

// Reads and writes of this size, and pipes this large: a stream of many
// frames costs fewer system calls and wake-ups (the SDK splits output into
// frames of at most kMaxExecFrameBytes itself).
constexpr size_t kCopyBytes = 256 * 1024;
constexpr int kPipeBytes = 1 << 20;

absl::Status Errno(absl::string_view what) {
  return absl::ErrnoToStatus(errno, what);
}

void SetWindowSize(int fd, const plugin::TerminalSize& size) {
  if (size.rows == 0 && size.columns == 0) return;
  struct winsize ws = {};
  ws.ws_row = static_cast<unsigned short>(size.rows);
  ws.ws_col = static_cast<unsigned short>(size.columns);
  ioctl(fd, TIOCSWINSZ, &ws);
}

// Writes all of `data` to the non-blocking `fd`, waiting for room, until
// `stop_fd` is readable. False when the reader is gone or stopped.
bool WriteUntilStopped(int fd, const char* data, size_t size, int stop_fd) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return false;
    struct pollfd fds[2] = {{fd, POLLOUT, 0}, {stop_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return false;
    if (fds[1].revents != 0) return false;
    if (fds[0].revents & (POLLERR | POLLHUP)) return false;
  }
  return true;
}

// Copies stdin from the caller to the command until it ends or `stop_fd`.
void PumpStdin(plugin::ExecStdin* in, int fd, bool tty, int stop_fd) {
  std::vector<char> buffer(kCopyBytes);
  while (true) {
    const size_t n = in->Read(buffer.data(), buffer.size());
    if (n == 0) break;
    if (!WriteUntilStopped(fd, buffer.data(), n, stop_fd)) return;
  }
  if (tty) {
    // A terminal has no half-close: end-of-file is the EOF character.
    struct termios attributes;
    char eof = 4;
    if (tcgetattr(fd, &attributes) == 0) eof = attributes.c_cc[VEOF];
    WriteUntilStopped(fd, &eof, 1, stop_fd);
  }
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

  // Our ends: stdin_w (or the terminal), out_r, err_r. Theirs: closed once
  // the helper has them.
  std::vector<int> ours, theirs;
  absl::Cleanup close_all = [&] {
    for (int fd : ours) close(fd);
    for (int fd : theirs) close(fd);
  };
  int stdin_w = -1, out_r = -1, err_r = -1;
  int child_in = -1, child_out = -1, child_err = -1;
  if (options.tty) {
    const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0) return Errno("opening a pseudo-terminal");
    ours.push_back(master);
    if (grantpt(master) != 0 || unlockpt(master) != 0) {
      return Errno("unlocking the pseudo-terminal");
    }
    char name[128];
    if (ptsname_r(master, name, sizeof(name)) != 0) {
      return Errno("naming the pseudo-terminal");
    }
    const int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) return Errno(absl::StrCat("opening ", name));
    theirs.push_back(slave);
    SetWindowSize(master, options.terminal_size);
    stdin_w = out_r = master;
    child_in = child_out = child_err = slave;
  } else {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) return Errno("pipe2");
    theirs.push_back(in[0]);
    ours.push_back(in[1]);
    if (pipe2(out, O_CLOEXEC) != 0) return Errno("pipe2");
    ours.push_back(out[0]);
    theirs.push_back(out[1]);
    if (pipe2(err, O_CLOEXEC) != 0) return Errno("pipe2");
    ours.push_back(err[0]);
    theirs.push_back(err[1]);
    // Best effort: the system's pipe-max-size may be lower.
    for (int fd : {in[1], out[0], err[0]}) fcntl(fd, F_SETPIPE_SZ, kPipeBytes);
    stdin_w = in[1];
    out_r = out[0];
    err_r = err[0];
    child_in = in[0];
    child_out = out[1];
    child_err = err[1];
  }
  absl::StatusOr<StartedHelper> helper = StartExecHelper(
      init_path, spec, target.init_pidfd, child_in, child_out, child_err);
  if (!helper.ok()) return helper.status();
  for (int fd : theirs) close(fd);
  theirs.clear();
  ours.push_back(helper->report_fd);
  for (int fd : ours) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  bool killed = false;
  auto kill_helper = [&] {
    if (!killed) kill(helper->pid, SIGKILL);
    killed = true;
  };
  const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    kill_helper();
    waitpid(helper->pid, nullptr, 0);
    return Errno("eventfd");
  }
  ours.push_back(stop_fd);
  std::thread stdin_thread;
  if (!options.tty) {
    // Without a terminal stdin is a pipe of its own: whoever finishes with
    // it closes it, so that the command reads end-of-file.
    ours.erase(std::find(ours.begin(), ours.end(), stdin_w));
    if (options.in == nullptr) close(stdin_w);
  }
  if (options.in != nullptr) {
    const bool tty = options.tty;
    stdin_thread = std::thread([&options, stdin_w, tty, stop_fd] {
      PumpStdin(options.in, stdin_w, tty, stop_fd);
      if (!tty) close(stdin_w);
    });
  }

  std::string report_line;
  bool reported = false;
  bool out_open = true, err_open = err_r >= 0;
  absl::Status failure;
  absl::Time reported_at = absl::InfiniteFuture();
  std::vector<char> buffer(kCopyBytes);
  // Reads what `fd` has into `output`; false at its end.
  auto drain = [&](int fd, plugin::ExecOutput* output) {
    while (true) {
      const ssize_t n = read(fd, buffer.data(), buffer.size());
      if (n > 0) {
        if (output != nullptr &&
            !output->Write(absl::string_view(buffer.data(), n))) {
          failure = absl::CancelledError("the exec stream is gone");
          return false;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      return false;  // EOF, or EIO: the terminal's last holder closed it
    }
  };
  while (failure.ok() && (!reported || out_open || err_open)) {
    struct pollfd fds[5];
    int count = 0;
    const int out_index = out_open ? count : -1;
    if (out_open) fds[count++] = {out_r, POLLIN, 0};
    const int err_index = err_open ? count : -1;
    if (err_open) fds[count++] = {err_r, POLLIN, 0};
    const int report_index = !reported ? count : -1;
    if (!reported) fds[count++] = {helper->report_fd, POLLIN, 0};
    const int resize_fd =
        options.resizes != nullptr ? options.resizes->fd() : -1;
    const int resize_index = resize_fd >= 0 && options.tty ? count : -1;
    if (resize_index >= 0) fds[count++] = {resize_fd, POLLIN, 0};
    const int cancel_fd = options.cancel != nullptr ? options.cancel->fd() : -1;
    const int cancel_index = cancel_fd >= 0 ? count : -1;
    if (cancel_fd >= 0) fds[count++] = {cancel_fd, POLLIN, 0};

    const absl::Time until =
        std::min(deadline,
                 reported ? reported_at + drain_grace : absl::InfiniteFuture());
    const absl::Duration left = until - absl::Now();
    const int timeout_ms = until == absl::InfiniteFuture()
                               ? -1
                               : static_cast<int>(std::max<int64_t>(
                                     0, absl::ToInt64Milliseconds(left) + 1));
    const int ready = poll(fds, count, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      failure = Errno("poll");
      break;
    }
    if (ready == 0) {
      if (absl::Now() >= deadline) {
        failure = absl::DeadlineExceededError(absl::StrCat(
            "command \"", options.command[0], "\" ran past its timeout"));
      }
      break;  // drained long enough after the end
    }
    if (cancel_index >= 0 && fds[cancel_index].revents != 0) {
      failure = absl::CancelledError("the exec was cancelled");
      break;
    }
    if (resize_index >= 0 && fds[resize_index].revents != 0) {
      if (std::optional<plugin::TerminalSize> size =
              options.resizes->TakeLatest()) {
        SetWindowSize(out_r, *size);
      }
    }
    if (out_index >= 0 && fds[out_index].revents != 0) {
      out_open = drain(out_r, options.out);
      if (out_open) reported_at = std::max(reported_at, absl::Now());
    }
    if (err_index >= 0 && fds[err_index].revents != 0) {
      err_open = drain(err_r, options.err);
      if (err_open) reported_at = std::max(reported_at, absl::Now());
    }
    if (report_index >= 0 && fds[report_index].revents != 0) {
      char chunk[256];
      const ssize_t n = read(helper->report_fd, chunk, sizeof(chunk));
      if (n > 0) {
        report_line.append(chunk, static_cast<size_t>(n));
      } else if (n == 0 || errno != EAGAIN) {
        reported = true;
        reported_at = absl::Now();
      }
    }
  }
  if (!failure.ok() || !reported) kill_helper();
  const uint64_t one = 1;
  (void)!write(stop_fd, &one, sizeof(one));
  if (options.in != nullptr) options.in->Close();
  if (stdin_thread.joinable()) stdin_thread.join();
  int helper_status = 0;
  while (waitpid(helper->pid, &helper_status, 0) < 0 && errno == EINTR) {
  }
  if (!failure.ok()) return failure;

  InitReport report;
  if (!DecodeInitReport(report_line, &report)) {
    return absl::InternalError(absl::StrCat("the exec helper ", init_path,
                                            " ended without a report (\"",
                                            report_line, "\")"));
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
