#include "services/images/store/store.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "services/images/store/fs_util.h"

namespace berth::images {

using ::berth::image::v1::Image;

Store::Lease::~Lease() { store_->Unpin(id_); }

void Store::Lease::AddBlob(absl::string_view digest) {
  store_->Pin(id_, digest, /*layer=*/false);
}

void Store::Lease::AddLayer(absl::string_view diff_id) {
  store_->Pin(id_, diff_id, /*layer=*/true);
}

void Store::Lease::AddImage(const Image& image) {
  AddBlob(image.digest());
  AddBlob(image.manifest_digest());
  AddBlob(image.config_digest());
  for (const auto& layer : image.layers()) {
    AddBlob(layer.digest());
    AddLayer(layer.diff_id());
  }
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(
    const std::string& root, LayerStore::UnpackFunction unpack) {
  absl::Status status = store_internal::MakeDirs(root, 0711);
  if (!status.ok()) return status;
  std::unique_ptr<Store> store(new Store());
  store->root_ = root;
  absl::StatusOr<std::unique_ptr<ContentStore>> content =
      ContentStore::Open(root);
  if (!content.ok()) return content.status();
  store->content_ = *std::move(content);
  absl::StatusOr<std::unique_ptr<ImageStore>> images =
      ImageStore::Open(absl::StrCat(root, "/images"));
  if (!images.ok()) return images.status();
  store->images_ = *std::move(images);
  if (!unpack) unpack = UnpackLayer;
  absl::StatusOr<std::unique_ptr<LayerStore>> layers = LayerStore::Open(
      absl::StrCat(root, "/layers"), store->content_.get(), std::move(unpack));
  if (!layers.ok()) return layers.status();
  store->layers_ = *std::move(layers);
  absl::StatusOr<std::unique_ptr<SnapshotStore>> snapshots =
      SnapshotStore::Open(absl::StrCat(root, "/snapshots"));
  if (!snapshots.ok()) return snapshots.status();
  store->snapshots_ = *std::move(snapshots);
  status = store->Recover();
  if (!status.ok()) return status;
  return store;
}

Store::~Store() = default;

absl::Status Store::Recover() {
  // A record is written after everything it names; one naming a missing
  // blob was damaged by hand (or by a bug) and cannot be used.
  for (const Image& image : images_->List()) {
    std::vector<std::string> blobs = {image.digest(), image.manifest_digest(),
                                      image.config_digest()};
    for (const auto& layer : image.layers()) blobs.push_back(layer.digest());
    for (const std::string& blob : blobs) {
      if (content_->Has(blob)) continue;
      LOG(WARNING) << "dropping image " << image.name() << ": its blob " << blob
                   << " is not stored";
      absl::Status status = images_->Delete(image.name());
      if (!status.ok()) LOG(WARNING) << status;
      break;
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<Store::Lease> Store::NewLease() {
  absl::MutexLock lock(&gc_mu_);
  const uint64_t id = next_lease_++;
  leases_[id];
  return std::unique_ptr<Lease>(new Lease(this, id));
}

void Store::Pin(uint64_t lease, absl::string_view what, bool layer) {
  absl::MutexLock lock(&gc_mu_);
  Pins& pins = leases_[lease];
  (layer ? pins.layers : pins.blobs).emplace_back(what);
}

void Store::Unpin(uint64_t lease) {
  absl::MutexLock lock(&gc_mu_);
  leases_.erase(lease);
}

absl::StatusOr<SnapshotInfo> Store::PrepareSnapshot(absl::string_view id,
                                                    const Image& image,
                                                    int idmap_userns_fd) {
  std::unique_ptr<Lease> lease = NewLease();
  lease->AddImage(image);
  SnapshotSpec spec;
  spec.image_name = image.name();
  spec.manifest_digest = image.manifest_digest();
  spec.idmap_userns_fd = idmap_userns_fd;
  if (image.layers().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "preparing snapshot ", id, ": image ", image.name(), " has no layers"));
  }
  for (auto it = image.layers().rbegin(); it != image.layers().rend(); ++it) {
    absl::StatusOr<LayerInfo> layer = layers_->Get(it->diff_id());
    if (!layer.ok()) {
      // Unpacked again from its blob (a layer deleted by hand, say).
      layer = layers_->Unpack(it->digest(), it->diff_id());
    }
    if (!layer.ok()) {
      return absl::Status(
          layer.status().code(),
          absl::StrCat("preparing snapshot ", id, " of image ", image.name(),
                       ": ", layer.status().message()));
    }
    spec.layer_diff_ids.push_back(layer->diff_id);
    spec.layer_dirs.push_back(layer->path);
  }
  return snapshots_->Prepare(id, spec);
}

std::vector<std::string> Store::SnapshotsOf(const Image& image) const {
  std::vector<std::string> ids;
  absl::StatusOr<std::vector<SnapshotInfo>> snapshots = snapshots_->List();
  if (!snapshots.ok()) return ids;
  for (const SnapshotInfo& snapshot : *snapshots) {
    if (snapshot.manifest_digest == image.manifest_digest()) {
      ids.push_back(snapshot.id);
    }
  }
  return ids;
}

absl::StatusOr<GcResult> Store::CollectGarbage(bool all_unused_images) {
  absl::MutexLock lock(&gc_mu_);
  GcResult result;
  absl::StatusOr<std::vector<SnapshotInfo>> snapshots = snapshots_->List();
  if (!snapshots.ok()) return snapshots.status();

  std::set<std::string> used_manifests;
  for (const SnapshotInfo& snapshot : *snapshots) {
    used_manifests.insert(snapshot.manifest_digest);
  }
  if (all_unused_images) {
    for (const Image& image : images_->List()) {
      if (used_manifests.count(image.manifest_digest()) > 0) continue;
      absl::Status status = images_->Delete(image.name());
      if (!status.ok()) return status;
      result.untagged.push_back(image.name());
    }
  }

  // Mark.
  std::set<std::string> blobs;
  std::set<std::string> layers;
  for (const Image& image : images_->List()) {
    blobs.insert(image.digest());
    blobs.insert(image.manifest_digest());
    blobs.insert(image.config_digest());
    for (const auto& layer : image.layers()) {
      blobs.insert(layer.digest());
      layers.insert(layer.diff_id());
    }
  }
  for (const SnapshotInfo& snapshot : *snapshots) {
    layers.insert(snapshot.layers.begin(), snapshot.layers.end());
  }
  for (const auto& [id, pins] : leases_) {
    blobs.insert(pins.blobs.begin(), pins.blobs.end());
    layers.insert(pins.layers.begin(), pins.layers.end());
  }

  // Sweep.
  absl::StatusOr<std::vector<std::string>> stored = content_->List();
  if (!stored.ok()) return stored.status();
  for (const std::string& digest : *stored) {
    if (blobs.count(digest) > 0) continue;
    absl::StatusOr<int64_t> size = content_->Size(digest);
    absl::Status status = content_->Delete(digest);
    if (!status.ok()) return status;
    result.deleted.push_back(digest);
    if (size.ok()) result.reclaimed_bytes += *size;
  }
  absl::StatusOr<std::vector<LayerInfo>> unpacked = layers_->List();
  if (!unpacked.ok()) return unpacked.status();
  for (const LayerInfo& layer : *unpacked) {
    if (layers.count(layer.diff_id) > 0) continue;
    absl::StatusOr<int64_t> freed = layers_->Delete(layer.diff_id);
    if (!freed.ok()) return freed.status();
    // (One being unpacked again meanwhile is kept.)
    if (!layers_->Has(layer.diff_id)) result.deleted.push_back(layer.diff_id);
    result.reclaimed_bytes += *freed;
  }
  result.reclaimed_bytes += layers_->CleanTmp();
  result.reclaimed_bytes +=
      content_->CleanIngest(absl::ZeroDuration(), /*keep=*/blobs);
  std::sort(result.untagged.begin(), result.untagged.end());
  std::sort(result.deleted.begin(), result.deleted.end());
  result.deleted.erase(
      std::unique(result.deleted.begin(), result.deleted.end()),
      result.deleted.end());
  if (!result.deleted.empty() || !result.untagged.empty()) {
    LOG(INFO) << "garbage collection: removed " << result.untagged.size()
              << " images, deleted " << result.deleted.size()
              << " blobs and layers, " << result.reclaimed_bytes << " bytes";
  }
  return result;
}

}  // namespace berth::images
