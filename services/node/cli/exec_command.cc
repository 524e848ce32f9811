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
#include "services/node/cli/attach_session.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/table.h"
#include "services/node/cli/terminal.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;

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
  return LocalTerminalSize(env_);
}

void Cli::PumpInput(ExecStream* stream, bool forward_stdin, bool tty,
                    int stop_fd, SignalPipe* window_change, bool* writes_done) {
  InputSink sink;
  sink.stdin = [stream](absl::string_view data) {
    driverpb::ExecTaskStreamingRequest request;
    request.set_stdin(data.data(), data.size());
    return stream->Write(request);
  };
  sink.stdin_close = [stream, tty, writes_done] {
    driverpb::ExecTaskStreamingRequest request;
    request.mutable_stdin_close();
    if (!stream->Write(request)) return false;
    // Without a terminal the command's output ends with its input: done.
    if (!tty) *writes_done = stream->WritesDone();
    return tty;
  };
  sink.resize = [stream](const driverpb::TerminalSize& size) {
    driverpb::ExecTaskStreamingRequest request;
    *request.mutable_resize() = size;
    return stream->Write(request);
  };
  // The pump shared with run -i/-t and attach (attach_session.h), without
  // detach keys: exec has none.
  berth::cli::PumpInput(env_, forward_stdin, stop_fd,
                        tty ? window_change : nullptr, /*detach=*/nullptr,
                        sink);
}

}  // namespace berth::cli
