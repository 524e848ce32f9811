// berth-images as berth-node reaches it on images.sock: the snapshots of
// image tasks (PrepareSnapshot, ReleaseSnapshot, ListSnapshots), its health
// for GetNodeStatus, and the channel the node's forwarding of
// berth.image.v1.ImageService (image_forwarder.h) calls through. berth-images
// may start after the node and restart under it: the channel connects when
// it is there, and every call says plainly when it is not.

#ifndef SERVICES_NODE_IMAGES_CLIENT_H_
#define SERVICES_NODE_IMAGES_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "berth/node/v1/node.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"

namespace berth::node {

// Thread-safe.
class ImagesClient {
 public:
  struct Options {
    // berth-images' socket.
    std::string socket;
    // How long a call waits for berth-images to answer at all (a restart
    // takes less) before it fails with NotReachable.
    absl::Duration connect_wait = absl::Seconds(5);
    // Deadline of the snapshot calls (a prepare mounts an overlay).
    absl::Duration call_timeout = absl::Seconds(60);
  };

  explicit ImagesClient(Options options);

  const std::string& socket() const { return options_.socket; }
  image::v1::ImageService::Stub& stub() { return *stub_; }

  // OK once the channel is connected, waiting up to `wait` (connect_wait
  // by default); else NotReachable.
  absl::Status Connect();
  absl::Status Connect(absl::Duration wait);

  // UNAVAILABLE "berth-images is not reachable at SOCKET (REASON)".
  absl::Status NotReachable() const;

  // The status of a failed call to berth-images as the node passes it on:
  // an UNAVAILABLE of a channel that is not connected (berth-images went
  // away) is NotReachable; berth-images' own errors keep their code and
  // message.
  absl::Status CallError(const grpc::Status& status) const;

  // With `idmap` (a user-namespaced task's mappings; null for none), the
  // snapshot's layers are idmapped to them (PrepareSnapshotRequest's
  // uid_mappings and gid_mappings).
  absl::StatusOr<image::v1::PrepareSnapshotResponse> PrepareSnapshot(
      const std::string& id, const std::string& reference,
      const driver::v1::UserNamespace* idmap = nullptr);
  absl::Status ReleaseSnapshot(const std::string& id);
  absl::StatusOr<std::vector<image::v1::Snapshot>> ListSnapshots();

  // Its health (the standard health service), for GetNodeStatus.
  v1::ComponentStatus Status();

 private:
  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<image::v1::ImageService::Stub> stub_;
};

}  // namespace berth::node

#endif  // SERVICES_NODE_IMAGES_CLIENT_H_
