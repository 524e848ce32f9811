#include "services/driver/common/idmap_mount.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
  if (attributes != 0) {
    struct mount_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.attr_set = attributes;
    if (syscall(SYS_mount_setattr, fd, "",
                AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
                sizeof(attr)) != 0) {
      *err = errno;
      *what = "setting the attributes of a bind of " + source;
      close(fd);
      return -1;
    }
  }
  return fd;
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
