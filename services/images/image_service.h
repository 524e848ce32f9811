// berth.image.v1.ImageService over berth-images' store: pulls (pull.h),
// imports (importer/importer.h), image records by name, digest or image id,
// removal and pruning through the store's garbage collection, and per-task
// overlay snapshots (their layers idmapped for a task in a user namespace:
// snapshot_idmaps.h).
//
// A reference in InspectImage, RemoveImage, TagImage.source and
// PrepareSnapshot is, in this order: a name as pull takes it ("busybox",
// "registry:5000/app:1", "app@sha256:..."), a digest of an image's index or
// manifest or config ("sha256:<64 hex>"), or a prefix of at least 12 hex
// characters of an image id (config digest, "sha256:" optional) that only one
// image id has.

#ifndef SERVICES_IMAGES_IMAGE_SERVICE_H_
#define SERVICES_IMAGES_IMAGE_SERVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "services/images/importer/importer.h"
#include "services/images/pull.h"
#include "services/images/registry/registry_client.h"
#include "services/images/snapshot_idmaps.h"
#include "services/images/store/store.h"

namespace berth::images {

struct ImageServiceOptions {
  // Layer downloads at the same time over all pulls.
  int max_concurrent_downloads = 3;
  // The node's platform: what an index is resolved to when a request names
  // none.
  image::v1::Platform platform;
  // Where an import's archive is written while it arrives (created 0700;
  // what is in it is removed at start). Required.
  std::string import_dir;
  // Where the id mappings of snapshots are kept (snapshot_idmaps.h; created
  // 0700). Required.
  std::string idmap_dir;
};

// The names an import gives the images `images` of an archive: the
// archive's own names (normalised), except that `option_name`
// (ImportOptions.name) names the image of an archive of one, and every
// image whose archive name is empty or only a tag ("latest", as OCI layouts
// usually have), such a tag completing an option_name without one
// ("busybox" and "latest": "docker.io/library/busybox:latest").
// INVALID_ARGUMENT, saying to pass a name, for an image left without one,
// and when two images would get the same name.
absl::StatusOr<std::vector<std::string>> ImportNames(
    const std::vector<ImportedImage>& images, absl::string_view option_name);

class ImageServiceImpl final : public image::v1::ImageService::Service {
 public:
  // `store` and `registry` are not owned and must outlive the service.
  static absl::StatusOr<std::unique_ptr<ImageServiceImpl>> Create(
      Store* store, RegistryClient* registry, ImageServiceOptions options);

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
                           image::v1::RemoveImageResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status TagImage(grpc::ServerContext* context,
                        const image::v1::TagImageRequest* request,
                        image::v1::TagImageResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status PruneImages(grpc::ServerContext* context,
                           const image::v1::PruneImagesRequest* request,
                           image::v1::PruneImagesResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status PrepareSnapshot(grpc::ServerContext* context,
                               const image::v1::PrepareSnapshotRequest* request,
                               image::v1::PrepareSnapshotResponse* response)
      override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status ReleaseSnapshot(grpc::ServerContext* context,
                               const image::v1::ReleaseSnapshotRequest* request,
                               image::v1::ReleaseSnapshotResponse* response)
      override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status ListSnapshots(
      grpc::ServerContext* context,
      const image::v1::ListSnapshotsRequest* request,
      image::v1::ListSnapshotsResponse* response) override;

  // The images `reference` names (see above), sorted by name; `by_name` is
  // set when it named one record by its name. NOT_FOUND names the
  // reference; INVALID_ARGUMENT when an id prefix is ambiguous.
  absl::StatusOr<std::vector<image::v1::Image>> FindImages(
      absl::string_view reference, bool* by_name = nullptr) const;

  // What the service did with an import (the archive already written to
  // `archive_path`).
  absl::StatusOr<std::vector<image::v1::Image>> Import(
      const std::string& archive_path, const image::v1::ImportOptions& options);

 private:
  ImageServiceImpl(Store* store, RegistryClient* registry,
                   std::unique_ptr<SnapshotIdMaps> idmaps,
                   ImageServiceOptions options);

  Store* const store_;
  const std::unique_ptr<SnapshotIdMaps> idmaps_;
  const ImageServiceOptions options_;
  Puller puller_;

  // Garbage collection, with imports kept out: an import's blobs are
  // written before its lease can name them.
  absl::StatusOr<GcResult> CollectGarbage(bool all_unused_images)
      ABSL_LOCKS_EXCLUDED(import_mu_);

  // Serialises what looks at image records and snapshots together: removal
  // (which checks the snapshots of what it removes), tagging, pruning and
  // preparing.
  absl::Mutex mu_;
  // Held shared by every import from its first blob to its records, and
  // exclusively by every garbage collection.
  absl::Mutex import_mu_;
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_IMAGE_SERVICE_H_
