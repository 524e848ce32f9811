// The NodeService calls the node's in-process tests make over node.sock, as
// the CLI makes them (testonly).

#ifndef SERVICES_NODE_NODE_TEST_CLIENT_H_
#define SERVICES_NODE_NODE_TEST_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "grpcpp/support/status.h"

namespace berth::node::testing {

// A task running `script` with /bin/sh -c on `driver`, host networking.
v1::TaskSpec ShellSpec(const std::string& driver, const std::string& script);

// RunTask, with a minute's deadline; its error as an absl::Status.
absl::StatusOr<v1::Task> RunTask(v1::NodeService::Stub& stub,
                                 const v1::TaskSpec& spec);
// InspectTask; a failed call fails the test (and gives an empty task).
v1::Task InspectTask(v1::NodeService::Stub& stub, const std::string& id);
// ListTasks; empty when the call fails.
std::vector<v1::Task> ListTasks(v1::NodeService::Stub& stub, bool all);
grpc::Status RemoveTask(v1::NodeService::Stub& stub, const std::string& id,
                        bool force);

}  // namespace berth::node::testing

#endif  // SERVICES_NODE_NODE_TEST_CLIENT_H_
