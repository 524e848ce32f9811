// The local terminal of `berth exec -t`: raw mode that is restored on every
// way out (return, exception, SIGINT/SIGTERM/SIGHUP/SIGQUIT), its size, and
// SIGWINCH as a readable file descriptor.

#ifndef SERVICES_NODE_CLI_TERMINAL_H_
#define SERVICES_NODE_CLI_TERMINAL_H_

#include <signal.h>
#include <termios.h>

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "berth/driver/v1/driver.pb.h"

namespace berth::cli {

// Puts a terminal into raw mode (no echo, no line editing, no signals from
// keys, no output processing) while it lives, then restores the settings it
// found. While it lives, SIGINT, SIGTERM, SIGHUP and SIGQUIT first restore
// the settings and then take their default action. One at a time per
// process.
class RawTerminal {
 public:
  // FAILED_PRECONDITION if `fd` is not a terminal or another RawTerminal
  // lives.
  static absl::StatusOr<std::unique_ptr<RawTerminal>> Enter(int fd);
  ~RawTerminal();

  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  RawTerminal() = default;
  struct sigaction saved_actions_[4] = {};
};

// The size of the terminal `fd`; nullopt if it is not one.
std::optional<driver::v1::TerminalSize> TerminalSizeOf(int fd);

// Makes SIGWINCH readable: while it lives, each SIGWINCH writes a byte to
// read_fd() (a non-blocking pipe). One at a time per process.
class WindowChangeSignal {
 public:
  static absl::StatusOr<std::unique_ptr<WindowChangeSignal>> Install();
  ~WindowChangeSignal();

  WindowChangeSignal(const WindowChangeSignal&) = delete;
  WindowChangeSignal& operator=(const WindowChangeSignal&) = delete;

  int read_fd() const { return read_fd_; }
  // Reads every pending byte; true if there was at least one.
  bool Drain();

 private:
  WindowChangeSignal(int read_fd, int write_fd)
      : read_fd_(read_fd), write_fd_(write_fd) {}
  const int read_fd_;
  const int write_fd_;
  struct sigaction saved_action_ = {};
};

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_TERMINAL_H_
