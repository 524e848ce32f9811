#include "services/common/peer_credentials.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

namespace berth {
namespace {

ABSL_CONST_INIT absl::Mutex registry_mu(absl::kConstInit);

// Descriptor -> the peer of the connection last accepted on it. A
// descriptor's entry is replaced when its number is reused for a new
// connection, so the map never holds more entries than descriptors were
// ever open at once.
absl::flat_hash_map<int, PeerCredentials>& Registry()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu) {
  static auto* const registry = new absl::flat_hash_map<int, PeerCredentials>;
  return *registry;
}

}  // namespace

bool PeerCredentials::InGroup(gid_t g) const {
  return gid == g || std::find(groups.begin(), groups.end(), g) != groups.end();
}

std::string PeerCredentials::ToString() const {
  return absl::StrCat("uid ", uid, " (gid ", gid, ", pid ", pid, ")");
}

absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd) {
  struct ucred cred = {};
  socklen_t length = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrCat("SO_PEERCRED of connection (fd ", fd, ")"));
  }
  PeerCredentials peer;
  peer.pid = cred.pid;
  peer.uid = cred.uid;
  peer.gid = cred.gid;
  // SO_PEERGROUPS says how much room it needs (ERANGE) when given too little.
  std::vector<gid_t> groups(16);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t size = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &size) == 0) {
      groups.resize(size / sizeof(gid_t));
      peer.groups = std::move(groups);
      return peer;
    }
    const int err = errno;
    if (err == ENOPROTOOPT) return peer;  // an old kernel: primary group only
    if (err != ERANGE) {
      return absl::ErrnoToStatus(
          err, absl::StrCat("SO_PEERGROUPS of connection (fd ", fd, ")"));
    }
    groups.resize(std::max<size_t>(size / sizeof(gid_t), groups.size() * 2));
  }
  return absl::InternalError(absl::StrCat("SO_PEERGROUPS of connection (fd ",
                                          fd, "): the list keeps growing"));
}

std::optional<PeerCredentials> PeerOf(const grpc::ServerContextBase& context) {
  std::optional<int> fd = internal::FdOfPeerString(context.peer());
  if (!fd.has_value()) return std::nullopt;
  absl::MutexLock lock(&registry_mu);
  auto it = Registry().find(*fd);
  if (it == Registry().end()) return std::nullopt;
  return it->second;
}

namespace internal {

void RecordConnectionPeer(int fd, const PeerCredentials& peer) {
  absl::MutexLock lock(&registry_mu);
  Registry()[fd] = peer;
}

std::optional<int> FdOfPeerString(const std::string& peer) {
  constexpr absl::string_view kPrefix = "fd:";
  if (!absl::StartsWith(peer, kPrefix)) return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(absl::string_view(peer).substr(kPrefix.size()), &fd) ||
      fd < 0) {
    return std::nullopt;
  }
  return fd;
}

}  // namespace internal
}  // namespace berth
