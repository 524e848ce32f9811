// Who is on the other end of a Unix-socket connection: SO_PEERCRED and
// SO_PEERGROUPS, taken when UnixGrpcServer accepts the connection, and the
// lookup of a call's peer by its ServerContext.

#ifndef SERVICES_COMMON_PEER_CREDENTIALS_H_
#define SERVICES_COMMON_PEER_CREDENTIALS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"

namespace berth {

// The credentials of a connected Unix-socket peer as the kernel recorded
// them when it called connect() (its effective uid and gid), in the user
// namespace of the process that asked (a uid that does not map there shows
// as the overflow uid, normally 65534).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  // Its supplementary groups (SO_PEERGROUPS); empty if the kernel has none
  // to tell (before Linux 4.13).
  std::vector<gid_t> groups;

  // Whether `g` is the peer's primary group or one of its supplementary ones.
  bool InGroup(gid_t g) const;
  // "uid U (gid G, pid P)".
  std::string ToString() const;
};

// Reads the credentials of the peer of the connected Unix socket `fd`.
// Errors name the descriptor.
absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd);

// The peer of the connection a call came in on, if it came through a
// UnixGrpcServer of this process (which records each connection's peer when
// it accepts it); nullopt for any other call (an in-process channel, a
// server that listens by itself). Thread-safe; cheap (a map look-up).
std::optional<PeerCredentials> PeerOf(const grpc::ServerContextBase& context);

namespace internal {

// Records `peer` for the connection on descriptor `fd`, about to be handed
// to gRPC (whose peer string for it is "fd:<fd>"). Replaces what an earlier
// connection on the same descriptor number left.
void RecordConnectionPeer(int fd, const PeerCredentials& peer);

// The descriptor of a gRPC peer string "fd:<fd>"; nullopt for any other.
std::optional<int> FdOfPeerString(const std::string& peer);

}  // namespace internal
}  // namespace berth

#endif  // SERVICES_COMMON_PEER_CREDENTIALS_H_
