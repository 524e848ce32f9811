// Unix socket paths: checking them, probing what is at them, and preparing
// one for a server to bind.
//
// berth's sockets live in one runtime directory (default /run/berth) that is
// 0750; a stale socket is removed when a server starts, a live one is never
// taken over.

#ifndef SERVICES_COMMON_UNIX_SOCKET_H_
#define SERVICES_COMMON_UNIX_SOCKET_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/unique_fd.h"

namespace berth {

// The longest path a Unix socket can have: sockaddr_un.sun_path is 108 bytes,
// one of which is the terminating NUL.
inline constexpr size_t kMaxSocketPathLength = 107;

// The mode of the directories PrepareSocketPath creates.
inline constexpr mode_t kSocketDirMode = 0750;

// The mode bits a runtime directory must not have (CheckSocketDirectory):
// any permission for others, and write for its group.
inline constexpr mode_t kSocketDirForbiddenBits = 0027;

// INVALID_ARGUMENT naming the path (and its length when it is too long) if
// `socket_path` is empty or longer than kMaxSocketPathLength bytes.
absl::Status CheckSocketPathLength(const std::string& socket_path);

// Connects a new stream socket (non-blocking, close-on-exec) to the Unix
// socket at `socket_path`, without waiting for a listener whose backlog is
// full. Errors name the path; their codes tell what is there:
// - INVALID_ARGUMENT: the path is empty or too long (CheckSocketPathLength);
// - NOT_FOUND: nothing is at the path (ENOENT);
// - UNAVAILABLE: nobody listens on it (ECONNREFUSED: a stale socket, or a
//   file that is not a socket);
// - RESOURCE_EXHAUSTED: someone listens, but its backlog is full (EAGAIN);
// - any other error has its errno's code (absl::ErrnoToStatus, e.g.
//   PERMISSION_DENIED for EACCES), or UNKNOWN where that code would be one
//   of the three above (e.g. EMFILE from socket(), not a full backlog).
absl::StatusOr<base::UniqueFd> ConnectUnixSocket(
    const std::string& socket_path);

// What is at a socket path. Probing never changes anything at the path.
enum class SocketPathState {
  kAbsent,     // nothing is there
  kLive,       // a socket that accepted a connection: someone serves on it
  kStale,      // a socket whose connect() was refused: nobody listens on it
  kNotSocket,  // a file, directory, symlink (not followed), ... but no socket
};

// Finds out what is at `socket_path` (lstat, then ConnectUnixSocket if it is
// a socket). A socket whose listen backlog is full counts as live.
// Errors (e.g. PERMISSION_DENIED from stat or connect) name the path.
absl::StatusOr<SocketPathState> ProbeSocketPath(const std::string& socket_path);

// Creates the directory of `socket_path` and any missing ancestors, each with
// mode 0750 (set explicitly, whatever the umask). Directories that already
// exist are left as they are. If `group` is given and this call creates the
// socket's directory itself, that directory is given to the group (so that
// its members may reach a socket in it). Checks the path's length first (as
// CheckSocketPathLength) and creates nothing for a bad path.
absl::Status MakeSocketDirectory(const std::string& socket_path,
                                 std::optional<gid_t> group = std::nullopt);

// Checks that the directory `dir` (a socket's own directory: the runtime
// directory; its ancestors are not checked) can be trusted with a server's
// socket: it is a directory (symbolic links are followed) owned by `owner`
// (normally the server's effective uid) with no permission for others and
// not writable by its group (mode & kSocketDirForbiddenBits is 0: 0750 and
// 0700 pass, 0755, 0770, 0701 do not). FAILED_PRECONDITION naming the
// directory, its owner and its mode, and the chmod that fixes it, otherwise.
absl::Status CheckSocketDirectory(const std::string& dir, uid_t owner);

// Makes `socket_path` ready for a server to bind:
// - rejects an empty path or one longer than kMaxSocketPathLength bytes
//   (INVALID_ARGUMENT naming the path and its length), before touching
//   anything;
// - creates the parent directory as MakeSocketDirectory does (0750 for the
//   directories it creates; existing ones keep their mode, which is the
//   business of whoever made them);
// - if a stale socket is at the path, unlinks it and logs that once (INFO);
// - if a live socket is at the path, fails with FAILED_PRECONDITION
//   "socket PATH is in use by another process" and leaves it in place;
// - if anything other than a socket is at the path, fails with
//   FAILED_PRECONDITION naming the path, and leaves it in place.
//
// This only checks; it does not reserve the path. A server that binds after
// it (UnixGrpcServer::Start) must hold off competitors itself.
absl::Status PrepareSocketPath(const std::string& socket_path);

}  // namespace berth

#endif  // SERVICES_COMMON_UNIX_SOCKET_H_
