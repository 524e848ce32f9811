#include "plugins/conformance/check_util.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "plugins/sdk/handshake.h"

namespace berth::conformance {

std::string Quote(absl::string_view text, size_t max) {
  if (text.size() > max) {
    return absl::StrCat("\"", absl::CHexEscape(text.substr(0, max)), "\"... (",
                        text.size(), " bytes)");
  }
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

std::string DescribeExit(const driver::v1::ExitResult& exit) {
  return absl::StrCat("exit_code ", exit.exit_code(), ", signal ",
                      exit.signal());
}

std::string DescribeError(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                      status.message());
}

absl::Status ExpectExit(const driver::v1::ExitResult& exit, int exit_code,
                        int signal, absl::string_view what) {
  if (exit.exit_code() == exit_code && exit.signal() == signal) {
    return absl::OkStatus();
  }
  return Mismatch(absl::StrCat(what, " gave ", DescribeExit(exit), "; want ",
                               "exit_code ", exit_code, ", signal ", signal));
}

// The part of an error's message the driver wrote: after the host's
// "plugin NAME: RPC (task ID): " prefix.
absl::string_view DriverMessage(const absl::Status& status,
                                absl::string_view task_id) {
  absl::string_view message = status.message();
  const std::string prefix = absl::StrCat("(task ", task_id, "): ");
  const size_t at = message.find(prefix);
  if (at != absl::string_view::npos) return message.substr(at + prefix.size());
  return message;
}

// An error status expected to be `want` whose driver message names `name`.
absl::Status ExpectError(const absl::Status& status, absl::StatusCode want,
                         absl::string_view task_id, absl::string_view name,
                         absl::string_view what) {
  if (status.ok()) {
    return Mismatch(absl::StrCat(what, " succeeded; want ",
                                 absl::StatusCodeToString(want)));
  }
  if (status.code() != want) {
    return Mismatch(absl::StrCat(what, " gave ", DescribeError(status),
                                 "; want ", absl::StatusCodeToString(want)));
  }
  if (!name.empty() &&
      !absl::StrContains(DriverMessage(status, task_id), name)) {
    return Mismatch(absl::StrCat(what, " gave ", absl::StatusCodeToString(want),
                                 " but its message does not name ", Quote(name),
                                 ": ", Quote(DriverMessage(status, task_id))));
  }
  return absl::OkStatus();
}

absl::Status ExpectState(const driver::v1::TaskStatus& status,
                         driver::v1::TaskState want, absl::string_view when) {
  if (status.state() == want) return absl::OkStatus();
  return Mismatch(absl::StrCat("InspectTask ", when, ": state ",
                               driver::v1::TaskState_Name(status.state()),
                               "; want ", driver::v1::TaskState_Name(want)));
}

absl::Status ExpectServing(Context& context, absl::Duration deadline) {
  grpc::ClientContext call;
  call.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(plugin::kHealthServiceName);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      grpc::health::v1::Health::NewStub(context.plugin().channel())
          ->Check(&call, request, &response);
  if (!status.ok()) {
    return Mismatch(absl::StrCat("grpc.health.v1.Health/Check(\"",
                                 plugin::kHealthServiceName,
                                 "\") failed: ", status.error_message()));
  }
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return Mismatch(
        absl::StrCat("grpc.health.v1.Health/Check(\"",
                     plugin::kHealthServiceName, "\") answered ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                         response.status()),
                     "; want SERVING"));
  }
  return absl::OkStatus();
}

std::optional<std::string> ReadHostFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string LogPath(const driver::v1::TaskConfig& task,
                    absl::string_view stream) {
  return absl::StrCat(task.task_dir(), "/logs/", stream, ".log");
}

absl::StatusOr<driver::v1::ExitResult> RunToEnd(
    Context& context, const driver::v1::TaskConfig& task) {
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  return context.WaitTask(task.id());
}

// A task that runs until it is stopped.
absl::StatusOr<driver::v1::TaskConfig> StartSleeper(Context& context,
                                                    absl::string_view hint) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::v1::TaskConfig task,
                               context.ShellTask(hint, "exec sleep 300"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  return task;
}

}  // namespace berth::conformance
