#include "services/common/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace berth {

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? absl::OkStatus()
                           : absl::ErrnoToStatus(errno, path);
  }
  const int result = nftw(
      path.c_str(),
      [](const char* entry, const struct stat*, int, struct FTW*) {
        return remove(entry) == 0 || errno == ENOENT ? 0 : -1;
      },
      32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (result != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
  }
  return absl::OkStatus();
}

}  // namespace berth
