#include "services/node/cli/attach_session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "berth/driver/v1/driver.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/detach_keys.h"
#include "services/node/cli/terminal.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;

// At most this much stdin per request (the API's limit).
constexpr size_t kStdinChunkBytes = 32 * 1024;

// `data` to sink.stdin in pieces of at most kStdinChunkBytes.
bool SendStdin(const InputSink& sink, absl::string_view data) {
  while (!data.empty()) {
    const size_t n = std::min(data.size(), kStdinChunkBytes);
    if (!sink.stdin(data.substr(0, n))) return false;
    data.remove_prefix(n);
  }
  return true;
}

}  // namespace

std::optional<driverpb::TerminalSize> LocalTerminalSize(
    const CliEnvironment& env) {
  std::optional<driverpb::TerminalSize> size = TerminalSizeOf(env.stdin_fd);
  if (!size.has_value()) size = TerminalSizeOf(env.stdout_fd);
  return size;
}

bool PumpInput(const CliEnvironment& env, bool forward_stdin, int stop_fd,
               SignalPipe* window_change, DetachMatcher* detach,
               const InputSink& sink) {
  bool stdin_open = forward_stdin;
  std::string buffer(kStdinChunkBytes, '\0');
  while (true) {
    pollfd fds[3] = {{stop_fd, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
    if (stdin_open) fds[1].fd = env.stdin_fd;
    if (window_change != nullptr) fds[2].fd = window_change->read_fd();
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (fds[0].revents != 0) return false;
    if (fds[2].revents != 0 && !window_change->Drain().empty()) {
      if (std::optional<driverpb::TerminalSize> size = LocalTerminalSize(env)) {
        if (!sink.resize(*size)) return false;
      }
    }
    if (fds[1].revents == 0) continue;
    const ssize_t n = read(env.stdin_fd, buffer.data(), buffer.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n > 0) {
      const absl::string_view data(buffer.data(), static_cast<size_t>(n));
      if (detach == nullptr) {
        if (!SendStdin(sink, data)) return false;
        continue;
      }
      if (!SendStdin(sink, detach->Feed(data))) return false;
      if (detach->detached()) return true;
      continue;
    }
    // The end of stdin (or an error reading it): what was held back as a
    // possible detach sequence, then the end of file.
    stdin_open = false;
    if (detach != nullptr) {
      if (!SendStdin(sink, detach->TakeHeld())) return false;
    }
    if (!sink.stdin_close()) return false;
    if (window_change == nullptr) return false;
  }
}

absl::StatusOr<AttachOutcome> RunAttachSession(
    node::v1::NodeService::StubInterface& stub, const CliEnvironment& env,
    const AttachOptions& options) {
  std::unique_ptr<SignalPipe> window_change;
  if (options.tty) {
    // Without it (SIGWINCH watched elsewhere) the size is only sent once.
    absl::StatusOr<std::unique_ptr<SignalPipe>> installed =
        SignalPipe::Install({SIGWINCH});
    if (installed.ok()) window_change = *std::move(installed);
  }
  std::unique_ptr<RawTerminal> raw;
  if (options.tty && options.stdin && isatty(env.stdin_fd)) {
    absl::StatusOr<std::unique_ptr<RawTerminal>> entered =
        RawTerminal::Enter(env.stdin_fd);
    if (!entered.ok()) return entered.status();
    raw = *std::move(entered);
  }
  base::UniqueFd stop_read;
  base::UniqueFd stop_write;
  if (int stop_pipe[2]; pipe2(stop_pipe, O_CLOEXEC) == 0) {
    stop_read.reset(stop_pipe[0]);
    stop_write.reset(stop_pipe[1]);
  } else {
    return absl::ErrnoToStatus(errno, "pipe2");
  }

  driverpb::AttachTaskRequest setup_request;
  driverpb::AttachSetup& setup = *setup_request.mutable_setup();
  setup.set_task_id(options.task);
  setup.set_stdin(options.stdin);
  if (options.tty) {
    if (std::optional<driverpb::TerminalSize> size = LocalTerminalSize(env)) {
      *setup.mutable_terminal_size() = *size;
    }
  }

  AttachOutcome outcome;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriterInterface<
      driverpb::AttachTaskRequest, driverpb::AttachTaskResponse>>
      stream = stub.AttachTask(&context);
  std::atomic<bool> detached{false};
  std::thread pump;
  if (stream->Write(setup_request) &&
      (options.stdin || window_change != nullptr)) {
    pump = std::thread([&] {
      DetachMatcher matcher(options.detach_keys);
      InputSink sink;
      sink.stdin = [&](absl::string_view data) {
        driverpb::AttachTaskRequest request;
        request.set_stdin(data.data(), data.size());
        return stream->Write(request);
      };
      sink.stdin_close = [&] {
        driverpb::AttachTaskRequest request;
        request.mutable_stdin_close();
        return stream->Write(request);
      };
      sink.resize = [&](const driverpb::TerminalSize& size) {
        driverpb::AttachTaskRequest request;
        *request.mutable_resize() = size;
        return stream->Write(request);
      };
      if (PumpInput(env, options.stdin, stop_read.get(), window_change.get(),
                    &matcher, sink)) {
        detached = true;
        // Ending the call leaves the task running (the API's contract).
        context.TryCancel();
      }
    });
  }
  driverpb::AttachTaskResponse response;
  while (stream->Read(&response)) {
    outcome.received = true;
    switch (response.frame_case()) {
      case driverpb::AttachTaskResponse::kStdout:
        BestEffortWrite(env.stdout_fd, response.stdout());
        break;
      case driverpb::AttachTaskResponse::kStderr:
        BestEffortWrite(env.stderr_fd, response.stderr());
        break;
      case driverpb::AttachTaskResponse::kExit:
        outcome.exit = response.exit();
        break;
      default:
        break;
    }
  }
  if (pump.joinable()) {
    BestEffortWrite(stop_write.get(), "x");
    pump.join();
  }
  outcome.detached = detached.load();
  outcome.status = stream->Finish();
  return outcome;
}

}  // namespace berth::cli
