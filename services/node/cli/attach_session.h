// The input and output loop of `berth run -i/-t` and `berth attach` over
// NodeService.AttachTask: stdin to the task (through the detach keys), the
// terminal in raw mode and its resizes for a task with a tty, the task's
// output to stdout and stderr, until the task's output ends, the detach keys
// are typed or the call fails.

#ifndef SERVICES_NODE_CLI_ATTACH_SESSION_H_
#define SERVICES_NODE_CLI_ATTACH_SESSION_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "grpcpp/support/status.h"
#include "services/node/cli/commands.h"
#include "services/node/cli/detach_keys.h"
#include "services/node/cli/terminal.h"

namespace berth::cli {

struct AttachOptions {
  // The task (id, unique id prefix or name).
  std::string task;
  // Send stdin to the task (AttachSetup.stdin); at its end, stdin_close.
  bool stdin = false;
  // The task has a terminal: stdin, when it is a terminal too and is sent,
  // is put in raw mode (restored on every way out) and the terminal's size
  // and its changes (SIGWINCH) are sent.
  bool tty = false;
  // The detach sequence (ParseDetachKeys' bytes); empty: none.
  std::string detach_keys;
};

struct AttachOutcome {
  // How the call ended; CANCELLED after a detach.
  grpc::Status status;
  // The exit frame: how the task ended while attached.
  std::optional<driver::v1::ExitResult> exit;
  // The detach keys were typed: the call was ended, the task left running.
  bool detached = false;
  // Some response (output, exit) arrived.
  bool received = false;
};

// Where PumpInput sends what it reads; each returns false when the stream
// is gone (PumpInput returns then).
struct InputSink {
  // Bytes of stdin (at most 32 KiB a call).
  std::function<bool(absl::string_view data)> stdin;
  // The end of stdin.
  std::function<bool()> stdin_close;
  // The terminal's new size.
  std::function<bool(const driver::v1::TerminalSize& size)> resize;
};

// The input side of `exec -i/-t`, `run -i/-t` and `attach`, on a thread of
// its own: until stop_fd is readable, sends stdin (when `forward_stdin`;
// through `detach`, when not null) and, with `window_change`, the terminal's
// size at each SIGWINCH. At the end of stdin sends what `detach` holds back,
// then stdin_close, and returns unless it watches resizes. Returns true when
// the detach keys were typed (nothing more was sent).
bool PumpInput(const CliEnvironment& env, bool forward_stdin, int stop_fd,
               SignalPipe* window_change, DetachMatcher* detach,
               const InputSink& sink);

// The size of the caller's terminal (stdin's, else stdout's); nullopt when
// neither is one.
std::optional<driver::v1::TerminalSize> LocalTerminalSize(
    const CliEnvironment& env);

// Attaches to `options.task` and copies until the call ends. An error only
// when the terminal cannot be set up (nothing was called then).
absl::StatusOr<AttachOutcome> RunAttachSession(
    node::v1::NodeService::StubInterface& stub, const CliEnvironment& env,
    const AttachOptions& options);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_ATTACH_SESSION_H_
