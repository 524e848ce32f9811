// berth.image.v1.ImageService on node.sock: every call passed on to
// berth-images on images.sock, so that `berth image ...` needs one socket.
// Unary calls are made and their answer copied; PullImage's progress is
// relayed message by message and ImportImage's chunks likewise; the
// upstream call is a child of the caller's (its deadline, and its
// cancellation: a caller that goes away cancels the pull or import, and
// berth-images ending the stream ends the caller's). berth-images away:
// UNAVAILABLE "berth-images is not reachable at SOCKET (...)". The snapshots
// of the node's own tasks are the node's: PrepareSnapshot and
// ReleaseSnapshot of a task's id are FAILED_PRECONDITION (berth rm releases
// it).

#ifndef SERVICES_NODE_IMAGE_FORWARDER_H_
#define SERVICES_NODE_IMAGE_FORWARDER_H_

#include <functional>
#include <string>
#include <utility>

#include "berth/image/v1/image.grpc.pb.h"
#include "services/node/images_client.h"
#include "services/node/stream_limiter.h"

namespace berth::node {

class ImageForwarder final : public image::v1::ImageService::Service {
 public:
  // `images` outlives this; `is_task` says whether an id is one of the
  // node's tasks; `streams` (null: no limit) bounds the streaming calls
  // (PullImage, ImportImage) of each client, with the node's.
  ImageForwarder(ImagesClient* images,
                 std::function<bool(const std::string&)> is_task,
                 StreamLimiter* streams = nullptr)
      : images_(images), is_task_(std::move(is_task)), streams_(streams) {}

  grpc::Status PullImage(
      grpc::ServerContext* context, const image::v1::PullImageRequest* request,
      grpc::ServerWriter<image::v1::PullImageProgress>* writer) override;
  grpc::Status ImportImage(
      grpc::ServerContext* context,
      grpc::ServerReader<image::v1::ImportImageRequest>* reader,
      image::v1::ImportImageResponse* response) override;
  grpc::Status ListImages(grpc::ServerContext* context,
                          const image::v1::ListImagesRequest* request,
                          image::v1::ListImagesResponse* response) override;
  grpc::Status InspectImage(grpc::ServerContext* context,
                            const image::v1::InspectImageRequest* request,
                            image::v1::InspectImageResponse* response) override;
  grpc::Status RemoveImage(grpc::ServerContext* context,
                           const image::v1::RemoveImageRequest* request,
                           image::v1::RemoveImageResponse* response) override;
  grpc::Status TagImage(grpc::ServerContext* context,
                        const image::v1::TagImageRequest* request,
                        image::v1::TagImageResponse* response) override;
  grpc::Status PruneImages(grpc::ServerContext* context,
                           const image::v1::PruneImagesRequest* request,
                           image::v1::PruneImagesResponse* response) override;
  grpc::Status PrepareSnapshot(
      grpc::ServerContext* context,
      const image::v1::PrepareSnapshotRequest* request,
      image::v1::PrepareSnapshotResponse* response) override;
  grpc::Status ReleaseSnapshot(
      grpc::ServerContext* context,
      const image::v1::ReleaseSnapshotRequest* request,
      image::v1::ReleaseSnapshotResponse* response) override;
  grpc::Status ListSnapshots(
      grpc::ServerContext* context,
      const image::v1::ListSnapshotsRequest* request,
      image::v1::ListSnapshotsResponse* response) override;

 private:
  template <typename Request, typename Response>
  grpc::Status Unary(grpc::ServerContext* context, const Request& request,
                     Response* response,
                     grpc::Status (image::v1::ImageService::Stub::*method)(
                         grpc::ClientContext*, const Request&, Response*));

  // FAILED_PRECONDITION when `id` is a task's snapshot.
  grpc::Status CheckNotTask(const std::string& id) const;

  ImagesClient* const images_;
  const std::function<bool(const std::string&)> is_task_;
  StreamLimiter* const streams_;
};

}  // namespace berth::node

#endif  // SERVICES_NODE_IMAGE_FORWARDER_H_
