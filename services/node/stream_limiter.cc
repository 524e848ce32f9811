#include "services/node/stream_limiter.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "services/common/peer_credentials.h"

namespace berth::node {

StreamLimiter::Slot& StreamLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    limiter_ = std::exchange(other.limiter_, nullptr);
    client_ = std::move(other.client_);
  }
  return *this;
}

void StreamLimiter::Slot::Release() {
  if (limiter_ == nullptr) return;
  std::exchange(limiter_, nullptr)->Release(client_);
}

StreamLimiter::StreamLimiter(int max_per_client)
    : max_per_client_(std::max(max_per_client, 1)) {}

std::string StreamLimiter::ClientOf(const grpc::ServerContextBase& context) {
  std::string client = context.peer();
  // Who connected (UnixGrpcServer recorded it at accept): named in the
  // error, and a descriptor number reused by a new connection before the
  // old one's streams have ended is not taken for the same client.
  if (std::optional<PeerCredentials> peer = PeerOf(context)) {
    absl::StrAppend(&client, " ", peer->ToString());
  }
  return client;
}

absl::StatusOr<StreamLimiter::Slot> StreamLimiter::Acquire(
    const grpc::ServerContextBase& context, absl::string_view rpc) {
  return AcquireFor(ClientOf(context), rpc);
}

absl::StatusOr<StreamLimiter::Slot> StreamLimiter::AcquireFor(
    const std::string& client, absl::string_view rpc) {
  absl::MutexLock lock(&mu_);
  int& count = open_[client];
  if (count >= max_per_client_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        rpc, ": this client (", client.empty() ? "unnamed" : client, ") has ",
        count,
        " streaming calls open (events, logs, stats, exec, attach, image "
        "pulls and imports), the most berth-node's --max_streams_per_client (",
        max_per_client_, ") allows; end one first"));
  }
  ++count;
  Slot slot;
  slot.limiter_ = this;
  slot.client_ = client;
  return slot;
}

void StreamLimiter::Release(const std::string& client) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(client);
  if (it == open_.end()) return;
  if (--it->second <= 0) open_.erase(it);
}

int StreamLimiter::open() const {
  absl::MutexLock lock(&mu_);
  int total = 0;
  for (const auto& [client, count] : open_) total += count;
  return total;
}

}  // namespace berth::node
