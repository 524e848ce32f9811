#include "base/io.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"

namespace berth::base {

absl::Status WriteAll(int fd, absl::string_view data, absl::string_view what) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      pollfd pfd = {fd, POLLOUT, 0};
      (void)poll(&pfd, 1, -1);
      continue;
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("writing ", what));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAll(int fd, absl::string_view what,
                                    size_t max_bytes) {
  std::string content;
  char buffer[64 * 1024];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      if (content.size() + static_cast<size_t>(n) > max_bytes) {
        return absl::OutOfRangeError(
            absl::StrCat(what, " holds more than ", max_bytes, " bytes"));
      }
      content.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return content;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      pollfd pfd = {fd, POLLIN, 0};
      (void)poll(&pfd, 1, -1);
      continue;
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("reading ", what));
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  return ReadAll(fd.get(), path, max_bytes);
}

absl::Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("setting O_NONBLOCK on descriptor ", fd));
  }
  return absl::OkStatus();
}

}  // namespace berth::base
