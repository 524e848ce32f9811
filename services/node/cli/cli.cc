#include "services/node/cli/cli.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/io.h"
#include "base/proto_time.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "berth/node/v1/node.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "services/common/dial.h"
#include "services/common/unix_socket.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/command_table.h"
#include "services/node/cli/commands.h"
#include "services/node/cli/event_text.h"
#include "services/node/cli/ps_filter.h"
#include "services/node/cli/ps_format.h"
#include "services/node/cli/table.h"

namespace berth::cli {
namespace {

namespace nodepb = ::berth::node::v1;

}  // namespace

void BestEffortWrite(int fd, absl::string_view data) {
  // A closed pipe (nobody reads any more) is no reason to stop or to say so.
  (void)base::WriteAll(fd, data);
}

Cli::Cli(const CliEnvironment& env, std::string socket_path)
    : env_(env), socket_path_(std::move(socket_path)) {}

int Cli::Dispatch(const CommandInfo& command,
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
  if (command.name == "attach") return AttachCommand(*parsed);
  if (command.name == "stats") return Stats(*parsed);
  if (command.name == "stop") return Stop(*parsed);
  if (command.name == "rm") return Remove(*parsed);
  if (command.name == "events") return Events(*parsed);
  if (command.name == "completion") return Completion(*parsed);
  if (command.name == "image pull") return ImagePull(*parsed);
  if (command.name == "image import") return ImageImport(*parsed);
  if (command.name == "image ls") return ImageList(*parsed);
  if (command.name == "image inspect") return ImageInspect(*parsed);
  if (command.name == "image rm") return ImageRemove(*parsed);
  if (command.name == "image prune") return ImagePrune(*parsed);
  if (command.name == "image tag") return ImageTag(*parsed);
  if (command.name == "node status") return NodeStatus(*parsed);
  return Fail(absl::StrCat("berth ", command.name, " is not implemented"));
}

// --- The node client.

void Cli::Out(absl::string_view text) const {
  BestEffortWrite(env_.stdout_fd, text);
}
void Cli::Err(absl::string_view text) const {
  BestEffortWrite(env_.stderr_fd, text);
}

int Cli::UsageError(absl::string_view command,
                    absl::string_view message) const {
  Err(absl::StrCat("berth ", command, ": ", message, "; see 'berth ", command,
                   " --help'\n"));
  return kExitUsage;
}

int Cli::NoArguments(absl::string_view command, const ParsedArgs& args) const {
  if (args.positional.empty()) return kExitOk;
  return UsageError(command, absl::StrCat("unexpected argument \"",
                                          args.positional[0], "\""));
}

int Cli::Fail(absl::string_view message) const {
  Err(absl::StrCat("berth: ", message, "\n"));
  return kExitError;
}

int Cli::Unreachable() const {
  // Not allowed to reach the socket (its directory or the socket's mode) is
  // not "not running": say who may call instead.
  absl::StatusOr<SocketPathState> state = ProbeSocketPath(socket_path_);
  if (state.status().code() == absl::StatusCode::kPermissionDenied) {
    return Fail(absl::StrCat(
        "permission denied on ", socket_path_,
        ": only root and members of berth-node's --socket_group (default "
        "berth) may call it; an administrator adds you with 'usermod -aG "
        "berth USER' (then log in again)"));
  }
  return Fail(absl::StrCat("cannot reach berth-node at ", socket_path_,
                           ": is it running? (tools/dev up)"));
}

int Cli::NodeError(const grpc::Status& status) const {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    absl::StatusOr<SocketPathState> state = ProbeSocketPath(socket_path_);
    if (!state.ok() || *state != SocketPathState::kLive) return Unreachable();
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // An older berth-node (or one that does not forward berth-images).
    return Fail(absl::StrCat(
        "berth-node at ", socket_path_, " does not serve this call",
        status.error_message().empty() ? "" : " (", status.error_message(),
        status.error_message().empty() ? "" : ")",
        ": is it older than this berth?"));
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

bool Cli::Connect() {
  absl::StatusOr<SocketPathState> state = ProbeSocketPath(socket_path_);
  if (!state.ok() || *state != SocketPathState::kLive) return false;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(socket_path_, env_.connect_timeout);
  if (!channel.ok()) return false;
  stub_ = nodepb::NodeService::NewStub(*channel);
  images_ = image::v1::ImageService::NewStub(*channel);
  return true;
}

void Cli::SetDeadline(grpc::ClientContext* context,
                      absl::Duration extra) const {
  context->set_deadline(
      absl::ToChronoTime(absl::Now() + env_.call_timeout + extra));
}

grpc::Status Cli::Inspect(const std::string& task, nodepb::Task* result) const {
  grpc::ClientContext context;
  SetDeadline(&context);
  nodepb::InspectTaskRequest request;
  request.set_task_id(task);
  nodepb::InspectTaskResponse response;
  grpc::Status status = stub_->InspectTask(&context, request, &response);
  if (status.ok()) *result = response.task();
  return status;
}

int Cli::PrintJson(const google::protobuf::Message& message,
                   bool pretty) const {
  absl::StatusOr<std::string> json = ToJson(message, pretty);
  if (!json.ok()) return Fail(json.status().message());
  Out(*json);
  return kExitOk;
}

int Cli::ForEachName(
    const std::vector<std::string>& names,
    const std::function<grpc::Status(const std::string&)>& call) const {
  int code = kExitOk;
  for (const std::string& name : names) {
    if (grpc::Status status = call(name); !status.ok())
      code = NodeError(status);
  }
  return code;
}

grpc::Status Cli::CopyLogs(const std::string& task, bool follow,
                           uint64_t tail_lines, LogPosition* position) {
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
      uint64_t& seen_bytes = is_stderr ? seen.stderr_bytes : seen.stdout_bytes;
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
    BestEffortWrite(is_stderr ? env_.stderr_fd : env_.stdout_fd, data);
  }
  return reader->Finish();
}

// --- ps, inspect, logs

int Cli::Ps(const ParsedArgs& args) {
  if (int code = NoArguments("ps", args); code != kExitOk) return code;
  absl::StatusOr<PsFilters> filters = PsFilters::Parse(args.Values("filter"));
  if (!filters.ok()) return UsageError("ps", filters.status().message());
  std::optional<PsFormat> format;
  if (args.Has("format")) {
    if (args.Has("json")) {
      return UsageError("ps", "--format and --json cannot be used together");
    }
    absl::StatusOr<PsFormat> parsed = PsFormat::Parse(args.Value("format"));
    if (!parsed.ok()) return UsageError("ps", parsed.status().message());
    format = *std::move(parsed);
  }
  if (!Connect()) return Unreachable();
  grpc::ClientContext context;
  SetDeadline(&context);
  nodepb::ListTasksRequest request;
  // A status filter decides which states show (docker's rule).
  request.set_all(args.Has("all") || filters->ImpliesAll());
  nodepb::ListTasksResponse response;
  grpc::Status status = stub_->ListTasks(&context, request, &response);
  if (!status.ok()) return NodeError(status);
  if (!filters->empty()) {
    nodepb::ListTasksResponse matching;
    for (const nodepb::Task& task : response.tasks()) {
      if (filters->Matches(task)) *matching.add_tasks() = task;
    }
    response = std::move(matching);
  }

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
  const std::vector<nodepb::Task> tasks(response.tasks().begin(),
                                        response.tasks().end());
  if (format.has_value()) {
    Out(format->Render(tasks, env_.now(), absl::LocalTimeZone()));
  } else {
    Out(PsTable(tasks, env_.now()));
  }
  return kExitOk;
}

int Cli::Inspect(const ParsedArgs& args) {
  if (args.positional.size() != 1) {
    return UsageError("inspect", "takes exactly one TASK");
  }
  if (!Connect()) return Unreachable();
  nodepb::Task task;
  grpc::Status status = Inspect(args.positional[0], &task);
  if (!status.ok()) return NodeError(status);
  return PrintJson(task, /*pretty=*/true);
}

int Cli::Logs(const ParsedArgs& args) {
  if (args.positional.size() != 1) {
    return UsageError("logs", "takes exactly one TASK");
  }
  uint64_t tail = 0;
  if (args.Has("tail") && args.Value("tail") != "all") {
    if (!absl::SimpleAtoi(args.Value("tail"), &tail) || tail == 0) {
      return UsageError("logs",
                        absl::StrCat("--tail \"", args.Value("tail"),
                                     "\" must be a number of lines above zero "
                                     "or 'all'"));
    }
  }
  if (!Connect()) return Unreachable();
  grpc::Status status = CopyLogs(args.positional[0], args.Has("follow"), tail);
  if (!status.ok()) return NodeError(status);
  return kExitOk;
}

// --- stop, rm

int Cli::Stop(const ParsedArgs& args) {
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
    *request.mutable_timeout() = base::ToProtoDuration(timeout);
  }
  if (args.Has("signal")) request.set_signal(args.Value("signal"));
  if (!Connect()) return Unreachable();
  return ForEachName(args.positional, [&](const std::string& task) {
    grpc::ClientContext context;
    SetDeadline(&context, timeout);
    request.set_task_id(task);
    nodepb::StopTaskResponse response;
    grpc::Status status = stub_->StopTask(&context, request, &response);
    if (status.ok()) Out(absl::StrCat(task, "\n"));
    return status;
  });
}

int Cli::Remove(const ParsedArgs& args) {
  if (args.positional.empty()) {
    return UsageError("rm", "at least one TASK is required");
  }
  if (!Connect()) return Unreachable();
  return ForEachName(args.positional, [&](const std::string& task) {
    grpc::ClientContext context;
    SetDeadline(&context,
                args.Has("force") ? absl::Seconds(10) : absl::ZeroDuration());
    nodepb::RemoveTaskRequest request;
    request.set_task_id(task);
    request.set_force(args.Has("force"));
    nodepb::RemoveTaskResponse response;
    grpc::Status status = stub_->RemoveTask(&context, request, &response);
    if (status.ok()) Out(absl::StrCat(task, "\n"));
    return status;
  });
}

// --- events, node status

int Cli::Events(const ParsedArgs& args) {
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
    Out(EventLine(event, absl::LocalTimeZone()));
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return NodeError(status);
  return kExitOk;
}

int Cli::NodeStatus(const ParsedArgs& args) {
  if (int code = NoArguments("node status", args); code != kExitOk) {
    return code;
  }
  if (!Connect()) return Unreachable();
  grpc::ClientContext context;
  SetDeadline(&context);
  nodepb::GetNodeStatusResponse response;
  grpc::Status status =
      stub_->GetNodeStatus(&context, nodepb::GetNodeStatusRequest(), &response);
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
    return Fail(absl::StrCat("not healthy: ", absl::StrJoin(unhealthy, ", ")));
  }
  return kExitOk;
}

}  // namespace berth::cli
