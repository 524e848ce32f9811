#include "services/driver/sandbox/agent_client.h"

#include <memory>

#include "absl/time/clock.h"
#include "base/proto_time.h"
#include "berth/agent/v1/agent.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "services/common/dial.h"
#include "services/common/status.h"

namespace berth::sandbox_driver {

namespace dv1 = ::berth::driver::v1;
namespace av1 = ::berth::agent::v1;

namespace {

// How long a call waits for the agent's socket to take the connection.
constexpr absl::Duration kDialTimeout = absl::Seconds(1);

absl::StatusOr<std::unique_ptr<av1::AgentService::Stub>> AgentAt(
    const std::string& socket) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(socket, kDialTimeout);
  if (!channel.ok()) return channel.status();
  return std::make_unique<av1::AgentService::Stub>(*channel);
}

}  // namespace

absl::StatusOr<av1::ProcessExit> AgentWait(const std::string& socket,
                                           const std::string& container_id,
                                           const std::string& process_id,
                                           absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<av1::AgentService::Stub>> agent =
      AgentAt(socket);
  if (!agent.ok()) return agent.status();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  av1::WaitProcessRequest request;
  request.set_container_id(container_id);
  request.set_process_id(process_id);
  av1::WaitProcessResponse response;
  absl::Status status =
      FromGrpcStatus((*agent)->WaitProcess(&context, request, &response));
  if (!status.ok()) return status;
  return response.exit();
}

absl::Status AgentSignal(const std::string& socket,
                         const std::string& container_id,
                         const std::string& process_id, int signal,
                         absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<av1::AgentService::Stub>> agent =
      AgentAt(socket);
  if (!agent.ok()) return agent.status();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  av1::SignalRequest request;
  request.set_container_id(container_id);
  request.set_process_id(process_id);
  request.set_signal(signal);
  av1::SignalResponse response;
  return FromGrpcStatus((*agent)->Signal(&context, request, &response));
}

absl::StatusOr<av1::InspectContainerResponse> AgentInspectContainer(
    const std::string& socket, const std::string& container_id,
    absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<av1::AgentService::Stub>> agent =
      AgentAt(socket);
  if (!agent.ok()) return agent.status();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  av1::InspectContainerRequest request;
  request.set_container_id(container_id);
  av1::InspectContainerResponse response;
  absl::Status status =
      FromGrpcStatus((*agent)->InspectContainer(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

void AgentDestroySandbox(const std::string& socket, const std::string& task_id,
                         absl::Duration grace, absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<av1::AgentService::Stub>> agent =
      AgentAt(socket);
  if (!agent.ok()) return;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  av1::DestroySandboxRequest request;
  *request.mutable_timeout() = base::ToProtoDuration(grace);
  av1::DestroySandboxResponse response;
  grpc::Status status = (*agent)->DestroySandbox(&context, request, &response);
  if (!status.ok()) {
    VLOG(1) << "task " << task_id
            << ": DestroySandbox: " << status.error_message();
  }
}

dv1::ExitResult FromProcessExit(const av1::ProcessExit& exit) {
  dv1::ExitResult result;
  result.set_exit_code(exit.exit_code());
  result.set_signal(exit.signal());
  if (exit.has_exited_at()) {
    *result.mutable_exited_at() = exit.exited_at();
  } else {
    *result.mutable_exited_at() = base::ToProtoTimestamp(absl::Now());
  }
  return result;
}

}  // namespace berth::sandbox_driver
