// Fuzzes the parsers of what a registry or an archive sends as an image
// index or manifest (ParseIndex, ParseManifest, DetectMediaType) and the
// platform choice made from an index. Checks that what is accepted keeps
// the documented limits: digests valid, sizes in [0, kMaxBlobSize], at most
// kMaxLayers layers and kMaxIndexEntries entries, a media type of the kind.

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/image/v1/image.pb.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "tools/fuzz/fuzz_util.h"

namespace berth::images {
namespace {

using berth::fuzz::Require;

void CheckDescriptor(const Descriptor& descriptor) {
  Require(ValidateDigest(descriptor.digest).ok(),
          "an accepted descriptor has an invalid digest");
  Require(descriptor.size >= 0 && descriptor.size <= kMaxBlobSize,
          "an accepted descriptor's size is out of range");
}

void FuzzIndex(absl::string_view json, absl::string_view media_type) {
  absl::StatusOr<Index> index = ParseIndex(json, media_type);
  if (!index.ok()) return;
  Require(IsIndexMediaType(index->media_type),
          "an accepted index has another media type");
  Require(index->manifests.size() <= kMaxIndexEntries,
          "an accepted index has too many entries");
  for (const Descriptor& descriptor : index->manifests) {
    CheckDescriptor(descriptor);
  }
  // The choice for the host and for each platform the index names: the
  // entry chosen is one of the index's.
  std::vector<image::v1::Platform> platforms = {HostPlatform()};
  for (const Descriptor& descriptor : index->manifests) {
    if (descriptor.platform.has_value()) {
      platforms.push_back(*descriptor.platform);
    }
    if (platforms.size() > 8) break;
  }
  for (const image::v1::Platform& platform : platforms) {
    absl::StatusOr<Descriptor> chosen = ChoosePlatform(*index, platform);
    (void)PlatformString(platform);
    if (!chosen.ok()) continue;
    CheckDescriptor(*chosen);
    Require(chosen->platform.has_value(),
            "ChoosePlatform chose an entry without a platform");
  }
}

void FuzzManifest(absl::string_view json, absl::string_view media_type) {
  absl::StatusOr<Manifest> manifest = ParseManifest(json, media_type);
  if (!manifest.ok()) return;
  Require(IsManifestMediaType(manifest->media_type),
          "an accepted manifest has another media type");
  CheckDescriptor(manifest->config);
  Require(manifest->config.size <= kMaxConfigSize,
          "an accepted manifest's config is larger than the limit");
  Require(manifest->layers.size() <= kMaxLayers,
          "an accepted manifest has too many layers");
  for (const Descriptor& layer : manifest->layers) {
    CheckDescriptor(layer);
    (void)IsLayerMediaType(layer.media_type);
  }
}

}  // namespace
}  // namespace berth::images

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace berth::images;
  const absl::string_view json = berth::fuzz::AsText(data, size);
  // As the registry client does: the Content-Type given, or the document's
  // own (detected).
  absl::StatusOr<std::string> detected = DetectMediaType(json);
  FuzzIndex(json, "");
  FuzzManifest(json, "");
  if (detected.ok()) {
    FuzzIndex(json, *detected);
    FuzzManifest(json, *detected);
  }
  FuzzIndex(json, "application/vnd.docker.distribution.manifest.list.v2+json");
  FuzzManifest(json,
               "application/vnd.oci.image.manifest.v1+json; charset=utf-8");
  return 0;
}
