// CheckSocketPathLength and ProbeSocketPath, apart from the rest of
// unix_socket.cc: they log nothing, so that a client linking only them (the
// statically linked `berth` command line) does not pull in glog.
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "services/common/unix_socket.h"

namespace berth {

static_assert(sizeof(sockaddr_un::sun_path) == kMaxSocketPathLength + 1,
              "kMaxSocketPathLength must match sockaddr_un.sun_path");

absl::Status CheckSocketPathLength(const std::string& socket_path) {
  if (socket_path.empty()) {
    return absl::InvalidArgumentError("socket path is empty");
  }
  if (socket_path.size() > kMaxSocketPathLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket path ", socket_path, " is ", socket_path.size(),
                     " bytes long; a Unix socket path can be at most ",
                     kMaxSocketPathLength, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SocketPathState> ProbeSocketPath(
    const std::string& socket_path) {
  if (absl::Status length = CheckSocketPathLength(socket_path); !length.ok()) {
    return length;
  }
  struct stat st;
  if (lstat(socket_path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return SocketPathState::kAbsent;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", socket_path));
  }
  if (!S_ISSOCK(st.st_mode)) return SocketPathState::kNotSocket;

  base::UniqueFd fd(
      socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrCat("cannot create a socket to probe ", socket_path));
  }
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  int err = 0;
  while (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr),
                 sizeof(addr)) != 0) {
    err = errno;
    if (err != EINTR) break;
    err = 0;
  }
  switch (err) {
    case 0:
    case EAGAIN:  // the listen backlog is full: someone listens
    case EINPROGRESS:
      return SocketPathState::kLive;
    case ECONNREFUSED:
      return SocketPathState::kStale;
    case ENOENT:  // removed between lstat and connect
      return SocketPathState::kAbsent;
    default:
      return absl::ErrnoToStatus(
          err, absl::StrCat("cannot probe socket ", socket_path));
  }
}

}  // namespace berth
