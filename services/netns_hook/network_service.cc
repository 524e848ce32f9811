#include "services/netns_hook/network_service.h"

#include "glog/logging.h"
#include "services/common/status.h"

namespace berth::netns_hook {

namespace nv1 = ::berth::network::v1;

grpc::Status NetworkServiceImpl::Prerun(grpc::ServerContext*,
                                        const nv1::PrerunRequest* request,
                                        nv1::PrerunResponse* response) {
  absl::StatusOr<nv1::PrerunResponse> result = hooks_->Prerun(*request);
  if (!result.ok()) {
    LOG(WARNING) << "Prerun: " << result.status();
    return ToGrpcStatus(result.status());
  }
  *response = *std::move(result);
  LOG(INFO) << "Prerun of allocation " << request->allocation_id() << ": "
            << (response->created() ? "made " : "already had ")
            << nv1::NetworkMode_Name(response->status().mode()) << " "
            << response->status().namespace_path();
  return grpc::Status::OK;
}

grpc::Status NetworkServiceImpl::Postrun(grpc::ServerContext*,
                                         const nv1::PostrunRequest* request,
                                         nv1::PostrunResponse*) {
  absl::Status status = hooks_->Postrun(request->allocation_id());
  if (!status.ok()) LOG(WARNING) << "Postrun: " << status;
  return ToGrpcStatus(status);
}

grpc::Status NetworkServiceImpl::ListNetworks(
    grpc::ServerContext*, const nv1::ListNetworksRequest*,
    nv1::ListNetworksResponse* response) {
  absl::StatusOr<std::vector<nv1::NetworkStatus>> networks = hooks_->List();
  if (!networks.ok()) return ToGrpcStatus(networks.status());
  for (nv1::NetworkStatus& status : *networks) {
    *response->add_networks() = std::move(status);
  }
  return grpc::Status::OK;
}

}  // namespace berth::netns_hook
