// Unpacking one layer blob (tar, gzip or zstd, detected from the bytes) into
// an empty directory, with libarchive reading and every entry created below
// that directory through descriptors (openat2 RESOLVE_BENEATH|NO_SYMLINKS,
// O_NOFOLLOW), so that no entry creates or changes anything outside it: not
// an absolute name, not "..", not a symlink planted as a parent, not a hard
// link to a file outside the layer. Whiteouts become overlayfs whiteouts (a
// ".wh.NAME" entry -> a 0:0 character device NAME; ".wh..wh..opq" -> the
// directory's trusted.overlay.opaque="y" xattr). Hard links, symbolic links,
// device nodes, FIFOs, extended attributes, owners, modes (setuid too) and
// modification times are kept.
//
// The rules, in detail (the OCI image-spec's layer rules, made strict):
// - Names are relative: "./" prefixes, "." components and repeated or
//   trailing slashes are dropped; an absolute name, a ".." component or an
//   empty name is refused. The entry naming the layer's root ("./") is
//   skipped: the directory's own owner, mode and times stay the caller's.
// - Missing parents are made (0755, root) as tar makes them; a parent that
//   is a symbolic link (even one pointing inside the layer) or not a
//   directory is refused.
// - A hard link may only name an entry unpacked before it in this layer
//   (never a directory); its name is checked like any entry's. A hard link
//   to a symbolic link links the link itself, never its target.
// - Symbolic links are created as they are; their targets are never
//   followed by the unpacker.
// - An entry replaces what an earlier entry of the same name made (a
//   directory with its contents), except that a directory entry over a
//   directory keeps it and its contents and takes the new owner and mode.
// - Owners are the entries' numeric uid/gid; modes (setuid, setgid and
//   sticky too) are set after the owner, extended attributes after both
//   (chown clears security.capability); directories' times are set last.
// - Extended attributes: every one the archive carries (user.*, trusted.*,
//   security.*, system.posix_acl_*), except trusted.overlay.* and
//   user.overlay.* which would change how overlayfs reads the layer (only
//   whiteouts set those; skipped with a warning). One the filesystem or the
//   kernel refuses with ENOTSUP or EPERM is skipped with a warning (once a
//   name a layer), as containerd does; any other failure is an error.
// - ".wh..wh.*" names other than the opaque marker (aufs' metadata) are
//   skipped.
//
// Runs as root (owners, device nodes and trusted.* attributes need it).

#ifndef SERVICES_IMAGES_UNPACK_UNPACK_H_
#define SERVICES_IMAGES_UNPACK_UNPACK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace berth::images {

struct UnpackOptions {
  // An entry whose size, or the total of the file contents written, exceeds
  // this fails (OUT_OF_RANGE, naming the entry).
  int64_t max_entry_size = int64_t{64} << 30;
  int64_t max_total_size = int64_t{256} << 30;
  // Called now and then (about every 4 MiB, and once at the end) with the
  // compressed bytes read so far; on the caller's thread.
  std::function<void(int64_t compressed_read)> progress;
};

struct UnpackResult {
  // "sha256:<hex>" of the uncompressed tar stream (to its very end, past
  // the tar's end-of-archive blocks): must equal the image config's diff_id
  // for this layer (the caller checks).
  std::string diff_id;
  // Bytes of file contents written.
  int64_t unpacked_size = 0;
  // Tar entries read (every header, skipped ones too).
  int64_t entries = 0;
};

// Unpacks the archive read from `blob_fd` (from its current offset, to its
// end; not closed) into `dest_dir`, which must exist and be empty
// (FAILED_PRECONDITION otherwise). Errors name the entry:
//   layer entry "../etc/passwd": a ".." component is refused
// INVALID_ARGUMENT for what the rules above refuse, DATA_LOSS for a
// truncated or corrupt stream ("layer stream after entry ...: truncated
// gzip input"), OUT_OF_RANGE for the size limits, the errno's code for a
// failing system call. On error `dest_dir` may hold a partial tree, which
// the caller removes (the store unpacks into a temporary directory and
// renames it into place only on success); nothing outside it is touched.
absl::StatusOr<UnpackResult> UnpackLayer(int blob_fd,
                                         const std::string& dest_dir,
                                         const UnpackOptions& options = {});

}  // namespace berth::images

#endif  // SERVICES_IMAGES_UNPACK_UNPACK_H_
