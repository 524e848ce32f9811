#include "tools/fuzz/fuzz_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "services/common/remove_tree.h"
#include "tools/fuzz/fuzz_util.h"

namespace berth::fuzz {

std::string TempBase() {
  for (const char* name : {"TEST_TMPDIR", "TMPDIR"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] == '/') return value;
  }
  return "/tmp";
}

ScopedTempDir::ScopedTempDir(absl::string_view prefix)
    : path_(absl::StrCat(TempBase(), "/", prefix, "-XXXXXX")) {
  Require(mkdtemp(path_.data()) != nullptr,
          absl::StrCat("mkdtemp ", path_, ": ", std::strerror(errno)));
}

ScopedTempDir::~ScopedTempDir() {
  const absl::Status removed = berth::RemoveTree(path_);
  Require(removed.ok(),
          absl::StrCat("cannot remove ", path_, ": ", removed.ToString()));
}

void CreateFile(const std::string& path, absl::string_view content) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  Require(fd >= 0,
          absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  const ssize_t n =
      content.empty() ? 0 : write(fd, content.data(), content.size());
  const std::string error = n < 0 ? std::strerror(errno) : "a short write";
  close(fd);
  Require(n == static_cast<ssize_t>(content.size()),
          absl::StrCat("cannot write ", path, ": ", error));
}

std::set<std::string> ListNames(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  Require(d != nullptr,
          absl::StrCat("cannot list ", dir, ": ", std::strerror(errno)));
  std::set<std::string> names;
  while (const dirent* entry = readdir(d)) {
    const absl::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace(name);
  }
  closedir(d);
  return names;
}

}  // namespace berth::fuzz
