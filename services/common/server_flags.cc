#include "services/common/server_flags.h"

#include <grp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "services/common/grpc_server.h"
#include "services/common/unix_socket.h"

ABSL_FLAG(int64_t, max_message_bytes, berth::kDefaultMaxMessageBytes,
          "The largest gRPC message, in bytes, this service takes or sends "
          "on its socket (default 4 MiB); a larger one fails its call with "
          "RESOURCE_EXHAUSTED.");

namespace berth {

absl::StatusOr<int64_t> MaxMessageBytesFlag() {
  constexpr int64_t kMin = 1024;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (max_message_bytes < kMin || max_message_bytes > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_bytes=", max_message_bytes,
                     ": must be between ", kMin, " and ", kMax));
  }
  return max_message_bytes;
}

absl::Status ApplyServerFlags(UnixGrpcServer::Options* options) {
  absl::StatusOr<int64_t> max_message_bytes = MaxMessageBytesFlag();
  if (!max_message_bytes.ok()) return max_message_bytes.status();
  options->max_message_bytes = *max_message_bytes;
  return absl::OkStatus();
}

SocketAccess GroupSocketAccess(const std::string& group_name,
                               std::string* warning) {
  SocketAccess access;  // root and the server's uid, 0600
  if (group_name.empty()) return access;
  std::vector<char> buffer(16384);
  struct group entry;
  struct group* found = nullptr;
  const int err = getgrnam_r(group_name.c_str(), &entry, buffer.data(),
                             buffer.size(), &found);
  if (err != 0 || found == nullptr) {
    *warning = absl::StrCat(
        "group ", group_name,
        (err != 0 ? absl::StrCat(" cannot be looked up (", strerror(err), ")")
                  : std::string(" does not exist")),
        ": only root may call the socket (0600); create the group "
        "(deploy/systemd/berth.sysusers.conf) or choose another "
        "--socket_group");
    return access;
  }
  access.group = found->gr_gid;
  access.mode = 0660;
  return access;
}

absl::Status PrepareRuntimeDirectory(const std::string& dir,
                                     const SocketAccess& access,
                                     std::string* warning) {
  // MakeSocketDirectory works from a socket's path.
  if (absl::Status made =
          MakeSocketDirectory(absl::StrCat(dir, "/x.sock"), access.group);
      !made.ok()) {
    return made;
  }
  if (!access.group.has_value()) return absl::OkStatus();
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", dir));
  }
  if (st.st_gid != *access.group || (st.st_mode & 0010) == 0) {
    char octal[8];
    snprintf(octal, sizeof(octal), "%04o", st.st_mode & 07777);
    *warning = absl::StrCat("the members of gid ", *access.group,
                            " cannot reach sockets in runtime directory ", dir,
                            " (gid ", st.st_gid, ", mode ", octal,
                            "): give it to that group, 0750");
  }
  return absl::OkStatus();
}

}  // namespace berth
