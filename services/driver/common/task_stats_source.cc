#include "services/driver/common/task_stats_source.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "services/common/dial.h"

namespace berth::driver_common {

namespace {

// Each call to berth-stats: it answers from memory, so a slow answer is a
// berth-stats in trouble and the in-process collector does better.
constexpr std::chrono::seconds kCallTimeout(2);
// Dialling berth-stats' socket.
constexpr absl::Duration kDialTimeout = absl::Seconds(1);

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
}

}  // namespace

TaskStatsSource::TaskStatsSource(stats::CgroupMounts mounts, double cpu_mhz,
                                 std::string socket)
    : mounts_(std::move(mounts)),
      cpu_mhz_(cpu_mhz),
      socket_(std::move(socket)) {}

void TaskStatsSource::SetSocket(const std::string& socket) {
  absl::MutexLock lock(&mu_);
  if (socket != socket_) {
    socket_ = socket;
    stub_.reset();
  }
}

std::shared_ptr<stats::v1::StatsService::Stub> TaskStatsSource::Stub() {
  absl::MutexLock lock(&mu_);
  if (socket_.empty()) return nullptr;
  if (stub_ == nullptr) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket_, kDialTimeout);
    if (!channel.ok()) {
      LOG(WARNING) << "berth-stats: " << channel.status()
                   << "; measuring in-process meanwhile";
      return nullptr;
    }
    stub_ = stats::v1::StatsService::NewStub(*channel);
  }
  return stub_;
}

void TaskStatsSource::Register(const std::string& task_id,
                               const std::string& cgroup_path) {
  std::shared_ptr<stats::v1::StatsService::Stub> stub = Stub();
  if (stub == nullptr) return;
  Register(*stub, task_id, cgroup_path);
}

void TaskStatsSource::Register(stats::v1::StatsService::Stub& stub,
                               const std::string& task_id,
                               const std::string& cgroup_path) {
  grpc::ClientContext context;
  SetDeadline(&context);
  stats::v1::RegisterTaskRequest request;
  request.set_task_id(task_id);
  request.set_cgroup_path(cgroup_path);
  stats::v1::RegisterTaskResponse response;
  grpc::Status status = stub.RegisterTask(&context, request, &response);
  if (!status.ok() && status.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
    LOG(WARNING) << "task " << task_id << ": registering with berth-stats: "
                 << status.error_message();
  }
}

void TaskStatsSource::Unregister(const std::string& task_id) {
  std::shared_ptr<stats::v1::StatsService::Stub> stub = Stub();
  if (stub == nullptr) return;
  grpc::ClientContext context;
  SetDeadline(&context);
  stats::v1::UnregisterTaskRequest request;
  request.set_task_id(task_id);
  stats::v1::UnregisterTaskResponse response;
  grpc::Status status = stub->UnregisterTask(&context, request, &response);
  if (!status.ok() && status.error_code() != grpc::StatusCode::NOT_FOUND) {
    LOG(WARNING) << "task " << task_id << ": unregistering from berth-stats: "
                 << status.error_message();
  }
}

absl::StatusOr<stats::v1::TaskResourceUsage> TaskStatsSource::Sample(
    const std::string& task_id, const std::string& cgroup_path,
    InProcessStats& in_process) {
  if (std::shared_ptr<stats::v1::StatsService::Stub> stub = Stub();
      stub != nullptr) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      grpc::ClientContext context;
      SetDeadline(&context);
      stats::v1::GetTaskStatsRequest request;
      request.set_task_id(task_id);
      stats::v1::GetTaskStatsResponse response;
      grpc::Status status = stub->GetTaskStats(&context, request, &response);
      if (status.ok()) return response.usage();
      if (status.error_code() != grpc::StatusCode::NOT_FOUND) break;
      // berth-stats restarted and forgot the task: register it again.
      Register(*stub, task_id, cgroup_path);
    }
  }
  return SampleInProcess(task_id, cgroup_path, in_process);
}

absl::StatusOr<stats::v1::TaskResourceUsage> TaskStatsSource::SampleInProcess(
    const std::string& task_id, const std::string& cgroup_path,
    InProcessStats& in_process) {
  absl::MutexLock lock(&in_process.mu_);
  if (in_process.collector_ == nullptr) {
    stats::CollectorOptions collector_options;
    collector_options.cpu_mhz = cpu_mhz_;
    absl::StatusOr<std::unique_ptr<stats::Collector>> collector =
        stats::NewCgroupCollector(mounts_, cgroup_path, collector_options);
    if (!collector.ok()) {
      return absl::Status(
          collector.status().code(),
          absl::StrCat("task ", task_id, ": ", collector.status().message()));
    }
    in_process.collector_ = std::move(*collector);
  }
  stats::v1::TaskResourceUsage usage;
  absl::Status status = in_process.collector_->Sample(&usage);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("task ", task_id, ": ", status.message()));
  }
  usage.set_task_id(task_id);
  return usage;
}

}  // namespace berth::driver_common
