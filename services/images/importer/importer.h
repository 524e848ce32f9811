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
  // The name from the archive as written there, or empty: OCI: the entry's
  // io.containerd.image.name annotation (a full reference), else its
  // org.opencontainers.image.ref.name (often only a tag, "latest"); docker
  // save: one of RepoTags ("busybox:latest"), one ImportedImage per tag.
  // The caller normalises it (ParseReference) and combines a bare tag with
  // a name of its own.
  std::string name;
  // Digest and media type of the top document (index or manifest) stored.
  std::string digest;
  std::string media_type;
};

// Reads the archive at `archive_path` (a tar, optionally gzip or zstd, of
// an OCI layout or a docker save; or a directory holding an OCI layout) and
// writes its blobs into `store`, streaming each (a tar is read twice for a
// docker save whose layers are named by path: once to hash them, once to
// store them). From a tar every blobs/sha256/ entry is stored; from a
// directory only what the images need. `platform` picks from indexes: the
// manifest chosen for it, its config and layers must be in the archive (or
// in the store already), every size as its descriptor says. Entry names
// that are absolute or have ".." are refused, as are links out of the
// archive, blobs whose content is not their digest (nothing is then stored
// under that digest) and hostile documents. Errors name the entry or
// digest.
absl::StatusOr<std::vector<ImportedImage>> ImportArchive(
    const std::string& archive_path, const image::v1::Platform& platform,
    ContentStore* store);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_IMPORTER_IMPORTER_H_
