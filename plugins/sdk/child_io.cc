#include "plugins/sdk/child_io.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "base/io.h"

namespace berth::plugin {
namespace {

// Reads and writes of this size: a stream of many frames costs fewer system
// calls and wake-ups (ExecOutput splits what it is given into frames).
constexpr size_t kCopyBytes = 256 * 1024;

// The end-of-file character when the terminal cannot be asked (^D, the
// default VEOF).
constexpr char kDefaultEof = 4;

// Copies ExecStdin to the command's stdin on a thread of its own, since
// ExecStdin::Read blocks.
class StdinPump {
 public:
  // `pipe`: the write end of the command's stdin pipe, owned (closed at the
  // end of stdin); or `terminal`, not owned. `stop_fd` polls readable once
  // Stop was called.
  StdinPump(ExecStdin* in, base::UniqueFd pipe, int terminal, int stop_fd)
      : in_(in),
        pipe_(std::move(pipe)),
        terminal_(terminal),
        stop_fd_(stop_fd) {
    thread_ = std::thread([this] { Run(); });
  }

  // Ends the thread: a blocked write gives up, what stdin still holds is
  // dropped, and nothing is sent for its end.
  void Stop() {
    stopped_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof(one));
    in_->Close();
    thread_.join();
  }

 private:
  int fd() const { return pipe_.valid() ? pipe_.get() : terminal_; }
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  void Run() {
    // A write to a pipe whose reader is gone fails with EPIPE rather than
    // killing the process; a SIGPIPE left pending goes with the thread.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);

    std::vector<char> buffer(kCopyBytes);
    bool writable = fd() >= 0;
    while (true) {
      const size_t n = in_->Read(buffer.data(), buffer.size());
      if (n == 0 || stopped()) break;
      if (writable && !Write(buffer.data(), n)) {
        // The command no longer takes stdin. Keep reading it all the same:
        // the caller's stdin shares its stream with resizes.
        writable = false;
        pipe_.reset();
      }
    }
    if (!writable || stopped()) return;
    if (pipe_.valid()) {
      pipe_.reset();  // end of file for the command
      return;
    }
    // A terminal has no half-close: end of file is its VEOF character, as
    // the terminal is set now (tcgetattr on the master reads the slave's).
    char eof = kDefaultEof;
    struct termios attributes;
    if (tcgetattr(terminal_, &attributes) == 0) {
      if (attributes.c_cc[VEOF] == _POSIX_VDISABLE) return;
      eof = static_cast<char>(attributes.c_cc[VEOF]);
    }
    Write(&eof, 1);
  }

  // Writes all of `data`, waiting for room; false when the command's stdin
  // broke or Stop was called.
  bool Write(const char* data, size_t size) {
    while (size > 0) {
      if (stopped()) return false;
      const ssize_t n = write(fd(), data, size);
      if (n > 0) {
        data += n;
        size -= static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN) return false;  // EPIPE, EIO, ...
      struct pollfd fds[2] = {{fd(), POLLOUT, 0}, {stop_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 && errno != EINTR) return false;
      if (fds[1].revents != 0) return false;
      if ((fds[0].revents & (POLLERR | POLLHUP)) != 0) return false;
    }
    return true;
  }

  ExecStdin* const in_;
  base::UniqueFd pipe_;
  const int terminal_;
  const int stop_fd_;
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

// A poll(2) timeout in milliseconds until `wake` (-1: none), rounded up so
// that a wake-up never comes early.
int TimeoutUntil(absl::Time wake, absl::Time now) {
  if (wake == absl::InfiniteFuture()) return -1;
  if (wake <= now) return 0;
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(wake - now) + 1, INT_MAX));
}

}  // namespace

absl::Status SetTerminalSize(int terminal, const TerminalSize& size) {
  if (size.rows == 0 && size.columns == 0) return absl::OkStatus();
  struct winsize window = {};
  window.ws_row = static_cast<unsigned short>(size.rows);
  window.ws_col = static_cast<unsigned short>(size.columns);
  if (ioctl(terminal, TIOCSWINSZ, &window) != 0) {
    return absl::ErrnoToStatus(errno, "setting the terminal's size");
  }
  return absl::OkStatus();
}

absl::Status PumpChildIo(const ExecOptions& options, ChildStdio stdio,
                         const ChildIoOptions& child) {
  bool exited = false;
  // Ends the pump before the command ended: it is killed.
  auto stop_early = [&](absl::Status status) {
    if (!exited && child.kill) child.kill();
    return status;
  };
  const bool tty = stdio.terminal.valid();
  if (tty && (stdio.stdin_fd.valid() || stdio.stdout_fd.valid() ||
              stdio.stderr_fd.valid())) {
    return stop_early(absl::InvalidArgumentError(
        "the command's stdio is either pipes or a terminal, not both"));
  }
  if (child.exit_fd < 0 && !child.has_exited) {
    return stop_early(absl::InvalidArgumentError(
        "the pump needs exit_fd or has_exited to learn the command's end"));
  }
  for (const base::UniqueFd* fd :
       {&stdio.terminal, &stdio.stdin_fd, &stdio.stdout_fd, &stdio.stderr_fd}) {
    if (!fd->valid()) continue;
    if (absl::Status status = base::SetNonBlocking(fd->get()); !status.ok()) {
      return stop_early(status);
    }
  }
  const base::UniqueFd stop_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd.valid()) {
    return stop_early(absl::ErrnoToStatus(errno, "eventfd"));
  }

  // Stdin (without a descriptor to write it to, it is read and dropped).
  std::optional<StdinPump> stdin_pump;
  if (options.in != nullptr) {
    stdin_pump.emplace(options.in, std::move(stdio.stdin_fd),
                       stdio.terminal.get(), stop_fd.get());
  } else {
    stdio.stdin_fd.reset();  // no stdin: end of file at once
  }

  // Output, resizes, the end, cancellation.
  struct Output {
    int fd;
    ExecOutput* sink;
    bool open;
  };
  Output outputs[2] = {
      {tty ? stdio.terminal.get() : stdio.stdout_fd.get(), options.out, false},
      {tty ? -1 : stdio.stderr_fd.get(), options.err, false}};
  for (Output& output : outputs) output.open = output.fd >= 0;
  ResizeEvents* const resizes =
      options.resizes != nullptr && (tty || child.resize) ? options.resizes
                                                          : nullptr;
  const int resize_fd = resizes != nullptr ? resizes->fd() : -1;
  const int cancel_fd = options.cancel != nullptr ? options.cancel->fd() : -1;
  auto cancelled = [&] {
    return options.cancel != nullptr && options.cancel->IsCancelled();
  };

  std::vector<char> buffer(kCopyBytes);
  // Once it has ended: when output last came (or it ended).
  absl::Time last_output = absl::InfinitePast();
  absl::Status result;
  while (!exited || outputs[0].open || outputs[1].open) {
    struct pollfd fds[5];
    int count = 0;
    int output_index[2] = {-1, -1};
    for (int i = 0; i < 2; ++i) {
      if (!outputs[i].open) continue;
      output_index[i] = count;
      fds[count++] = {outputs[i].fd, POLLIN, 0};
    }
    const int exit_index = !exited && child.exit_fd >= 0 ? count : -1;
    if (exit_index >= 0) fds[count++] = {child.exit_fd, POLLIN, 0};
    const int resize_index = resize_fd >= 0 ? count : -1;
    if (resize_index >= 0) fds[count++] = {resize_fd, POLLIN, 0};
    if (cancel_fd >= 0) fds[count++] = {cancel_fd, POLLIN, 0};

    absl::Time now = absl::Now();
    absl::Time wake = child.deadline;
    if (exited) {
      wake = std::min(wake, last_output + child.drain_grace);
    } else if (child.exit_fd < 0) {
      wake = std::min(wake, now + kChildExitPollInterval);
    }
    if (poll(fds, count, TimeoutUntil(wake, now)) < 0 && errno != EINTR) {
      result = stop_early(absl::ErrnoToStatus(errno, "poll"));
      break;
    }
    if (cancelled()) {
      result = stop_early(absl::CancelledError("the exec was cancelled"));
      break;
    }
    bool gone = false;
    for (int i = 0; i < 2; ++i) {
      if (output_index[i] < 0 || fds[output_index[i]].revents == 0) continue;
      Output& output = outputs[i];
      const ssize_t n = read(output.fd, buffer.data(), buffer.size());
      if (n > 0) {
        if (output.sink != nullptr &&
            !output.sink->Write(
                absl::string_view(buffer.data(), static_cast<size_t>(n)))) {
          gone = true;
        }
        if (exited) last_output = absl::Now();
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        output.open = false;  // end of file, or EIO: the terminal is let go
      }
    }
    if (gone) {
      result = stop_early(absl::UnavailableError("the exec stream is gone"));
      break;
    }
    if (resize_index >= 0 && fds[resize_index].revents != 0) {
      if (std::optional<TerminalSize> size = resizes->TakeLatest()) {
        if (child.resize) {
          child.resize(*size);
        } else {
          (void)SetTerminalSize(stdio.terminal.get(), *size);
        }
      }
    }
    if (!exited &&
        (exit_index >= 0 ? fds[exit_index].revents != 0 : child.has_exited())) {
      exited = true;
      if (child.on_exit) child.on_exit();
      last_output = absl::Now();
    }
    now = absl::Now();
    if (!exited && now >= child.deadline) {
      result = stop_early(absl::DeadlineExceededError(
          "the command ran past its deadline and was killed"));
      break;
    }
    if (exited &&
        now >= std::min(child.deadline, last_output + child.drain_grace)) {
      break;  // what it left behind holds its output open
    }
  }
  if (stdin_pump.has_value()) stdin_pump->Stop();
  return result;
}

}  // namespace berth::plugin
