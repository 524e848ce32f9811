// The task's own root, assembled by berth-task-init (PID 1 of the task's new
// pid, mount, ipc and uts namespaces) and entered with pivot_root before the
// task's program is forked. libc and libstdc++ only: linked into the static
// init.
//
// What the root holds, in the order it is made:
//   /                  RootSpec::rootfs bound recursively, or a tmpfs in
//                      which each of RootSpec::host_dirs is bound read-only
//                      (a host symlink such as /bin -> usr/bin is copied as
//                      a symlink, a missing one skipped);
//   /tmp               a private tmpfs (1777);
//   /berth/task        RootSpec::task_dir, its `.berth` and `logs` covered by
//                      empty read-only tmpfs mounts (a mount point cannot be
//                      renamed either);
//   /proc              the pid namespace's own proc;
//   /sys               sysfs read-only (an rbind of the host's when sysfs
//                      may not be mounted), /sys/fs/cgroup a read-only
//                      tmpfs holding each of the host's hierarchies, which
//                      in the task's cgroup namespace show its own cgroup;
//   /dev               a tmpfs with null, zero, full, random, urandom, tty
//                      (the host's nodes bound in where mknod is refused, in
//                      a user namespace), a new devpts instance, shm and
//                      mqueue;
//   RootSpec::mounts   in order (after /dev, so that one may replace
//                      /dev/shm, say);
//   then, unless privileged, the OCI default masked paths (a file covered
//   by /dev/null, a directory by an empty read-only tmpfs) and read-only
//   paths of /proc; then "/" itself read-only when readonly_rootfs.
// Privileged: the host's /dev, /sys writable, nothing masked.
// A bind whose RootSpec/MountSpec names a detached tree (*_fd) attaches that
// tree (made by the driver, in a user namespace) instead of its source path.
//
// The root may be an image (untrusted content): every path inside it is
// resolved with openat2(RESOLVE_IN_ROOT) from the root, missing components
// are made one at a time, and mounts go onto the resolved descriptor, so no
// symlink in the image leads a mount or a mkdir out of the root.

#ifndef SERVICES_DRIVER_COMMON_ROOT_SETUP_H_
#define SERVICES_DRIVER_COMMON_ROOT_SETUP_H_

#include <string>

#include "services/driver/common/init_spec.h"

namespace berth::driver_common {

// Assembles the task's root at root.mount_point in the caller's mount
// namespace (which must be its own: every mount is first made a slave of the
// host's) and enters it: on return "/" is the task's root, the working
// directory is "/" and the old root is detached. The caller is PID 1 of the
// pid namespace /proc is to show, has joined its cgroups and unshared its
// cgroup namespace (when root.cgroup_namespace), and joined its network
// namespace (sysfs shows that one).
//
// False with *what naming the step and path ("mounting proc at /proc") and
// *error_number the errno; the caller's mount namespace then holds a
// half-made root and the caller is expected to exit. Directories made as
// mount points inside an image rootfs stay there.
bool SetUpRoot(const RootSpec& root, std::string* what, int* error_number);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_ROOT_SETUP_H_
