// A shared library that, once loaded into any process, leaves
// /berth/task/preloaded behind (in a sandbox's root: the task's directory).
// sandbox_driver_proxy_test names it in an image's /etc/ld.so.preload: the
// agent must never read that file (it loads in a root of its own).

#include <fcntl.h>
#include <unistd.h>

namespace {

__attribute__((constructor)) void MarkLoaded() {
  const int fd =
      open("/berth/task/preloaded", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}

}  // namespace
