// What berth-images records of an image, made from its stored documents:
// the shared step of a pull and an import once the index (if any), the
// manifest and the config are in the content store.

#ifndef SERVICES_IMAGES_IMAGE_RECORD_H_
#define SERVICES_IMAGES_IMAGE_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/image/v1/image.pb.h"
#include "services/images/oci/manifest.h"
#include "services/images/store/content_store.h"

namespace berth::images {

// An image resolved down to one platform's manifest and config.
struct ResolvedImage {
  // The document a name points to (index, list or manifest).
  std::string digest;
  std::string media_type;
  // The manifest chosen (== digest when the name points to a manifest).
  std::string manifest_digest;
  Manifest manifest;
  ImageConfigFile config;
  // The platform the index's entry names, when there was an index.
  std::optional<image::v1::Platform> index_platform;
};

// The largest index, manifest or config read from the store.
inline constexpr int64_t kMaxDocumentSize = 8 << 20;

// Checks what a manifest and its config say of the layers: as many diff_ids
// as layers, each layer of a media type that can be unpacked. Errors name
// the manifest or the layer.
absl::Status CheckLayers(const ResolvedImage& image);

// Resolves the stored document `digest` (`media_type`, or detected when
// empty) for `platform`: an index's entry for it, then the manifest and the
// config, all read from `content` (NOT_FOUND names a missing blob). The
// layers are not looked at beyond CheckLayers.
absl::StatusOr<ResolvedImage> ResolveStoredImage(
    const ContentStore& content, absl::string_view digest,
    absl::string_view media_type, const image::v1::Platform& platform);

// The record of `image` under `name`: digests, platform, the layers with
// their unpacked sizes (`unpacked_sizes`, one per layer), the total size
// of the config and layer blobs, the configuration and the creation time.
image::v1::Image MakeImageRecord(const std::string& name,
                                 const ResolvedImage& image,
                                 const std::vector<int64_t>& unpacked_sizes);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_IMAGE_RECORD_H_
