#include "services/node/images_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "services/common/dial.h"
#include "services/common/status.h"

namespace berth::node {

ImagesClient::ImagesClient(Options options) : options_(std::move(options)) {
  // Not DialUnix: berth-images may start after the node.
  channel_ = grpc::CreateCustomChannel(absl::StrCat("unix:", options_.socket),
                                       grpc::InsecureChannelCredentials(),
                                       UnixChannelArguments());
  stub_ = image::v1::ImageService::NewStub(channel_);
}

absl::Status ImagesClient::NotReachable() const {
  return absl::UnavailableError(
      absl::StrCat("berth-images is not reachable at ", options_.socket, " (",
                   WhyNotConnected(options_.socket), "): is it running?"));
}

absl::Status ImagesClient::Connect() { return Connect(options_.connect_wait); }

absl::Status ImagesClient::Connect(absl::Duration wait) {
  if (channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + wait))) {
    return absl::OkStatus();
  }
  return NotReachable();
}

absl::Status ImagesClient::CallError(const grpc::Status& status) const {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      channel_->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY) {
    return NotReachable();
  }
  return FromGrpcStatus(status);
}

absl::StatusOr<image::v1::PrepareSnapshotResponse>
ImagesClient::PrepareSnapshot(const std::string& id,
                              const std::string& reference,
                              const driver::v1::UserNamespace* idmap) {
  if (absl::Status s = Connect(); !s.ok()) return s;
  image::v1::PrepareSnapshotRequest request;
  request.set_id(id);
  request.set_reference(reference);
  if (idmap != nullptr) {
    for (auto [from, to] :
         {std::pair{&idmap->uid_mappings(), request.mutable_uid_mappings()},
          std::pair{&idmap->gid_mappings(), request.mutable_gid_mappings()}}) {
      for (const driver::v1::IdMapping& range : *from) {
        image::v1::IdMapping* mapping = to->Add();
        mapping->set_container_id(range.container_id());
        mapping->set_host_id(range.host_id());
        mapping->set_size(range.size());
      }
    }
  }
  image::v1::PrepareSnapshotResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  grpc::Status s = stub_->PrepareSnapshot(&context, request, &response);
  if (!s.ok()) return CallError(s);
  return response;
}

absl::Status ImagesClient::ReleaseSnapshot(const std::string& id) {
  if (absl::Status s = Connect(); !s.ok()) return s;
  image::v1::ReleaseSnapshotRequest request;
  request.set_id(id);
  image::v1::ReleaseSnapshotResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  grpc::Status s = stub_->ReleaseSnapshot(&context, request, &response);
  return s.ok() ? absl::OkStatus() : CallError(s);
}

absl::StatusOr<std::vector<image::v1::Snapshot>> ImagesClient::ListSnapshots() {
  if (absl::Status s = Connect(); !s.ok()) return s;
  image::v1::ListSnapshotsResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  grpc::Status s = stub_->ListSnapshots(
      &context, image::v1::ListSnapshotsRequest(), &response);
  if (!s.ok()) return CallError(s);
  return std::vector<image::v1::Snapshot>(response.snapshots().begin(),
                                          response.snapshots().end());
}

v1::ComponentStatus ImagesClient::Status() {
  v1::ComponentStatus status;
  status.set_name("berth-images");
  status.set_socket(options_.socket);
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = health->Check(
      &context, grpc::health::v1::HealthCheckRequest(), &response);
  status.set_healthy(s.ok() &&
                     response.status() ==
                         grpc::health::v1::HealthCheckResponse::SERVING);
  if (s.ok()) {
    status.set_message(status.healthy() ? "serving" : "not serving");
  } else {
    status.set_message(std::string(CallError(s).message()));
  }
  return status;
}

}  // namespace berth::node
