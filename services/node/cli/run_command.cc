// `berth run`: pulls the task's image when the node lacks it, starts the
// task, then (without -d) shows its output until it ends and exits with its
// exit code (cli.h). With -i or -t the output comes through AttachTask
// (attach_session.h), with stdin and the terminal, and the detach keys leave
// the task running.

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/unique_fd.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "berth/node/v1/node.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "services/node/cli/attach_session.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/commands.h"
#include "services/node/cli/detach_keys.h"
#include "services/node/cli/table.h"
#include "services/node/cli/task_spec_flags.h"
#include "services/node/cli/terminal.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;
namespace nodepb = ::berth::node::v1;

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
  const base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  return ReadAll(fd.get(), path);
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

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

// While it lives, `forward` runs on a thread of its own with SIGINT and
// SIGTERM readable on the pipe it is given and a stop fd that becomes
// readable when it should return. Without the pipe (the signals watched
// elsewhere) nothing runs and the signals keep their actions.
class SignalForwarding {
 public:
  explicit SignalForwarding(
      std::function<void(SignalPipe* signals, int stop_fd)> forward) {
    signals_ = SignalPipe::Install({SIGINT, SIGTERM});
    if (int stop_pipe[2]; signals_.ok() && pipe2(stop_pipe, O_CLOEXEC) == 0) {
      stop_read_.reset(stop_pipe[0]);
      stop_write_.reset(stop_pipe[1]);
      thread_ = std::thread([this, forward = std::move(forward)] {
        forward(signals_->get(), stop_read_.get());
      });
    }
  }
  // Stops the thread, then puts the signals' actions back.
  ~SignalForwarding() {
    if (thread_.joinable()) {
      BestEffortWrite(stop_write_.get(), "x");
      thread_.join();
    }
  }

 private:
  absl::StatusOr<std::unique_ptr<SignalPipe>> signals_;
  base::UniqueFd stop_read_;
  base::UniqueFd stop_write_;
  std::thread thread_;
};

// `run -i/-t`: how often the task is looked at until it has started.
constexpr absl::Duration kStartPollInterval = absl::Milliseconds(10);

bool IsInteractive(const nodepb::TaskSpec& spec) {
  return spec.stdin_open() || spec.tty();
}

}  // namespace

int Cli::Run(const ParsedArgs& args) {
  absl::StatusOr<RunTarget> target = RunTargetFromArgs(args);
  if (!target.ok()) return UsageError("run", target.status().message());
  nodepb::TaskSpec base;
  if (args.Has("json-spec")) {
    const std::string path = args.Value("json-spec");
    absl::StatusOr<std::string> json = ReadFile(path, env_.stdin_fd);
    if (!json.ok()) {
      return UsageError("run",
                        absl::StrCat("--json-spec: ", json.status().message()));
    }
    google::protobuf::util::JsonParseOptions options;
    const google::protobuf::util::Status parsed =
        google::protobuf::util::JsonStringToMessage(*json, &base, options);
    if (!parsed.ok()) {
      return UsageError("run",
                        absl::StrCat("--json-spec ", path,
                                     ": not a berth.node.v1.TaskSpec in JSON: ",
                                     std::string(parsed.message())));
    }
  } else if (args.positional.empty()) {
    return UsageError("run",
                      "an IMAGE or a command is required: berth run [FLAGS] "
                      "IMAGE [COMMAND [ARGS...]], or berth run [FLAGS] -- "
                      "COMMAND [ARGS...] for none");
  }
  if (args.Has("detach") && args.Has("rm")) {
    return UsageError("run", "--rm cannot be used with -d");
  }
  std::string detach_keys = *ParseDetachKeys(kDefaultDetachKeys);
  if (args.Has("detach-keys")) {
    absl::StatusOr<std::string> keys =
        ParseDetachKeys(args.Value("detach-keys"));
    if (!keys.ok()) {
      return UsageError(
          "run", absl::StrCat("--detach-keys \"", args.Value("detach-keys"),
                              "\": ", keys.status().message()));
    }
    detach_keys = *std::move(keys);
  }
  PullPolicy pull = PullPolicy::kMissing;
  if (args.Has("pull")) {
    absl::StatusOr<PullPolicy> policy = ParsePullPolicy(args.Value("pull"));
    if (!policy.ok()) {
      return UsageError("run",
                        absl::StrCat("--pull ", policy.status().message()));
    }
    pull = *policy;
  }
  absl::StatusOr<nodepb::TaskSpec> spec =
      TaskSpecFromRunFlags(args, target->command, std::move(base), env_.getenv,
                           [this](const std::string& path) {
                             return ReadFile(path, env_.stdin_fd);
                           });
  if (!spec.ok()) return UsageError("run", spec.status().message());
  if (args.Has("interactive")) spec->set_stdin_open(true);
  if (args.Has("tty")) spec->set_tty(true);
  if (spec->stdin_open() && spec->tty() && !args.Has("detach") &&
      !isatty(env_.stdin_fd)) {
    // docker's "the input device is not a TTY".
    return Fail("run -i -t: stdin is not a terminal (leave out -t)");
  }
  if (absl::Status image = ApplyRunImage(args, target->image, &*spec);
      !image.ok()) {
    return UsageError("run", image.message());
  }

  if (!Connect()) return Unreachable();
  if (!spec->image().reference().empty()) {
    if (int code =
            EnsureImage(spec->image().reference(), pull, args.Has("quiet"));
        code != kExitOk) {
      return code;
    }
  }
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
  if (!IsInteractive(task.spec())) return Attach(task, args.Has("rm"));
  const bool remove = args.Has("rm");
  const std::string& id = task.id();

  // -i and -t: the task's stdin and output through AttachTask. Its first
  // attach gets what the task wrote before, so the prompt is not lost.
  AttachOptions options;
  options.task = id;
  options.stdin = task.spec().stdin_open();
  options.tty = task.spec().tty();
  options.detach_keys = detach_keys;
  const bool raw = options.tty && options.stdin && isatty(env_.stdin_fd);
  absl::StatusOr<AttachOutcome> outcome;
  {
    // In raw mode Ctrl-C is a byte for the task; otherwise it stops the
    // task as without -i.
    std::unique_ptr<SignalForwarding> forwarding;
    if (!raw) {
      forwarding = std::make_unique<SignalForwarding>(
          [this, id](SignalPipe* signals, int stop_fd) {
            ForwardSignals(id, signals, stop_fd);
          });
    }
    // The node attaches to running tasks only: wait for the start (an
    // attach refused then would have read stdin meant for the task).
    nodepb::Task now = task;
    while (now.state() == nodepb::TASK_STATE_PENDING ||
           now.state() == nodepb::TASK_STATE_STARTING ||
           now.state() == nodepb::TASK_STATE_UNSPECIFIED) {
      absl::SleepFor(kStartPollInterval);
      if (grpc::Status status = Inspect(id, &now); !status.ok()) {
        return NodeError(status);
      }
    }
    outcome = RunAttachSession(*stub_, env_, options);
  }
  if (!outcome.ok()) {
    return Fail(absl::StrCat("run: ", outcome.status().message()));
  }
  if (outcome->detached) {
    // docker leaves a detached --rm task to be removed when it ends; berth
    // leaves it alone: you may come back to it.
    // On a terminal the line may hold the task's prompt: a line of its own.
    Err(absl::StrCat(isatty(env_.stderr_fd) ? "\n" : "",
                     "berth: detached from ", TaskName(task),
                     remove ? " (left running, not removed)" : "",
                     "; berth attach ", TaskName(task), " to come back\n"));
    return kExitOk;
  }

  // The attach ended: the task's output did. Wait for its end as the node
  // records it (--rm needs it ended).
  nodepb::Task ended;
  while (true) {
    grpc::Status status = Inspect(id, &ended);
    if (!status.ok()) return NodeError(status);
    if (HasEnded(ended)) break;
    if (!outcome->status.ok()) {
      // The attach failed with the task still running: say why, leave it.
      return NodeError(outcome->status);
    }
    absl::SleepFor(env_.log_refollow_delay);
  }
  if (!outcome->status.ok() && !outcome->received &&
      ended.state() != nodepb::TASK_STATE_FAILED) {
    // It ended before it could be attached to: its output from the logs.
    CopyLogs(id, /*follow=*/false, 0);
  }
  return FinishRun(ended, remove, outcome->exit);
}

int Cli::Attach(const nodepb::Task& started, bool remove) {
  absl::StatusOr<nodepb::Task> ended;
  {
    SignalForwarding forwarding(
        [this, &started](SignalPipe* signals, int stop_fd) {
          ForwardSignals(started.id(), signals, stop_fd);
        });
    ended = FollowUntilEnd(started);
  }  // the signals' actions back
  if (!ended.ok()) {
    return NodeError(
        grpc::Status(static_cast<grpc::StatusCode>(ended.status().code()),
                     std::string(ended.status().message())));
  }
  return FinishRun(*ended, remove);
}

int Cli::FinishRun(const nodepb::Task& ended, bool remove,
                   const std::optional<driverpb::ExitResult>& exit) {
  int code = 0;
  if (ended.state() == nodepb::TASK_STATE_FAILED) {
    Err(absl::StrCat("berth: task ", TaskName(ended), " failed to start",
                     ended.error().empty() ? "" : ": ", ended.error(), "\n"));
    code = kExitTaskFailed;
  } else {
    code = ExitCodeOf(exit.has_value() ? *exit : ended.exit_result());
  }
  if (remove) {
    grpc::ClientContext context;
    SetDeadline(&context);
    nodepb::RemoveTaskRequest request;
    request.set_task_id(ended.id());
    nodepb::RemoveTaskResponse response;
    grpc::Status status = stub_->RemoveTask(&context, request, &response);
    if (!status.ok()) NodeError(status);
  }
  return code;
}

absl::StatusOr<nodepb::Task> Cli::FollowUntilEnd(const nodepb::Task& started) {
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

void Cli::ForwardSignals(const std::string& task, SignalPipe* signals,
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

}  // namespace berth::cli
