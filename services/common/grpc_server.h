// A gRPC server on a Unix socket, the way every berth service serves.

#ifndef SERVICES_COMMON_GRPC_SERVER_H_
#define SERVICES_COMMON_GRPC_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server.h"

namespace berth {

// Serves gRPC services on one Unix socket, with the standard health service
// (grpc.health.v1.Health, service "" SERVING) unless told otherwise.
//
//   UnixGrpcServer::Options options;
//   options.socket_path = "/run/berth/stats.sock";
//   options.services = {&stats_service};
//   absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
//       UnixGrpcServer::Start(options);
//   if (!server.ok()) return server.status();
//   ...
//   (*server)->Shutdown(absl::Seconds(5));
//
// Thread-safe.
class UnixGrpcServer {
 public:
  struct Options {
    // Where to serve. Its directory is created (0750) if missing; a stale
    // socket there is removed, a live one makes Start fail (see
    // PrepareSocketPath). At most kMaxSocketPathLength bytes.
    std::string socket_path;
    // The services to serve. Not owned: they must outlive the server.
    std::vector<grpc::Service*> services;
    // Serve grpc.health.v1.Health: "" is SERVING until Shutdown begins.
    bool enable_health = true;
  };

  // Prepares the socket path, starts serving on "unix:" + socket_path and
  // makes the socket 0660. On failure nothing it made is left behind (a
  // directory it created stays) and the error names the socket path.
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
  // to return). Finally removes the socket file if it is still the one this
  // server made. Only the first call does anything; a call that comes while
  // another is shutting down returns when that one is done.
  //
  // gRPC itself unlinks the socket path when its listener closes, early in
  // shutdown: do not start a replacement on the same path before
  // this server's Shutdown has returned, or gRPC may unlink the
  // replacement's socket.
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
  UnixGrpcServer(std::string socket_path, std::unique_ptr<grpc::Server> server,
                 dev_t socket_dev, ino_t socket_ino);

  const std::string socket_path_;
  const std::unique_ptr<grpc::Server> server_;
  // Identify the socket file this server made, so that Shutdown never removes
  // one somebody else put at the path since.
  const dev_t socket_dev_;
  const ino_t socket_ino_;

  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace berth

#endif  // SERVICES_COMMON_GRPC_SERVER_H_
