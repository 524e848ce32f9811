// ExecTaskStreaming for drivers: the two optional interfaces a Driver may
// also implement (ARCHITECTURE.md, "berth exec").
//
// - ExecStreamingDriver, the high level: the driver gets readers and writers
//   for stdin, stdout and stderr, the terminal resizes and a cancellation
//   token, and returns how the command ended. It never sees protobuf. The SDK
//   does the framing: output frames of at most 32 KiB, the exit frame only
//   after every Write has returned, stdin and resizes read by a thread of
//   their own so that resizes never hold up stdin and only the latest
//   pending resize is kept.
// - RawExecStreamingDriver, the raw level: the driver gets the stream of
//   ExecTaskStreamingRequest and ExecTaskStreamingResponse messages itself,
//   for a driver that hands it on to a backend.
//
// A driver implementing neither reports exec_streaming false and the RPC
// answers UNIMPLEMENTED. One implementing both is served at the raw level.
//
//   class MyDriver : public berth::plugin::Driver,
//                    public berth::plugin::ExecStreamingDriver {
//     absl::StatusOr<ExitStatus> ExecTaskStreaming(
//         const ExecOptions& options) override { ... }
//   };
//
// The end of a call: once the driver returned and the exit frame is written,
// the SDK ends the call (OK) without waiting for the caller to half-close
// the stream; requests the caller sends after that are dropped.

#ifndef PLUGINS_SDK_EXEC_H_
#define PLUGINS_SDK_EXEC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "plugins/sdk/cancel.h"

namespace berth::plugin {

// The largest stdout or stderr frame the SDK sends (and the largest stdin
// frame a caller may send).
inline constexpr size_t kMaxExecFrameBytes = 32 * 1024;

// Size of a terminal in characters.
struct TerminalSize {
  uint32_t rows = 0;
  uint32_t columns = 0;

  friend bool operator==(const TerminalSize& a, const TerminalSize& b) {
    return a.rows == b.rows && a.columns == b.columns;
  }
  friend bool operator!=(const TerminalSize& a, const TerminalSize& b) {
    return !(a == b);
  }
};

// How an exec'd command ended.
struct ExitStatus {
  // Exit code; 0 when a signal killed it.
  int exit_code = 0;
  // The signal that killed it; 0 when it exited.
  int signal = 0;
  // The kernel killed it for lack of memory.
  bool oom_killed = false;
};

// The command's stdin, as the caller sends it.
class ExecStdin {
 public:
  virtual ~ExecStdin() = default;

  // Blocks until stdin has bytes or ends; copies up to `size` of them into
  // `buffer` and returns how many. Returns 0 at the end of stdin: the caller
  // sent stdin_close or half-closed the stream, the call was cancelled, or
  // Close() was called. One reader at a time.
  virtual size_t Read(char* buffer, size_t size) = 0;

  // The driver will read no more: Read returns 0 from now on (a Read blocked
  // in another thread returns at once) and the rest of stdin is dropped.
  // From any thread.
  virtual void Close() = 0;
};

// The command's stdout or stderr, towards the caller.
class ExecOutput {
 public:
  virtual ~ExecOutput() = default;

  // Sends `data`, of any size, in frames of at most kMaxExecFrameBytes.
  // Blocks while the caller does not read (flow control). Returns false when
  // the stream is gone (the call was cancelled, or the driver already
  // returned); the driver should then stop. Thread-safe.
  virtual bool Write(absl::string_view data) = 0;
};

// Terminal resizes from the caller. Latest wins: a size not taken before the
// next arrives is replaced by it.
class ResizeEvents {
 public:
  virtual ~ResizeEvents() = default;

  // The newest size not taken yet, if any; taking it clears the slot.
  virtual std::optional<TerminalSize> TakeLatest() = 0;

  // Blocks until a size is pending (true), the call is cancelled or
  // `deadline` passes (false unless a size is pending).
  virtual bool WaitUntil(absl::Time deadline) = 0;

  // Polls readable (POLLIN) while a size is pending; TakeLatest clears it.
  // Owned by the stream; do not read or close it. -1 if it could not be made.
  virtual int fd() = 0;
};

// What ExecStreamingDriver::ExecTaskStreaming gets. The pointers are valid
// until it returns.
struct ExecOptions {
  // The task to run the command in (the SDK made sure InspectTask knows it
  // and that it runs).
  std::string task_id;
  // The command and its arguments; never empty.
  std::vector<std::string> command;
  // Give the command a terminal: everything it writes then goes to `out`.
  bool tty = false;
  // The terminal's size at the start; zero when the caller gave none.
  TerminalSize terminal_size;

  ExecStdin* in = nullptr;
  ExecOutput* out = nullptr;
  ExecOutput* err = nullptr;
  ResizeEvents* resizes = nullptr;
  // Cancelled when the caller cancels the call: kill the command and return
  // (any status; the SDK answers CANCELLED).
  const CancelToken* cancel = nullptr;
};

// The high-level exec interface.
class ExecStreamingDriver {
 public:
  virtual ~ExecStreamingDriver() = default;

  // Runs options.command in the task and returns how it ended, after every
  // Write to options.out and options.err has returned (the SDK sends the
  // exit frame after the last of them). An error status is answered as it
  // is, without an exit frame: NOT_FOUND naming the task, INVALID_ARGUMENT
  // naming the command, ...
  virtual absl::StatusOr<ExitStatus> ExecTaskStreaming(
      const ExecOptions& options) = 0;
};

// The stream of one ExecTaskStreaming call, for the raw interface.
class ExecTaskStream {
 public:
  virtual ~ExecTaskStream() = default;

  // The call's first request (the SDK checked that it has a task id and a
  // command).
  virtual const driver::v1::ExecSetup& setup() const = 0;

  // The next request after the setup (stdin, stdin_close, resize), in the
  // order the caller sent them (the SDK reads them ahead into a bounded
  // queue). Returns false when there are no more: the caller half-closed the
  // stream or cancelled it (then cancel() is cancelled), or CloseRecv() was
  // called. One reader at a time.
  virtual bool Recv(driver::v1::ExecTaskStreamingRequest* request) = 0;

  // The driver will receive no more: Recv returns false from now on (a Recv
  // blocked in another thread returns at once) and later requests are
  // dropped. Call it before returning if a thread of yours may be in Recv.
  virtual void CloseRecv() = 0;

  // Sends one response; stdout and stderr frames larger than
  // kMaxExecFrameBytes are split. Returns false when the stream is gone.
  // Thread-safe. The exit frame must be the last, after all output.
  virtual bool Send(const driver::v1::ExecTaskStreamingResponse& response) = 0;

  // Cancelled when the caller cancels the call.
  virtual const CancelToken& cancel() const = 0;
};

// The raw exec interface.
class RawExecStreamingDriver {
 public:
  virtual ~RawExecStreamingDriver() = default;

  // Serves the stream until the command has ended and its exit frame is
  // sent. A returned error is answered as the call's status (send no exit
  // frame then).
  virtual absl::Status ExecTaskStreamingRaw(ExecTaskStream* stream) = 0;
};

// The ExitResult message for `status`, exited now.
driver::v1::ExitResult ToExitResult(const ExitStatus& status);

// A streaming exec with a deadline: what a driver runs for both exec calls.
using RunExecFn = std::function<absl::StatusOr<ExitStatus>(
    const ExecOptions& options, absl::Time deadline)>;

// Driver::ExecTask for a driver whose exec is streaming: calls `run` with no
// stdin, stdout and stderr gathered in memory, `cancel`, and the deadline
// `timeout` sets (none for InfiniteDuration), and returns the output with
// the exit result; `run`'s error as it is.
absl::StatusOr<driver::v1::ExecTaskResponse> ExecTaskThroughStreaming(
    const std::string& task_id, const std::vector<std::string>& command,
    absl::Duration timeout, const CancelToken& cancel, const RunExecFn& run);

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_EXEC_H_
