// Connecting to a berth service on a Unix socket.

#ifndef SERVICES_COMMON_DIAL_H_
#define SERVICES_COMMON_DIAL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace berth {

// The arguments of a channel to a berth service on a Unix socket: a
// subchannel pool of its own (with gRPC's global pool, a new channel to a
// socket whose server was killed and started again reuses the dead
// connection, and its first calls fail with "Broken pipe"), and reconnection
// attempts at most 1 s apart (a local service restarts in less; gRPC's
// default backoff grows to 2 minutes while it is away), and an explicit
// largest message each way, kChannelMaxMessageBytes (gRPC's defaults: 4 MiB
// received, no bound on what is sent).
grpc::ChannelArguments UnixChannelArguments();

// The largest message a channel of UnixChannelArguments sends or takes: as
// large as a berth server takes by default (4 MiB). A larger one fails its
// call with RESOURCE_EXHAUSTED naming both sizes.
inline constexpr int kChannelMaxMessageBytes = 4 << 20;

// Why a connection to `socket_path` did not come about, as far as a look at
// the path tells: "no such socket", "not a socket", "connection refused (a
// stale socket: nobody listens on it)", ...
std::string WhyNotConnected(const std::string& socket_path);

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
