// `berth exec`: a command in a running task over ExecTaskStreaming, with
// stdin, a terminal in raw mode and its resizes when asked (cli.h).

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "berth/driver/v1/driver.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/table.h"
#include "services/node/cli/terminal.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;

// At most this much stdin per ExecTaskStreamingRequest.
constexpr size_t kStdinChunkBytes = 32 * 1024;

}  // namespace

int Cli::Exec(const ParsedArgs& args) {
  if (args.positional.empty()) {
    return UsageError("exec", "a TASK and a COMMAND are required");
  }
  const std::string task = args.positional[0];
  std::vector<std::string> command(args.positional.begin() + 1,
                                   args.positional.end());
  if (!command.empty() && command[0] == "--") command.erase(command.begin());
  if (command.empty()) return UsageError("exec", "a COMMAND is required");
  const bool interactive = args.Has("interactive");
  const bool tty = args.Has("tty");
  if (interactive && tty && !isatty(env_.stdin_fd)) {
    return Fail("exec -i -t: stdin is not a terminal (leave out -t)");
  }
  if (!Connect()) return Unreachable();

  std::unique_ptr<SignalPipe> window_change;
  if (tty) {
    absl::StatusOr<std::unique_ptr<SignalPipe>> installed =
        SignalPipe::Install({SIGWINCH});
    if (!installed.ok()) return Fail(installed.status().message());
    window_change = *std::move(installed);
  }
  std::unique_ptr<RawTerminal> raw;
  if (tty && interactive) {
    absl::StatusOr<std::unique_ptr<RawTerminal>> entered =
        RawTerminal::Enter(env_.stdin_fd);
    if (!entered.ok()) return Fail(entered.status().message());
    raw = *std::move(entered);
  }

  driverpb::ExecTaskStreamingRequest setup_request;
  driverpb::ExecSetup& setup = *setup_request.mutable_setup();
  setup.set_task_id(task);
  for (const std::string& word : command) setup.add_command(word);
  setup.set_tty(tty);
  if (tty) {
    if (std::optional<driverpb::TerminalSize> size = TerminalSize()) {
      *setup.mutable_terminal_size() = *size;
    }
  }

  grpc::ClientContext context;
  std::unique_ptr<ExecStream> stream = stub_->ExecTaskStreaming(&context);
  bool writes_done = false;
  if (stream->Write(setup_request) && !interactive) {
    driverpb::ExecTaskStreamingRequest close_stdin;
    close_stdin.mutable_stdin_close();
    stream->Write(close_stdin);
    if (!tty) writes_done = stream->WritesDone();
  }

  base::UniqueFd stop_read;
  base::UniqueFd stop_write;
  std::thread pump;
  if (interactive || tty) {
    int stop_pipe[2];
    if (pipe2(stop_pipe, O_CLOEXEC) != 0) {
      context.TryCancel();
      return Fail(absl::StrCat("pipe: ", std::strerror(errno)));
    }
    stop_read.reset(stop_pipe[0]);
    stop_write.reset(stop_pipe[1]);
    pump = std::thread([&] {
      PumpInput(stream.get(), interactive, tty, stop_read.get(),
                window_change.get(), &writes_done);
    });
  }

  std::optional<driverpb::ExitResult> exit_result;
  driverpb::ExecTaskStreamingResponse response;
  while (stream->Read(&response)) {
    switch (response.frame_case()) {
      case driverpb::ExecTaskStreamingResponse::kStdout:
        BestEffortWrite(env_.stdout_fd, response.stdout());
        break;
      case driverpb::ExecTaskStreamingResponse::kStderr:
        BestEffortWrite(env_.stderr_fd, response.stderr());
        break;
      case driverpb::ExecTaskStreamingResponse::kExit:
        exit_result = response.exit();
        break;
      default:
        break;
    }
  }
  if (pump.joinable()) {
    BestEffortWrite(stop_write.get(), "x");
    pump.join();
    stop_read.reset();
    stop_write.reset();
  }
  if (!writes_done) stream->WritesDone();
  grpc::Status status = stream->Finish();
  raw.reset();  // messages below on a terminal that is itself again
  if (!status.ok()) return NodeError(status);
  if (!exit_result.has_value()) {
    return Fail(absl::StrCat("exec in task ", task,
                             " ended without the command's exit status"));
  }
  return ExitCodeOf(*exit_result);
}

std::optional<driverpb::TerminalSize> Cli::TerminalSize() const {
  std::optional<driverpb::TerminalSize> size = TerminalSizeOf(env_.stdin_fd);
  if (!size.has_value()) size = TerminalSizeOf(env_.stdout_fd);
  return size;
}

void Cli::PumpInput(ExecStream* stream, bool forward_stdin, bool tty,
                    int stop_fd, SignalPipe* window_change, bool* writes_done) {
  bool stdin_open = forward_stdin;
  std::string buffer(kStdinChunkBytes, '\0');
  while (true) {
    pollfd fds[3] = {{stop_fd, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
    if (stdin_open) fds[1].fd = env_.stdin_fd;
    if (tty && window_change != nullptr) fds[2].fd = window_change->read_fd();
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[2].revents != 0 && !window_change->Drain().empty()) {
      if (std::optional<driverpb::TerminalSize> size = TerminalSize()) {
        driverpb::ExecTaskStreamingRequest resize;
        *resize.mutable_resize() = *size;
        if (!stream->Write(resize)) return;
      }
    }
    if (fds[1].revents != 0) {
      const ssize_t n = read(env_.stdin_fd, buffer.data(), buffer.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n > 0) {
        driverpb::ExecTaskStreamingRequest data;
        data.set_stdin(buffer.data(), static_cast<size_t>(n));
        if (!stream->Write(data)) return;
        continue;
      }
      stdin_open = false;
      driverpb::ExecTaskStreamingRequest close_stdin;
      close_stdin.mutable_stdin_close();
      if (!stream->Write(close_stdin)) return;
      if (!tty) {
        *writes_done = stream->WritesDone();
        return;
      }
    }
  }
}

}  // namespace berth::cli
