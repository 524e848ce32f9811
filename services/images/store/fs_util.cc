#include "services/images/store/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/io.h"
#include "base/path.h"
#include "base/unique_fd.h"

namespace berth::images::store_internal {

absl::Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty() || path == "/" || path == ".") return absl::OkStatus();
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a directory"));
  }
  absl::Status parent = MakeDirs(base::Dirname(path), mode);
  if (!parent.ok()) return parent;
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
  }
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& path) {
  base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  if (fsync(fd.get()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fsync ", path));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view data,
                             mode_t mode) {
  const std::string tmp = RandomName(absl::StrCat(path, ".tmp-"));
  base::UniqueFd fd(
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
  absl::Status status = base::WriteAll(fd.get(), data, tmp);
  if (status.ok() && fsync(fd.get()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("fsync ", tmp));
  }
  fd.reset();
  if (status.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("renaming ", tmp));
  }
  if (!status.ok()) {
    unlink(tmp.c_str());
    return status;
  }
  return FsyncDir(base::Dirname(path));
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("listing ", path));
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  closedir(dir);
  return names;
}

bool IsHex64(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

namespace {

struct UsageWalk {
  int64_t bytes = 0;
  std::set<std::pair<dev_t, ino_t>> linked;
};
thread_local UsageWalk* usage_walk = nullptr;

int AddUsage(const char*, const struct stat* st, int, struct FTW*) {
  if (st->st_nlink > 1 && !S_ISDIR(st->st_mode) &&
      !usage_walk->linked.emplace(st->st_dev, st->st_ino).second) {
    return 0;
  }
  usage_walk->bytes += static_cast<int64_t>(st->st_blocks) * 512;
  return 0;
}

}  // namespace

int64_t DiskUsage(const std::string& path) {
  UsageWalk walk;
  usage_walk = &walk;
  nftw(path.c_str(), AddUsage, 32, FTW_PHYS | FTW_MOUNT);
  usage_walk = nullptr;
  return walk.bytes;
}

std::string RandomName(absl::string_view prefix) {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != sizeof(value)) {
    value = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ULL ^
            static_cast<uint64_t>(time(nullptr));
  }
  return absl::StrFormat("%s%016x", prefix, value);
}

}  // namespace berth::images::store_internal
