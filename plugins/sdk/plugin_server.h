// A Driver served on a Unix socket: berth.plugin.v1.PluginService,
// berth.driver.v1.DriverService and grpc.health.v1.Health (services "" and
// "plugin" SERVING while it serves). Serve() (serve.h) is this plus the
// launch handshake and signals; tests use it directly.

#ifndef PLUGINS_SDK_PLUGIN_SERVER_H_
#define PLUGINS_SDK_PLUGIN_SERVER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "plugins/sdk/driver.h"

namespace berth {
class UnixGrpcServer;
}  // namespace berth

namespace berth::plugin {
namespace internal {
class CallWatcher;
class DriverServiceImpl;
class HealthServiceImpl;
class PluginServiceImpl;
}  // namespace internal

class PluginServer {
 public:
  struct Options {
    // Where to serve (see UnixGrpcServer::Options::socket_path).
    std::string socket_path;
    // The grace period of a Shutdown call that gives none.
    absl::Duration default_grace = absl::Seconds(2);
  };

  // Serves `driver` (not owned; it must outlive the server). Errors name the
  // socket path.
  static absl::StatusOr<std::unique_ptr<PluginServer>> Start(
      Driver& driver, const Options& options);

  // Shuts down with no grace period if Shutdown was not called.
  ~PluginServer();
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  // Blocks until PluginService.Shutdown was called or RequestShutdown;
  // returns the grace period asked for (the first one).
  absl::Duration WaitForShutdownRequest() ABSL_LOCKS_EXCLUDED(mu_);

  // Makes WaitForShutdownRequest return `grace` (unless a request came
  // first). Thread-safe; any number of calls.
  void RequestShutdown(absl::Duration grace) ABSL_LOCKS_EXCLUDED(mu_);

  // Health NOT_SERVING (Watch streams get it and end), then stops taking
  // calls, gives the calls in flight `grace` to finish, cancels the rest
  // (their CancelTokens fire) and removes the socket. Tasks keep running.
  // Only the first call does anything.
  void Shutdown(absl::Duration grace);

  const std::string& socket_path() const { return socket_path_; }

 private:
  PluginServer(Driver& driver, const Options& options);

  const std::string socket_path_;
  std::unique_ptr<internal::CallWatcher> watcher_;
  std::unique_ptr<internal::HealthServiceImpl> health_;
  std::unique_ptr<internal::PluginServiceImpl> plugin_service_;
  std::unique_ptr<internal::DriverServiceImpl> driver_service_;
  std::unique_ptr<UnixGrpcServer> server_;  // last: goes first

  absl::Mutex mu_;
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration requested_grace_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_PLUGIN_SERVER_H_
