// berth-images' store under <state_dir>/images, one object owning its parts:
//
//   blobs/sha256/<hex>, ingest/<hex>   ContentStore  (content())
//   images/<sha256 of name>.json       ImageStore    (images())
//   layers/<hex>/, layers/<hex>.json   LayerStore    (layers())
//   snapshots/<id>/{upper,work,rootfs,snapshot.json}
//                                      SnapshotStore (snapshots())
//
// Open recovers from a crash at any point: partial blobs stay in ingest/
// (never listed; resumed by the next writer of the digest, or removed after
// a day or by garbage collection), half-unpacked layers (layers/tmp-*, a
// directory without its metadata) and half-made snapshots (no
// snapshot.json; unmounted first) are removed, and image records naming a
// blob that is not stored are dropped with a warning. Snapshots with a
// record are left mounted: tasks running on them are untouched.
//
// Garbage collection marks what image records (index or manifest, manifest,
// config and layer blobs; layers by diff_id), snapshots (their layers) and
// leases reference, and sweeps the rest of blobs/, layers/, layers/tmp-*
// and ingest/. A pull or import holds a Lease on what it has stored until its
// image record is written, so a concurrent collection keeps it:
//
//   std::unique_ptr<Store::Lease> lease = store->NewLease();
//   lease->AddBlob(digest);              // before looking whether it exists
//   ... write the blob, unpack the layer (lease->AddLayer(diff_id)) ...
//   store->images()->Put(image);         // then the lease may go
//
// Thread-safe.

#ifndef SERVICES_IMAGES_STORE_STORE_H_
#define SERVICES_IMAGES_STORE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "berth/image/v1/image.pb.h"
#include "services/images/store/content_store.h"
#include "services/images/store/image_store.h"
#include "services/images/store/layer_store.h"
#include "services/images/store/snapshot_store.h"

namespace berth::images {

// What a garbage collection did.
struct GcResult {
  // Names removed (CollectGarbage(true)), sorted.
  std::vector<std::string> untagged;
  // Digests of the blobs and diff_ids of the layers deleted, sorted.
  std::vector<std::string> deleted;
  // Bytes freed on disk (blobs, layers, temporary and ingest files).
  int64_t reclaimed_bytes = 0;
};

class Store {
 public:
  // Pins blobs and layers against garbage collection while it lives.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // Add before looking whether the blob or layer is stored: a collection
    // running meanwhile waits for the Add, or has finished before it.
    void AddBlob(absl::string_view digest);
    void AddLayer(absl::string_view diff_id);
    // Every blob and layer `image` names.
    void AddImage(const ::berth::image::v1::Image& image);

   private:
    friend class Store;
    Lease(Store* store, uint64_t id) : store_(store), id_(id) {}
    Store* const store_;
    const uint64_t id_;
  };

  // Opens (creating, 0711) the store at `root` (<state_dir>/images) and
  // recovers it (see above).
  // `unpack` replaces UnpackLayer (for tests).
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const std::string& root, LayerStore::UnpackFunction unpack = nullptr);
  ~Store();

  const std::string& root() const { return root_; }
  ContentStore* content() const { return content_.get(); }
  ImageStore* images() const { return images_.get(); }
  LayerStore* layers() const { return layers_.get(); }
  SnapshotStore* snapshots() const { return snapshots_.get(); }

  // A new lease; it must not outlive the store.
  std::unique_ptr<Lease> NewLease();

  // Prepares snapshot `id` of the stored `image`: its layers (unpacked again
  // from their blobs if a layer is missing) below, top layer first. Errors
  // name the image. `idmap_userns_fd`: see SnapshotSpec.
  absl::StatusOr<SnapshotInfo> PrepareSnapshot(
      absl::string_view id, const ::berth::image::v1::Image& image,
      int idmap_userns_fd = -1);

  // The ids of the snapshots of `image` (by manifest digest), sorted.
  std::vector<std::string> SnapshotsOf(
      const ::berth::image::v1::Image& image) const;

  // Deletes every blob, layer, temporary directory and ingest file (no
  // writer holds) that no image record, snapshot or lease references. With
  // `all_unused_images`, first removes every image record no snapshot uses.
  absl::StatusOr<GcResult> CollectGarbage(bool all_unused_images)
      ABSL_LOCKS_EXCLUDED(gc_mu_);

 private:
  Store() = default;
  absl::Status Recover();
  void Pin(uint64_t lease, absl::string_view what, bool layer)
      ABSL_LOCKS_EXCLUDED(gc_mu_);
  void Unpin(uint64_t lease) ABSL_LOCKS_EXCLUDED(gc_mu_);

  std::string root_;
  std::unique_ptr<ContentStore> content_;
  std::unique_ptr<ImageStore> images_;
  std::unique_ptr<LayerStore> layers_;
  std::unique_ptr<SnapshotStore> snapshots_;

  // Held by a whole collection and by every pin.
  absl::Mutex gc_mu_;
  uint64_t next_lease_ ABSL_GUARDED_BY(gc_mu_) = 1;
  // Per lease: the blob digests and layer diff_ids it pins.
  struct Pins {
    std::vector<std::string> blobs;
    std::vector<std::string> layers;
  };
  std::map<uint64_t, Pins> leases_ ABSL_GUARDED_BY(gc_mu_);
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_STORE_STORE_H_
