#include "services/node/image_forwarder.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "services/common/status.h"

namespace berth::node {
namespace {

namespace imagepb = ::berth::image::v1;
using Stub = imagepb::ImageService::Stub;

}  // namespace

template <typename Request, typename Response>
grpc::Status ImageForwarder::Unary(
    grpc::ServerContext* context, const Request& request, Response* response,
    grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                 Response*)) {
  if (absl::Status s = images_->Connect(); !s.ok()) return ToGrpcStatus(s);
  std::unique_ptr<grpc::ClientContext> upstream =
      grpc::ClientContext::FromServerContext(*context);
  grpc::Status s = (images_->stub().*method)(upstream.get(), request, response);
  if (s.ok()) return s;
  return ToGrpcStatus(images_->CallError(s));
}

grpc::Status ImageForwarder::CheckNotTask(const std::string& id) const {
  if (!is_task_ || !is_task_(id)) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::FAILED_PRECONDITION,
      absl::StrCat("snapshot ", id, " is the root of task ", id,
                   ": the node prepares and releases it (berth rm ", id, ")"));
}

grpc::Status ImageForwarder::PullImage(
    grpc::ServerContext* context, const imagepb::PullImageRequest* request,
    grpc::ServerWriter<imagepb::PullImageProgress>* writer) {
  StreamLimiter::Slot slot;
  if (streams_ != nullptr) {
    absl::StatusOr<StreamLimiter::Slot> acquired =
        streams_->Acquire(*context, "PullImage");
    if (!acquired.ok()) return ToGrpcStatus(acquired.status());
    slot = *std::move(acquired);
  }
  if (absl::Status s = images_->Connect(); !s.ok()) return ToGrpcStatus(s);
  // A child call: the caller's cancellation cancels it, also while it waits
  // for berth-images' next message.
  std::unique_ptr<grpc::ClientContext> upstream =
      grpc::ClientContext::FromServerContext(*context);
  std::unique_ptr<grpc::ClientReader<imagepb::PullImageProgress>> reader =
      images_->stub().PullImage(upstream.get(), *request);
  imagepb::PullImageProgress progress;
  while (reader->Read(&progress)) {
    if (!writer->Write(progress)) {
      upstream->TryCancel();
      break;
    }
  }
  grpc::Status s = reader->Finish();
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the caller cancelled");
  }
  return s.ok() ? s : ToGrpcStatus(images_->CallError(s));
}

grpc::Status ImageForwarder::ImportImage(
    grpc::ServerContext* context,
    grpc::ServerReader<imagepb::ImportImageRequest>* reader,
    imagepb::ImportImageResponse* response) {
  StreamLimiter::Slot slot;
  if (streams_ != nullptr) {
    absl::StatusOr<StreamLimiter::Slot> acquired =
        streams_->Acquire(*context, "ImportImage");
    if (!acquired.ok()) return ToGrpcStatus(acquired.status());
    slot = *std::move(acquired);
  }
  if (absl::Status s = images_->Connect(); !s.ok()) return ToGrpcStatus(s);
  std::unique_ptr<grpc::ClientContext> upstream =
      grpc::ClientContext::FromServerContext(*context);
  std::unique_ptr<grpc::ClientWriter<imagepb::ImportImageRequest>> writer =
      images_->stub().ImportImage(upstream.get(), response);
  imagepb::ImportImageRequest chunk;
  bool upstream_open = true;
  while (reader->Read(&chunk)) {
    // berth-images ended the call (an error its status gives): the rest of
    // the archive is not read.
    if (!writer->Write(chunk)) {
      upstream_open = false;
      break;
    }
  }
  // Read is false at the archive's end (the caller's WritesDone) and when
  // the caller went away (a cancel, its deadline, its connection gone). The
  // second is known here already: gRPC marks the context cancelled before
  // that Read returns (ServerReader::Read, MaybeMarkCancelledOnRead: the
  // stream was reset, not ended). So an archive cut short is never passed
  // on as whole (berth-images tells the two apart the same way).
  if (context->IsCancelled()) {
    // berth-images must not take what it got for the whole archive. (The
    // call, a child of the caller's, is cancelled by gRPC too; a call
    // cancelled before berth-images' server took it is dropped unseen.)
    upstream->TryCancel();
  } else if (upstream_open) {
    writer->WritesDone();
  }
  grpc::Status s = writer->Finish();
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the caller cancelled");
  }
  return s.ok() ? s : ToGrpcStatus(images_->CallError(s));
}

grpc::Status ImageForwarder::ListImages(
    grpc::ServerContext* context, const imagepb::ListImagesRequest* request,
    imagepb::ListImagesResponse* response) {
  return Unary(context, *request, response, &Stub::ListImages);
}

grpc::Status ImageForwarder::InspectImage(
    grpc::ServerContext* context, const imagepb::InspectImageRequest* request,
    imagepb::InspectImageResponse* response) {
  return Unary(context, *request, response, &Stub::InspectImage);
}

grpc::Status ImageForwarder::RemoveImage(
    grpc::ServerContext* context, const imagepb::RemoveImageRequest* request,
    imagepb::RemoveImageResponse* response) {
  return Unary(context, *request, response, &Stub::RemoveImage);
}

grpc::Status ImageForwarder::TagImage(grpc::ServerContext* context,
                                      const imagepb::TagImageRequest* request,
                                      imagepb::TagImageResponse* response) {
  return Unary(context, *request, response, &Stub::TagImage);
}

grpc::Status ImageForwarder::PruneImages(
    grpc::ServerContext* context, const imagepb::PruneImagesRequest* request,
    imagepb::PruneImagesResponse* response) {
  return Unary(context, *request, response, &Stub::PruneImages);
}

grpc::Status ImageForwarder::PrepareSnapshot(
    grpc::ServerContext* context,
    const imagepb::PrepareSnapshotRequest* request,
    imagepb::PrepareSnapshotResponse* response) {
  if (grpc::Status s = CheckNotTask(request->id()); !s.ok()) return s;
  return Unary(context, *request, response, &Stub::PrepareSnapshot);
}

grpc::Status ImageForwarder::ReleaseSnapshot(
    grpc::ServerContext* context,
    const imagepb::ReleaseSnapshotRequest* request,
    imagepb::ReleaseSnapshotResponse* response) {
  if (grpc::Status s = CheckNotTask(request->id()); !s.ok()) return s;
  return Unary(context, *request, response, &Stub::ReleaseSnapshot);
}

grpc::Status ImageForwarder::ListSnapshots(
    grpc::ServerContext* context, const imagepb::ListSnapshotsRequest* request,
    imagepb::ListSnapshotsResponse* response) {
  return Unary(context, *request, response, &Stub::ListSnapshots);
}

}  // namespace berth::node
