// The local terminal of `berth exec -t`: raw mode that is restored on every
// way out (return, exception, SIGINT/SIGTERM/SIGHUP/SIGQUIT), its size; and
// signals (SIGWINCH, SIGINT, ...) as a readable file descriptor.

#ifndef SERVICES_NODE_CLI_TERMINAL_H_
#define SERVICES_NODE_CLI_TERMINAL_H_

#include <signal.h>
#include <termios.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"
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

// Makes signals readable: while it lives, each of its signals that arrives
// writes its number as one byte to read_fd() (a non-blocking pipe) instead of
// taking its action. A signal is watched by one SignalPipe at a time.
//
//   absl::StatusOr<std::unique_ptr<SignalPipe>> winch =
//       SignalPipe::Install({SIGWINCH});
//   ... poll((*winch)->read_fd()) ...; (*winch)->Drain() → {SIGWINCH}
class SignalPipe {
 public:
  static absl::StatusOr<std::unique_ptr<SignalPipe>> Install(
      std::vector<int> signals);
  // Puts back the actions the signals had.
  ~SignalPipe();

  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int read_fd() const { return read_fd_.get(); }
  // The signals that arrived since the last call, in order; reads without
  // blocking.
  std::vector<int> Drain();

 private:
  SignalPipe(base::UniqueFd read_fd, base::UniqueFd write_fd)
      : read_fd_(std::move(read_fd)), write_fd_(std::move(write_fd)) {}
  // Closed after the destructor has put the signals' actions back.
  const base::UniqueFd read_fd_;
  const base::UniqueFd write_fd_;
  std::vector<int> signals_;
  std::vector<struct sigaction> saved_actions_;
};

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_TERMINAL_H_
