// Importing images from archives into the content store: an OCI image layout
// (a directory, or a tar of one: oci-layout, index.json, blobs/sha256/...)
// and a `docker save` archive (manifest.json, <config>.json, layer tars).
// Every blob is verified by the store as it is written; docker-save layers
// (uncompressed tars named by path) are stored under their own digest with
// the Docker layer media type (tar), and a manifest is synthesised for them.

#ifndef SERVICES_IMAGES_IMPORTER_IMPORTER_H_
#define SERVICES_IMAGES_IMPORTER_IMPORTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/image/v1/image.pb.h"
#include "services/images/store/content_store.h"

namespace berth::images {

// One image found in an archive, its blobs in the store.
struct ImportedImage {
  // The name from the archive (OCI: the org.opencontainers.image.ref.name
  // annotation, made a full reference with the layout's base name where it
  // is only a tag; docker: RepoTags), or empty.
  std::string name;
  // Digest and media type of the top document (index or manifest) stored.
  std::string digest;
  std::string media_type;
};

// Reads the archive at `archive_path` (a tar, optionally gzip or zstd, of
// an OCI layout or a docker save; or a directory holding an OCI layout) and
// writes its blobs into `store`. `platform` picks from indexes when the
// caller resolves them later; every manifest reachable for that platform
// must be complete in the archive. Errors name the entry or digest.
absl::StatusOr<std::vector<ImportedImage>> ImportArchive(
    const std::string& archive_path, const image::v1::Platform& platform,
    ContentStore* store);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_IMPORTER_IMPORTER_H_
