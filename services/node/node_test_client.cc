#include "services/node/node_test_client.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"

namespace berth::node::testing {

v1::TaskSpec ShellSpec(const std::string& driver, const std::string& script) {
  v1::TaskSpec spec;
  spec.set_driver(driver);
  auto& fields = *spec.mutable_driver_config()->mutable_fields();
  fields["command"].set_string_value("/bin/sh");
  auto* args = fields["args"].mutable_list_value();
  args->add_values()->set_string_value("-c");
  args->add_values()->set_string_value(script);
  spec.mutable_network()->set_mode(network::v1::NETWORK_MODE_HOST);
  return spec;
}

absl::StatusOr<v1::Task> RunTask(v1::NodeService::Stub& stub,
                                 const v1::TaskSpec& spec) {
  v1::RunTaskRequest request;
  *request.mutable_spec() = spec;
  v1::RunTaskResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  grpc::Status status = stub.RunTask(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return response.task();
}

v1::Task InspectTask(v1::NodeService::Stub& stub, const std::string& id) {
  v1::InspectTaskRequest request;
  request.set_task_id(id);
  v1::InspectTaskResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub.InspectTask(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.task();
}

std::vector<v1::Task> ListTasks(v1::NodeService::Stub& stub, bool all) {
  v1::ListTasksRequest request;
  request.set_all(all);
  v1::ListTasksResponse response;
  grpc::ClientContext context;
  if (!stub.ListTasks(&context, request, &response).ok()) return {};
  return {response.tasks().begin(), response.tasks().end()};
}

grpc::Status RemoveTask(v1::NodeService::Stub& stub, const std::string& id,
                        bool force) {
  v1::RemoveTaskRequest request;
  request.set_task_id(id);
  request.set_force(force);
  v1::RemoveTaskResponse response;
  grpc::ClientContext context;
  return stub.RemoveTask(&context, request, &response);
}

}  // namespace berth::node::testing
