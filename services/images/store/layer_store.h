// Layers unpacked once, by diff_id, under <root>/layers/<diff_id hex>/, and
// shared by every image and snapshot that has them. Unpack reads the blob
// from the content store into layers/tmp-<random>/ (UnpackLayer), checks the
// uncompressed stream's digest against the expected diff_id, renames the
// directory into place and then writes layers/<hex>.json (the metadata):
// a layer exists only when its metadata does. Concurrent requests for the
// same diff_id wait for the first and share its result. Thread-safe.

#ifndef SERVICES_IMAGES_STORE_LAYER_STORE_H_
#define SERVICES_IMAGES_STORE_LAYER_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/images/store/content_store.h"
#include "services/images/unpack/unpack.h"

namespace berth::images {

struct LayerInfo {
  // "sha256:..." of the uncompressed tar.
  std::string diff_id;
  // The blob it was unpacked from.
  std::string blob_digest;
  // layers/<hex>: the directory to give overlayfs as a lower layer.
  std::string path;
  // Bytes of file contents (UnpackResult::unpacked_size) and entries.
  int64_t unpacked_size = 0;
  int64_t entries = 0;
  absl::Time unpacked_at;
};

class LayerStore {
 public:
  // UnpackLayer's signature (tests substitute their own).
  using UnpackFunction = std::function<absl::StatusOr<UnpackResult>(
      int blob_fd, const std::string& dest_dir, const UnpackOptions& options)>;

  // `dir` (created 0700 if missing) holds the layers; `content` (not owned)
  // the blobs; `unpack` unpacks (Store gives UnpackLayer). Recovery: tmp-*
  // directories, directories without metadata and metadata without
  // directories are removed.
  static absl::StatusOr<std::unique_ptr<LayerStore>> Open(
      const std::string& dir, const ContentStore* content,
      UnpackFunction unpack);

  // The layer `diff_id`, unpacking blob `blob_digest` if it is not yet.
  // DATA_LOSS names both digests when the blob's uncompressed digest is not
  // diff_id; an unpack error names the entry (from UnpackLayer). Nothing is
  // left behind on error. options.progress, if set, is called only when
  // this call unpacks.
  absl::StatusOr<LayerInfo> Unpack(absl::string_view blob_digest,
                                   absl::string_view diff_id,
                                   const UnpackOptions& options = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  bool Has(absl::string_view diff_id) const;
  // NOT_FOUND names the diff_id.
  absl::StatusOr<LayerInfo> Get(absl::string_view diff_id) const;
  // Every complete layer.
  absl::StatusOr<std::vector<LayerInfo>> List() const;
  // layers/<hex> (whether or not it exists).
  std::string LayerPath(absl::string_view diff_id) const;

  // Removes a layer (its metadata first, so that a crash midway leaves a
  // directory that recovery removes); returns the bytes freed on disk. An
  // unknown layer frees 0. Never removes one being unpacked.
  absl::StatusOr<int64_t> Delete(absl::string_view diff_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Removes tmp-* directories no Unpack of this store is using; returns the
  // bytes freed.
  int64_t CleanTmp() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& dir() const { return dir_; }

 private:
  LayerStore(std::string dir, const ContentStore* content,
             UnpackFunction unpack)
      : dir_(std::move(dir)), content_(content), unpack_(std::move(unpack)) {}
  absl::Status Recover();
  absl::StatusOr<LayerInfo> UnpackInto(const std::string& tmp,
                                       const std::string& blob_digest,
                                       const std::string& diff_id,
                                       const UnpackOptions& options);
  std::string MetadataPath(absl::string_view diff_id) const;

  const std::string dir_;
  const ContentStore* const content_;
  const UnpackFunction unpack_;
  absl::Mutex mu_;
  // diff_ids being unpacked.
  std::set<std::string> unpacking_ ABSL_GUARDED_BY(mu_);
  // tmp-* names in use (by an Unpack, or a Delete removing a layer).
  std::set<std::string> busy_tmp_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_STORE_LAYER_STORE_H_
