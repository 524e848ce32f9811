// A RegistryClient for tests, serving OCI layouts (as //tools/testimages
// makes them) from memory: manifests by tag or digest, blobs in chunks from
// the writer's offset (as a registry honouring Range does), with hooks to
// hold a download, change a blob's bytes and count what was fetched.

#ifndef SERVICES_IMAGES_FAKE_REGISTRY_H_
#define SERVICES_IMAGES_FAKE_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "services/images/registry/registry_client.h"

namespace berth::images {

class FakeRegistry : public RegistryClient {
 public:
  // The test image `name` of //tools/testimages:images, in runfiles.
  static std::string TestImage(absl::string_view name);

  // Serves the OCI layout at `layout_dir` (the first entry of its
  // index.json) as `reference` ("127.0.0.1:5000/library/busybox:1"), with
  // every blob of the layout.
  absl::Status AddLayout(const std::string& layout_dir,
                         absl::string_view reference) ABSL_LOCKS_EXCLUDED(mu_);
  // Serves `bytes` for `digest` from now on (a corrupted blob).
  void SetBlob(absl::string_view digest, std::string bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Called before each chunk of a blob is written, with the blob's digest
  // and the offset of the chunk, outside the fake's lock: may block.
  void set_before_chunk(
      std::function<void(const std::string& digest, int64_t offset)> hook)
      ABSL_LOCKS_EXCLUDED(mu_);
  void set_chunk_size(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Holds downloads of `digest` once `offset` bytes are written, until
  // Release() or until the writer refuses bytes (its pull was stopped: an
  // empty Write fails), which ends the download with the writer's error.
  void Hold(absl::string_view digest, int64_t offset) ABSL_LOCKS_EXCLUDED(mu_);
  void Release() ABSL_LOCKS_EXCLUDED(mu_);
  // Downloads being held now.
  int held() const ABSL_LOCKS_EXCLUDED(mu_);

  // FetchBlob calls for `digest`.
  int fetches(absl::string_view digest) const ABSL_LOCKS_EXCLUDED(mu_);
  // The offset the last FetchBlob of `digest` started at (-1: none).
  int64_t start_offset(absl::string_view digest) const ABSL_LOCKS_EXCLUDED(mu_);
  // FetchBlob calls running now.
  int running_fetches() const ABSL_LOCKS_EXCLUDED(mu_);
  // The most FetchBlob calls that were running at once.
  int max_concurrent_fetches() const ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<FetchedManifest> FetchManifest(
      const Reference& reference) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<FetchedManifest> FetchManifestByDigest(
      const Reference& reference, absl::string_view digest,
      absl::string_view media_type) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status FetchBlob(const Reference& reference, absl::string_view digest,
                         int64_t size, BlobWriter* writer,
                         const std::function<void(int64_t)>& progress) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Blob {
    std::string bytes;
    std::string media_type;  // for manifests and indexes
  };

  absl::Status WaitWhileHeld(const std::string& digest, int64_t offset,
                             BlobWriter* writer) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Blob> blobs_ ABSL_GUARDED_BY(mu_);
  // Normalised reference -> digest.
  std::map<std::string, std::string> tags_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&, int64_t)> before_chunk_
      ABSL_GUARDED_BY(mu_);
  int64_t chunk_size_ ABSL_GUARDED_BY(mu_) = 64 << 10;
  std::string hold_digest_ ABSL_GUARDED_BY(mu_);
  int64_t hold_offset_ ABSL_GUARDED_BY(mu_) = 0;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> fetches_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> start_offsets_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int max_running_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_FAKE_REGISTRY_H_
