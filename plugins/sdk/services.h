// Internal to the SDK: the gRPC services a plugin serves on a Driver —
// berth.plugin.v1.PluginService, berth.driver.v1.DriverService and
// grpc.health.v1.Health. PluginServer (plugin_server.h) puts them on a socket.

#ifndef PLUGINS_SDK_SERVICES_H_
#define PLUGINS_SDK_SERVICES_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "berth/plugin/v1/plugin.grpc.pb.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "plugins/sdk/call_watcher.h"
#include "plugins/sdk/cancel.h"
#include "plugins/sdk/driver.h"

namespace berth::plugin::internal {

class PluginServiceImpl final : public v1::PluginService::Service {
 public:
  // `on_shutdown` is called (once per Shutdown call) with the grace period
  // the caller asked for, or `default_grace`.
  PluginServiceImpl(Driver& driver, absl::Duration default_grace,
                    std::function<void(absl::Duration)> on_shutdown);

  grpc::Status GetPluginInfo(grpc::ServerContext* context,
                             const v1::GetPluginInfoRequest* request,
                             v1::GetPluginInfoResponse* response) override;
  grpc::Status GetCapabilities(grpc::ServerContext* context,
                               const v1::GetCapabilitiesRequest* request,
                               v1::GetCapabilitiesResponse* response) override;
  grpc::Status GetConfigSchema(grpc::ServerContext* context,
                               const v1::GetConfigSchemaRequest* request,
                               v1::GetConfigSchemaResponse* response) override;
  grpc::Status SetConfig(grpc::ServerContext* context,
                         const v1::SetConfigRequest* request,
                         v1::SetConfigResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext* context,
                        const v1::ShutdownRequest* request,
                        v1::ShutdownResponse* response) override;

 private:
  Driver& driver_;
  const absl::Duration default_grace_;
  const std::function<void(absl::Duration)> on_shutdown_;
};

// ExecTaskStreaming and AttachTask are served with gRPC's callback API
// (exec_adapter.h, attach_adapter.h), every other method with the sync API.
class DriverServiceImpl final
    : public driver::v1::DriverService::WithCallbackMethod_AttachTask<
          driver::v1::DriverService::WithCallbackMethod_ExecTaskStreaming<
              driver::v1::DriverService::Service>> {
 public:
  DriverServiceImpl(Driver& driver, CallWatcher& watcher);

  grpc::Status GetCapabilities(
      grpc::ServerContext* context,
      const driver::v1::GetCapabilitiesRequest* request,
      driver::v1::GetCapabilitiesResponse* response) override;
  grpc::Status Fingerprint(
      grpc::ServerContext* context,
      const driver::v1::FingerprintRequest* request,
      grpc::ServerWriter<driver::v1::FingerprintResponse>* writer) override;
  grpc::Status StartTask(grpc::ServerContext* context,
                         const driver::v1::StartTaskRequest* request,
                         driver::v1::StartTaskResponse* response) override;
  grpc::Status WaitTask(grpc::ServerContext* context,
                        const driver::v1::WaitTaskRequest* request,
                        driver::v1::WaitTaskResponse* response) override;
  grpc::Status StopTask(grpc::ServerContext* context,
                        const driver::v1::StopTaskRequest* request,
                        driver::v1::StopTaskResponse* response) override;
  grpc::Status DestroyTask(grpc::ServerContext* context,
                           const driver::v1::DestroyTaskRequest* request,
                           driver::v1::DestroyTaskResponse* response) override;
  grpc::Status InspectTask(grpc::ServerContext* context,
                           const driver::v1::InspectTaskRequest* request,
                           driver::v1::InspectTaskResponse* response) override;
  grpc::Status RecoverTask(grpc::ServerContext* context,
                           const driver::v1::RecoverTaskRequest* request,
                           driver::v1::RecoverTaskResponse* response) override;
  grpc::Status SignalTask(grpc::ServerContext* context,
                          const driver::v1::SignalTaskRequest* request,
                          driver::v1::SignalTaskResponse* response) override;
  grpc::Status TaskEvents(
      grpc::ServerContext* context,
      const driver::v1::TaskEventsRequest* request,
      grpc::ServerWriter<driver::v1::TaskEventsResponse>* writer) override;
  grpc::Status TaskStats(
      grpc::ServerContext* context, const driver::v1::TaskStatsRequest* request,
      grpc::ServerWriter<driver::v1::TaskStatsResponse>* writer) override;
  grpc::Status ExecTask(grpc::ServerContext* context,
                        const driver::v1::ExecTaskRequest* request,
                        driver::v1::ExecTaskResponse* response) override;
  grpc::ServerBidiReactor<driver::v1::ExecTaskStreamingRequest,
                          driver::v1::ExecTaskStreamingResponse>*
  ExecTaskStreaming(grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<driver::v1::AttachTaskRequest,
                          driver::v1::AttachTaskResponse>*
  AttachTask(grpc::CallbackServerContext* context) override;
  grpc::Status CreateNetwork(
      grpc::ServerContext* context,
      const driver::v1::CreateNetworkRequest* request,
      driver::v1::CreateNetworkResponse* response) override;
  grpc::Status DestroyNetwork(
      grpc::ServerContext* context,
      const driver::v1::DestroyNetworkRequest* request,
      driver::v1::DestroyNetworkResponse* response) override;

 private:
  // An open TaskStats stream, ended (OK) when its task is destroyed.
  struct StatsStream {
    std::string task_id;
    CancelToken* wake;
    bool destroyed;
  };

  Driver& driver_;
  CallWatcher& watcher_;
  absl::Mutex stats_mu_;
  std::list<StatsStream> stats_streams_ ABSL_GUARDED_BY(stats_mu_);
};

// grpc.health.v1.Health with statuses set by the plugin. Check of a service
// without a status is NOT_FOUND; Watch sends SERVICE_UNKNOWN for it. Watch
// streams end (OK) once Shutdown has sent them NOT_SERVING, so that they do
// not hold the server's shutdown.
class HealthServiceImpl final : public grpc::health::v1::Health::Service {
 public:
  explicit HealthServiceImpl(CallWatcher& watcher);

  void SetServing(const std::string& service, bool serving)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every service NOT_SERVING for good; Watch streams end.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>*
                         writer) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  CallWatcher& watcher_;
  absl::Mutex mu_;
  std::map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace berth::plugin::internal

#endif  // PLUGINS_SDK_SERVICES_H_
