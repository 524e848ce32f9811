#include "services/node/task_network.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "services/common/dial.h"
#include "services/common/status.h"
#include "services/node/task_isolation.h"

namespace berth::node {

NetnsNetwork::NetnsNetwork(Options options) : options_(std::move(options)) {
  // Not DialUnix: berth-netns may start after the node.
  channel_ = grpc::CreateCustomChannel(absl::StrCat("unix:", options_.socket),
                                       grpc::InsecureChannelCredentials(),
                                       UnixChannelArguments());
  stub_ = network::v1::NetworkService::NewStub(channel_);
}

absl::StatusOr<network::v1::NetworkStatus> NetnsNetwork::SetUp(
    const std::string& allocation_id, const v1::TaskSpec& spec) {
  // Waits out a restart of berth-netns, but says plainly that it is not
  // there rather than hold the start (and its caller) for long.
  if (!channel_->WaitForConnected(
          absl::ToChronoTime(absl::Now() + options_.connect_wait))) {
    return absl::UnavailableError(absl::StrCat(
        "spec.network: berth-netns does not answer on ", options_.socket, " (",
        WhyNotConnected(options_.socket), ", waited ",
        absl::FormatDuration(options_.connect_wait), "): is it running?"));
  }
  network::v1::PrerunRequest request;
  request.set_allocation_id(allocation_id);
  request.set_mode(spec.network().mode() ==
                           network::v1::NETWORK_MODE_UNSPECIFIED
                       ? network::v1::NETWORK_MODE_NONE
                       : spec.network().mode());
  request.set_cni_network(spec.network().cni_network());
  *request.mutable_port_mappings() = spec.network().port_mappings();
  *request.mutable_dns() = spec.network().dns();
  request.set_hostname(TaskHostname(spec));
  network::v1::PrerunResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  // berth-netns may be restarting: wait for it within the deadline.
  context.set_wait_for_ready(true);
  grpc::Status s = stub_->Prerun(&context, request, &response);
  if (!s.ok()) {
    absl::Status error = FromGrpcStatus(s);
    return absl::Status(error.code(),
                        absl::StrCat("berth-netns Prerun (", options_.socket,
                                     "): ", error.message()));
  }
  return response.status();
}

absl::Status NetnsNetwork::TearDown(const std::string& allocation_id) {
  network::v1::PostrunRequest request;
  request.set_allocation_id(allocation_id);
  network::v1::PostrunResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  context.set_wait_for_ready(true);
  grpc::Status s = stub_->Postrun(&context, request, &response);
  if (s.ok()) return absl::OkStatus();
  absl::Status error = FromGrpcStatus(s);
  return absl::Status(error.code(),
                      absl::StrCat("berth-netns Postrun (", options_.socket,
                                   "): ", error.message()));
}

v1::ComponentStatus NetnsNetwork::Status() {
  v1::ComponentStatus status;
  status.set_name("berth-netns");
  status.set_socket(options_.socket);
  network::v1::ListNetworksRequest request;
  network::v1::ListNetworksResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  grpc::Status s = stub_->ListNetworks(&context, request, &response);
  status.set_healthy(s.ok());
  status.set_message(s.ok()
                         ? absl::StrCat(response.networks_size(), " networks")
                         : s.error_message());
  return status;
}

DriverNetwork::DriverNetwork(std::shared_ptr<plugin::host::DriverClient> driver,
                             absl::Duration call_timeout)
    : driver_(std::move(driver)), call_timeout_(call_timeout) {}

absl::StatusOr<network::v1::NetworkStatus> DriverNetwork::SetUp(
    const std::string& allocation_id, const v1::TaskSpec& spec) {
  driver::v1::CreateNetworkRequest request;
  request.set_allocation_id(allocation_id);
  request.set_hostname(TaskHostname(spec));
  absl::StatusOr<driver::v1::CreateNetworkResponse> made =
      driver_->CreateNetwork(request, {absl::Now() + call_timeout_});
  if (!made.ok()) return made.status();
  return made->status();
}

absl::Status DriverNetwork::TearDown(const std::string& allocation_id) {
  driver::v1::DestroyNetworkRequest request;
  request.set_allocation_id(allocation_id);
  return driver_->DestroyNetwork(request, {absl::Now() + call_timeout_})
      .status();
}

}  // namespace berth::node
