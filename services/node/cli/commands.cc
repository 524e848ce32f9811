#include "services/node/cli/commands.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "berth/node/v1/node.pb.h"
#include "berth/stats/v1/stats.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "plugins/sdk/proto_time.h"
#include "services/common/dial.h"
#include "services/common/service_main.h"
#include "services/common/unix_socket.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/table.h"
#include "services/node/cli/task_spec_flags.h"
#include "services/node/cli/terminal.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;
namespace nodepb = ::berth::node::v1;
namespace statspb = ::berth::stats::v1;

// At most this much stdin per ExecTaskStreamingRequest.
constexpr size_t kStdinChunkBytes = 32 * 1024;
// Width of the COMMAND column of `ps`.
constexpr size_t kCommandWidth = 30;
// ANSI: cursor home, then clear the screen.
constexpr char kClearScreen[] = "\033[H\033[2J";
// The node's time between the stop signal and the kill when none is given.
constexpr absl::Duration kDefaultStopTimeout = absl::Seconds(5);

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed pipe: nobody reads any more
    data.remove_prefix(static_cast<size_t>(n));
  }
}

absl::StatusOr<std::string> ReadAll(int fd, const std::string& what) {
  std::string data;
  char buffer[8192];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read ", what, ": ", std::strerror(errno)));
    }
    if (n == 0) return data;
    data.append(buffer, static_cast<size_t>(n));
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path, int stdin_fd) {
  if (path == "-") return ReadAll(stdin_fd, "stdin");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  absl::StatusOr<std::string> data = ReadAll(fd, path);
  close(fd);
  return data;
}

// One subcommand: its name ("node status" for the nested one), synopsis,
// description and flags.
struct CommandInfo {
  std::string name;
  std::string synopsis;
  std::string description;
  std::vector<FlagSpec> flags;
  PositionalMode mode = PositionalMode::kInterspersed;
};

const FlagSpec kHelpFlag = {"help", 'h', "", "Print this help"};

const std::vector<CommandInfo>& Commands() {
  static const std::vector<CommandInfo>* const kCommands = new std::vector<
      CommandInfo>{
      {"run", "[FLAGS] [--] COMMAND [ARGS...]",
       "Run a command as a new task. Without -d, shows its output (stdout to\n"
       "stdout, stderr to stderr) and exits with the task's exit code (128+N\n"
       "when signal N killed it; 125 when it could not be started).",
       RunFlagSpecs(), PositionalMode::kStopAtFirst},
      {"ps",
       "[FLAGS]",
       "List the tasks: running ones, or all with -a.",
       {{"all", 'a', "", "Show every task, not only running ones"},
        {"json", 0, "", "Print the ListTasksResponse in protobuf JSON"},
        {"quiet", 'q', "", "Print only the (short) task ids"},
        kHelpFlag}},
      {"inspect",
       "TASK",
       "Print a task (id, unique id prefix or name) as JSON (protobuf JSON\n"
       "mapping).",
       {kHelpFlag}},
      {"logs",
       "[FLAGS] TASK",
       "Print a task's output: its stdout to stdout, its stderr to stderr.",
       {{"follow", 'f', "", "Keep printing new output until the task ends"},
        {"tail", 0, "N",
         "Start N lines before the end ('all': from the start)"},
        kHelpFlag}},
      {"exec",
       "[FLAGS] TASK [--] COMMAND [ARGS...]",
       "Run a command inside a running task and exit with its exit code\n"
       "(128+N when signal N killed it).",
       {{"interactive", 'i', "", "Pass stdin to the command"},
        {"tty", 't', "",
         "Give the command a terminal (with -i: this terminal in raw mode, "
         "resized with it)"},
        kHelpFlag},
       PositionalMode::kStopAtFirst},
      {"stats",
       "[FLAGS] [TASK...]",
       "Show the resource usage of tasks (every running task when none is\n"
       "named) in a table refreshed in place, until they end or Ctrl-C.",
       {{"no-stream", 0, "", "Print one sample of each task and exit"},
        {"json", 0, "",
         "Print samples as JSON lines (berth.stats.v1.TaskResourceUsage)"},
        kHelpFlag}},
      {"stop",
       "[FLAGS] TASK...",
       "Stop tasks: their stop signal, then SIGKILL after the timeout. A\n"
       "stopped task is not restarted.",
       {{"timeout", 't', "SECONDS",
         "Time between the stop signal and SIGKILL (default 5)"},
        {"signal", 's', "SIGNAL", "Stop signal (default SIGTERM)"},
        kHelpFlag}},
      {"rm",
       "[FLAGS] TASK...",
       "Remove stopped tasks and everything kept of them.",
       {{"force", 'f', "", "Stop a running task first"}, kHelpFlag}},
      {"events",
       "[FLAGS] [TASK...]",
       "Print the node's events as they happen (tasks created, started,\n"
       "exited, restarting, failed, removed; plugins up), of the named tasks\n"
       "only when some are given, until Ctrl-C.",
       {{"json", 0, "",
         "Print events as JSON lines (berth.node.v1.EventsResponse)"},
        kHelpFlag}},
      {"node status",
       "[FLAGS]",
       "Show the node's services and driver plugins and whether each is\n"
       "healthy; exits 1 when one is not.",
       {{"json", 0, "", "Print the GetNodeStatusResponse in protobuf JSON"},
        kHelpFlag}},
  };
  return *kCommands;
}

const CommandInfo* FindCommand(absl::string_view name) {
  for (const CommandInfo& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::string CommandUsage(const CommandInfo& command) {
  return absl::StrCat("usage: berth ", command.name, " ", command.synopsis,
                      "\n\n", command.description, "\n\nFlags:\n",
                      FormatFlagHelp(command.flags));
}

std::string TopUsage() {
  std::string usage =
      "usage: berth [--socket=PATH] COMMAND [ARGS...]\n"
      "\n"
      "The command line of berth-node: runs tasks on this node and looks "
      "after them.\n"
      "\n"
      "Commands:\n";
  const std::vector<std::pair<const char*, const char*>> kSummaries = {
      {"run", "Run a command as a new task"},
      {"ps", "List tasks"},
      {"inspect", "Show a task as JSON"},
      {"logs", "Show a task's output"},
      {"exec", "Run a command inside a running task"},
      {"stats", "Show the resource usage of tasks"},
      {"stop", "Stop tasks"},
      {"rm", "Remove tasks"},
      {"events", "Show the node's events as they happen"},
      {"node status", "Show the node's services and plugins"},
  };
  for (const auto& [name, summary] : kSummaries) {
    absl::StrAppend(&usage, absl::StrFormat("  %-13s %s\n", name, summary));
  }
  absl::StrAppend(
      &usage,
      "\nGlobal flags:\n"
      "  --socket=PATH   berth-node's socket (default: $BERTH_NODE_SOCKET, "
      "else\n"
      "                  $BERTH_RUNTIME_DIR/node.sock, else "
      "/run/berth/node.sock)\n"
      "  -h, --help      Print this help\n"
      "  --version       Print berth's version\n"
      "\nRun 'berth COMMAND --help' for more about a command.\n");
  return usage;
}

std::string TaskName(const nodepb::Task& task) {
  return task.spec().name().empty() ? ShortId(task.id()) : task.spec().name();
}

bool HasEnded(const nodepb::Task& task) {
  switch (task.state()) {
    case nodepb::TASK_STATE_EXITED:
    case nodepb::TASK_STATE_FAILED:
      return true;
    case nodepb::TASK_STATE_RESTARTING:
      return task.has_exit_result();
    default:
      return false;
  }
}

class Cli {
 public:
  Cli(const CliEnvironment& env, std::string socket_path)
      : env_(env), socket_path_(std::move(socket_path)) {}

  int Dispatch(const CommandInfo& command,
               const std::vector<std::string>& args) {
    absl::StatusOr<ParsedArgs> parsed =
        ParseArgs(command.flags, args, command.mode);
    if (!parsed.ok()) {
      return UsageError(command.name, std::string(parsed.status().message()));
    }
    if (parsed->Has("help")) {
      Out(CommandUsage(command));
      return kExitOk;
    }
    if (command.name == "run") return Run(*parsed);
    if (command.name == "ps") return Ps(*parsed);
    if (command.name == "inspect") return Inspect(*parsed);
    if (command.name == "logs") return Logs(*parsed);
    if (command.name == "exec") return Exec(*parsed);
    if (command.name == "stats") return Stats(*parsed);
    if (command.name == "stop") return Stop(*parsed);
    if (command.name == "rm") return Remove(*parsed);
    if (command.name == "events") return Events(*parsed);
    return NodeStatus(*parsed);
  }

 private:
  void Out(absl::string_view text) const { WriteAll(env_.stdout_fd, text); }
  void Err(absl::string_view text) const { WriteAll(env_.stderr_fd, text); }

  int UsageError(absl::string_view command, absl::string_view message) const {
    Err(absl::StrCat("berth ", command, ": ", message, "; see 'berth ", command,
                     " --help'\n"));
    return kExitUsage;
  }

  int Fail(absl::string_view message) const {
    Err(absl::StrCat("berth: ", message, "\n"));
    return kExitError;
  }

  int Unreachable() const {
    return Fail(absl::StrCat("cannot reach berth-node at ", socket_path_,
                             ": is it running? (tools/dev up)"));
  }

  // A failed call: the node's message, or the unreachable line when the
  // node went away.
  int NodeError(const grpc::Status& status) const {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      absl::StatusOr<SocketPathState> state = ProbeSocketPath(socket_path_);
      if (!state.ok() || *state != SocketPathState::kLive) return Unreachable();
    }
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        status.error_message() == "Deadline Exceeded") {
      // gRPC's own words: our deadline passed before berth-node answered.
      return Fail(absl::StrCat("berth-node at ", socket_path_,
                               " did not answer in time (it may still be at "
                               "work: see berth ps -a)"));
    }
    return Fail(status.error_message());
  }

  // Connects to berth-node; false (nothing printed) when it cannot be
  // reached.
  bool Connect() {
    absl::StatusOr<SocketPathState> state = ProbeSocketPath(socket_path_);
    if (!state.ok() || *state != SocketPathState::kLive) return false;
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket_path_, env_.connect_timeout);
    if (!channel.ok()) return false;
    stub_ = nodepb::NodeService::NewStub(*channel);
    return true;
  }

  void SetDeadline(grpc::ClientContext* context,
                   absl::Duration extra = absl::ZeroDuration()) const {
    context->set_deadline(
        absl::ToChronoTime(absl::Now() + env_.call_timeout + extra));
  }

  grpc::Status Inspect(const std::string& task, nodepb::Task* result) const {
    grpc::ClientContext context;
    SetDeadline(&context);
    nodepb::InspectTaskRequest request;
    request.set_task_id(task);
    nodepb::InspectTaskResponse response;
    grpc::Status status = stub_->InspectTask(&context, request, &response);
    if (status.ok()) *result = response.task();
    return status;
  }

  int PrintJson(const google::protobuf::Message& message, bool pretty) const {
    absl::StatusOr<std::string> json = ToJson(message, pretty);
    if (!json.ok()) return Fail(json.status().message());
    Out(*json);
    return kExitOk;
  }

  // --- run

  int Run(const ParsedArgs& args) {
    nodepb::TaskSpec base;
    if (args.Has("json-spec")) {
      const std::string path = args.Value("json-spec");
      absl::StatusOr<std::string> json = ReadFile(path, env_.stdin_fd);
      if (!json.ok()) {
        return UsageError(
            "run", absl::StrCat("--json-spec: ", json.status().message()));
      }
      google::protobuf::util::JsonParseOptions options;
      const google::protobuf::util::Status parsed =
          google::protobuf::util::JsonStringToMessage(*json, &base, options);
      if (!parsed.ok()) {
        return UsageError(
            "run", absl::StrCat("--json-spec ", path,
                                ": not a berth.node.v1.TaskSpec in JSON: ",
                                std::string(parsed.message())));
      }
    } else if (args.positional.empty()) {
      return UsageError("run",
                        "a command is required: berth run [FLAGS] -- COMMAND "
                        "[ARGS...]");
    }
    if (args.Has("detach") && args.Has("rm")) {
      return UsageError("run", "--rm cannot be used with -d");
    }
    absl::StatusOr<nodepb::TaskSpec> spec = TaskSpecFromRunFlags(
        args, args.positional, std::move(base), env_.getenv);
    if (!spec.ok()) return UsageError("run", spec.status().message());

    if (!Connect()) return Unreachable();
    grpc::ClientContext context;
    SetDeadline(&context);
    nodepb::RunTaskRequest request;
    *request.mutable_spec() = *std::move(spec);
    request.set_remove_on_start_failure(args.Has("rm"));
    nodepb::RunTaskResponse response;
    grpc::Status status = stub_->RunTask(&context, request, &response);
    if (!status.ok()) return NodeError(status);
    const nodepb::Task& task = response.task();
    if (args.Has("detach")) {
      Out(absl::StrCat(task.id(), "\n"));
      return kExitOk;
    }
    return Attach(task, args.Has("rm"));
  }

  // Shows the task's output until it ends; returns its exit code.
  // SIGINT and SIGTERM stop the task with that signal while berth shows its
  // output (like docker's signal proxy); a second one ends berth itself and
  // leaves the task to the node.
  int Attach(const nodepb::Task& started, bool remove) {
    absl::StatusOr<std::unique_ptr<SignalPipe>> signals =
        SignalPipe::Install({SIGINT, SIGTERM});
    int stop_pipe[2] = {-1, -1};
    std::thread forwarder;
    if (signals.ok() && pipe2(stop_pipe, O_CLOEXEC) == 0) {
      forwarder = std::thread([this, &started, &signals, &stop_pipe] {
        ForwardSignals(started.id(), signals->get(), stop_pipe[0]);
      });
    }
    absl::StatusOr<nodepb::Task> ended = FollowUntilEnd(started);
    if (forwarder.joinable()) {
      WriteAll(stop_pipe[1], "x");
      forwarder.join();
      close(stop_pipe[0]);
      close(stop_pipe[1]);
    }
    if (signals.ok()) signals->reset();  // the signals' actions back
    if (!ended.ok()) {
      return NodeError(
          grpc::Status(static_cast<grpc::StatusCode>(ended.status().code()),
                       std::string(ended.status().message())));
    }
    const nodepb::Task& task = *ended;
    const std::string& id = task.id();

    int code = 0;
    if (task.state() == nodepb::TASK_STATE_FAILED) {
      Err(absl::StrCat("berth: task ", TaskName(task), " failed to start",
                       task.error().empty() ? "" : ": ", task.error(), "\n"));
      code = kExitTaskFailed;
    } else {
      code = ExitCodeOf(task.exit_result());
    }
    if (remove) {
      grpc::ClientContext context;
      SetDeadline(&context);
      nodepb::RemoveTaskRequest request;
      request.set_task_id(id);
      nodepb::RemoveTaskResponse response;
      grpc::Status status = stub_->RemoveTask(&context, request, &response);
      if (!status.ok()) NodeError(status);
    }
    return code;
  }

  // Shows the task's output until it has ended; returns the ended task.
  absl::StatusOr<nodepb::Task> FollowUntilEnd(const nodepb::Task& started) {
    const std::string& id = started.id();
    LogPosition position;
    nodepb::Task task = started;
    while (!HasEnded(task)) {
      grpc::Status logs = CopyLogs(id, /*follow=*/true, 0, &position);
      grpc::Status status = Inspect(id, &task);
      if (!status.ok()) return FromGrpc(status);
      if (HasEnded(task)) break;
      if (!logs.ok()) return FromGrpc(logs);
      // The output ended before the task did (it may not have been
      // started yet): follow again, skipping what was shown.
      absl::SleepFor(env_.log_refollow_delay);
    }
    return task;
  }

  static absl::Status FromGrpc(const grpc::Status& status) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }

  // Until stop_fd is readable: the first SIGINT or SIGTERM stops the task
  // with that signal, a second one takes its default action.
  void ForwardSignals(const std::string& task, SignalPipe* signals,
                      int stop_fd) {
    bool forwarded = false;
    while (true) {
      pollfd fds[2] = {{stop_fd, POLLIN, 0}, {signals->read_fd(), POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents != 0) return;
      for (int signal : signals->Drain()) {
        if (forwarded) {
          struct sigaction default_action = {};
          default_action.sa_handler = SIG_DFL;
          sigaction(signal, &default_action, nullptr);
          kill(getpid(), signal);
          return;
        }
        forwarded = true;
        grpc::ClientContext context;
        SetDeadline(&context, kDefaultStopTimeout);
        nodepb::StopTaskRequest request;
        request.set_task_id(task);
        request.set_signal(signal == SIGINT ? "SIGINT" : "SIGTERM");
        nodepb::StopTaskResponse response;
        grpc::Status status = stub_->StopTask(&context, request, &response);
        if (!status.ok()) NodeError(status);
      }
    }
  }

  // How much of each output stream of a task was copied.
  struct LogPosition {
    uint64_t stdout_bytes = 0;
    uint64_t stderr_bytes = 0;
  };

  // Copies a task's output to stdout and stderr until the stream ends. With
  // `position`, skips the bytes it counts as copied and counts the new ones.
  grpc::Status CopyLogs(const std::string& task, bool follow,
                        uint64_t tail_lines, LogPosition* position = nullptr) {
    grpc::ClientContext context;
    nodepb::TaskLogsRequest request;
    request.set_task_id(task);
    request.set_follow(follow);
    request.set_tail_lines(tail_lines);
    std::unique_ptr<grpc::ClientReader<nodepb::TaskLogsResponse>> reader =
        stub_->TaskLogs(&context, request);
    LogPosition seen;
    nodepb::TaskLogsResponse chunk;
    while (reader->Read(&chunk)) {
      const bool is_stderr = chunk.stream() == nodepb::LOG_STREAM_STDERR;
      absl::string_view data = chunk.data();
      if (position != nullptr) {
        uint64_t& seen_bytes =
            is_stderr ? seen.stderr_bytes : seen.stdout_bytes;
        const uint64_t copied =
            is_stderr ? position->stderr_bytes : position->stdout_bytes;
        const uint64_t skip =
            seen_bytes >= copied
                ? 0
                : std::min<uint64_t>(copied - seen_bytes, data.size());
        seen_bytes += data.size();
        data.remove_prefix(skip);
        (is_stderr ? position->stderr_bytes : position->stdout_bytes) +=
            data.size();
      }
      WriteAll(is_stderr ? env_.stderr_fd : env_.stdout_fd, data);
    }
    return reader->Finish();
  }

  // --- ps, inspect, logs

  int Ps(const ParsedArgs& args) {
    if (!args.positional.empty()) {
      return UsageError("ps", absl::StrCat("unexpected argument \"",
                                           args.positional[0], "\""));
    }
    if (!Connect()) return Unreachable();
    grpc::ClientContext context;
    SetDeadline(&context);
    nodepb::ListTasksRequest request;
    request.set_all(args.Has("all"));
    nodepb::ListTasksResponse response;
    grpc::Status status = stub_->ListTasks(&context, request, &response);
    if (!status.ok()) return NodeError(status);

    if (args.Has("json")) {
      if (response.tasks().empty()) {
        Out("{\n \"tasks\": []\n}\n");
        return kExitOk;
      }
      return PrintJson(response, /*pretty=*/true);
    }
    if (args.Has("quiet")) {
      for (const nodepb::Task& task : response.tasks()) {
        Out(absl::StrCat(ShortId(task.id()), "\n"));
      }
      return kExitOk;
    }
    Table table(
        {"ID", "NAME", "DRIVER", "STATE", "CREATED", "EXIT", "COMMAND"});
    const absl::Time now = env_.now();
    for (const nodepb::Task& task : response.tasks()) {
      const std::string created =
          task.has_created_at()
              ? HumanAgo(plugin::FromProtoTimestamp(task.created_at()), now)
              : "-";
      table.AddRow({ShortId(task.id()), task.spec().name(),
                    task.spec().driver(), StateText(task.state()), created,
                    ExitText(task), CommandText(task.spec(), kCommandWidth)});
    }
    Out(table.Render());
    return kExitOk;
  }

  int Inspect(const ParsedArgs& args) {
    if (args.positional.size() != 1) {
      return UsageError("inspect", "takes exactly one TASK");
    }
    if (!Connect()) return Unreachable();
    nodepb::Task task;
    grpc::Status status = Inspect(args.positional[0], &task);
    if (!status.ok()) return NodeError(status);
    return PrintJson(task, /*pretty=*/true);
  }

  int Logs(const ParsedArgs& args) {
    if (args.positional.size() != 1) {
      return UsageError("logs", "takes exactly one TASK");
    }
    uint64_t tail = 0;
    if (args.Has("tail") && args.Value("tail") != "all") {
      if (!absl::SimpleAtoi(args.Value("tail"), &tail) || tail == 0) {
        return UsageError(
            "logs", absl::StrCat("--tail \"", args.Value("tail"),
                                 "\" must be a number of lines above zero "
                                 "or 'all'"));
      }
    }
    if (!Connect()) return Unreachable();
    grpc::Status status =
        CopyLogs(args.positional[0], args.Has("follow"), tail);
    if (!status.ok()) return NodeError(status);
    return kExitOk;
  }

  // --- exec

  int Exec(const ParsedArgs& args) {
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
    std::unique_ptr<
        grpc::ClientReaderWriter<driverpb::ExecTaskStreamingRequest,
                                 driverpb::ExecTaskStreamingResponse>>
        stream = stub_->ExecTaskStreaming(&context);
    bool writes_done = false;
    if (stream->Write(setup_request) && !interactive) {
      driverpb::ExecTaskStreamingRequest close_stdin;
      close_stdin.mutable_stdin_close();
      stream->Write(close_stdin);
      if (!tty) writes_done = stream->WritesDone();
    }

    int stop_pipe[2] = {-1, -1};
    std::thread pump;
    if (interactive || tty) {
      if (pipe2(stop_pipe, O_CLOEXEC) != 0) {
        context.TryCancel();
        return Fail(absl::StrCat("pipe: ", std::strerror(errno)));
      }
      pump = std::thread([&] {
        PumpInput(stream.get(), interactive, tty, stop_pipe[0],
                  window_change.get(), &writes_done);
      });
    }

    std::optional<driverpb::ExitResult> exit_result;
    driverpb::ExecTaskStreamingResponse response;
    while (stream->Read(&response)) {
      switch (response.frame_case()) {
        case driverpb::ExecTaskStreamingResponse::kStdout:
          WriteAll(env_.stdout_fd, response.stdout());
          break;
        case driverpb::ExecTaskStreamingResponse::kStderr:
          WriteAll(env_.stderr_fd, response.stderr());
          break;
        case driverpb::ExecTaskStreamingResponse::kExit:
          exit_result = response.exit();
          break;
        default:
          break;
      }
    }
    if (pump.joinable()) {
      WriteAll(stop_pipe[1], "x");
      pump.join();
      close(stop_pipe[0]);
      close(stop_pipe[1]);
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

  std::optional<driverpb::TerminalSize> TerminalSize() const {
    std::optional<driverpb::TerminalSize> size = TerminalSizeOf(env_.stdin_fd);
    if (!size.has_value()) size = TerminalSizeOf(env_.stdout_fd);
    return size;
  }

  // Sends stdin (when `forward_stdin`) and terminal resizes (when `tty`)
  // until stop_fd is readable or the stream fails. At the end of stdin sends
  // stdin_close and, without a terminal, half-closes the stream.
  void PumpInput(
      grpc::ClientReaderWriter<driverpb::ExecTaskStreamingRequest,
                               driverpb::ExecTaskStreamingResponse>* stream,
      bool forward_stdin, bool tty, int stop_fd, SignalPipe* window_change,
      bool* writes_done) {
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

  // --- stats

  struct StatsTarget {
    std::string id;
    std::string name;
    uint64_t memory_limit = 0;
  };

  int Stats(const ParsedArgs& args) {
    if (!Connect()) return Unreachable();
    std::vector<StatsTarget> targets;
    if (args.positional.empty()) {
      grpc::ClientContext context;
      SetDeadline(&context);
      nodepb::ListTasksResponse response;
      grpc::Status status =
          stub_->ListTasks(&context, nodepb::ListTasksRequest(), &response);
      if (!status.ok()) return NodeError(status);
      for (const nodepb::Task& task : response.tasks()) {
        if (task.state() != nodepb::TASK_STATE_RUNNING) continue;
        targets.push_back({task.id(), task.spec().name(),
                           task.spec().resources().memory_bytes()});
      }
    } else {
      for (const std::string& name : args.positional) {
        nodepb::Task task;
        grpc::Status status = Inspect(name, &task);
        if (!status.ok()) return NodeError(status);
        targets.push_back({task.id(), task.spec().name(),
                           task.spec().resources().memory_bytes()});
      }
    }
    StatsSession session(this, std::move(targets), args.Has("no-stream"),
                         args.Has("json"));
    return session.Run();
  }

  // The TaskStats streams of `stats`, one thread each, and the table.
  class StatsSession {
   public:
    StatsSession(Cli* cli, std::vector<StatsTarget> targets, bool no_stream,
                 bool json)
        : cli_(cli),
          targets_(std::move(targets)),
          no_stream_(no_stream),
          json_(json),
          samples_(targets_.size()),
          ended_(targets_.size(), false),
          contexts_(targets_.size()) {}

    int Run() {
      std::vector<std::thread> threads;
      for (size_t i = 0; i < targets_.size(); ++i) {
        contexts_[i] = std::make_unique<grpc::ClientContext>();
        threads.emplace_back([this, i] { Follow(i); });
      }
      {
        absl::MutexLock lock(&mu_);
        if (no_stream_) {
          mu_.Await(absl::Condition(this, &StatsSession::AllSampledOrEnded));
          if (!json_) cli_->Out(RenderTable(/*all=*/true));
        } else {
          while (!AllEnded()) {
            mu_.AwaitWithTimeout(absl::Condition(this, &StatsSession::AllEnded),
                                 cli_->env_.stats_refresh);
            if (!json_ && !AllEnded()) {
              cli_->Out(absl::StrCat(kClearScreen, RenderTable(/*all=*/false)));
            }
          }
        }
      }
      for (auto& context : contexts_) context->TryCancel();
      for (std::thread& thread : threads) thread.join();
      absl::MutexLock lock(&mu_);
      if (targets_.empty() && !json_ && !no_stream_) {
        cli_->Out(RenderTable(/*all=*/true));  // the header alone
      }
      int code = kExitOk;
      for (const std::string& error : errors_) code = cli_->Fail(error);
      return code;
    }

   private:
    void Follow(size_t i) {
      nodepb::TaskStatsRequest request;
      request.set_task_id(targets_[i].id);
      std::unique_ptr<grpc::ClientReader<nodepb::TaskStatsResponse>> reader =
          cli_->stub_->TaskStats(contexts_[i].get(), request);
      nodepb::TaskStatsResponse response;
      bool cancelled = false;
      while (reader->Read(&response)) {
        absl::MutexLock lock(&mu_);
        if (json_ && (!no_stream_ || !samples_[i].has_value())) {
          absl::StatusOr<std::string> line = ToJson(response.usage(), false);
          if (line.ok()) cli_->Out(*line);
        }
        samples_[i] = response.usage();
        if (no_stream_) {
          contexts_[i]->TryCancel();
          cancelled = true;
          break;
        }
      }
      grpc::Status status = reader->Finish();
      absl::MutexLock lock(&mu_);
      ended_[i] = true;
      if (!status.ok() && !cancelled &&
          status.error_code() != grpc::StatusCode::CANCELLED) {
        errors_.push_back(status.error_message());
      }
    }

    bool AllEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::all_of(ended_.begin(), ended_.end(),
                         [](bool e) { return e; });
    }

    bool AllSampledOrEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (size_t i = 0; i < targets_.size(); ++i) {
        if (!ended_[i] && !samples_[i].has_value()) return false;
      }
      return true;
    }

    // Tasks (threads included) as the cgroup counts them; else the
    // processes a procfs sample lists; else unknown.
    static std::string PidsColumn(const statspb::TaskResourceUsage& sample) {
      const statspb::PidsStats& pids = sample.usage().pids();
      if (std::find(pids.measured().begin(), pids.measured().end(),
                    statspb::PIDS_FIELD_CURRENT) != pids.measured().end()) {
        return absl::StrCat(pids.current());
      }
      if (!sample.processes().empty()) {
        return absl::StrCat(sample.processes_size());
      }
      return "--";
    }

    // The table of the tasks sampled (and, unless `all`, still streaming).
    std::string RenderTable(bool all) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      Table table(
          {"TASK", "NAME", "CPU %", "MEM USAGE / LIMIT", "MEM %", "PIDS"});
      for (size_t i = 0; i < targets_.size(); ++i) {
        if (!samples_[i].has_value() || (!all && ended_[i])) continue;
        const StatsTarget& target = targets_[i];
        const statspb::TaskResourceUsage& sample = *samples_[i];
        const statspb::MemoryStats& memory = sample.usage().memory();
        const uint64_t used =
            memory.usage() != 0 ? memory.usage() : memory.rss();
        const std::string limit =
            target.memory_limit != 0 ? HumanBytes(target.memory_limit) : "--";
        const std::string percent =
            target.memory_limit != 0
                ? absl::StrFormat("%.2f%%",
                                  100.0 * static_cast<double>(used) /
                                      static_cast<double>(target.memory_limit))
                : "--";
        table.AddRow({ShortId(target.id), target.name,
                      absl::StrFormat("%.2f%%", sample.usage().cpu().percent()),
                      absl::StrCat(HumanBytes(used), " / ", limit), percent,
                      PidsColumn(sample)});
      }
      return table.Render();
    }

    Cli* const cli_;
    const std::vector<StatsTarget> targets_;
    const bool no_stream_;
    const bool json_;
    mutable absl::Mutex mu_;
    std::vector<std::optional<statspb::TaskResourceUsage>> samples_
        ABSL_GUARDED_BY(mu_);
    std::vector<bool> ended_ ABSL_GUARDED_BY(mu_);
    std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;
  };

  // --- stop, rm

  int Stop(const ParsedArgs& args) {
    if (args.positional.empty()) {
      return UsageError("stop", "at least one TASK is required");
    }
    nodepb::StopTaskRequest request;
    absl::Duration timeout = kDefaultStopTimeout;
    if (args.Has("timeout")) {
      double seconds = -1;
      if (!absl::SimpleAtod(args.Value("timeout"), &seconds) || seconds < 0 ||
          seconds > 1e9) {
        return UsageError("stop",
                          absl::StrCat("--timeout \"", args.Value("timeout"),
                                       "\" must be a number of seconds"));
      }
      timeout = absl::Seconds(seconds);
      *request.mutable_timeout() = plugin::ToProtoDuration(timeout);
    }
    if (args.Has("signal")) request.set_signal(args.Value("signal"));
    if (!Connect()) return Unreachable();
    int code = kExitOk;
    for (const std::string& task : args.positional) {
      grpc::ClientContext context;
      SetDeadline(&context, timeout);
      request.set_task_id(task);
      nodepb::StopTaskResponse response;
      grpc::Status status = stub_->StopTask(&context, request, &response);
      if (status.ok()) {
        Out(absl::StrCat(task, "\n"));
      } else {
        code = NodeError(status);
      }
    }
    return code;
  }

  int Remove(const ParsedArgs& args) {
    if (args.positional.empty()) {
      return UsageError("rm", "at least one TASK is required");
    }
    if (!Connect()) return Unreachable();
    int code = kExitOk;
    for (const std::string& task : args.positional) {
      grpc::ClientContext context;
      SetDeadline(&context,
                  args.Has("force") ? absl::Seconds(10) : absl::ZeroDuration());
      nodepb::RemoveTaskRequest request;
      request.set_task_id(task);
      request.set_force(args.Has("force"));
      nodepb::RemoveTaskResponse response;
      grpc::Status status = stub_->RemoveTask(&context, request, &response);
      if (status.ok()) {
        Out(absl::StrCat(task, "\n"));
      } else {
        code = NodeError(status);
      }
    }
    return code;
  }

  // --- node status

  // --- events

  int Events(const ParsedArgs& args) {
    if (!Connect()) return Unreachable();
    nodepb::EventsRequest request;
    for (const std::string& task : args.positional) request.add_task_ids(task);
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<nodepb::EventsResponse>> reader =
        stub_->Events(&context, request);
    nodepb::EventsResponse event;
    while (reader->Read(&event)) {
      if (args.Has("json")) {
        if (int code = PrintJson(event, /*pretty=*/false); code != kExitOk) {
          return code;
        }
        continue;
      }
      const absl::Time when =
          absl::FromUnixSeconds(event.timestamp().seconds()) +
          absl::Nanoseconds(event.timestamp().nanos());
      const std::string type_name = nodepb::EventType_Name(event.type());
      absl::string_view type = type_name;
      absl::ConsumePrefix(&type, "EVENT_TYPE_");
      absl::ConsumePrefix(&type, "TASK_");
      Out(absl::StrCat(
          absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", when, absl::LocalTimeZone()),
          " ", absl::AsciiStrToLower(type), " ",
          event.task_id().empty() ? "-" : ShortId(event.task_id()), " ",
          event.message(), "\n"));
    }
    grpc::Status status = reader->Finish();
    if (!status.ok()) return NodeError(status);
    return kExitOk;
  }

  int NodeStatus(const ParsedArgs& args) {
    if (!args.positional.empty()) {
      return UsageError("node status", absl::StrCat("unexpected argument \"",
                                                    args.positional[0], "\""));
    }
    if (!Connect()) return Unreachable();
    grpc::ClientContext context;
    SetDeadline(&context);
    nodepb::GetNodeStatusResponse response;
    grpc::Status status = stub_->GetNodeStatus(
        &context, nodepb::GetNodeStatusRequest(), &response);
    if (!status.ok()) return NodeError(status);

    std::vector<std::string> unhealthy;
    Table table({"COMPONENT", "KIND", "HEALTHY", "SOCKET", "PID", "MESSAGE"});
    auto add = [&](const nodepb::ComponentStatus& component, const char* kind) {
      if (!component.healthy()) unhealthy.push_back(component.name());
      table.AddRow({component.name(), kind, component.healthy() ? "yes" : "no",
                    component.socket(),
                    component.pid() != 0 ? absl::StrCat(component.pid()) : "-",
                    component.message()});
    };
    for (const auto& component : response.services()) add(component, "service");
    for (const auto& component : response.plugins()) add(component, "plugin");
    if (args.Has("json")) {
      if (int code = PrintJson(response, /*pretty=*/true); code != kExitOk) {
        return code;
      }
    } else {
      Out(table.Render());
    }
    if (!unhealthy.empty()) {
      return Fail(
          absl::StrCat("not healthy: ", absl::StrJoin(unhealthy, ", ")));
    }
    return kExitOk;
  }

  const CliEnvironment& env_;
  const std::string socket_path_;
  std::unique_ptr<nodepb::NodeService::Stub> stub_;
};

}  // namespace

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string ResolveNodeSocket(const std::string& socket_flag,
                              const CliEnvironment& env) {
  if (!socket_flag.empty()) return socket_flag;
  auto lookup = [&](const char* name) -> std::string {
    if (!env.getenv) return "";
    return env.getenv(name).value_or("");
  };
  if (std::string socket = lookup("BERTH_NODE_SOCKET"); !socket.empty()) {
    return socket;
  }
  if (std::string dir = lookup("BERTH_RUNTIME_DIR"); !dir.empty()) {
    return absl::StrCat(dir, "/node.sock");
  }
  return absl::StrCat(kDefaultRuntimeDir, "/node.sock");
}

int RunCli(const std::vector<std::string>& args, const CliEnvironment& env) {
  auto out = [&](absl::string_view text) { WriteAll(env.stdout_fd, text); };
  auto err = [&](absl::string_view text) { WriteAll(env.stderr_fd, text); };
  std::string socket_flag;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out(TopUsage());
      return kExitOk;
    }
    if (arg == "--version") {
      out(absl::StrCat("berth ", kVersion, "\n"));
      return kExitOk;
    }
    if (arg == "--socket") {
      if (i + 1 == args.size()) {
        err("berth: flag --socket needs a value (PATH); see 'berth --help'\n");
        return kExitUsage;
      }
      socket_flag = args[++i];
      if (socket_flag.empty()) {
        err("berth: --socket is empty; see 'berth --help'\n");
        return kExitUsage;
      }
      continue;
    }
    if (arg.rfind("--socket=", 0) == 0) {
      socket_flag = arg.substr(std::string("--socket=").size());
      if (socket_flag.empty()) {
        err("berth: --socket is empty; see 'berth --help'\n");
        return kExitUsage;
      }
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      err(absl::StrCat("berth: unknown flag ", arg, "; see 'berth --help'\n"));
      return kExitUsage;
    }
    break;
  }
  if (i == args.size()) {
    err(TopUsage());
    return kExitUsage;
  }

  std::string name = args[i++];
  if (name == "help") {
    if (i == args.size()) {
      out(TopUsage());
      return kExitOk;
    }
    name = args[i] == "node" ? "node status" : args[i];
    const CommandInfo* command = FindCommand(name);
    if (command == nullptr) {
      err(absl::StrCat("berth: unknown command \"", args[i],
                       "\"; see 'berth --help'\n"));
      return kExitUsage;
    }
    out(CommandUsage(*command));
    return kExitOk;
  }
  if (name == "node") {
    if (i == args.size() || args[i] == "-h" || args[i] == "--help") {
      std::string usage = CommandUsage(*FindCommand("node status"));
      if (i == args.size()) {
        err(usage);
        return kExitUsage;
      }
      out(usage);
      return kExitOk;
    }
    if (args[i] != "status") {
      err(absl::StrCat("berth node: unknown command \"", args[i],
                       "\"; see 'berth node --help'\n"));
      return kExitUsage;
    }
    name = "node status";
    ++i;
  }
  const CommandInfo* command = FindCommand(name);
  if (command == nullptr) {
    err(absl::StrCat("berth: unknown command \"", name,
                     "\"; see 'berth --help'\n"));
    return kExitUsage;
  }
  Cli cli(env, ResolveNodeSocket(socket_flag, env));
  return cli.Dispatch(*command,
                      std::vector<std::string>(args.begin() + i, args.end()));
}

}  // namespace berth::cli
