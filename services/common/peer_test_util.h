// For the tests of who may call a berth socket (testonly): a connection made
// by a process of another uid, and a call over it.

#ifndef SERVICES_COMMON_PEER_TEST_UTIL_H_
#define SERVICES_COMMON_PEER_TEST_UTIL_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"

namespace berth {
namespace testing {

// Who connects.
struct Caller {
  uid_t uid = 65534;  // nobody
  gid_t gid = 65534;  // nogroup
  // Its supplementary groups (none unless given).
  std::vector<gid_t> groups;
  // Keep CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so that the socket file's
  // and its directories' permissions do not stop the connect(): what is
  // tested is then the server's own check of the peer. False: an ordinary
  // process of that uid, which file permissions alone may stop.
  bool bypass_file_permissions = true;
};

// Connects to the Unix socket `socket_path` as `caller`: a forked child
// takes the caller's groups and uids (it must run as root), connects, and
// hands the connected socket back (the kernel keeps the child's credentials
// for the connection, which the server reads with SO_PEERCRED). The child
// does nothing but system calls: no gRPC in a forked child. The connect()'s
// error comes back as a status (errno's code, e.g. PERMISSION_DENIED for
// EACCES) naming the path.
absl::StatusOr<base::UniqueFd> ConnectAs(const std::string& socket_path,
                                         const Caller& caller);

// A gRPC channel over a connected socket (which it takes).
std::shared_ptr<grpc::Channel> ChannelOverConnection(base::UniqueFd fd);

// A unary call of `method` with raw request bytes, within `timeout`; the
// response's bytes into *response if the call succeeds and it is not null.
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method, const std::string& request,
                          std::string* response = nullptr,
                          absl::Duration timeout = absl::Seconds(30));

// ConnectAs, then grpc.health.v1.Health/Check (service "") over the
// connection: OK if the server let the caller in (and serves health), the
// server's PERMISSION_DENIED if not. A failed connect() is UNAVAILABLE with
// its error.
grpc::Status CallHealthAs(const std::string& socket_path, const Caller& caller);

}  // namespace testing
}  // namespace berth

#endif  // SERVICES_COMMON_PEER_TEST_UTIL_H_
