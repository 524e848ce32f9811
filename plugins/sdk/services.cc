#include "plugins/sdk/services.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/sdk/attach_adapter.h"
#include "plugins/sdk/config.h"
#include "plugins/sdk/exec_adapter.h"
#include "plugins/sdk/proto_time.h"
#include "plugins/sdk/signals.h"
#include "services/common/status.h"
#include "services/common/stream_log.h"

namespace berth::plugin::internal {
namespace {

constexpr char kPluginService[] = "berth.plugin.v1.PluginService/";
constexpr char kDriverService[] = "berth.driver.v1.DriverService/";
constexpr absl::Duration kDefaultStopTimeout = absl::Seconds(5);
constexpr absl::Duration kDefaultStatsInterval = absl::Seconds(1);
// How often a Watch of the health service looks at its cancellation.
constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(50);

grpc::Status InvalidArgument(absl::string_view message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(message));
}

// The status of a unary call, logged (below WARNING: the caller gets it).
grpc::Status Answer(absl::string_view rpc, const absl::Status& status) {
  if (!status.ok()) {
    VLOG(1) << rpc << " failed: " << status;
  }
  return ToGrpcStatus(status);
}

// `status` with " (task ID)" appended to its message.
absl::Status ForTask(const absl::Status& status, const std::string& task_id) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (task ", task_id, ")"));
}

grpc::Status Cancelled(absl::string_view rpc, const std::string& task_id) {
  return grpc::Status(
      grpc::StatusCode::CANCELLED,
      absl::StrCat(rpc, " of task ", task_id, " was cancelled by its caller"));
}

// The end of a call that may block or stream: below WARNING when cancelled.
grpc::Status End(absl::string_view rpc, grpc::Status status,
                 grpc::ServerContext* context) {
  LogStreamEnd(absl::StrCat(kDriverService, rpc), status, context);
  return status;
}

}  // namespace

// ---- PluginService ----

PluginServiceImpl::PluginServiceImpl(
    Driver& driver, absl::Duration default_grace,
    std::function<void(absl::Duration)> on_shutdown)
    : driver_(driver),
      default_grace_(default_grace),
      on_shutdown_(std::move(on_shutdown)) {}

grpc::Status PluginServiceImpl::GetPluginInfo(
    grpc::ServerContext*, const v1::GetPluginInfoRequest*,
    v1::GetPluginInfoResponse* response) {
  const DriverInfo info = driver_.Info();
  response->set_name(info.name);
  response->set_type(v1::PLUGIN_TYPE_DRIVER);
  response->set_plugin_version(info.version);
  response->set_description(info.description);
  return grpc::Status::OK;
}

grpc::Status PluginServiceImpl::GetCapabilities(
    grpc::ServerContext*, const v1::GetCapabilitiesRequest*,
    v1::GetCapabilitiesResponse* response) {
  for (const char* package : {"berth.plugin.v1", "berth.driver.v1"}) {
    v1::ApiVersion* version = response->add_api_versions();
    version->set_package(package);
    version->set_revision(0);
  }
  return grpc::Status::OK;
}

grpc::Status PluginServiceImpl::GetConfigSchema(
    grpc::ServerContext*, const v1::GetConfigSchemaRequest*,
    v1::GetConfigSchemaResponse* response) {
  *response->mutable_plugin_config() = driver_.PluginConfigSchema();
  *response->mutable_task_config() = driver_.TaskConfigSchema();
  return grpc::Status::OK;
}

grpc::Status PluginServiceImpl::SetConfig(grpc::ServerContext*,
                                          const v1::SetConfigRequest* request,
                                          v1::SetConfigResponse*) {
  const absl::Status valid =
      ValidateConfig(request->config(), driver_.PluginConfigSchema(), "config");
  if (!valid.ok())
    return Answer(absl::StrCat(kPluginService, "SetConfig"), valid);
  return Answer(absl::StrCat(kPluginService, "SetConfig"),
                driver_.SetConfig(request->config(), request->node()));
}

grpc::Status PluginServiceImpl::Shutdown(grpc::ServerContext*,
                                         const v1::ShutdownRequest* request,
                                         v1::ShutdownResponse*) {
  absl::Duration grace = default_grace_;
  if (request->has_grace_period()) {
    grace = FromProtoDuration(request->grace_period());
    if (grace < absl::ZeroDuration()) {
      return InvalidArgument(absl::StrCat("grace_period must not be negative (",
                                          absl::FormatDuration(grace), ")"));
    }
  }
  LOG(INFO) << "Shutdown requested, grace period "
            << absl::FormatDuration(grace);
  on_shutdown_(grace);
  return grpc::Status::OK;
}

// ---- DriverService ----

DriverServiceImpl::DriverServiceImpl(Driver& driver, CallWatcher& watcher)
    : driver_(driver), watcher_(watcher) {}

grpc::Status DriverServiceImpl::GetCapabilities(
    grpc::ServerContext*, const driver::v1::GetCapabilitiesRequest*,
    driver::v1::GetCapabilitiesResponse* response) {
  driver::v1::DriverCapabilities* capabilities =
      response->mutable_capabilities();
  *capabilities = driver_.Capabilities();
  const bool streaming = SupportsExecStreaming(driver_);
  capabilities->set_exec_streaming(streaming);
  if (!streaming) capabilities->set_exec_tty(false);
  return grpc::Status::OK;
}

grpc::Status DriverServiceImpl::Fingerprint(
    grpc::ServerContext* context, const driver::v1::FingerprintRequest*,
    grpc::ServerWriter<driver::v1::FingerprintResponse>* writer) {
  CancelToken token;
  CallWatcher::Registration registration(watcher_, context, &token);
  uint64_t version = 0;
  driver::v1::FingerprintResponse fingerprint =
      driver_.CurrentFingerprint(&version);
  grpc::Status status;
  do {
    if (!writer->Write(fingerprint)) break;
  } while (driver_.WaitForFingerprint(&version, &fingerprint, token));
  status = grpc::Status(grpc::StatusCode::CANCELLED,
                        "Fingerprint was cancelled by its caller");
  return End("Fingerprint", status, context);
}

grpc::Status DriverServiceImpl::StartTask(
    grpc::ServerContext*, const driver::v1::StartTaskRequest* request,
    driver::v1::StartTaskResponse* response) {
  constexpr char kRpc[] = "berth.driver.v1.DriverService/StartTask";
  if (!request->has_task()) return InvalidArgument("task is required");
  const driver::v1::TaskConfig& task = request->task();
  if (task.id().empty()) return InvalidArgument("task.id is required");
  if (absl::Status valid =
          ValidateConfig(task.driver_config(), driver_.TaskConfigSchema(),
                         "task.driver_config");
      !valid.ok()) {
    return Answer(kRpc, ForTask(valid, task.id()));
  }
  absl::StatusOr<driver::v1::StartTaskResponse> started =
      driver_.StartTask(task);
  if (!started.ok()) return Answer(kRpc, started.status());
  *response = *std::move(started);
  if (!response->handle().has_config()) {
    *response->mutable_handle()->mutable_config() = task;
  }
  return grpc::Status::OK;
}

grpc::Status DriverServiceImpl::WaitTask(
    grpc::ServerContext* context, const driver::v1::WaitTaskRequest* request,
    driver::v1::WaitTaskResponse* response) {
  if (request->task_id().empty()) {
    return InvalidArgument("task_id is required");
  }
  CancelToken token;
  absl::StatusOr<driver::v1::ExitResult> result;
  {
    CallWatcher::Registration registration(watcher_, context, &token);
    result = driver_.WaitTask(request->task_id(), token);
  }
  if (token.IsCancelled() || context->IsCancelled()) {
    return End("WaitTask", Cancelled("WaitTask", request->task_id()), context);
  }
  if (!result.ok()) {
    return Answer(absl::StrCat(kDriverService, "WaitTask"), result.status());
  }
  *response->mutable_result() = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status DriverServiceImpl::StopTask(
    grpc::ServerContext*, const driver::v1::StopTaskRequest* request,
    driver::v1::StopTaskResponse*) {
  constexpr char kRpc[] = "berth.driver.v1.DriverService/StopTask";
  const std::string& id = request->task_id();
  if (id.empty()) return InvalidArgument("task_id is required");
  absl::Duration timeout = kDefaultStopTimeout;
  if (request->has_timeout()) {
    timeout = FromProtoDuration(request->timeout());
    if (timeout < absl::ZeroDuration()) {
      return InvalidArgument(
          absl::StrCat("timeout must not be negative (task ", id, ")"));
    }
  }
  absl::StatusOr<int> signal = ParseSignal(
      request->signal().empty() ? "SIGTERM" : request->signal(), "signal");
  if (!signal.ok()) return Answer(kRpc, ForTask(signal.status(), id));
  return Answer(kRpc, driver_.StopTask(id, timeout, *signal));
}

grpc::Status DriverServiceImpl::DestroyTask(
    grpc::ServerContext*, const driver::v1::DestroyTaskRequest* request,
    driver::v1::DestroyTaskResponse*) {
  const std::string& id = request->task_id();
  if (id.empty()) return InvalidArgument("task_id is required");
  const absl::Status destroyed = driver_.DestroyTask(id, request->force());
  if (destroyed.ok()) {
    absl::MutexLock lock(&stats_mu_);
    for (StatsStream& stream : stats_streams_) {
      if (stream.task_id != id) continue;
      stream.destroyed = true;
      stream.wake->Cancel();
    }
  }
  return Answer("berth.driver.v1.DriverService/DestroyTask", destroyed);
}

grpc::Status DriverServiceImpl::InspectTask(
    grpc::ServerContext*, const driver::v1::InspectTaskRequest* request,
    driver::v1::InspectTaskResponse* response) {
  if (request->task_id().empty()) {
    return InvalidArgument("task_id is required");
  }
  absl::StatusOr<driver::v1::TaskStatus> status =
      driver_.InspectTask(request->task_id());
  if (!status.ok()) {
    return Answer("berth.driver.v1.DriverService/InspectTask", status.status());
  }
  *response->mutable_status() = *std::move(status);
  // The run's handle, for a caller that never got StartTask's reply. Without
  // one (UNIMPLEMENTED, or the driver cannot tell) InspectTask still answers
  // the status.
  absl::StatusOr<driver::v1::TaskHandle> handle =
      driver_.HandleOf(request->task_id());
  if (!handle.ok()) {
    // NOT_FOUND: destroyed since InspectTask.
    LOG_IF(WARNING, !absl::IsUnimplemented(handle.status()) &&
                        !absl::IsNotFound(handle.status()))
        << "InspectTask of task " << request->task_id()
        << " answers without a handle: " << handle.status();
  } else if (handle->config().id() != request->task_id()) {
    LOG(WARNING) << "InspectTask of task " << request->task_id()
                 << " answers without a handle: the driver's HandleOf gave "
                    "one whose config.id is \""
                 << handle->config().id() << "\"";
  } else {
    *response->mutable_handle() = *std::move(handle);
  }
  return grpc::Status::OK;
}

grpc::Status DriverServiceImpl::RecoverTask(
    grpc::ServerContext*, const driver::v1::RecoverTaskRequest* request,
    driver::v1::RecoverTaskResponse* response) {
  if (!request->has_handle()) return InvalidArgument("handle is required");
  if (request->handle().config().id().empty()) {
    return InvalidArgument("handle.config.id is required");
  }
  absl::StatusOr<driver::v1::TaskStatus> status =
      driver_.RecoverTask(request->handle());
  if (!status.ok()) {
    return Answer("berth.driver.v1.DriverService/RecoverTask", status.status());
  }
  *response->mutable_status() = *std::move(status);
  return grpc::Status::OK;
}

grpc::Status DriverServiceImpl::SignalTask(
    grpc::ServerContext*, const driver::v1::SignalTaskRequest* request,
    driver::v1::SignalTaskResponse*) {
  constexpr char kRpc[] = "berth.driver.v1.DriverService/SignalTask";
  const std::string& id = request->task_id();
  if (id.empty()) return InvalidArgument("task_id is required");
  if (request->signal().empty()) {
    return InvalidArgument(absl::StrCat("signal is required (task ", id, ")"));
  }
  absl::StatusOr<int> signal = ParseSignal(request->signal(), "signal");
  if (!signal.ok()) return Answer(kRpc, ForTask(signal.status(), id));
  return Answer(kRpc, driver_.SignalTask(id, *signal));
}

grpc::Status DriverServiceImpl::TaskEvents(
    grpc::ServerContext* context, const driver::v1::TaskEventsRequest*,
    grpc::ServerWriter<driver::v1::TaskEventsResponse>* writer) {
  CancelToken token;
  std::unique_ptr<TaskEventSubscription> subscription =
      driver_.SubscribeTaskEvents();
  CallWatcher::Registration registration(watcher_, context, &token);
  driver::v1::TaskEventsResponse event;
  while (subscription->Next(&event, token)) {
    if (!writer->Write(event)) break;
  }
  return End("TaskEvents",
             grpc::Status(grpc::StatusCode::CANCELLED,
                          "TaskEvents was cancelled by its caller"),
             context);
}

grpc::Status DriverServiceImpl::TaskStats(
    grpc::ServerContext* context, const driver::v1::TaskStatsRequest* request,
    grpc::ServerWriter<driver::v1::TaskStatsResponse>* writer) {
  const std::string& id = request->task_id();
  if (id.empty()) {
    return End("TaskStats", InvalidArgument("task_id is required"), context);
  }
  absl::Duration interval = kDefaultStatsInterval;
  if (request->has_interval()) {
    interval = FromProtoDuration(request->interval());
    if (interval <= absl::ZeroDuration()) {
      return End("TaskStats",
                 InvalidArgument(
                     absl::StrCat("interval must be positive (task ", id, ")")),
                 context);
    }
  }

  CancelToken token;  // cancelled by the caller or by DestroyTask
  std::list<StatsStream>::iterator entry;
  {
    absl::MutexLock lock(&stats_mu_);
    entry = stats_streams_.insert(stats_streams_.end(), {id, &token, false});
  }
  grpc::Status status;
  {
    CallWatcher::Registration registration(watcher_, context, &token);
    driver::v1::TaskStatsResponse response;
    for (bool first = true;; first = false) {
      absl::StatusOr<stats::v1::TaskResourceUsage> usage =
          driver_.TaskStats(id);
      if (!usage.ok()) {
        // NOT_FOUND after a first sample: the task went away meanwhile.
        if (!first && usage.status().code() == absl::StatusCode::kNotFound) {
          break;
        }
        status = ToGrpcStatus(usage.status());
        break;
      }
      if (usage->task_id().empty()) usage->set_task_id(id);
      if (!usage->has_timestamp()) {
        *usage->mutable_timestamp() = ToProtoTimestamp(absl::Now());
      }
      *response.mutable_usage() = *std::move(usage);
      if (!writer->Write(response)) break;
      if (token.WaitFor(interval)) break;
    }
  }
  bool destroyed;
  {
    absl::MutexLock lock(&stats_mu_);
    destroyed = entry->destroyed;
    stats_streams_.erase(entry);
  }
  if (status.ok() && !destroyed && context->IsCancelled()) {
    status = Cancelled("TaskStats", id);
  }
  return End("TaskStats", status, context);
}

grpc::Status DriverServiceImpl::ExecTask(
    grpc::ServerContext* context, const driver::v1::ExecTaskRequest* request,
    driver::v1::ExecTaskResponse* response) {
  const std::string& id = request->task_id();
  if (id.empty()) return InvalidArgument("task_id is required");
  if (request->command().empty() || request->command(0).empty()) {
    return InvalidArgument(absl::StrCat("command is required (task ", id, ")"));
  }
  absl::Duration timeout = absl::InfiniteDuration();
  if (request->has_timeout()) {
    timeout = FromProtoDuration(request->timeout());
    if (timeout <= absl::ZeroDuration()) {
      return InvalidArgument(
          absl::StrCat("timeout must be positive (task ", id, ")"));
    }
  }
  const std::vector<std::string> command(request->command().begin(),
                                         request->command().end());
  CancelToken token;
  absl::StatusOr<driver::v1::ExecTaskResponse> result;
  {
    CallWatcher::Registration registration(watcher_, context, &token);
    result = driver_.ExecTask(id, command, timeout, token);
  }
  if (token.IsCancelled() || context->IsCancelled()) {
    return End("ExecTask", Cancelled("ExecTask", id), context);
  }
  if (!result.ok()) {
    return Answer(absl::StrCat(kDriverService, "ExecTask"), result.status());
  }
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<driver::v1::ExecTaskStreamingRequest,
                        driver::v1::ExecTaskStreamingResponse>*
DriverServiceImpl::ExecTaskStreaming(grpc::CallbackServerContext* context) {
  return NewExecTaskStreamingReactor(
      driver_, context, [](const grpc::Status& status, bool caller_cancelled) {
        // Below WARNING when cancelled.
        LogStreamEnd(absl::StrCat(kDriverService, "ExecTaskStreaming"), status,
                     caller_cancelled);
      });
}

grpc::ServerBidiReactor<driver::v1::AttachTaskRequest,
                        driver::v1::AttachTaskResponse>*
DriverServiceImpl::AttachTask(grpc::CallbackServerContext* context) {
  return NewAttachTaskReactor(
      driver_, context, [](const grpc::Status& status, bool caller_cancelled) {
        // Below WARNING when cancelled.
        LogStreamEnd(absl::StrCat(kDriverService, "AttachTask"), status,
                     caller_cancelled);
      });
}

grpc::Status DriverServiceImpl::CreateNetwork(
    grpc::ServerContext*, const driver::v1::CreateNetworkRequest* request,
    driver::v1::CreateNetworkResponse* response) {
  if (request->allocation_id().empty()) {
    return InvalidArgument("allocation_id is required");
  }
  absl::StatusOr<driver::v1::CreateNetworkResponse> created =
      driver_.CreateNetwork(*request);
  if (!created.ok()) {
    return Answer("berth.driver.v1.DriverService/CreateNetwork",
                  created.status());
  }
  *response = *std::move(created);
  return grpc::Status::OK;
}

grpc::Status DriverServiceImpl::DestroyNetwork(
    grpc::ServerContext*, const driver::v1::DestroyNetworkRequest* request,
    driver::v1::DestroyNetworkResponse*) {
  if (request->allocation_id().empty()) {
    return InvalidArgument("allocation_id is required");
  }
  return Answer("berth.driver.v1.DriverService/DestroyNetwork",
                driver_.DestroyNetwork(request->allocation_id()));
}

// ---- Health ----

HealthServiceImpl::HealthServiceImpl(CallWatcher& watcher)
    : watcher_(watcher) {}

void HealthServiceImpl::SetServing(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  serving_[service] = serving;
  ++version_;
}

void HealthServiceImpl::Shutdown() {
  absl::MutexLock lock(&mu_);
  for (auto& [service, serving] : serving_) serving = false;
  shut_down_ = true;
  ++version_;
}

grpc::Status HealthServiceImpl::Check(
    grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
    grpc::health::v1::HealthCheckResponse* response) {
  absl::MutexLock lock(&mu_);
  auto it = serving_.find(request->service());
  if (it == serving_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no health status for service \"",
                                     request->service(), "\""));
  }
  response->set_status(
      it->second ? grpc::health::v1::HealthCheckResponse::SERVING
                 : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  return grpc::Status::OK;
}

grpc::Status HealthServiceImpl::Watch(
    grpc::ServerContext* context,
    const grpc::health::v1::HealthCheckRequest* request,
    grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) {
  using grpc::health::v1::HealthCheckResponse;
  CancelToken token;
  CallWatcher::Registration registration(watcher_, context, &token);
  uint64_t sent_version = 0;
  HealthCheckResponse::ServingStatus sent = HealthCheckResponse::UNKNOWN;
  bool first = true;
  while (true) {
    HealthCheckResponse response;
    bool shut_down;
    {
      absl::MutexLock lock(&mu_);
      auto changed = [this, &sent_version]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return version_ != sent_version;
      };
      while (!first && !changed()) {
        if (token.IsCancelled()) {
          return grpc::Status(grpc::StatusCode::CANCELLED,
                              "Watch was cancelled by its caller");
        }
        mu_.AwaitWithTimeout(absl::Condition(&changed), kCancelPollInterval);
      }
      sent_version = version_;
      shut_down = shut_down_;
      auto it = serving_.find(request->service());
      response.set_status(it == serving_.end()
                              ? HealthCheckResponse::SERVICE_UNKNOWN
                          : it->second ? HealthCheckResponse::SERVING
                                       : HealthCheckResponse::NOT_SERVING);
    }
    if (first || response.status() != sent) {
      if (!writer->Write(response)) {
        return grpc::Status(grpc::StatusCode::CANCELLED,
                            "Watch was cancelled by its caller");
      }
      sent = response.status();
    }
    first = false;
    if (shut_down) return grpc::Status::OK;
  }
}

}  // namespace berth::plugin::internal
