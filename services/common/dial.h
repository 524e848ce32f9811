// Connecting to a berth service on a Unix socket.

#ifndef SERVICES_COMMON_DIAL_H_
#define SERVICES_COMMON_DIAL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace berth {

// An insecure channel to "unix:" + socket_path, once it is connected: waits
// up to `timeout` for the connection (a socket that appears meanwhile is
// used). Errors:
// - INVALID_ARGUMENT naming the path if it is empty or too long for a socket;
// - UNAVAILABLE "cannot connect to PATH within 2s: REASON", where REASON is
//   "no such socket" if nothing is at the path, "not a socket", "connection
//   refused (a stale socket: nobody listens on it)", or what else is known.
absl::StatusOr<std::shared_ptr<grpc::Channel>> DialUnix(
    const std::string& socket_path, absl::Duration timeout);

}  // namespace berth

#endif  // SERVICES_COMMON_DIAL_H_
