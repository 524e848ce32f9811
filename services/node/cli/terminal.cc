#include "services/node/cli/terminal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace berth::cli {
namespace {

constexpr int kRestoringSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// The terminal in raw mode and its settings before; read by the signal
// handler, so plain globals set before the handler is installed.
std::atomic<int> raw_fd{-1};
struct termios saved_termios;

void RestoreAndReraise(int signal) {
  const int saved_errno = errno;
  const int fd = raw_fd.load();
  if (fd >= 0) tcsetattr(fd, TCSANOW, &saved_termios);
  // SA_RESETHAND put the default action back: raised again, the signal is
  // delivered when this handler returns.
  raise(signal);
  errno = saved_errno;
}

std::atomic<int> winch_write_fd{-1};

void OnWindowChange(int) {
  const int saved_errno = errno;
  const int fd = winch_write_fd.load();
  if (fd >= 0) {
    const char byte = 0;
    [[maybe_unused]] ssize_t written = write(fd, &byte, 1);
  }
  errno = saved_errno;
}

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RawTerminal>> RawTerminal::Enter(int fd) {
  if (!isatty(fd)) {
    return absl::FailedPreconditionError(
        absl::StrCat("file descriptor ", fd, " is not a terminal"));
  }
  if (raw_fd.load() >= 0) {
    return absl::FailedPreconditionError("a terminal is already in raw mode");
  }
  struct termios original;
  if (tcgetattr(fd, &original) != 0) return ErrnoError("tcgetattr");
  saved_termios = original;
  raw_fd.store(fd);

  std::unique_ptr<RawTerminal> terminal(new RawTerminal());
  for (size_t i = 0; i < std::size(kRestoringSignals); ++i) {
    struct sigaction action = {};
    action.sa_handler = RestoreAndReraise;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(kRestoringSignals[i], &action, &terminal->saved_actions_[i]);
  }
  struct termios raw = original;
  cfmakeraw(&raw);
  if (tcsetattr(fd, TCSANOW, &raw) != 0) {
    return ErrnoError("tcsetattr");  // the destructor restores the handlers
  }
  return terminal;
}

RawTerminal::~RawTerminal() {
  const int fd = raw_fd.load();
  if (fd >= 0) tcsetattr(fd, TCSANOW, &saved_termios);
  for (size_t i = 0; i < std::size(kRestoringSignals); ++i) {
    sigaction(kRestoringSignals[i], &saved_actions_[i], nullptr);
  }
  raw_fd.store(-1);
}

std::optional<driver::v1::TerminalSize> TerminalSizeOf(int fd) {
  struct winsize size = {};
  if (!isatty(fd) || ioctl(fd, TIOCGWINSZ, &size) != 0) return std::nullopt;
  driver::v1::TerminalSize terminal_size;
  terminal_size.set_rows(size.ws_row);
  terminal_size.set_columns(size.ws_col);
  return terminal_size;
}

absl::StatusOr<std::unique_ptr<WindowChangeSignal>>
WindowChangeSignal::Install() {
  if (winch_write_fd.load() >= 0) {
    return absl::FailedPreconditionError("SIGWINCH is already watched");
  }
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return ErrnoError("pipe2");
  std::unique_ptr<WindowChangeSignal> watcher(
      new WindowChangeSignal(fds[0], fds[1]));
  winch_write_fd.store(fds[1]);
  struct sigaction action = {};
  action.sa_handler = OnWindowChange;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGWINCH, &action, &watcher->saved_action_) != 0) {
    return ErrnoError("sigaction(SIGWINCH)");
  }
  return watcher;
}

WindowChangeSignal::~WindowChangeSignal() {
  sigaction(SIGWINCH, &saved_action_, nullptr);
  winch_write_fd.store(-1);
  close(read_fd_);
  close(write_fd_);
}

bool WindowChangeSignal::Drain() {
  bool any = false;
  char buffer[64];
  while (true) {
    const ssize_t n = read(read_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      any = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return any;
  }
}

}  // namespace berth::cli
