// The flags every berth service that serves a socket takes, defined once
// here (a service's main links :server_flags), and how they reach its
// UnixGrpcServer::Options.
//
//   --max_message_bytes (default 4194304, 4 MiB): the largest message the
//     service takes or sends; a larger one fails its call with
//     RESOURCE_EXHAUSTED.

#ifndef SERVICES_COMMON_SERVER_FLAGS_H_
#define SERVICES_COMMON_SERVER_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/common/grpc_server.h"

ABSL_DECLARE_FLAG(int64_t, max_message_bytes);

namespace berth {

// --max_message_bytes, checked: INVALID_ARGUMENT naming the flag for a value
// out of range (at least 1 KiB, at most 2 GiB - 1).
absl::StatusOr<int64_t> MaxMessageBytesFlag();

// Sets what the shared flags say in `options`; errors as above.
absl::Status ApplyServerFlags(UnixGrpcServer::Options* options);

// Who may call a socket that the members of the group `group_name` may
// call besides root and the server's own uid (berth-node's --socket_group):
// the group, socket mode 0660. An empty name: nobody else, 0600. A group
// that does not exist: the same as an empty name, and *warning says so (the
// server starts: only root may call).
SocketAccess GroupSocketAccess(const std::string& group_name,
                               std::string* warning);

// Makes the runtime directory `dir` for a socket of `access` if it is
// missing: 0750, given to access.group if any (so that the group's members
// can reach the socket). An existing directory is left as it is; if
// access.group cannot search it, *warning says so.
absl::Status PrepareRuntimeDirectory(const std::string& dir,
                                     const SocketAccess& access,
                                     std::string* warning);

}  // namespace berth

#endif  // SERVICES_COMMON_SERVER_FLAGS_H_
