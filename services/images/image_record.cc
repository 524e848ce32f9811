#include "services/images/image_record.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/proto_time.h"

namespace berth::images {

namespace pb = ::berth::image::v1;

absl::Status CheckLayers(const ResolvedImage& image) {
  const Manifest& manifest = image.manifest;
  if (image.config.diff_ids.size() != manifest.layers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config ", manifest.config.digest, " of manifest ",
        image.manifest_digest, " lists ", image.config.diff_ids.size(),
        " diff_ids for the manifest's ", manifest.layers.size(), " layers"));
  }
  for (size_t i = 0; i < manifest.layers.size(); ++i) {
    if (!IsLayerMediaType(manifest.layers[i].media_type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", i + 1, " ", manifest.layers[i].digest,
                       " of manifest ", image.manifest_digest, ": media type ",
                       manifest.layers[i].media_type, " cannot be unpacked"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ResolvedImage> ResolveStoredImage(const ContentStore& content,
                                                 absl::string_view digest,
                                                 absl::string_view media_type,
                                                 const pb::Platform& platform) {
  ResolvedImage image;
  image.digest = std::string(digest);
  absl::StatusOr<std::string> body = content.ReadBlob(digest, kMaxDocumentSize);
  if (!body.ok()) return body.status();
  if (media_type.empty()) {
    absl::StatusOr<std::string> detected = DetectMediaType(*body);
    if (!detected.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("document ", digest, ": ", detected.status().message()));
    }
    image.media_type = *detected;
  } else {
    image.media_type = std::string(media_type);
  }
  std::string manifest_media_type = image.media_type;
  image.manifest_digest = image.digest;
  if (IsIndexMediaType(image.media_type)) {
    absl::StatusOr<Index> index = ParseIndex(*body, image.media_type);
    if (!index.ok()) {
      return absl::Status(
          index.status().code(),
          absl::StrCat("index ", digest, ": ", index.status().message()));
    }
    absl::StatusOr<Descriptor> chosen = ChoosePlatform(*index, platform);
    if (!chosen.ok()) {
      return absl::Status(
          chosen.status().code(),
          absl::StrCat("index ", digest, ": ", chosen.status().message()));
    }
    image.index_platform = chosen->platform;
    image.manifest_digest = chosen->digest;
    manifest_media_type = chosen->media_type;
    body = content.ReadBlob(chosen->digest, kMaxDocumentSize);
    if (!body.ok()) return body.status();
  }
  absl::StatusOr<Manifest> manifest = ParseManifest(*body, manifest_media_type);
  if (!manifest.ok()) {
    return absl::Status(manifest.status().code(),
                        absl::StrCat("manifest ", image.manifest_digest, ": ",
                                     manifest.status().message()));
  }
  image.manifest = *std::move(manifest);
  body = content.ReadBlob(image.manifest.config.digest, kMaxDocumentSize);
  if (!body.ok()) return body.status();
  absl::StatusOr<ImageConfigFile> config = ParseImageConfig(*body);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat("config ", image.manifest.config.digest,
                                     ": ", config.status().message()));
  }
  image.config = *std::move(config);
  absl::Status checked = CheckLayers(image);
  if (!checked.ok()) return checked;
  return image;
}

pb::Image MakeImageRecord(const std::string& name, const ResolvedImage& image,
                          const std::vector<int64_t>& unpacked_sizes) {
  pb::Image record;
  record.set_name(name);
  record.set_digest(image.digest);
  record.set_media_type(image.media_type);
  record.set_manifest_digest(image.manifest_digest);
  record.set_config_digest(image.manifest.config.digest);
  *record.mutable_platform() = image.config.platform;
  if (record.platform().os().empty() && image.index_platform) {
    *record.mutable_platform() = *image.index_platform;
  }
  int64_t size = image.manifest.config.size;
  for (size_t i = 0; i < image.manifest.layers.size(); ++i) {
    const Descriptor& descriptor = image.manifest.layers[i];
    pb::Layer* layer = record.add_layers();
    layer->set_digest(descriptor.digest);
    if (i < image.config.diff_ids.size()) {
      layer->set_diff_id(image.config.diff_ids[i]);
    }
    layer->set_media_type(descriptor.media_type);
    layer->set_size(descriptor.size);
    if (i < unpacked_sizes.size()) layer->set_unpacked_size(unpacked_sizes[i]);
    size += descriptor.size;
  }
  record.set_size(size);
  *record.mutable_config() = image.config.config;
  if (image.config.created_unix_nanos) {
    *record.mutable_created() = base::ToProtoTimestamp(
        absl::FromUnixNanos(*image.config.created_unix_nanos));
  }
  return record;
}

}  // namespace berth::images
