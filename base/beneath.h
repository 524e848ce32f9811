// Opening files below a directory without following symbolic links: what a
// process that may be root uses for paths in a directory someone else can
// write to (a task's directory), so that a link planted there can neither
// lead outside nor anywhere else inside.

#ifndef BASE_BENEATH_H_
#define BASE_BENEATH_H_

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/unique_fd.h"

namespace berth::base {

// Opens `relative` (a relative path without "..") below the directory
// `dir_fd` with open(2) `flags` (O_CLOEXEC is added; `mode` for O_CREAT),
// resolving no symbolic link in any component and never leaving the
// directory: openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or,
// where the kernel lacks it, openat(2) with O_NOFOLLOW one component at a
// time. A link met is ELOOP (or ENOTDIR); errors name `relative`.
absl::StatusOr<UniqueFd> OpenBeneath(int dir_fd, absl::string_view relative,
                                     int flags, mode_t mode = 0);
// The same below the directory `dir`, which is itself opened with
// O_NOFOLLOW (its parents are the caller's to trust); errors name
// `dir`/`relative`.
absl::StatusOr<UniqueFd> OpenBeneath(const std::string& dir,
                                     absl::string_view relative, int flags,
                                     mode_t mode = 0);

// The content of the regular file `relative` below `dir_fd` (or `dir`),
// opened as OpenBeneath does (and O_NONBLOCK, so that a FIFO planted there
// cannot block the reader): NOT_FOUND when missing, FAILED_PRECONDITION when
// not a regular file, OUT_OF_RANGE when longer than `max_bytes` (at most
// max_bytes + 1 bytes are read).
absl::StatusOr<std::string> ReadFileBeneath(int dir_fd,
                                            absl::string_view relative,
                                            size_t max_bytes);
absl::StatusOr<std::string> ReadFileBeneath(const std::string& dir,
                                            absl::string_view relative,
                                            size_t max_bytes);

namespace beneath_internal {
// OpenBeneath's fallback, without openat2 (exposed for its test).
absl::StatusOr<UniqueFd> OpenByComponents(int dir_fd,
                                          absl::string_view relative, int flags,
                                          mode_t mode);
}  // namespace beneath_internal

}  // namespace berth::base

#endif  // BASE_BENEATH_H_
