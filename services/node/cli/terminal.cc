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
#include <vector>

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

// By signal number: 1 + the write end of the SignalPipe watching it, or 0
// (so that the zero-initialized array means "none").
constexpr int kMaxSignal = 65;
std::atomic<int> signal_write_fds[kMaxSignal];

void WriteSignalNumber(int signal) {
  const int saved_errno = errno;
  const int fd = signal > 0 && signal < kMaxSignal
                     ? signal_write_fds[signal].load() - 1
                     : -1;
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(signal);
    [[maybe_unused]] ssize_t written = write(fd, &byte, 1);
  }
  errno = saved_errno;
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
  if (tcgetattr(fd, &original) != 0)
    return absl::ErrnoToStatus(errno, "tcgetattr");
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
    return absl::ErrnoToStatus(
        errno, "tcsetattr");  // the destructor restores the handlers
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

absl::StatusOr<std::unique_ptr<SignalPipe>> SignalPipe::Install(
    std::vector<int> signals) {
  for (int signal : signals) {
    if (signal <= 0 || signal >= kMaxSignal) {
      return absl::InvalidArgumentError(absl::StrCat("no signal ", signal));
    }
    if (signal_write_fds[signal].load() != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("signal ", signal, " is already watched"));
    }
  }
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
    return absl::ErrnoToStatus(errno, "pipe2");
  std::unique_ptr<SignalPipe> pipe(
      new SignalPipe(base::UniqueFd(fds[0]), base::UniqueFd(fds[1])));
  for (int signal : signals) {
    signal_write_fds[signal].store(fds[1] + 1);
    struct sigaction action = {};
    action.sa_handler = WriteSignalNumber;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    struct sigaction saved = {};
    if (sigaction(signal, &action, &saved) != 0) {
      signal_write_fds[signal].store(0);
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("sigaction(", signal, ")"));
    }
    pipe->signals_.push_back(signal);
    pipe->saved_actions_.push_back(saved);
  }
  return pipe;
}

SignalPipe::~SignalPipe() {
  for (size_t i = 0; i < signals_.size(); ++i) {
    sigaction(signals_[i], &saved_actions_[i], nullptr);
    signal_write_fds[signals_[i]].store(0);
  }
}

std::vector<int> SignalPipe::Drain() {
  std::vector<int> arrived;
  unsigned char buffer[64];
  while (true) {
    const ssize_t n = read(read_fd_.get(), buffer, sizeof(buffer));
    if (n > 0) {
      arrived.insert(arrived.end(), buffer, buffer + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return arrived;
  }
}

}  // namespace berth::cli
