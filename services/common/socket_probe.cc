// CheckSocketPathLength, ConnectUnixSocket and ProbeSocketPath, apart from the
// rest of unix_socket.cc: they log nothing, so that a client linking only them
// (the statically linked `berth` command line) does not pull in glog.
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
#include "absl/strings/string_view.h"
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

absl::StatusOr<base::UniqueFd> ConnectUnixSocket(
    const std::string& socket_path) {
  if (absl::Status length = CheckSocketPathLength(socket_path); !length.ok()) {
    return length;
  }
  // Errors other than connect()'s own three, with a code none of theirs.
  auto other_error = [&](int err, absl::string_view what) {
    absl::Status status =
        absl::ErrnoToStatus(err, absl::StrCat(what, " ", socket_path));
    switch (status.code()) {
      case absl::StatusCode::kNotFound:
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kResourceExhausted:
        return absl::UnknownError(status.message());
      default:
        return status;
    }
  };
  base::UniqueFd fd(
      socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return other_error(errno, "cannot create a socket to connect to");
  }
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  for (;;) {
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr),
                sizeof(addr)) == 0) {
      return fd;
    }
    const int err = errno;
    switch (err) {
      case EINTR:
        continue;
      case EISCONN:  // an interrupted attempt connected after all
        return fd;
      case ENOENT:
        return absl::NotFoundError(absl::StrCat(
            "cannot connect to socket ", socket_path, ": nothing is there"));
      case ECONNREFUSED:
        return absl::UnavailableError(
            absl::StrCat("cannot connect to socket ", socket_path,
                         ": nobody listens on it (connection refused)"));
      case EAGAIN:
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot connect to socket ", socket_path,
                         ": its listener's backlog is full"));
      default:
        return other_error(err, "cannot connect to socket");
    }
  }
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

  absl::StatusOr<base::UniqueFd> connected = ConnectUnixSocket(socket_path);
  switch (connected.status().code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kResourceExhausted:  // someone listens
      return SocketPathState::kLive;
    case absl::StatusCode::kUnavailable:
      return SocketPathState::kStale;
    case absl::StatusCode::kNotFound:  // removed between lstat and connect
      return SocketPathState::kAbsent;
    default:
      return connected.status();
  }
}

}  // namespace berth
