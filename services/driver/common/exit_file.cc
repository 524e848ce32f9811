#include "services/driver/common/exit_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace berth::driver_common {

bool WriteExitRecordAt(int dir_fd, const std::string& name,
                       const ExitRecord& record) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." ||
      name == "..") {
    errno = EINVAL;
    return false;
  }
  const std::string temporary = name + ".tmp";
  // Whatever is at NAME.tmp (a file left by a crash, or a planted link) is
  // removed itself, never followed.
  if (unlinkat(dir_fd, temporary.c_str(), 0) != 0 && errno != ENOENT) {
    return false;
  }
  const int fd =
      openat(dir_fd, temporary.c_str(),
             O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const std::string data = EncodeExitRecord(record);
  size_t written = 0;
  bool ok = true;
  while (ok && written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      ok = false;
      break;
    }
    written += static_cast<size_t>(n);
  }
  // Not fsync'd: the record must survive a restart of the driver or the
  // node (the page cache does), not of the host, which ends the task and
  // its init anyway; an fsync here cost up to 9 ms at the end of every run.
  int error = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && renameat(dir_fd, temporary.c_str(), dir_fd, name.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    unlinkat(dir_fd, temporary.c_str(), 0);
    errno = error;
  }
  return ok;
}

}  // namespace berth::driver_common
