#include "services/common/unix_socket.h"

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
#include "base/path.h"
#include "glog/logging.h"

namespace berth {
namespace {

// mkdir -p with mode 0750 for the directories it creates.
absl::Status MakeDirectories(const std::string& dir) {
  if (dir.empty() || dir == "/") return absl::OkStatus();
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not a directory"));
  }
  if (errno != ENOENT) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", dir));
  }
  if (absl::Status parent = MakeDirectories(base::Dirname(dir)); !parent.ok()) {
    return parent;
  }
  if (mkdir(dir.c_str(), kSocketDirMode) != 0) {
    const int err = errno;
    if (err == EEXIST) {  // made by someone else meanwhile
      if (stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        return absl::OkStatus();
      }
      return absl::FailedPreconditionError(
          absl::StrCat(dir, " exists and is not a directory"));
    }
    return absl::ErrnoToStatus(err,
                               absl::StrCat("cannot create directory ", dir));
  }
  // mkdir's mode is filtered through the umask; ours is not meant to be.
  if (chmod(dir.c_str(), kSocketDirMode) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err,
                               absl::StrCat("cannot chmod directory ", dir));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeSocketDirectory(const std::string& socket_path) {
  if (absl::Status length = CheckSocketPathLength(socket_path); !length.ok()) {
    return length;
  }
  if (absl::Status dirs = MakeDirectories(base::Dirname(socket_path));
      !dirs.ok()) {
    return absl::Status(dirs.code(),
                        absl::StrCat("cannot prepare the directory of socket ",
                                     socket_path, ": ", dirs.message()));
  }
  return absl::OkStatus();
}

absl::Status PrepareSocketPath(const std::string& socket_path) {
  if (absl::Status dir = MakeSocketDirectory(socket_path); !dir.ok()) {
    return dir;
  }
  absl::StatusOr<SocketPathState> state = ProbeSocketPath(socket_path);
  if (!state.ok()) return state.status();
  switch (*state) {
    case SocketPathState::kAbsent:
      return absl::OkStatus();
    case SocketPathState::kLive:
      return absl::FailedPreconditionError(absl::StrCat(
          "socket ", socket_path, " is in use by another process"));
    case SocketPathState::kNotSocket:
      return absl::FailedPreconditionError(absl::StrCat(
          socket_path, " exists and is not a socket; not removing it"));
    case SocketPathState::kStale:
      if (unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
        const int err = errno;
        return absl::ErrnoToStatus(
            err, absl::StrCat("cannot remove stale socket ", socket_path));
      }
      LOG(INFO) << "removed stale socket " << socket_path
                << " (nobody was listening on it)";
      return absl::OkStatus();
  }
  return absl::InternalError("unreachable");
}

}  // namespace berth
