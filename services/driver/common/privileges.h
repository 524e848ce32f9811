// Dropping root's privileges in berth-task-init's forked child, just before
// it executes the task's program: capabilities, no_new_privs, seccomp, and
// descriptors that must not leak into the program. libc and libstdc++ only
// (linked into the static init): no libcap, raw capget/capset and prctl.

#ifndef SERVICES_DRIVER_COMMON_PRIVILEGES_H_
#define SERVICES_DRIVER_COMMON_PRIVILEGES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "services/driver/common/init_spec.h"

namespace berth::driver_common {

// Becomes uid/gid/groups keeping spec.capabilities (root: in the bounding,
// permitted, effective and inheritable sets, as far as the caller holds them;
// any other user: none, with the bounding set still reduced to
// spec.capabilities; ambient always empty),
// sets no_new_privs when asked, marks every descriptor >= 3 close-on-exec,
// and loads spec.seccomp_filter. When spec.enabled is false it only sets the
// groups, gid and uid (the old behaviour) and marks descriptors close-on-exec.
//
// The order, each step needing what the previous ones still allow:
//   1. read /proc/sys/kernel/cap_last_cap (CAP_LAST_CAP when unreadable);
//   2. close-on-exec sweep (before setuid: /proc/self/fd of a process that
//      changed its uid belongs to root and is no longer readable by it);
//   3. drop every capability not in spec.capabilities from the bounding set
//      (needs CAP_SETPCAP, so while still root);
//   4. [no_new_privs false and a filter given: load the filter here, while
//      CAP_SYS_ADMIN allows it; the filter must allow the steps below]
//   5. setgroups, setgid, setuid (a non-root uid clears permitted and
//      effective; inheritable is cleared by the capset below);
//   6. capset: spec.capabilities (of those permitted) for root, nothing
//      for anyone else;
//   7. clear the ambient set; 8. PR_SET_NO_NEW_PRIVS;
//   9. load the seccomp filter (last, so it need not allow anything above).
//
// Meant for a forked, single-threaded child: it changes only the calling
// thread's credentials. Returns false with `*what` naming the step and
// `*error_number` the errno; the caller must then not execute the program.
bool DropPrivileges(const PrivilegeSpec& spec, uid_t uid, gid_t gid,
                    const std::vector<gid_t>& groups, std::string* what,
                    int* error_number);

// Marks every descriptor >= 3 close-on-exec: close_range(CLOSE_RANGE_CLOEXEC)
// (Linux 5.11), else each entry of /proc/self/fd. False with errno set.
bool MarkDescriptorsCloseOnExec();

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_PRIVILEGES_H_
