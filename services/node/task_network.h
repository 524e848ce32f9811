// Where a task's network namespace comes from: berth-netns (Prerun and
// Postrun) for most drivers, or the task's own driver (CreateNetwork and
// DestroyNetwork) for a driver whose capabilities say must_create_network.
// Both are idempotent for one allocation, so a node that restarts in the
// middle does them again.

#ifndef SERVICES_NODE_TASK_NETWORK_H_
#define SERVICES_NODE_TASK_NETWORK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/network/v1/network.grpc.pb.h"
#include "berth/node/v1/node.pb.h"
#include "grpcpp/channel.h"
#include "plugins/host/driver_client.h"

namespace berth::node {

class TaskNetwork {
 public:
  virtual ~TaskNetwork() = default;

  // Makes the namespace of the allocation for `spec`'s network (not host).
  virtual absl::StatusOr<network::v1::NetworkStatus> SetUp(
      const std::string& allocation_id, const v1::TaskSpec& spec) = 0;
  // Removes it; an allocation unknown to it is success.
  virtual absl::Status TearDown(const std::string& allocation_id) = 0;
};

// berth-netns on its socket. Thread-safe.
class NetnsNetwork final : public TaskNetwork {
 public:
  struct Options {
    std::string socket;
    // Deadline of each call (which waits for berth-netns while it restarts).
    absl::Duration call_timeout = absl::Seconds(60);
    // How long SetUp waits for berth-netns to answer at all before it fails
    // saying so (a restart takes less; one that is not running would
    // otherwise hold the start for call_timeout).
    absl::Duration connect_wait = absl::Seconds(10);
  };

  explicit NetnsNetwork(Options options);

  absl::StatusOr<network::v1::NetworkStatus> SetUp(
      const std::string& allocation_id, const v1::TaskSpec& spec) override;
  absl::Status TearDown(const std::string& allocation_id) override;

  // Its health, for GetNodeStatus.
  v1::ComponentStatus Status();

 private:
  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<network::v1::NetworkService::Stub> stub_;
};

// The driver of the task, for a driver that makes its own networks.
class DriverNetwork final : public TaskNetwork {
 public:
  DriverNetwork(std::shared_ptr<plugin::host::DriverClient> driver,
                absl::Duration call_timeout);

  absl::StatusOr<network::v1::NetworkStatus> SetUp(
      const std::string& allocation_id, const v1::TaskSpec& spec) override;
  absl::Status TearDown(const std::string& allocation_id) override;

 private:
  const std::shared_ptr<plugin::host::DriverClient> driver_;
  const absl::Duration call_timeout_;
};

}  // namespace berth::node

#endif  // SERVICES_NODE_TASK_NETWORK_H_
