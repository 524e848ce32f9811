// Idmapped mounts for tasks in a user namespace. A host directory bound
// into such a task shows its files as owned by nobody (host ids the
// namespace does not map). Through a mount idmapped to the task's
// namespace, a file owned on disk by id K shows as owned by the host id the
// namespace maps K to, i.e. as K inside the task: a root-owned image or
// host directory is owned by the task's root. Writes through it store the
// task's ids unshifted (its root writes root-owned files on the host), so a
// writable bind whose new files must be owned on the host by the task's
// mapped ids is not to be idmapped.
//
// Linked into the static berth-task-init like :init_spec: libc only.

#ifndef SERVICES_DRIVER_COMMON_IDMAP_MOUNT_H_
#define SERVICES_DRIVER_COMMON_IDMAP_MOUNT_H_

#include <cstdint>
#include <string>

namespace berth::driver_common {

// Marks `mount_fd`, a detached mount (open_tree with OPEN_TREE_CLONE, not
// yet attached with move_mount), as idmapped through the user namespace
// `userns_fd` (an open /proc/PID/ns/user), with every mount under it when
// `recursive`. False with `*what` naming the step and `*err` its errno
// (EINVAL: a file system without idmapped mounts, or an attached mount).
bool IdmapMount(int mount_fd, int userns_fd, bool recursive, std::string* what,
                int* err);

// open_tree(`source`, OPEN_TREE_CLONE [| AT_RECURSIVE]) then IdmapMount: a
// close-on-exec descriptor of the idmapped copy, for move_mount; -1 with
// `*what` and `*err` on failure.
int OpenIdmappedTree(const std::string& source, int userns_fd, bool recursive,
                     std::string* what, int* err);

// open_tree(`source`, OPEN_TREE_CLONE [| AT_RECURSIVE]) with `attributes`
// (MOUNT_ATTR_RDONLY, _NOSUID, ...) set on it, and idmapped through the user
// namespace `userns_fd` unless it is -1: a close-on-exec descriptor of a
// detached bind of `source` for a task's init in a user namespace to
// attach with move_mount (its ids may not search the path, and what it
// would clone by path is a mount of another namespace); -1 with `*what`
// and `*err` on failure.
//
// An idmapped tree's attributes are not locked once the init attaches it:
// a task with CAP_SYS_ADMIN in its namespace can remount it writable, and
// write there as the ids it is mapped to on disk (root's, for its root).
// Idmap no read-only host content for such a task.
int OpenBindTree(const std::string& source, uint64_t attributes, bool recursive,
                 std::string* what, int* err, int userns_fd = -1);

// A new user namespace with `uid_map` and `gid_map` (lines of "CONTAINER
// HOST SIZE\n", as /proc/PID/uid_map takes them), kept alive by nothing but
// the returned close-on-exec descriptor: an idmapping for IdmapMount equal
// to that of a task's namespace with the same maps, made before the task
// exists (only host root can idmap the host's file systems). A short-lived
// child holds it while its maps are written. -1 with `*what` and `*err` on
// failure. Needs CAP_SYS_ADMIN and CAP_SETUID/CAP_SETGID (host root).
int MakeUserNamespace(const std::string& uid_map, const std::string& gid_map,
                      std::string* what, int* err);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_IDMAP_MOUNT_H_
