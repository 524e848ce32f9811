// The subcommands of `berth` as one object over a connection to berth-node:
// what RunCli (commands.cc) dispatches to once it has the command's name.
// Internal to //services/node/cli:commands. The definitions are split by
// concern:
//
//   cli.cc            the node client (connection, errors, deadlines,
//                     Inspect, PrintJson, CopyLogs) and the small commands:
//                     ps, inspect, logs, stop, rm, events, node status
//   run_command.cc    run: the task's output until it ends, Ctrl-C
//   exec_command.cc   exec: stdin, the terminal and its resizes
//   stats_command.cc  stats: a stream per task and the table
//   image_command.cc  image pull, import, ls, inspect, rm, prune, tag over
//                     berth.image.v1.ImageService (forwarded on node.sock),
//                     and the pull before `run`
//
// The command table (names, flags, usage texts) is command_table.h.

#ifndef SERVICES_NODE_CLI_CLI_H_
#define SERVICES_NODE_CLI_CLI_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "berth/image/v1/image.pb.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "berth/node/v1/node.pb.h"
#include "google/protobuf/message.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/command_table.h"
#include "services/node/cli/commands.h"
#include "services/node/cli/task_spec_flags.h"
#include "services/node/cli/terminal.h"

namespace berth::cli {

// The node's time between the stop signal and the kill when none is given.
inline constexpr absl::Duration kDefaultStopTimeout = absl::Seconds(5);

// Writes all of `data` to `fd` (base::WriteAll); gives up silently when the
// fd is closed (nobody reads any more).
void BestEffortWrite(int fd, absl::string_view data);

class Cli {
 public:
  Cli(const CliEnvironment& env, std::string socket_path);

  // Runs `command` with `args` (what follows its name); returns the exit
  // code.
  int Dispatch(const CommandInfo& command,
               const std::vector<std::string>& args);

  // The hidden `berth __complete tasks|images` the completion scripts call
  // (completion_command.cc): the names, one a line; exit 1 without a word
  // when the node cannot be reached.
  int CompleteNames(const std::vector<std::string>& args);

 private:
  // How much of each output stream of a task was copied.
  struct LogPosition {
    uint64_t stdout_bytes = 0;
    uint64_t stderr_bytes = 0;
  };

  // A task `stats` shows.
  struct StatsTarget {
    std::string id;
    std::string name;
    uint64_t memory_limit = 0;
  };

  // The TaskStats streams of `stats`, one thread each, and the table
  // (stats_command.cc).
  class StatsSession;

  using ExecStream =
      grpc::ClientReaderWriter<driver::v1::ExecTaskStreamingRequest,
                               driver::v1::ExecTaskStreamingResponse>;

  // --- The node client (cli.cc).

  void Out(absl::string_view text) const;
  void Err(absl::string_view text) const;

  int UsageError(absl::string_view command, absl::string_view message) const;
  // For a command that takes no arguments: the usage error naming the first
  // one given, or kExitOk.
  int NoArguments(absl::string_view command, const ParsedArgs& args) const;
  int Fail(absl::string_view message) const;
  int Unreachable() const;

  // A failed call: the node's message, or the unreachable line when the
  // node went away.
  int NodeError(const grpc::Status& status) const;

  // Connects to berth-node (its NodeService and the ImageService it
  // forwards); false (nothing printed) when it cannot be reached.
  bool Connect();

  void SetDeadline(grpc::ClientContext* context,
                   absl::Duration extra = absl::ZeroDuration()) const;

  grpc::Status Inspect(const std::string& task, node::v1::Task* result) const;

  int PrintJson(const google::protobuf::Message& message, bool pretty) const;

  // Calls `call` with each of `names` (tasks, images), going on after a
  // failure (said by NodeError); kExitOk, or the code of a failure.
  int ForEachName(
      const std::vector<std::string>& names,
      const std::function<grpc::Status(const std::string&)>& call) const;

  // Copies a task's output to stdout and stderr until the stream ends. With
  // `position`, skips the bytes it counts as copied and counts the new ones.
  grpc::Status CopyLogs(const std::string& task, bool follow,
                        uint64_t tail_lines, LogPosition* position = nullptr);

  // --- The small commands (cli.cc).

  int Ps(const ParsedArgs& args);
  int Inspect(const ParsedArgs& args);
  int Logs(const ParsedArgs& args);
  int Stop(const ParsedArgs& args);
  int Remove(const ParsedArgs& args);
  int Events(const ParsedArgs& args);
  int NodeStatus(const ParsedArgs& args);

  // --- run (run_command.cc).

  int Run(const ParsedArgs& args);

  // Shows the task's output until it ends; returns its exit code.
  // SIGINT and SIGTERM stop the task with that signal while berth shows its
  // output (like docker's signal proxy); a second one ends berth itself and
  // leaves the task to the node.
  int Attach(const node::v1::Task& started, bool remove);

  // The end of a run once `ended` has: says why a task that failed to start
  // did, removes the task with --rm (`remove`; a failure said, the code
  // kept) and returns berth's exit code: 125 for a failed start, else that
  // of `exit` (an attach's exit frame) if given, else of the recorded end.
  int FinishRun(
      const node::v1::Task& ended, bool remove,
      const std::optional<driver::v1::ExitResult>& exit = std::nullopt);

  // Shows the task's output until it has ended; returns the ended task.
  absl::StatusOr<node::v1::Task> FollowUntilEnd(const node::v1::Task& started);

  // Until stop_fd is readable: the first SIGINT or SIGTERM stops the task
  // with that signal, a second one takes its default action.
  void ForwardSignals(const std::string& task, SignalPipe* signals,
                      int stop_fd);

  // --- exec (exec_command.cc).

  int Exec(const ParsedArgs& args);

  std::optional<driver::v1::TerminalSize> TerminalSize() const;

  // Sends stdin (when `forward_stdin`) and terminal resizes (when `tty`)
  // until stop_fd is readable or the stream fails. At the end of stdin sends
  // stdin_close and, without a terminal, half-closes the stream.
  void PumpInput(ExecStream* stream, bool forward_stdin, bool tty, int stop_fd,
                 SignalPipe* window_change, bool* writes_done);

  // --- attach (attach_command.cc): `berth attach TASK`.

  int AttachCommand(const ParsedArgs& args);

  // --- completion: `berth completion bash|zsh`.

  int Completion(const ParsedArgs& args);

  // --- stats (stats_command.cc).

  int Stats(const ParsedArgs& args);

  // --- image (image_command.cc).

  // How a pull's progress is shown.
  enum class PullDisplay {
    // PullProgressPrinter, on a terminal when the fd is one.
    kAuto,
    // PullProgressPrinter as on a terminal.
    kTerminal,
    // PullProgressPrinter's plain lines.
    kPlain,
    // Nothing.
    kQuiet,
  };

  // Pulls `reference` and writes its progress and summary to `fd` ("Image
  // is up to date" when it brings `digest_before`); Ctrl-C (SIGINT,
  // SIGTERM) cancels the stream. The image stored, or the exit code to
  // return (the error printed).
  std::variant<image::v1::Image, int> PullImage(
      const std::string& reference, const image::v1::Platform* platform, int fd,
      PullDisplay display, const std::string& digest_before);

  // Before `run`: pulls the task's image as `policy` says (progress to
  // stderr unless `quiet`); kExitOk or the exit code to return.
  int EnsureImage(const std::string& reference, PullPolicy policy, bool quiet);

  int ImagePull(const ParsedArgs& args);
  int ImageImport(const ParsedArgs& args);
  int ImageList(const ParsedArgs& args);
  int ImageInspect(const ParsedArgs& args);
  int ImageRemove(const ParsedArgs& args);
  int ImagePrune(const ParsedArgs& args);
  int ImageTag(const ParsedArgs& args);

  const CliEnvironment& env_;
  const std::string socket_path_;
  std::unique_ptr<node::v1::NodeService::Stub> stub_;
  std::unique_ptr<image::v1::ImageService::Stub> images_;
};

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_CLI_H_
