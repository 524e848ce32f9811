#include "services/driver/common/idmap_mount.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace berth::driver_common {

bool IdmapMount(int mount_fd, int userns_fd, bool recursive, std::string* what,
                int* err) {
  struct mount_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  const unsigned int flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
  if (syscall(SYS_mount_setattr, mount_fd, "", flags, &attr, sizeof(attr)) !=
      0) {
    *err = errno;
    *what = "idmapping a mount to the task's user namespace";
    return false;
  }
  return true;
}

int OpenBindTree(const std::string& source, uint64_t attributes, bool recursive,
                 std::string* what, int* err, int userns_fd) {
  const unsigned int flags =
      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  const int fd =
      static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, source.c_str(), flags));
  if (fd < 0) {
    *err = errno;
    *what = "cloning the mount of " + source;
    return -1;
  }
  if (attributes != 0 || userns_fd >= 0) {
    struct mount_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.attr_set = attributes;
    if (userns_fd >= 0) {
      attr.attr_set |= MOUNT_ATTR_IDMAP;
      attr.userns_fd = static_cast<uint64_t>(userns_fd);
    }
    if (syscall(SYS_mount_setattr, fd, "",
                AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
                sizeof(attr)) != 0) {
      *err = errno;
      *what = std::string(userns_fd >= 0 ? "idmapping a bind of "
                                         : "setting the attributes of a bind "
                                           "of ") +
              source;
      close(fd);
      return -1;
    }
  }
  return fd;
}

namespace {

// The holder of MakeUserNamespace's namespace: it shares the caller's
// memory (CLONE_VM), so it touches nothing, errno included, and waits with
// every signal blocked for the SIGKILL that ends it.
int HoldNamespace(void*) {
  while (true) syscall(SYS_pause);
  return 0;
}

// Writes `data` to the existing file `path` in one write.
bool WriteOnce(const std::string& path, const std::string& data) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok =
      write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  const int saved = errno;
  close(fd);
  errno = saved;
  return ok;
}

}  // namespace

int MakeUserNamespace(const std::string& uid_map, const std::string& gid_map,
                      std::string* what, int* err) {
  constexpr size_t kStackSize = 16 * 1024;
  void* stack = mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    *err = errno;
    *what = "mmap";
    return -1;
  }
  // No copy of the (large, threaded) caller: CLONE_VM, and no exit signal,
  // so that no one waiting for any child but __WALL reaps it.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  int pidfd = -1;
  const pid_t pid =
      clone(HoldNamespace, static_cast<char*>(stack) + kStackSize,
            CLONE_NEWUSER | CLONE_VM | CLONE_PIDFD, nullptr, &pidfd);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) {
    munmap(stack, kStackSize);
    *err = clone_errno;
    *what = "making a user namespace for idmapped mounts (clone)";
    return -1;
  }
  const std::string proc = "/proc/" + std::to_string(pid);
  int userns_fd = -1;
  if (!WriteOnce(proc + "/uid_map", uid_map)) {
    *err = errno;
    *what = "writing the uid map \"" + uid_map + "\" of a user namespace";
  } else if (!WriteOnce(proc + "/gid_map", gid_map)) {
    *err = errno;
    *what = "writing the gid map \"" + gid_map + "\" of a user namespace";
  } else {
    userns_fd = open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
    if (userns_fd < 0) {
      *err = errno;
      *what = "opening " + proc + "/ns/user";
    }
  }
  syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  siginfo_t info;
  while (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info,
                WEXITED | __WALL) != 0 &&
         errno == EINTR) {
  }
  close(pidfd);
  // Only once it is gone: it ran on this stack.
  munmap(stack, kStackSize);
  return userns_fd;
}

int OpenIdmappedTree(const std::string& source, int userns_fd, bool recursive,
                     std::string* what, int* err) {
  const unsigned int flags =
      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  const int fd =
      static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, source.c_str(), flags));
  if (fd < 0) {
    *err = errno;
    *what = "cloning the mount of " + source;
    return -1;
  }
  if (!IdmapMount(fd, userns_fd, recursive, what, err)) {
    *what += " (" + source + ")";
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace berth::driver_common
