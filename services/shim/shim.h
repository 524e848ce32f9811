// berth-shim: one process per sandboxed process. Its own stdin, stdout and
// stderr stand for the process's, its signals go to the process, and it exits
// with the process's exit code (128 + N for a signal). It carries all of this
// over one berth.proxy.v1.ProxyService/Connect stream to berth-proxy, and
// survives a restart of the proxy: it reconnects with the token and the
// offsets of the output it has written, so no output is lost or written twice.
//
// Threads: the caller's (reads the stream, writes stdout and stderr, acks),
// one more (reads stdin and a signalfd, sends stdin, signals and resizes
// up), the acker, and with an attach socket its server's, besides gRPC's
// own.

#ifndef SERVICES_SHIM_SHIM_H_
#define SERVICES_SHIM_SHIM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/agent/v1/agent.pb.h"
#include "plugins/sdk/rotating_log.h"

namespace berth {
namespace shim {

// The environment variable a token may come in.
inline constexpr char kTokenEnvVar[] = "BERTH_SHIM_TOKEN";

// The exit code of the shim itself when it fails: no token, the proxy gone
// for longer than the reconnect timeout, the token refused, the agent gone.
inline constexpr int kShimFailureExitCode = 255;

// Bytes of stdin per frame.
inline constexpr size_t kStdinFrameSize = 32 * 1024;

// Takes the token out of the environment: returns the value of
// BERTH_SHIM_TOKEN, then overwrites the variable's string in place (so that
// /proc/PID/environ, which shows the environment the process was started
// with, no longer has it) and unsets it (so that children do not inherit it).
// NOT_FOUND if it is not set. Call it first thing in main(), before any
// thread exists: it changes the environment.
absl::StatusOr<std::string> TakeTokenFromEnvironment();

// Reads the token from descriptor `fd` up to EOF (at most 4 KiB; trailing
// whitespace removed) and closes it. Errors name the descriptor.
absl::StatusOr<std::string> ReadTokenFromFd(int fd);

// The signals the shim forwards to the process as `signal` frames:
// HUP, INT, QUIT, USR1, USR2, ALRM, TERM, CONT, TSTP, TTIN, TTOU. SIGWINCH
// becomes a `resize` instead. Not forwarded: KILL and STOP (they cannot be
// caught: killing the shim makes the proxy send the process SIGHUP), CHLD
// (the shim has no children), PIPE (ignored: a closed stdout is handled as a
// write error), the fault signals of the shim's own code (SEGV, BUS, FPE,
// ILL, ABRT, TRAP, SYS) and the shim's own resource limits and timers (XCPU,
// XFSZ, PROF, VTALRM), and URG.
const std::vector<int>& ForwardedSignals();

// Blocks the forwarded signals and SIGWINCH in the calling thread (threads
// started later inherit the mask; the shim reads them from a signalfd) and
// ignores SIGPIPE. Call it in main() before any thread is started.
absl::Status BlockShimSignals();

// The shim's exit code for how the process ended: its exit code, or
// 128 + signal.
int ExitCodeFor(const berth::agent::v1::ProcessExit& exit);

// One output stream of the process (stdout or stderr) written to a
// descriptor, by offset: bytes before what was already written are dropped
// (a resumed stream may repeat them), a chunk starting beyond it is an error.
// Thread-compatible; written() may be read from any thread.
class OutputSink {
 public:
  // `name` ("stdout") is for messages. With `log` the stream goes to its
  // rotated files instead of `fd`.
  OutputSink(int fd, std::string name,
             std::unique_ptr<plugin::RotatingLog> log = nullptr)
      : fd_(fd), name_(std::move(name)), log_(std::move(log)) {}
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // Writes the part of `data`, which starts at `offset` of the stream, that
  // is beyond written(), all of it (partial writes, EINTR and EAGAIN are
  // retried). DATA_LOSS naming the stream and both offsets if `offset` is
  // beyond written(). A descriptor that cannot be written (EPIPE: nobody
  // reads the other end; ENOSPC; EIO) makes the sink discard what comes from
  // then on and count it as written, so the process is never held up by a
  // reader that went away; broken() says so.
  absl::Status Write(uint64_t offset, absl::string_view data);

  // Bytes of the stream written out (or discarded after a write error).
  uint64_t written() const { return written_.load(std::memory_order_acquire); }
  bool broken() const { return broken_; }
  const std::string& name() const { return name_; }

 private:
  const int fd_;
  const std::string name_;
  const std::unique_ptr<plugin::RotatingLog> log_;
  std::atomic<uint64_t> written_{0};
  bool broken_ = false;
};

struct ShimOptions {
  // berth-proxy's socket.
  std::string proxy_socket = "/run/berth/proxy.sock";
  // The token of the process.
  std::string token;
  // How long to keep trying to reach the proxy after the stream was lost
  // (and at start).
  absl::Duration reconnect_timeout = absl::Seconds(30);
  // The process's stdio.
  int stdin_fd = 0;
  int stdout_fd = 1;
  int stderr_fd = 2;
  // When set, the process's stdout and stderr go to rotated files
  // LOG_DIR/stdout.log and stderr.log (plugins/sdk/rotating_log.h) instead
  // of stdout_fd and stderr_fd: where berth-node reads a task's output.
  std::string log_dir;
  // Their limits; 0 takes the defaults of TaskConfig.logs.
  uint64_t log_max_file_bytes = 0;
  uint32_t log_max_files = 0;
  // Read forwarded signals and SIGWINCH from a signalfd (they must be
  // blocked in every thread: BlockShimSignals).
  bool forward_signals = true;
  // A listening Unix socket (taken) on which attached callers are served
  // (attach_server.h, the sandbox driver's AttachTask): the process's
  // output, the exit, their terminal sizes sent up as resizes. -1: none.
  int attach_fd = -1;
  // With attach_fd: the process's stdin is what attached callers send
  // (end of file once one closes it), not stdin_fd.
  bool attach_stdin = false;
  // With attach_fd: how long attached callers are given, after the exit,
  // to take what they were not sent yet.
  absl::Duration attach_flush_timeout = absl::Seconds(2);
};

// Runs the shim until the process exits (returns ExitCodeFor its exit) or the
// shim fails (logs one message naming the cause, and the proxy socket where
// it is about the proxy, and returns kShimFailureExitCode):
// - the proxy refuses the token (PERMISSION_DENIED, or another error that is
//   not about the connection): no retry;
// - the proxy ends the stream with UNAVAILABLE about the sandbox's agent (a
//   message naming the "agent" or the "sandbox"): no retry;
// - the stream is lost otherwise (UNAVAILABLE, or CANCELLED by the other
//   end): reconnects with resume and the offsets written, with backoff, for
//   at most reconnect_timeout since the loss, then gives up;
// - output that does not fit the offsets written (a gap): no retry.
int RunShim(const ShimOptions& options);

}  // namespace shim
}  // namespace berth

#endif  // SERVICES_SHIM_SHIM_H_
