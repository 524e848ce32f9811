// How many streaming calls one client of node.sock may hold open at once
// (berth-node's --max_streams_per_client): each holds a thread (or two) of
// the node's, and exec, attach and stats one of a driver's too. A client is
// its connection: the call's peer as gRPC names it (UnixGrpcServer hands
// gRPC each accepted connection by its descriptor, "fd:N") with the
// credentials UnixGrpcServer took when it accepted it (PeerOf).

#ifndef SERVICES_NODE_STREAM_LIMITER_H_
#define SERVICES_NODE_STREAM_LIMITER_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"

namespace berth::node {

// Thread-safe.
class StreamLimiter {
 public:
  // The place of one open stream; released when destroyed (or Release).
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept { *this = std::move(other); }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }

    void Release();

   private:
    friend class StreamLimiter;
    StreamLimiter* limiter_ = nullptr;
    std::string client_;
  };

  // `max_per_client` below 1 means 1.
  explicit StreamLimiter(int max_per_client);

  // A place for one more streaming call of `context`'s client:
  // RESOURCE_EXHAUSTED naming the client, `rpc`, the flag and its value
  // when the client holds max_per_client already.
  absl::StatusOr<Slot> Acquire(const grpc::ServerContextBase& context,
                               absl::string_view rpc) ABSL_LOCKS_EXCLUDED(mu_);
  // The same, for a client named `client` (tests).
  absl::StatusOr<Slot> AcquireFor(const std::string& client,
                                  absl::string_view rpc)
      ABSL_LOCKS_EXCLUDED(mu_);

  // How a call's client is known: its connection as gRPC names it ("fd:N")
  // and, when UnixGrpcServer recorded it, who connected ("uid U (gid G, pid
  // P)").
  static std::string ClientOf(const grpc::ServerContextBase& context);

  // Streams open now, of every client.
  int open() const ABSL_LOCKS_EXCLUDED(mu_);
  int max_per_client() const { return max_per_client_; }

 private:
  void Release(const std::string& client) ABSL_LOCKS_EXCLUDED(mu_);

  const int max_per_client_;
  mutable absl::Mutex mu_;
  std::map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::node

#endif  // SERVICES_NODE_STREAM_LIMITER_H_
