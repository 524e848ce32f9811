// A task's user namespace (TaskConfig.isolation.user_namespace) as the exec
// driver checks and applies it: the maps berth-task-init's launcher writes,
// and the host ids the task's files end up owned by.

#ifndef SERVICES_DRIVER_EXEC_USER_NAMESPACE_H_
#define SERVICES_DRIVER_EXEC_USER_NAMESPACE_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/driver/v1/driver.pb.h"
#include "services/driver/common/launcher.h"

namespace berth::exec_driver {

// The kernel takes at most this many lines per map.
inline constexpr int kMaxIdMapLines = 340;

// True when `user_namespace` asks for a namespace (any mapping given).
bool WantsUserNamespace(const driver::v1::UserNamespace& user_namespace);

// Checks and converts `user_namespace`. INVALID_ARGUMENT naming the field
// (isolation.user_namespace.uid_mappings[1].size ...) when a map is empty,
// a range is empty or runs past 2^32, ranges overlap inside or on the host,
// a range maps host id 0 (the host's root must never be the task's), or
// container id 0 is not mapped (the init becomes the namespace's root).
absl::StatusOr<driver_common::UserNamespaceMaps> ResolveUserNamespace(
    const driver::v1::UserNamespace& user_namespace);

// The host id that `id` inside the namespace is, or none if unmapped.
std::optional<uint32_t> MapToHost(
    const std::vector<driver_common::IdMapLine>& map, uint32_t id);

// INVALID_ARGUMENT naming `user` unless the task's uid, gid and groups are
// all mapped (setresuid to an unmapped id fails inside the namespace).
absl::Status CheckIdentityMapped(const driver_common::UserNamespaceMaps& maps,
                                 uid_t uid, gid_t gid,
                                 const std::vector<gid_t>& groups);

}  // namespace berth::exec_driver

#endif  // SERVICES_DRIVER_EXEC_USER_NAMESPACE_H_
