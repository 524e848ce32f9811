#include "services/images/snapshot_idmaps.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/io.h"
#include "glog/logging.h"
#include "services/driver/common/idmap_mount.h"

namespace berth::images {
namespace {

namespace pb = ::berth::image::v1;

constexpr int kMaxRanges = 8;
constexpr char kSuffix[] = ".pb";

absl::Status ValidateOne(const IdMappings& mappings, absl::string_view field) {
  if (mappings.size() > kMaxRanges) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", mappings.size(),
                                                   " ranges, at most ",
                                                   kMaxRanges, " are allowed"));
  }
  constexpr uint64_t kLimit = uint64_t{1} << 32;
  for (int i = 0; i < mappings.size(); ++i) {
    const pb::IdMapping& range = mappings[i];
    const std::string name = absl::StrCat(field, "[", i, "]");
    if (range.size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ".size is 0"));
    }
    if (uint64_t{range.container_id()} + range.size() > kLimit ||
        uint64_t{range.host_id()} + range.size() > kLimit) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " runs past 2^32 (container_id ", range.container_id(),
          ", host_id ", range.host_id(), ", size ", range.size(), ")"));
    }
    for (int j = 0; j < i; ++j) {
      const pb::IdMapping& other = mappings[j];
      auto overlap = [&](uint32_t a, uint32_t b) {
        return uint64_t{a} < uint64_t{b} + other.size() &&
               uint64_t{b} < uint64_t{a} + range.size();
      };
      if (overlap(range.container_id(), other.container_id())) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, " overlaps ", field, "[", j, "] inside the namespace"));
      }
      if (overlap(range.host_id(), other.host_id())) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " overlaps ", field, "[", j, "] on the host"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateIdMappings(const IdMappings& uid_mappings,
                                const IdMappings& gid_mappings) {
  if (uid_mappings.empty() != gid_mappings.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(uid_mappings.empty() ? "uid_mappings" : "gid_mappings",
                     " is empty while ",
                     uid_mappings.empty() ? "gid_mappings" : "uid_mappings",
                     " is not: give both or neither"));
  }
  absl::Status valid = ValidateOne(uid_mappings, "uid_mappings");
  if (valid.ok()) valid = ValidateOne(gid_mappings, "gid_mappings");
  return valid;
}

std::string IdMapText(const IdMappings& mappings) {
  std::string text;
  for (const pb::IdMapping& range : mappings) {
    absl::StrAppend(&text, range.container_id(), " ", range.host_id(), " ",
                    range.size(), "\n");
  }
  return text;
}

bool SameIdMappings(const IdMappings& a, const IdMappings& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](const pb::IdMapping& x, const pb::IdMapping& y) {
                      return x.container_id() == y.container_id() &&
                             x.host_id() == y.host_id() && x.size() == y.size();
                    });
}

absl::StatusOr<base::UniqueFd> MakeIdmapNamespace(
    const IdMappings& uid_mappings, const IdMappings& gid_mappings) {
  std::string what;
  int err = 0;
  base::UniqueFd fd(driver_common::MakeUserNamespace(
      IdMapText(uid_mappings), IdMapText(gid_mappings), &what, &err));
  if (!fd) return absl::ErrnoToStatus(err, what);
  return fd;
}

absl::StatusOr<std::unique_ptr<SnapshotIdMaps>> SnapshotIdMaps::Open(
    const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("creating ", dir));
  }
  return std::unique_ptr<SnapshotIdMaps>(new SnapshotIdMaps(dir));
}

std::string SnapshotIdMaps::PathOf(absl::string_view id) const {
  return absl::StrCat(dir_, "/", id, kSuffix);
}

absl::StatusOr<pb::Snapshot> SnapshotIdMaps::Get(absl::string_view id) const {
  pb::Snapshot maps;
  const std::string path = PathOf(id);
  absl::StatusOr<std::string> bytes = base::ReadFile(path);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status())) return maps;
    return bytes.status();
  }
  if (!maps.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat("the id mappings of snapshot ", id,
                                            " in ", path, " cannot be parsed"));
  }
  return maps;
}

absl::Status SnapshotIdMaps::Put(absl::string_view id,
                                 const IdMappings& uid_mappings,
                                 const IdMappings& gid_mappings) {
  pb::Snapshot maps;
  *maps.mutable_uid_mappings() = uid_mappings;
  *maps.mutable_gid_mappings() = gid_mappings;
  const std::string path = PathOf(id);
  const std::string tmp = absl::StrCat(path, ".tmp");
  base::UniqueFd fd(
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
  absl::Status written =
      base::WriteAll(fd.get(), maps.SerializeAsString(), tmp);
  if (written.ok() && fsync(fd.get()) != 0) {
    written = absl::ErrnoToStatus(errno, absl::StrCat("fsync of ", tmp));
  }
  fd.reset();
  if (written.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    written = absl::ErrnoToStatus(errno, absl::StrCat("renaming ", tmp));
  }
  if (!written.ok()) {
    unlink(tmp.c_str());
    return written;
  }
  base::UniqueFd dir(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir && fsync(dir.get()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fsync of ", dir_));
  }
  return absl::OkStatus();
}

absl::Status SnapshotIdMaps::Remove(absl::string_view id) {
  const std::string path = PathOf(id);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
  }
  return absl::OkStatus();
}

void SnapshotIdMaps::Clean(const std::set<std::string>& snapshots) {
  DIR* dir = opendir(dir_.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (struct dirent* entry = readdir(dir)) {
    absl::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    absl::string_view id = name;
    if (absl::ConsumeSuffix(&id, kSuffix) && snapshots.count(std::string(id))) {
      continue;
    }
    stale.emplace_back(name);
  }
  closedir(dir);
  for (const std::string& name : stale) {
    LOG(INFO) << "removing " << dir_ << "/" << name
              << ": the id mappings of no snapshot";
    unlink(absl::StrCat(dir_, "/", name).c_str());
  }
}

}  // namespace berth::images
