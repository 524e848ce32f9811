#include "services/common/unix_socket.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/path.h"
#include "glog/logging.h"

namespace berth {
namespace {

// mkdir -p with mode 0750 for the directories it creates. True if it
// created `dir` itself.
absl::StatusOr<bool> MakeDirectories(const std::string& dir) {
  if (dir.empty() || dir == "/") return false;
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return false;
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not a directory"));
  }
  if (errno != ENOENT) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", dir));
  }
  if (absl::StatusOr<bool> parent = MakeDirectories(base::Dirname(dir));
      !parent.ok()) {
    return parent.status();
  }
  if (mkdir(dir.c_str(), kSocketDirMode) != 0) {
    const int err = errno;
    if (err == EEXIST) {  // made by someone else meanwhile
      if (stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return false;
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
  return true;
}

}  // namespace

absl::Status MakeSocketDirectory(const std::string& socket_path,
                                 std::optional<gid_t> group) {
  if (absl::Status length = CheckSocketPathLength(socket_path); !length.ok()) {
    return length;
  }
  const std::string dir = base::Dirname(socket_path);
  absl::StatusOr<bool> made = MakeDirectories(dir);
  if (!made.ok()) {
    return absl::Status(
        made.status().code(),
        absl::StrCat("cannot prepare the directory of socket ", socket_path,
                     ": ", made.status().message()));
  }
  if (*made && group.has_value() &&
      chown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrCat("cannot give directory ", dir, " to gid ", *group,
                          " (for socket ", socket_path, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckSocketDirectory(const std::string& dir, uid_t owner) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err,
                               absl::StrCat("cannot stat directory ", dir));
  }
  char octal[8];
  snprintf(octal, sizeof(octal), "%04o", st.st_mode & 07777);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not a directory"));
  }
  if (st.st_uid != owner) {
    return absl::FailedPreconditionError(absl::StrCat(
        "runtime directory ", dir, " is owned by uid ", st.st_uid, " (mode ",
        octal, "), not by uid ", owner,
        " which serves in it: refusing to put a socket there (chown ", owner,
        " ", dir, " or choose another --runtime_dir)"));
  }
  if ((st.st_mode & kSocketDirForbiddenBits) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("runtime directory ", dir, " (owner uid ", st.st_uid,
                     ") has mode ", octal,
                     ((st.st_mode & 0007) != 0 ? ", open to others"
                                               : ", writable by its group"),
                     ": refusing to put a socket there (chmod 0750 ", dir,
                     ", or make it with install -d -m 0750)"));
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
