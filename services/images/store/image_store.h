// Image records: a name ("docker.io/library/busybox:latest") to the image
// as resolved when it was stored (berth.image.v1.Image: digest, manifest and
// config digests, platform, layers, configuration, stored_at). One JSON file
// per name under <root>/images/<sha256 of the name>.json, written atomically
// (temporary file, fsync, rename, fsync of the directory), so a crash leaves
// either the old record or the new one. The caller writes a record only
// after every blob and layer it names is stored: a listed image is whole.
// Thread-safe.

#ifndef SERVICES_IMAGES_STORE_IMAGE_STORE_H_
#define SERVICES_IMAGES_STORE_IMAGE_STORE_H_

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

namespace berth::images {

class ImageStore {
 public:
  using Image = ::berth::image::v1::Image;

  // Loads the records in `dir` (created 0700 if missing). A record that
  // cannot be parsed is removed with a warning.
  static absl::StatusOr<std::unique_ptr<ImageStore>> Open(
      const std::string& dir);

  // Stores `image` under image.name() (replacing a record of that name).
  // stored_at is set to now when unset; other_names is not stored.
  // INVALID_ARGUMENT when the name is empty or a digest field is malformed.
  absl::Status Put(const Image& image) ABSL_LOCKS_EXCLUDED(mu_);
  // The record of `name`, with other_names filled (the other names of the
  // same digest). NOT_FOUND names it.
  absl::StatusOr<Image> Get(absl::string_view name) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records whose names start with `name_prefix`, sorted by name, with
  // other_names filled.
  std::vector<Image> List(absl::string_view name_prefix = "") const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Removes the record of `name`; NOT_FOUND names it.
  absl::Status Delete(absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);
  // Stores the record of `source` under `target` as well (stored_at now)
  // and returns it. NOT_FOUND names source.
  absl::StatusOr<Image> Tag(absl::string_view source, absl::string_view target)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& dir() const { return dir_; }

 private:
  explicit ImageStore(std::string dir) : dir_(std::move(dir)) {}
  std::string RecordPath(absl::string_view name) const;
  Image WithOtherNames(const Image& image) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  mutable absl::Mutex mu_;
  // By name.
  std::map<std::string, Image, std::less<>> images_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_STORE_IMAGE_STORE_H_
