// Fuzzes ImportArchive with an arbitrary archive (a tar, plain, gzip or
// zstd, of an OCI layout or a `docker save`), imported for linux/amd64 into
// a fresh content store each run:
//
//   TMP/berth-import-fuzz-XXXXXX/        removed after the run
//     archive                            the input
//     store/                             the content store
//
// Nothing may appear beside them (the importer writes only into the
// store), and every image it reports must name a blob the store holds with
// a valid digest. Inputs over 256 KiB are skipped.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "berth/image/v1/image.pb.h"
#include "services/images/importer/importer.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/store/content_store.h"
#include "tools/fuzz/fuzz_files.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

constexpr size_t kMaxInput = 256 << 10;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace berth::images;
  using berth::fuzz::Require;
  if (size > kMaxInput) return 0;
  const berth::fuzz::ScopedTempDir temp("berth-import-fuzz");
  const std::string& dir = temp.path();
  const std::string archive = dir + "/archive";
  berth::fuzz::CreateFile(archive, berth::fuzz::AsText(data, size));
  {
    absl::StatusOr<std::unique_ptr<ContentStore>> store =
        ContentStore::Open(dir + "/store");
    Require(store.ok(), store.status().ToString());
    berth::image::v1::Platform platform;
    platform.set_os("linux");
    platform.set_architecture("amd64");
    absl::StatusOr<std::vector<ImportedImage>> images =
        ImportArchive(archive, platform, store->get());
    if (images.ok()) {
      for (const ImportedImage& image : *images) {
        Require(ValidateDigest(image.digest).ok(),
                absl::StrCat("an imported image's digest is invalid: ",
                             image.digest));
        Require((*store)->Has(image.digest),
                absl::StrCat("an imported image's document is not stored: ",
                             image.digest));
        Require(
            IsIndexMediaType(image.media_type) ||
                IsManifestMediaType(image.media_type),
            absl::StrCat("an imported image's media type: ", image.media_type));
      }
    }
  }
  Require(
      berth::fuzz::ListNames(dir) == std::set<std::string>{"archive", "store"},
      absl::StrCat("the importer wrote beside its store in ", dir));
  return 0;
}
