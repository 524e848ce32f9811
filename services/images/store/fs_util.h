// File-system steps the image store's parts share: directories made with
// their parents, writes that are atomic and durable (a temporary file,
// fsync, rename, fsync of the directory), directory listings, and the
// digest check every path made from a digest passes first.

#ifndef SERVICES_IMAGES_STORE_FS_UTIL_H_
#define SERVICES_IMAGES_STORE_FS_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::images::store_internal {

// mkdir -p with `mode` for the directories it makes.
absl::Status MakeDirs(const std::string& path, mode_t mode = 0700);

// fsync(2) of the directory `path` (after a rename or unlink in it).
absl::Status FsyncDir(const std::string& path);

// Writes `data` to `path` so that a reader (or a restart after a crash)
// sees either the old file or the whole new one: `path`.tmp-<random>,
// fsync, rename, fsync of the directory.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view data,
                             mode_t mode = 0600);

// The names in the directory `path` (not "." and ".."); NOT_FOUND when it
// is missing.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path);

// True for 64 lowercase hex characters.
bool IsHex64(absl::string_view s);

// Bytes the tree at `path` takes on disk (st_blocks, a hard-linked file
// once), not crossing mounts; 0 when it is missing.
int64_t DiskUsage(const std::string& path);

// "<prefix><16 random hex>", for temporary names.
std::string RandomName(absl::string_view prefix);

}  // namespace berth::images::store_internal

#endif  // SERVICES_IMAGES_STORE_FS_UTIL_H_
