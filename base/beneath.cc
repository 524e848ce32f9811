#include "base/beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace berth::base {
namespace {

// The components of `relative`, "." dropped; INVALID_ARGUMENT for an
// absolute path, "..", or nothing at all.
absl::StatusOr<std::vector<std::string>> Components(
    absl::string_view relative) {
  if (relative.empty() || relative[0] == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", relative, "\" is not a relative path"));
  }
  std::vector<std::string> parts;
  for (absl::string_view part :
       absl::StrSplit(relative, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", relative, "\" has a \"..\" component"));
    }
    parts.emplace_back(part);
  }
  if (parts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", relative, "\" names no file"));
  }
  return parts;
}

absl::Status OpenError(int error, absl::string_view relative) {
  return absl::ErrnoToStatus(error, absl::StrCat("opening ", relative));
}

// Set once the kernel said it has no openat2 (before 5.6).
std::atomic<bool> openat2_missing{false};

}  // namespace

namespace beneath_internal {

absl::StatusOr<UniqueFd> OpenByComponents(int dir_fd,
                                          absl::string_view relative, int flags,
                                          mode_t mode) {
  absl::StatusOr<std::vector<std::string>> parts = Components(relative);
  if (!parts.ok()) return parts.status();
  UniqueFd current;
  int at = dir_fd;
  for (size_t i = 0; i + 1 < parts->size(); ++i) {
    UniqueFd next(openat(at, (*parts)[i].c_str(),
                         O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) return OpenError(errno, relative);
    current = std::move(next);
    at = current.get();
  }
  UniqueFd fd(
      openat(at, parts->back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) return OpenError(errno, relative);
  return fd;
}

}  // namespace beneath_internal

absl::StatusOr<UniqueFd> OpenBeneath(int dir_fd, absl::string_view relative,
                                     int flags, mode_t mode) {
  // Checked here too, so that both ways refuse the same paths alike.
  if (absl::StatusOr<std::vector<std::string>> parts = Components(relative);
      !parts.ok()) {
    return parts.status();
  }
  if (!openat2_missing.load(std::memory_order_relaxed)) {
    struct open_how how = {};
    how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
    if (flags & (O_CREAT | O_TMPFILE)) how.mode = mode;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
    const std::string path(relative);
    long fd;  // NOLINT(runtime/int): syscall(2)'s type
    do {
      fd = syscall(SYS_openat2, dir_fd, path.c_str(), &how, sizeof(how));
    } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    if (errno != ENOSYS) return OpenError(errno, relative);
    openat2_missing.store(true, std::memory_order_relaxed);
  }
  return beneath_internal::OpenByComponents(dir_fd, relative, flags, mode);
}

absl::StatusOr<UniqueFd> OpenBeneath(const std::string& dir,
                                     absl::string_view relative, int flags,
                                     mode_t mode) {
  const UniqueFd dir_fd(
      open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", dir));
  }
  absl::StatusOr<UniqueFd> fd =
      OpenBeneath(dir_fd.get(), relative, flags, mode);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat(dir, ": ", fd.status().message()));
  }
  return fd;
}

absl::StatusOr<std::string> ReadFileBeneath(int dir_fd,
                                            absl::string_view relative,
                                            size_t max_bytes) {
  absl::StatusOr<UniqueFd> fd =
      OpenBeneath(dir_fd, relative, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (fstat(fd->get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fstat ", relative));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(relative, " is not a regular file"));
  }
  // One byte more than allowed tells a file that is too long.
  std::string content(max_bytes + 1, '\0');
  size_t size = 0;
  while (size < content.size()) {
    const ssize_t n = read(fd->get(), &content[size], content.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", relative));
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  if (size > max_bytes) {
    return absl::OutOfRangeError(
        absl::StrCat(relative, " holds more than ", max_bytes, " bytes"));
  }
  content.resize(size);
  return content;
}

absl::StatusOr<std::string> ReadFileBeneath(const std::string& dir,
                                            absl::string_view relative,
                                            size_t max_bytes) {
  const UniqueFd dir_fd(
      open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", dir));
  }
  absl::StatusOr<std::string> content =
      ReadFileBeneath(dir_fd.get(), relative, max_bytes);
  if (!content.ok()) {
    return absl::Status(content.status().code(),
                        absl::StrCat(dir, ": ", content.status().message()));
  }
  return content;
}

}  // namespace berth::base
