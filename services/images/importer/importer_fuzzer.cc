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

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "berth/image/v1/image.pb.h"
#include "services/common/remove_tree.h"
#include "services/images/importer/importer.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/store/content_store.h"

namespace {

constexpr size_t kMaxInput = 256 << 10;

void Require(bool condition, const std::string& what) {
  if (!condition) {
    std::fprintf(stderr, "importer_fuzzer: %s\n", what.c_str());
    std::abort();
  }
}

std::string TempBase() {
  for (const char* name : {"TEST_TMPDIR", "TMPDIR"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] == '/') return value;
  }
  return "/tmp";
}

std::set<std::string> List(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = opendir(dir.c_str());
  Require(d != nullptr, absl::StrCat("cannot list ", dir));
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.insert(name);
  }
  closedir(d);
  return names;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace berth::images;
  if (size > kMaxInput) return 0;
  std::string dir = TempBase() + "/berth-import-fuzz-XXXXXX";
  Require(mkdtemp(dir.data()) != nullptr,
          absl::StrCat("mkdtemp: ", std::strerror(errno)));
  const std::string archive = dir + "/archive";
  {
    const int fd =
        open(archive.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    Require(fd >= 0, absl::StrCat("cannot create ", archive));
    Require(size == 0 || write(fd, data, size) == static_cast<ssize_t>(size),
            absl::StrCat("cannot write ", archive));
    close(fd);
  }
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
  Require(List(dir) == std::set<std::string>{"archive", "store"},
          absl::StrCat("the importer wrote beside its store in ", dir));
  const absl::Status removed = berth::RemoveTree(dir);
  Require(removed.ok(), removed.ToString());
  return 0;
}
