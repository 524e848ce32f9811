#include "services/driver/common/privileges.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#ifndef __NR_close_range
#define __NR_close_range 436
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

namespace berth::driver_common {
namespace {

// The highest capability the running kernel knows: bits above it can be
// neither dropped from the bounding set (EINVAL) nor set by capset (EPERM).
int LastCapability() {
  const int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CAP_LAST_CAP;
  char buffer[16];
  ssize_t n;
  do {
    n = read(fd, buffer, sizeof(buffer) - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return CAP_LAST_CAP;
  buffer[n] = '\0';
  char* end = nullptr;
  const long last = std::strtol(buffer, &end, 10);
  if (end == buffer || last < 0 || last > 63) return CAP_LAST_CAP;
  return static_cast<int>(last);
}

// Records errno and the step ("STEP" or "STEP NUMBER SUFFIX"). errno is read
// first: building the message may allocate.
bool Fail(std::string* what, int* error_number, const char* step,
          long number = -1, const char* suffix = "") {
  *error_number = errno;
  *what = step;
  if (number >= 0) *what += " " + std::to_string(number) + suffix;
  return false;
}

bool LoadSeccompFilter(const std::string& filter, std::string* what,
                       int* error_number) {
  const size_t count = filter.size() / sizeof(struct sock_filter);
  if (filter.size() % sizeof(struct sock_filter) != 0 || count == 0 ||
      count > BPF_MAXINSNS) {
    *error_number = EINVAL;
    *what = "loading the seccomp filter: " + std::to_string(filter.size()) +
            " bytes are not 1 to " + std::to_string(BPF_MAXINSNS) +
            " whole instructions";
    return false;
  }
  // The kernel copies the program; it is only read, through the pointer the
  // uapi declares non-const.
  struct sock_fprog program = {};
  program.len = static_cast<unsigned short>(count);
  program.filter =
      reinterpret_cast<struct sock_filter*>(const_cast<char*>(filter.data()));
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) != 0) {
    return Fail(what, error_number, "loading the seccomp filter");
  }
  return true;
}

bool SetIdentity(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                 std::string* what, int* error_number) {
  if (setgroups(groups.size(), groups.data()) != 0) {
    return Fail(what, error_number, "setting supplementary groups");
  }
  if (setgid(gid) != 0) {
    return Fail(what, error_number, "setting group", gid);
  }
  if (setuid(uid) != 0) {
    return Fail(what, error_number, "setting user", uid);
  }
  return true;
}

}  // namespace

bool MarkDescriptorsCloseOnExec() {
  if (syscall(__NR_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) {
    return true;
  }
  if (errno != ENOSYS && errno != EINVAL) return false;
  // Before Linux 5.11 (no CLOSE_RANGE_CLOEXEC): one descriptor at a time.
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  const int dir_fd = dirfd(dir);
  bool ok = true;
  int saved_errno = 0;
  while (struct dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd < 3 || fd == dir_fd) {
      continue;
    }
    const int flags = fcntl(static_cast<int>(fd), F_GETFD);
    if (flags < 0) continue;  // closed meanwhile
    if ((flags & FD_CLOEXEC) == 0 &&
        fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC) != 0) {
      ok = false;
      saved_errno = errno;
    }
  }
  closedir(dir);
  if (!ok) errno = saved_errno;
  return ok;
}

bool DropPrivileges(const PrivilegeSpec& spec, uid_t uid, gid_t gid,
                    const std::vector<gid_t>& groups, std::string* what,
                    int* error_number) {
  // Before anything else: a later step may leave /proc unreadable.
  const int last_cap = LastCapability();
  if (!MarkDescriptorsCloseOnExec()) {
    return Fail(what, error_number, "marking descriptors close-on-exec");
  }
  if (!spec.enabled) {
    return SetIdentity(uid, gid, groups, what, error_number);
  }

  const uint64_t known =
      last_cap >= 63 ? ~uint64_t{0} : (uint64_t{1} << (last_cap + 1)) - 1;
  const uint64_t keep = spec.capabilities & known;
  for (int cap = 0; cap <= last_cap; ++cap) {
    if ((keep & (uint64_t{1} << cap)) != 0) continue;
    // Already gone (a nested init, an earlier drop): nothing to do, and no
    // CAP_SETPCAP needed.
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 0) continue;
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      // An older kernel than cap_last_cap said cannot happen; CAP_LAST_CAP
      // (the headers') may be above the kernel's when /proc was unreadable.
      if (errno == EINVAL) break;
      return Fail(what, error_number, "dropping capability", cap,
                  " from the bounding set");
    }
  }

  const bool has_filter = !spec.seccomp_filter.empty();
  // Without no_new_privs the kernel loads a filter only for a holder of
  // CAP_SYS_ADMIN, which a task never keeps: load it now, while still root.
  // The filter then sees the steps below (setgroups, setgid, setuid, capset,
  // prctl) and must allow them; the default one (security.h) does.
  if (has_filter && !spec.no_new_privs &&
      !LoadSeccompFilter(spec.seccomp_filter, what, error_number)) {
    return false;
  }

  // A non-root uid loses permitted and effective here (no SECBIT_KEEP_CAPS);
  // root keeps everything until the capset below.
  if (!SetIdentity(uid, gid, groups, what, error_number)) return false;

  struct __user_cap_header_struct header = {};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (uid == 0) {
    // Root keeps what it asked for of what it has: the init may itself run
    // without some capabilities (a container, a user namespace), and capset
    // refuses to add any to the permitted set.
    if (syscall(SYS_capget, &header, data) != 0) {
      return Fail(what, error_number, "reading capabilities");
    }
    uint64_t permitted = 0;
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; ++i) {
      permitted |= uint64_t{data[i].permitted} << (32 * i);
    }
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; ++i) {
      const uint32_t word =
          static_cast<uint32_t>((keep & permitted) >> (32 * i));
      data[i].effective = word;
      data[i].permitted = word;
      data[i].inheritable = word;
    }
  }
  // Also for a non-root user: setuid left the inheritable set as it was.
  if (syscall(SYS_capset, &header, data) != 0) {
    return Fail(what, error_number, "setting capabilities");
  }
  // Before Linux 4.3 there is no ambient set (EINVAL): nothing to clear.
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 &&
      errno != EINVAL) {
    return Fail(what, error_number, "clearing the ambient capabilities");
  }
  if (spec.no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Fail(what, error_number, "setting no_new_privs");
  }
  if (has_filter && spec.no_new_privs &&
      !LoadSeccompFilter(spec.seccomp_filter, what, error_number)) {
    return false;
  }
  return true;
}

}  // namespace berth::driver_common
