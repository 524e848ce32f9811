#include "services/common/stats/test_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "gtest/gtest.h"

namespace berth {
namespace stats {
namespace testing {

void MakeDirs(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      ADD_FAILURE() << "mkdir " << prefix << ": " << std::strerror(errno);
      return;
    }
    if (slash == std::string::npos) return;
  }
}

void WriteFile(const std::string& path, absl::string_view content) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) MakeDirs(path.substr(0, slash));
  const base::UniqueFd fd(
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    ADD_FAILURE() << "open " << path << ": " << std::strerror(errno);
    return;
  }
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n =
        write(fd.get(), content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      ADD_FAILURE() << "write " << path << ": " << std::strerror(errno);
      break;
    }
    written += static_cast<size_t>(n);
  }
}

void RemoveTree(const std::string& path) {
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) {
        if (remove(p) != 0 && errno != ENOENT) {
          ADD_FAILURE() << "cannot remove " << p << ": "
                        << std::strerror(errno);
        }
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

std::string Runfile(absl::string_view path) {
  return ::berth::testing::RunfilePath(path);
}

}  // namespace testing
}  // namespace stats
}  // namespace berth
