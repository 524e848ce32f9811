// Fuzzes UnpackLayer with an arbitrary blob (tar, gzip or zstd; detected
// from the bytes), unpacked into a fresh directory each run:
//
//   TMP/berth-unpack-fuzz-XXXXXX/          outer, removed after the run
//     sentinel                             must stay as it is
//     inner/sentinel                       must stay as it is
//     inner/layer/                         the destination
//
// Whatever the blob holds, nothing may be created, removed or changed
// outside inner/layer (a ".." entry, a symbolic or hard link leading out,
// a whiteout of the parent would show in outer or inner), and inner/layer
// must stay a directory. A plain (uncompressed) blob that unpacks must
// have the SHA-256 of its bytes as diff_id. Runs as root (owners, device
// nodes and trusted.* attributes); as another user those entries fail,
// which is an answer too. Inputs over 64 KiB are skipped, and the limits
// given to the unpacker are small (1 MiB an entry, 4 MiB a layer), so that
// a sparse entry claiming gigabytes fails quickly instead of filling /tmp.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "services/images/unpack/unpack.h"
#include "tools/fuzz/fuzz_files.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

constexpr size_t kMaxInput = 64 << 10;
constexpr char kSentinel[] = "outside the layer: must not change\n";

using berth::fuzz::Require;

void CheckSentinel(const std::string& path) {
  struct stat st;
  Require(lstat(path.c_str(), &st) == 0,
          absl::StrCat(path, " is gone: the layer reached outside"));
  Require(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 &&
              st.st_uid == geteuid() && st.st_nlink == 1,
          absl::StrCat(path, " was changed: the layer reached outside"));
  char buffer[sizeof(kSentinel)] = {};
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  Require(fd >= 0, absl::StrCat("cannot open ", path));
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  close(fd);
  Require(n == static_cast<ssize_t>(std::strlen(kSentinel)) &&
              std::memcmp(buffer, kSentinel, n) == 0,
          absl::StrCat(path, " was rewritten: the layer reached outside"));
}

bool LooksCompressed(const uint8_t* data, size_t size) {
  if (size >= 1 && (data[0] == 0x1f || data[0] == 0x28)) return true;
  // zstd skippable frames: 0x184D2A5? little-endian.
  return size >= 4 && data[1] == 0x2a && data[2] == 0x4d && data[3] == 0x18;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The unpacker's warnings (skipped attributes, libarchive's) are expected
  // by the thousand here.
  berth::fuzz::QuietLogging();
  if (size > kMaxInput) return 0;

  const berth::fuzz::ScopedTempDir temp("berth-unpack-fuzz");
  const std::string& outer = temp.path();
  const std::string inner = outer + "/inner";
  const std::string layer = inner + "/layer";
  Require(mkdir(inner.c_str(), 0700) == 0 && mkdir(layer.c_str(), 0755) == 0,
          absl::StrCat("cannot make ", layer));
  berth::fuzz::CreateFile(outer + "/sentinel", kSentinel);
  berth::fuzz::CreateFile(inner + "/sentinel", kSentinel);

  berth::base::UniqueFd blob(memfd_create("layer", MFD_CLOEXEC));
  Require(blob.valid(), "memfd_create failed");
  Require(
      size == 0 || write(blob.get(), data, size) == static_cast<ssize_t>(size),
      "cannot write the blob");
  Require(lseek(blob.get(), 0, SEEK_SET) == 0, "cannot rewind the blob");

  berth::images::UnpackOptions options;
  options.max_entry_size = int64_t{1} << 20;
  options.max_total_size = int64_t{4} << 20;
  absl::StatusOr<berth::images::UnpackResult> result =
      berth::images::UnpackLayer(blob.get(), layer, options);

  Require(berth::fuzz::ListNames(outer) ==
              std::set<std::string>{"inner", "sentinel"},
          absl::StrCat("an entry appeared in or vanished from ", outer));
  Require(berth::fuzz::ListNames(inner) ==
              std::set<std::string>{"layer", "sentinel"},
          absl::StrCat("an entry appeared in or vanished from ", inner));
  CheckSentinel(outer + "/sentinel");
  CheckSentinel(inner + "/sentinel");
  struct stat st;
  Require(lstat(layer.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
          "the destination is no longer a directory");
  if (result.ok()) {
    Require(absl::StartsWith(result->diff_id, "sha256:") &&
                result->diff_id.size() == 71,
            absl::StrCat("a malformed diff_id: ", result->diff_id));
    Require(result->unpacked_size >= 0 &&
                result->unpacked_size <= options.max_total_size,
            "unpacked_size out of range");
    if (!LooksCompressed(data, size)) {
      berth::Sha256 hash;
      hash.Update(data, size);
      Require(result->diff_id == "sha256:" + berth::Sha256::Hex(hash.Finish()),
              "the diff_id of a plain tar is not the SHA-256 of its bytes");
    }
  }
  return 0;
}
