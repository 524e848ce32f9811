#include "services/driver/common/user_namespace.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/beneath.h"
#include "base/path.h"
#include "services/driver/common/idmap_mount.h"

namespace berth::driver_common {

namespace dv1 = ::berth::driver::v1;

namespace {

constexpr uint64_t kIdLimit = uint64_t{1} << 32;

bool Overlap(uint64_t a, uint64_t a_size, uint64_t b, uint64_t b_size) {
  return a < b + b_size && b < a + a_size;
}

absl::StatusOr<std::vector<IdMapLine>> ResolveMap(
    const google::protobuf::RepeatedPtrField<dv1::IdMapping>& mappings,
    const std::string& field) {
  if (mappings.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field,
                     ": empty (a user namespace needs uid and gid "
                     "mappings)"));
  }
  if (mappings.size() > kMaxIdMapLines) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", mappings.size(),
                     " ranges, the kernel takes at most ", kMaxIdMapLines));
  }
  std::vector<IdMapLine> lines;
  bool has_root = false;
  for (int i = 0; i < mappings.size(); ++i) {
    const dv1::IdMapping& m = mappings[i];
    const std::string at = absl::StrCat(field, "[", i, "]");
    if (m.size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".size: is 0"));
    }
    if (uint64_t{m.container_id()} + m.size() > kIdLimit ||
        uint64_t{m.host_id()} + m.size() > kIdLimit) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": ", m.container_id(), " ", m.host_id(), " ",
                       m.size(), " runs past id 4294967295"));
    }
    if (m.host_id() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(at,
                       ".host_id: a range starting at host id 0 would "
                       "make the host's root the task's"));
    }
    for (int j = 0; j < i; ++j) {
      const dv1::IdMapping& o = mappings[j];
      if (Overlap(m.container_id(), m.size(), o.container_id(), o.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".container_id: overlaps ", field, "[", j, "] inside"));
      }
      if (Overlap(m.host_id(), m.size(), o.host_id(), o.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".host_id: overlaps ", field, "[", j, "] on the host"));
      }
    }
    has_root = has_root || m.container_id() == 0;
    lines.push_back({m.container_id(), m.host_id(), m.size()});
  }
  if (!has_root) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": no range maps container id 0 (the task's root)"));
  }
  return lines;
}

}  // namespace

bool WantsUserNamespace(const dv1::UserNamespace& user_namespace) {
  return !user_namespace.uid_mappings().empty() ||
         !user_namespace.gid_mappings().empty();
}

absl::StatusOr<UserNamespaceMaps> ResolveUserNamespace(
    const dv1::UserNamespace& user_namespace) {
  UserNamespaceMaps maps;
  absl::StatusOr<std::vector<IdMapLine>> uid = ResolveMap(
      user_namespace.uid_mappings(), "isolation.user_namespace.uid_mappings");
  if (!uid.ok()) return uid.status();
  absl::StatusOr<std::vector<IdMapLine>> gid = ResolveMap(
      user_namespace.gid_mappings(), "isolation.user_namespace.gid_mappings");
  if (!gid.ok()) return gid.status();
  maps.uid = *std::move(uid);
  maps.gid = *std::move(gid);
  return maps;
}

std::optional<uint32_t> MapToHost(const std::vector<IdMapLine>& map,
                                  uint32_t id) {
  for (const IdMapLine& line : map) {
    if (id >= line.container_id && id - line.container_id < line.size) {
      return line.host_id + (id - line.container_id);
    }
  }
  return std::nullopt;
}

absl::Status CheckIdentityMapped(const UserNamespaceMaps& maps, uid_t uid,
                                 gid_t gid, const std::vector<gid_t>& groups) {
  if (!MapToHost(maps.uid, uid)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "user: uid ", uid,
        " is not mapped by isolation.user_namespace.uid_mappings"));
  }
  if (!MapToHost(maps.gid, gid)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "user: gid ", gid,
        " is not mapped by isolation.user_namespace.gid_mappings"));
  }
  for (gid_t group : groups) {
    if (!MapToHost(maps.gid, group)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "user: supplementary group ", group,
          " is not mapped by isolation.user_namespace.gid_mappings"));
    }
  }
  return absl::OkStatus();
}

absl::Status GiveTaskDirToNamespace(
    const std::string& task_dir, bool made, uid_t task_uid, gid_t task_gid,
    const UserNamespaceMaps& maps,
    const std::vector<std::string>& private_dirs) {
  const std::optional<uint32_t> root_uid = MapToHost(maps.uid, 0);
  const std::optional<uint32_t> root_gid = MapToHost(maps.gid, 0);
  const std::optional<uint32_t> uid = MapToHost(maps.uid, task_uid);
  const std::optional<uint32_t> gid = MapToHost(maps.gid, task_gid);
  if (!root_uid || !root_gid || !uid || !gid) {
    return absl::InvalidArgumentError(
        "isolation.user_namespace: container ids 0 and the task's user must "
        "be mapped");
  }
  auto give = [](int dir_fd, const std::string& name, const std::string& path,
                 uint32_t to_uid, uint32_t to_gid) {
    if (fchownat(dir_fd, name.c_str(), to_uid, to_gid, AT_SYMLINK_NOFOLLOW) !=
        0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("chown ", path, " to ", to_uid, ":", to_gid));
    }
    return absl::OkStatus();
  };
  if (absl::Status s =
          made ? give(AT_FDCWD, task_dir, task_dir, *uid, *gid)
               : give(AT_FDCWD, task_dir, task_dir, *root_uid, *root_gid);
      !s.ok()) {
    return s;
  }
  const base::UniqueFd task_fd(
      open(task_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!task_fd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", task_dir));
  }
  for (const std::string& name : private_dirs) {
    const std::string path = absl::StrCat(task_dir, "/", name);
    // Opened beneath the task directory without following a link in any
    // component (a relative name such as ".berth/agent-logs").
    absl::StatusOr<base::UniqueFd> dir_fd = base::OpenBeneath(
        task_fd.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (!dir_fd.ok()) return dir_fd.status();
    DIR* dir = fdopendir(dup(dir_fd->get()));
    if (dir == nullptr) {
      return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
    }
    absl::Status result;
    if (fchownat(dir_fd->get(), "", *root_uid, *root_gid, AT_EMPTY_PATH) != 0) {
      result = absl::ErrnoToStatus(
          errno,
          absl::StrCat("chown ", path, " to ", *root_uid, ":", *root_gid));
    }
    while (result.ok()) {
      const struct dirent* entry = readdir(dir);
      if (entry == nullptr) break;
      struct stat st;
      if (fstatat(dir_fd->get(), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
              0 ||
          !S_ISREG(st.st_mode)) {
        continue;
      }
      result =
          give(dir_fd->get(), entry->d_name,
               absl::StrCat(path, "/", entry->d_name), *root_uid, *root_gid);
    }
    closedir(dir);
    if (!result.ok()) return result;
  }
  return absl::OkStatus();
}

absl::Status OpenForUserNamespace(InitSpec* init,
                                  std::vector<base::UniqueFd>* passed) {
  auto pass = [&](base::UniqueFd fd) {
    passed->push_back(std::move(fd));
    return kInitFirstPassedFd + static_cast<int>(passed->size()) - 1;
  };
  auto open_dir = [&](const std::string& path, int* field) {
    base::UniqueFd fd(
        open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) {
      return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
    }
    *field = pass(std::move(fd));
    return absl::OkStatus();
  };
  auto bind_tree = [&](const std::string& source, uint64_t attributes,
                       int* field) {
    std::string what;
    int err = 0;
    base::UniqueFd fd(
        OpenBindTree(source, attributes, /*recursive=*/true, &what, &err));
    if (!fd.valid()) return absl::ErrnoToStatus(err, what);
    *field = pass(std::move(fd));
    return absl::OkStatus();
  };
  if (absl::Status s = open_dir(init->log_dir, &init->log_dir_fd); !s.ok()) {
    return s;
  }
  if (absl::Status s = open_dir(std::string(base::Dirname(init->exit_file)),
                                &init->exit_dir_fd);
      !s.ok()) {
    return s;
  }
  if (!init->root.enabled) return absl::OkStatus();
  if (!init->root.rootfs.empty()) {
    if (absl::Status s = bind_tree(init->root.rootfs, 0, &init->root.rootfs_fd);
        !s.ok()) {
      return s;
    }
  }
  if (!init->root.task_dir.empty()) {
    if (absl::Status s =
            bind_tree(init->root.task_dir, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                      &init->root.task_dir_fd);
        !s.ok()) {
      return s;
    }
  }
  for (MountSpec& mount : init->root.mounts) {
    if (mount.kind != MountSpec::Kind::kBind) continue;
    if (absl::Status s =
            bind_tree(mount.source,
                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                          (mount.read_only ? MOUNT_ATTR_RDONLY : 0),
                      &mount.source_fd);
        !s.ok()) {
      return s;
    }
  }
  if (passed->size() > static_cast<size_t>(kMaxPassedFds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("isolation.mounts: at most ", kMaxPassedFds - 4,
                     " binds in a task with a user namespace"));
  }
  return absl::OkStatus();
}

}  // namespace berth::driver_common
