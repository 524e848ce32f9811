#include "services/agent/boot.h"

#include <unistd.h>

namespace berth::agent {

bool EnterRootFromDescriptor(int fd) {
  // chroot(".") from a working directory outside the current root: the
  // directory the descriptor names becomes the root, whatever the current
  // one is.
  if (fchdir(fd) != 0 || chroot(".") != 0 || chdir("/") != 0) return false;
  close(fd);
  return true;
}

}  // namespace berth::agent
