// Unpacking one layer blob (tar, gzip or zstd, detected from the bytes) into
// an empty directory, with libarchive reading and every entry created below
// that directory through descriptors (openat2 RESOLVE_BENEATH|NO_MAGICLINKS,
// O_NOFOLLOW), so that no entry creates or changes anything outside it: not
// an absolute name, not "..", not a symlink planted as a parent, not a hard
// link to a file outside the layer. Whiteouts become overlayfs whiteouts (a
// ".wh.NAME" entry -> a 0:0 character device NAME; ".wh..wh..opq" -> the
// directory's trusted.overlay.opaque="y" xattr). Hard links, symbolic links,
// device nodes, FIFOs, extended attributes, owners, modes (setuid too) and
// modification times are kept.

#ifndef SERVICES_IMAGES_UNPACK_UNPACK_H_
#define SERVICES_IMAGES_UNPACK_UNPACK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace berth::images {

struct UnpackOptions {
  // An entry whose size or whose total unpacked bytes exceed this fails.
  int64_t max_entry_size = int64_t{64} << 30;
  int64_t max_total_size = int64_t{256} << 30;
  // Called now and then with the compressed bytes read so far.
  std::function<void(int64_t compressed_read)> progress;
};

struct UnpackResult {
  // "sha256:<hex>" of the uncompressed tar stream: must equal the image
  // config's diff_id for this layer (the caller checks).
  std::string diff_id;
  // Bytes of file contents written.
  int64_t unpacked_size = 0;
  int64_t entries = 0;
};

// Unpacks the archive read from `blob_fd` (from its current offset) into
// `dest_dir`, which must exist and be empty. On error the message names the
// entry (or says the stream is truncated); `dest_dir` may hold a partial
// tree, which the caller removes (the store unpacks into a temporary
// directory and renames it into place only on success).
absl::StatusOr<UnpackResult> UnpackLayer(int blob_fd,
                                         const std::string& dest_dir,
                                         const UnpackOptions& options = {});

}  // namespace berth::images

#endif  // SERVICES_IMAGES_UNPACK_UNPACK_H_
