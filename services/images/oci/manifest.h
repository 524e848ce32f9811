// The OCI image formats (image-spec v1.0/1.1) and their Docker schema 2
// equivalents, parsed from JSON with nlohmann-json. Every parser takes bytes
// that are not trusted: sizes and digests are validated, unknown fields are
// ignored, a wrong type names the field.

#ifndef SERVICES_IMAGES_OCI_MANIFEST_H_
#define SERVICES_IMAGES_OCI_MANIFEST_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/image/v1/image.pb.h"

namespace berth::images {

// Media types.
inline constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
inline constexpr char kOciManifest[] =
    "application/vnd.oci.image.manifest.v1+json";
inline constexpr char kOciConfig[] = "application/vnd.oci.image.config.v1+json";
inline constexpr char kOciLayerTar[] = "application/vnd.oci.image.layer.v1.tar";
inline constexpr char kOciLayerGzip[] =
    "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr char kOciLayerZstd[] =
    "application/vnd.oci.image.layer.v1.tar+zstd";
inline constexpr char kDockerManifestList[] =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr char kDockerManifest[] =
    "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr char kDockerConfig[] =
    "application/vnd.docker.container.image.v1+json";
inline constexpr char kDockerLayerGzip[] =
    "application/vnd.docker.image.rootfs.diff.tar.gzip";
// An uncompressed Docker layer (what `docker save` archives hold).
inline constexpr char kDockerLayerTar[] =
    "application/vnd.docker.image.rootfs.diff.tar";
inline constexpr char kDockerForeignLayer[] =
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";
inline constexpr char kOciNondistributableLayerTar[] =
    "application/vnd.oci.image.layer.nondistributable.v1.tar";
inline constexpr char kOciNondistributableLayerGzip[] =
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip";
inline constexpr char kOciNondistributableLayerZstd[] =
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd";

// Limits on what the parsers accept (and what callers should read at most).
// An index or manifest document, as containerd limits it.
inline constexpr int64_t kMaxManifestSize = 4 << 20;
// An image configuration document.
inline constexpr int64_t kMaxConfigSize = 8 << 20;
// Any blob a descriptor names (1 TiB): larger sizes are refused.
inline constexpr int64_t kMaxBlobSize = int64_t{1} << 40;
// Layers of a manifest (and diff_ids of a config).
inline constexpr size_t kMaxLayers = 1024;
// Entries of an index.
inline constexpr size_t kMaxIndexEntries = 4096;

// The Accept header a client sends for manifests: all four kinds.
std::string ManifestAcceptHeader();

// True for an index or a manifest list.
bool IsIndexMediaType(absl::string_view media_type);
// True for an image manifest (OCI or Docker schema 2).
bool IsManifestMediaType(absl::string_view media_type);
// True for a layer this store can unpack (tar, gzip, zstd; OCI or Docker).
bool IsLayerMediaType(absl::string_view media_type);

struct Descriptor {
  std::string media_type;
  std::string digest;  // validated
  int64_t size = 0;    // >= 0
  std::vector<std::string> urls;
  std::map<std::string, std::string> annotations;
  // Set in an index's entries only.
  std::optional<image::v1::Platform> platform;
};

struct Index {
  std::string media_type;  // kOciIndex or kDockerManifestList
  std::vector<Descriptor> manifests;
  std::map<std::string, std::string> annotations;
};

struct Manifest {
  std::string media_type;  // kOciManifest or kDockerManifest
  Descriptor config;
  std::vector<Descriptor> layers;  // base first
  std::map<std::string, std::string> annotations;
};

struct ImageConfigFile {
  image::v1::Platform platform;  // os, architecture, variant
  image::v1::ImageConfig config;
  std::vector<std::string> diff_ids;  // validated; one per layer
  std::optional<int64_t> created_unix_nanos;
};

// `media_type` is what the registry's Content-Type (or the parent
// descriptor) says; when empty, the document's own mediaType field decides.
// A document whose mediaType contradicts the given one is refused.
absl::StatusOr<Index> ParseIndex(absl::string_view json,
                                 absl::string_view media_type = "");
absl::StatusOr<Manifest> ParseManifest(absl::string_view json,
                                       absl::string_view media_type = "");
absl::StatusOr<ImageConfigFile> ParseImageConfig(absl::string_view json);

// The document's media type: its "mediaType" field, or for a document
// without one, guessed from its shape ("manifests" -> OCI index, "layers"
// -> OCI manifest). INVALID_ARGUMENT when it is neither.
absl::StatusOr<std::string> DetectMediaType(absl::string_view json);

// The node's own platform (linux/amd64 here, from uname).
image::v1::Platform HostPlatform();

// The entry of `index` for `platform` (os and architecture equal; variant
// equal when both have one). NOT_FOUND lists the platforms the index has.
absl::StatusOr<Descriptor> ChoosePlatform(const Index& index,
                                          const image::v1::Platform& platform);

// "linux/amd64", "linux/arm64/v8".
std::string PlatformString(const image::v1::Platform& platform);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_OCI_MANIFEST_H_
