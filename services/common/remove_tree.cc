#include "services/common/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

// Removes everything in the directory `fd` (`path`, for messages) on device
// `dev`. Every step is relative to a descriptor and follows no link, so a
// directory swapped for a link meanwhile (by a task still running as
// someone who can write there) is refused, never walked into.
absl::Status EmptyDirectory(int fd, dev_t dev, const std::string& path) {
  std::vector<std::string> names;
  {
    // A description of its own, so that the listing's position is not fd's.
    const int listing_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* listing = listing_fd < 0 ? nullptr : fdopendir(listing_fd);
    if (listing == nullptr) {
      if (listing_fd >= 0) close(listing_fd);
      return absl::ErrnoToStatus(errno, absl::StrCat("listing ", path));
    }
    while (const dirent* entry = readdir(listing)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(listing);
  }
  for (const std::string& name : names) {
    const std::string child = absl::StrCat(path, "/", name);
    struct stat st;
    if (fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return absl::ErrnoToStatus(errno, child);
    }
    if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != dev) {
        return absl::FailedPreconditionError(
            absl::StrCat("removing ", path, ": ", child, " is a mount point"));
      }
      const int sub = openat(fd, name.c_str(),
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) return absl::ErrnoToStatus(errno, child);
      struct stat opened;
      absl::Status emptied =
          fstat(sub, &opened) != 0 ? absl::ErrnoToStatus(errno, child)
          : opened.st_dev != dev || opened.st_ino != st.st_ino
              ? absl::FailedPreconditionError(
                    absl::StrCat(child, " changed while being removed"))
              : EmptyDirectory(sub, dev, child);
      close(sub);
      if (!emptied.ok()) return emptied;
    }
    if (unlinkat(fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) !=
            0 &&
        errno != ENOENT) {
      return absl::ErrnoToStatus(errno, absl::StrCat("removing ", child));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? absl::OkStatus()
                           : absl::ErrnoToStatus(errno, path);
  }
  if (!S_ISDIR(st.st_mode)) {
    // A file or a link at `path`: removed itself, never its target.
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
    }
    return absl::OkStatus();
  }
  const int fd =
      open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
  const absl::Status emptied = EmptyDirectory(fd, st.st_dev, path);
  close(fd);
  if (!emptied.ok()) return emptied;
  if (rmdir(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
  }
  return absl::OkStatus();
}

}  // namespace berth
