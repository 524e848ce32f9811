// A task's user namespace (TaskConfig.isolation.user_namespace) as the
// built-in drivers check and apply it: the maps berth-task-init's launcher
// writes, the host ids the task's files end up owned by, and what the init
// (the namespace's root, whose ids may not search berth's directories) is
// given as descriptors instead of paths.

#ifndef SERVICES_DRIVER_COMMON_USER_NAMESPACE_H_
#define SERVICES_DRIVER_COMMON_USER_NAMESPACE_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/unique_fd.h"
#include "berth/driver/v1/driver.pb.h"
#include "services/driver/common/init_spec.h"
#include "services/driver/common/launcher.h"

namespace berth::driver_common {

// The kernel takes at most this many lines per map.
inline constexpr int kMaxIdMapLines = 340;

// True when `user_namespace` asks for a namespace (any mapping given).
bool WantsUserNamespace(const driver::v1::UserNamespace& user_namespace);

// Checks and converts `user_namespace`. INVALID_ARGUMENT naming the field
// (isolation.user_namespace.uid_mappings[1].size ...) when a map is empty,
// a range is empty or runs past 2^32, ranges overlap inside or on the host,
// a range maps host id 0 (the host's root must never be the task's), or
// container id 0 is not mapped (the init becomes the namespace's root).
absl::StatusOr<UserNamespaceMaps> ResolveUserNamespace(
    const driver::v1::UserNamespace& user_namespace);

// The host id that `id` inside the namespace is, or none if unmapped.
std::optional<uint32_t> MapToHost(const std::vector<IdMapLine>& map,
                                  uint32_t id);

// INVALID_ARGUMENT naming `user` unless the task's uid, gid and groups are
// all mapped (setresuid to an unmapped id fails inside the namespace).
absl::Status CheckIdentityMapped(const UserNamespaceMaps& maps, uid_t uid,
                                 gid_t gid, const std::vector<gid_t>& groups);

// Gives what the init of a task in a user namespace writes to the
// namespace's root (host ids of container ids 0:0): each of `private_dirs`
// (relative to `task_dir`, e.g. ".berth") and the regular files a previous
// run left in it. `task_dir` itself goes to `task_uid`:`task_gid` (ids
// inside) when the driver made it (`made`), else to the namespace's root,
// as it is the host's root's for a task without a user namespace. Never
// through a link (the task may own what is below the task directory).
absl::Status GiveTaskDirToNamespace(
    const std::string& task_dir, bool made, uid_t task_uid, gid_t task_gid,
    const UserNamespaceMaps& maps,
    const std::vector<std::string>& private_dirs);

// For an init in a user namespace, whose ids may not search the host paths
// it needs: `init`'s log directory and the directory of its exit file
// opened, and a detached tree (OpenBindTree) of each bind's source (the
// image, the task directory, every kBind of root.mounts, a file as well as
// a directory), appended to `passed` and named by `init`'s *_fd fields
// (kInitFirstPassedFd + index), what StartInit's `passed_fds` then takes.
// Writable binds are not idmapped: what the task writes there is owned by
// its mapped ids. INVALID_ARGUMENT naming isolation.mounts when there are
// more than kMaxPassedFds.
absl::Status OpenForUserNamespace(InitSpec* init,
                                  std::vector<base::UniqueFd>* passed);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_USER_NAMESPACE_H_
