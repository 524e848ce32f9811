#include "plugins/sdk/plugin_server.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/sdk/call_watcher.h"
#include "plugins/sdk/handshake.h"
#include "plugins/sdk/services.h"
#include "services/common/grpc_server.h"

namespace berth::plugin {

PluginServer::PluginServer(Driver& driver, const Options& options)
    : socket_path_(options.socket_path),
      watcher_(std::make_unique<internal::CallWatcher>()),
      health_(std::make_unique<internal::HealthServiceImpl>(*watcher_)),
      plugin_service_(std::make_unique<internal::PluginServiceImpl>(
          driver, options.default_grace,
          [this](absl::Duration grace) { RequestShutdown(grace); })),
      driver_service_(
          std::make_unique<internal::DriverServiceImpl>(driver, *watcher_)) {}

absl::StatusOr<std::unique_ptr<PluginServer>> PluginServer::Start(
    Driver& driver, const Options& options) {
  auto server = absl::WrapUnique(new PluginServer(driver, options));
  UnixGrpcServer::Options grpc_options;
  grpc_options.socket_path = options.socket_path;
  grpc_options.services = {server->plugin_service_.get(),
                           server->driver_service_.get(),
                           server->health_.get()};
  // Our own health service: gRPC's default one cannot be reached through
  // UnixGrpcServer to set "plugin", and its Watch streams hold a shutdown.
  grpc_options.enable_health = false;
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> grpc_server =
      UnixGrpcServer::Start(grpc_options);
  if (!grpc_server.ok()) return grpc_server.status();
  server->server_ = *std::move(grpc_server);
  server->health_->SetServing("", true);
  server->health_->SetServing(kHealthServiceName, true);
  return server;
}

PluginServer::~PluginServer() { Shutdown(absl::ZeroDuration()); }

absl::Duration PluginServer::WaitForShutdownRequest() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&shutdown_requested_));
  return requested_grace_;
}

void PluginServer::RequestShutdown(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  if (shutdown_requested_) return;
  shutdown_requested_ = true;
  requested_grace_ = grace;
}

void PluginServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  health_->Shutdown();
  server_->Shutdown(grace);  // only the first call does anything
}

}  // namespace berth::plugin
