// A gRPC server on a Unix socket, the way every berth service serves.

#ifndef SERVICES_COMMON_GRPC_SERVER_H_
#define SERVICES_COMMON_GRPC_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server.h"
#include "services/common/peer_credentials.h"
#include "services/common/refusal_log.h"

namespace berth {

// The message size a berth server takes and sends unless told otherwise:
// 4 MiB each way (--max_message_bytes).
inline constexpr int64_t kDefaultMaxMessageBytes = 4 << 20;

// Who may call a UnixGrpcServer, and what its socket file looks like. Root
// (uid 0) and the server's own effective uid may always call.
struct SocketAccess {
  // Further uids that may call.
  std::vector<uid_t> uids;
  // A group whose members may call (the peer's primary group or one of its
  // supplementary groups); the socket file is given to it. nullopt: none.
  std::optional<gid_t> group;
  // The socket file's permission bits.
  mode_t mode = 0600;

  // Whether `peer` may call a server running as `server_uid`.
  bool Allows(const PeerCredentials& peer, uid_t server_uid) const;
  // Who may call, for messages: "root, uid 1000, group berth (gid 990)".
  std::string Describe(uid_t server_uid) const;
};

// Serves gRPC services on one Unix socket, with the standard health service
// (grpc.health.v1.Health, service "" SERVING) unless told otherwise.
//
//   UnixGrpcServer::Options options;
//   options.socket_path = "/run/berth/stats.sock";
//   options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
//   options.services = {&stats_service};
//   absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
//       UnixGrpcServer::Start(options);
//   if (!server.ok()) return server.status();
//   ...
//   (*server)->Shutdown(absl::Seconds(5));
//
// The server binds and listens on the socket itself and accepts each
// connection on a thread of its own, where it reads the peer's credentials
// (SO_PEERCRED, SO_PEERGROUPS: see PeerOf in peer_credentials.h for a
// call's). A peer that `access` allows is handed to gRPC; any other is
// handed to an internal server that answers every call on that connection
// with PERMISSION_DENIED "uid U may not call PATH (allowed: ...)", so the
// services never see its calls and its client gets a clear error rather than
// a closed connection. A uid's first refused connection is logged (WARNING)
// with its pid and who is allowed; its further ones only as a count, at most
// once a minute (RefusalLog), so that a peer connecting in a loop cannot
// flood the log.
//
// Thread-safe.
class UnixGrpcServer {
 public:
  struct Options {
    // Where to serve. Its directory is created (0750) if missing; an
    // existing one must belong to the server's effective uid, give others no
    // permission and its group no write (0750 or 0700; CheckSocketDirectory
    // in unix_socket.h). A stale socket there is removed, a live one makes
    // Start fail (see PrepareSocketPath). At most kMaxSocketPathLength bytes.
    std::string socket_path;
    // The services to serve. Not owned: they must outlive the server.
    std::vector<grpc::Service*> services;
    // Serve grpc.health.v1.Health: "" is SERVING until Shutdown begins.
    bool enable_health = true;
    // Who may call; by default root and the server's own uid, socket 0600.
    SocketAccess access;
    // The largest message taken or sent, in bytes (gRPC fails a call whose
    // message is larger with RESOURCE_EXHAUSTED).
    int64_t max_message_bytes = kDefaultMaxMessageBytes;
  };

  // Prepares the socket path, binds and listens on it (the socket file
  // given access.mode and access.group), and starts serving. On failure
  // nothing it made is left behind (a directory it created stays) and the
  // error names the socket path.
  //
  // Berth servers starting at the same time in the same directory are
  // serialized (flock on the directory, from the check of the path until the
  // socket listens), so that one of two servers started on one path fails
  // instead of taking the other's socket.
  static absl::StatusOr<std::unique_ptr<UnixGrpcServer>> Start(
      const Options& options);

  // Shuts down with no grace period.
  ~UnixGrpcServer();

  UnixGrpcServer(const UnixGrpcServer&) = delete;
  UnixGrpcServer& operator=(const UnixGrpcServer&) = delete;

  // Stops serving: first marks every health status NOT_SERVING (Watch
  // streams get the update), then stops taking new calls, gives calls in
  // flight `grace` to finish and cancels those still running (handlers
  // should watch ServerContext::IsCancelled(); this waits for every handler
  // to return). The listening socket is closed, and its file removed if it
  // is still the one this server made, as soon as the health status is
  // NOT_SERVING. Only the first call does anything; a call that comes while
  // another is shutting down returns when that one is done.
  //
  // gRPC 1.51's health service does not end its Watch streams when the
  // server shuts down: an open Watch counts as a call in flight and holds
  // Shutdown for the whole `grace` unless its client cancels it. A client
  // watching health should cancel its Watch once it sees NOT_SERVING.
  void Shutdown(absl::Duration grace) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until the server has shut down (Shutdown, from another thread).
  void Wait();

  const std::string& socket_path() const { return socket_path_; }

 private:
  UnixGrpcServer(const Options& options, std::unique_ptr<grpc::Server> server,
                 int listen_fd, int wake_fd, dev_t socket_dev,
                 ino_t socket_ino);

  // The accept thread: hands each connection to server_ or, if its peer is
  // not allowed, to the deny server (made on the first such peer); logs the
  // refusals' counts when they are due.
  void AcceptLoop();
  void HandOver(int fd);
  // Closes the listening socket and removes its file if it is ours.
  void StopListening();

  const std::string socket_path_;
  const SocketAccess access_;
  const int64_t max_message_bytes_;
  const uid_t server_uid_;
  const std::unique_ptr<grpc::Server> server_;
  // Owned; closed by StopListening (listen_fd_) and the destructor.
  const int listen_fd_;
  // An eventfd: written to stop the accept thread.
  const int wake_fd_;
  // Identify the socket file this server made, so that Shutdown never removes
  // one somebody else put at the path since.
  const dev_t socket_dev_;
  const ino_t socket_ino_;

  // Only the accept thread touches these until it has been joined.
  std::unique_ptr<grpc::Server> deny_server_;
  std::unique_ptr<grpc::CallbackGenericService> deny_service_;
  RefusalLog refusals_;
  std::thread accept_thread_;

  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace berth

#endif  // SERVICES_COMMON_GRPC_SERVER_H_
