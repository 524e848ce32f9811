// berth.network.v1.NetworkService over a NetworkHooks implementation: the
// gRPC edge of berth-netns (status conversion only; the logic is the hooks').

#ifndef SERVICES_NETNS_HOOK_NETWORK_SERVICE_H_
#define SERVICES_NETNS_HOOK_NETWORK_SERVICE_H_

#include "berth/network/v1/network.grpc.pb.h"
#include "services/netns_hook/network_hooks.h"

namespace berth::netns_hook {

class NetworkServiceImpl final : public network::v1::NetworkService::Service {
 public:
  // `hooks` must outlive the service.
  explicit NetworkServiceImpl(NetworkHooks* hooks) : hooks_(hooks) {}

  grpc::Status Prerun(grpc::ServerContext* context,
                      const network::v1::PrerunRequest* request,
                      network::v1::PrerunResponse* response) override;
  grpc::Status Postrun(grpc::ServerContext* context,
                       const network::v1::PostrunRequest* request,
                       network::v1::PostrunResponse* response) override;
  grpc::Status ListNetworks(
      grpc::ServerContext* context,
      const network::v1::ListNetworksRequest* request,
      network::v1::ListNetworksResponse* response) override;

 private:
  NetworkHooks* const hooks_;
};

}  // namespace berth::netns_hook

#endif  // SERVICES_NETNS_HOOK_NETWORK_SERVICE_H_
