#include "services/stats/stats_service.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "services/common/status.h"
#include "services/common/stream_log.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;

constexpr char kStreamRpc[] = "berth.stats.v1.StatsService/StreamTaskStats";
// Samples one Write batch takes from a subscriber's queue at most.
constexpr size_t kMaxBatch = 256;
constexpr int64_t kNodeWindowNs = 1000000000;

std::string Quote(absl::string_view id) { return absl::StrCat("\"", id, "\""); }

absl::Status ForTask(absl::string_view task_id, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("task ", Quote(task_id), ": ",
                                                  status.message()));
}

}  // namespace

StatsServiceImpl::StatsServiceImpl(StatsServiceOptions options)
    : options_(std::move(options)), collector_options_(options_.collector) {
  if (collector_options_.cpu_mhz <= 0) {
    absl::StatusOr<double> mhz =
        HostCpuMhz(options_.proc_root, options_.sys_root);
    if (mhz.ok()) {
      collector_options_.cpu_mhz = *mhz;
    } else {
      LOG(WARNING) << mhz.status().message() << "; total_ticks will read 0";
    }
  }
  absl::StatusOr<HostCpuTimes> times = ReadHostCpuTimes(options_.proc_root);
  if (times.ok()) {
    absl::MutexLock lock(&node_mu_);
    node_cpu_.emplace_back(collector_options_.monotonic_ns(), *times);
  }
}

StatsServiceImpl::~StatsServiceImpl() {
  Shutdown();
  absl::flat_hash_map<int64_t, std::unique_ptr<Sampler>> samplers;
  {
    absl::MutexLock lock(&samplers_mu_);
    samplers.swap(samplers_);
  }
  samplers.clear();  // joins the threads, outside the lock
}

void StatsServiceImpl::Shutdown() {
  {
    absl::MutexLock lock(&samplers_mu_);
    shutting_down_ = true;
  }
  ForEachSubscriber([](Subscriber& subscriber) {
    subscriber.End(absl::UnavailableError("berth-stats is shutting down"));
  });
}

template <typename F>
void StatsServiceImpl::ForEachSubscriber(F f) {
  absl::MutexLock lock(&samplers_mu_);
  for (const auto& [interval, sampler] : samplers_) {
    for (const std::shared_ptr<Subscriber>& subscriber :
         sampler->subscribers()) {
      f(*subscriber);
    }
  }
}

grpc::Status StatsServiceImpl::RegisterTask(
    grpc::ServerContext*, const pb::RegisterTaskRequest* request,
    pb::RegisterTaskResponse* response) {
  const std::string& id = request->task_id();
  if (id.empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("task_id is required"));
  }
  absl::StatusOr<std::unique_ptr<Collector>> collector;
  switch (request->target_case()) {
    case pb::RegisterTaskRequest::kCgroupPath:
      if (request->cgroup_path().empty()) {
        return ToGrpcStatus(absl::InvalidArgumentError(
            absl::StrCat("cgroup_path of task ", Quote(id), " is empty")));
      }
      collector = NewCgroupCollector(options_.cgroups, request->cgroup_path(),
                                     collector_options_);
      break;
    case pb::RegisterTaskRequest::kRootPid:
      if (request->root_pid() <= 0) {
        return ToGrpcStatus(absl::InvalidArgumentError(
            absl::StrCat("root_pid of task ", Quote(id),
                         " must be positive, got ", request->root_pid())));
      }
      collector = NewProcfsCollector(options_.proc_root, request->root_pid(),
                                     collector_options_);
      break;
    default:
      return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
          "task ", Quote(id), ": one of cgroup_path or root_pid is required")));
  }
  if (!collector.ok()) return ToGrpcStatus(ForTask(id, collector.status()));
  // A first sample: checks that the target can be read, and is the baseline
  // of the first percent.
  pb::TaskResourceUsage baseline;
  absl::Status status = (*collector)->Sample(&baseline);
  if (!status.ok()) return ToGrpcStatus(ForTask(id, status));

  response->set_backend((*collector)->backend());
  auto task = std::make_shared<Task>(id, *std::move(collector));
  bool replaced = false;
  {
    absl::MutexLock lock(&tasks_mu_);
    std::shared_ptr<Task>& slot = tasks_[id];
    replaced = slot != nullptr;
    slot = std::move(task);
  }
  LOG(INFO) << (replaced ? "re-registered" : "registered") << " task "
            << Quote(id) << ": "
            << (request->has_root_pid()
                    ? absl::StrCat("process tree of pid ", request->root_pid())
                    : absl::StrCat("cgroup ", request->cgroup_path()))
            << " (" << pb::Backend_Name(response->backend()) << ")";
  return grpc::Status::OK;
}

grpc::Status StatsServiceImpl::UnregisterTask(
    grpc::ServerContext*, const pb::UnregisterTaskRequest* request,
    pb::UnregisterTaskResponse*) {
  const std::string& id = request->task_id();
  if (id.empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("task_id is required"));
  }
  bool erased = false;
  {
    absl::MutexLock lock(&tasks_mu_);
    erased = tasks_.erase(id) > 0;
  }
  if (erased) {
    ForEachSubscriber(
        [&id](Subscriber& subscriber) { subscriber.TaskUnregistered(id); });
    LOG(INFO) << "unregistered task " << Quote(id);
  }
  return grpc::Status::OK;
}

absl::Status StatsServiceImpl::SampleTask(const std::shared_ptr<Task>& task,
                                          pb::TaskResourceUsage* usage) {
  absl::Status status;
  {
    absl::MutexLock lock(&task->mu);
    status = task->collector->Sample(usage);
  }
  if (status.ok()) {
    usage->set_task_id(task->id);
    return status;
  }
  status = ForTask(task->id, status);
  if (!absl::IsNotFound(status)) return status;
  // Gone: forget the task (unless it was registered again meanwhile) and end
  // every stream that includes it.
  bool erased = false;
  {
    absl::MutexLock lock(&tasks_mu_);
    auto it = tasks_.find(task->id);
    if (it != tasks_.end() && it->second == task) {
      tasks_.erase(it);
      erased = true;
    }
  }
  if (erased) LOG(INFO) << status.message() << "; forgetting it";
  ForEachSubscriber(
      [&](Subscriber& subscriber) { subscriber.TaskGone(task->id, status); });
  return status;
}

grpc::Status StatsServiceImpl::GetTaskStats(
    grpc::ServerContext*, const pb::GetTaskStatsRequest* request,
    pb::GetTaskStatsResponse* response) {
  const std::string& id = request->task_id();
  if (id.empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("task_id is required"));
  }
  std::shared_ptr<Task> task;
  {
    absl::MutexLock lock(&tasks_mu_);
    auto it = tasks_.find(id);
    if (it != tasks_.end()) task = it->second;
  }
  if (task == nullptr) {
    return ToGrpcStatus(absl::NotFoundError(
        absl::StrCat("task ", Quote(id), " is not registered")));
  }
  return ToGrpcStatus(SampleTask(task, response->mutable_usage()));
}

void StatsServiceImpl::Tick(
    const std::vector<std::shared_ptr<Subscriber>>& subscribers) {
  bool all = false;
  absl::flat_hash_set<std::string> wanted;
  for (const std::shared_ptr<Subscriber>& subscriber : subscribers) {
    if (subscriber->ended()) continue;
    if (subscriber->all_tasks()) {
      all = true;
    } else {
      for (std::string& id : subscriber->task_ids())
        wanted.insert(std::move(id));
    }
  }
  std::vector<std::shared_ptr<Task>> tasks;
  std::vector<std::string> missing;
  {
    absl::MutexLock lock(&tasks_mu_);
    if (all) {
      tasks.reserve(tasks_.size());
      for (const auto& [id, task] : tasks_) tasks.push_back(task);
    } else {
      for (const std::string& id : wanted) {
        auto it = tasks_.find(id);
        if (it == tasks_.end()) {
          missing.push_back(id);
        } else {
          tasks.push_back(it->second);
        }
      }
    }
  }
  // A chosen task unregistered between a stream's start and its first tick.
  for (const std::string& id : missing) {
    for (const std::shared_ptr<Subscriber>& subscriber : subscribers) {
      subscriber->TaskUnregistered(id);
    }
  }

  std::vector<SharedSample> samples;
  samples.reserve(tasks.size());
  for (const std::shared_ptr<Task>& task : tasks) {
    auto usage = std::make_shared<pb::TaskResourceUsage>();
    absl::Status status = SampleTask(task, usage.get());
    if (status.ok()) {
      samples.push_back(std::move(usage));
    } else if (!absl::IsNotFound(status)) {
      LOG_EVERY_N(WARNING, 100) << status;
    }
  }
  if (samples.empty()) return;
  for (const std::shared_ptr<Subscriber>& subscriber : subscribers) {
    if (subscriber->all_tasks()) {
      subscriber->Push(samples);
      continue;
    }
    std::vector<SharedSample> chosen;
    for (const SharedSample& sample : samples) {
      if (subscriber->Wants(sample->task_id())) chosen.push_back(sample);
    }
    subscriber->Push(std::move(chosen));
  }
}

grpc::Status StatsServiceImpl::StreamTaskStats(
    grpc::ServerContext* context, const pb::StreamTaskStatsRequest* request,
    grpc::ServerWriter<pb::StreamTaskStatsResponse>* writer) {
  absl::Duration interval = options_.default_interval;
  if (request->has_interval()) {
    interval = absl::Seconds(request->interval().seconds()) +
               absl::Nanoseconds(request->interval().nanos());
    if (interval < options_.min_interval) {
      const grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("interval must be at least ",
                       absl::FormatDuration(options_.min_interval), ", got ",
                       absl::FormatDuration(interval))));
      LogStreamEnd(kStreamRpc, status, context);
      return status;
    }
  }
  absl::flat_hash_set<std::string> ids;
  for (const std::string& id : request->task_ids()) {
    if (id.empty()) {
      const grpc::Status status = ToGrpcStatus(
          absl::InvalidArgumentError("task_ids has an empty task id"));
      LogStreamEnd(kStreamRpc, status, context);
      return status;
    }
    ids.insert(id);
  }
  {
    absl::MutexLock lock(&tasks_mu_);
    for (const std::string& id : request->task_ids()) {
      if (!tasks_.contains(id)) {
        const grpc::Status status = ToGrpcStatus(absl::NotFoundError(
            absl::StrCat("task ", Quote(id), " is not registered")));
        LogStreamEnd(kStreamRpc, status, context);
        return status;
      }
    }
  }

  auto subscriber =
      std::make_shared<Subscriber>(std::move(ids), options_.queue_capacity);
  const int64_t key = absl::ToInt64Nanoseconds(interval);
  {
    absl::MutexLock lock(&samplers_mu_);
    if (shutting_down_) {
      const grpc::Status status =
          ToGrpcStatus(absl::UnavailableError("berth-stats is shutting down"));
      LogStreamEnd(kStreamRpc, status, context);
      return status;
    }
    std::unique_ptr<Sampler>& sampler = samplers_[key];
    if (sampler == nullptr) {
      sampler = std::make_unique<Sampler>(
          interval,
          [this](const std::vector<std::shared_ptr<Subscriber>>& subscribers) {
            Tick(subscribers);
          },
          subscriber);
    } else {
      sampler->Add(subscriber);
    }
  }

  absl::Status end;
  bool client_gone = false;
  std::vector<SharedSample> batch;
  pb::StreamTaskStatsResponse response;
  while (true) {
    batch.clear();
    uint64_t dropped = 0;
    const Subscriber::Next next = subscriber->Take(
        options_.cancel_poll, kMaxBatch, &batch, &dropped, &end);
    if (next == Subscriber::Next::kEnded) break;
    if (next == Subscriber::Next::kTimeout) {
      if (context->IsCancelled()) {
        client_gone = true;
        break;
      }
      continue;
    }
    for (size_t i = 0; i < batch.size() && !client_gone; ++i) {
      *response.mutable_usage() = *batch[i];
      response.set_dropped_samples(dropped);
      // No buffer hint: a sync Write with one does not complete until a
      // later write flushes it, which would hold this handler.
      if (!writer->Write(response)) client_gone = true;
    }
    if (client_gone) break;
  }

  std::unique_ptr<Sampler> idle;
  {
    absl::MutexLock lock(&samplers_mu_);
    auto it = samplers_.find(key);
    if (it != samplers_.end() && it->second->Remove(subscriber.get()) == 0) {
      idle = std::move(it->second);
      samplers_.erase(it);
    }
  }
  idle.reset();  // joins its thread, outside the lock

  const grpc::Status status =
      client_gone
          ? grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away")
          : ToGrpcStatus(end);
  LogStreamEnd(kStreamRpc, status, client_gone || context->IsCancelled());
  return status;
}

grpc::Status StatsServiceImpl::GetNodeStats(
    grpc::ServerContext*, const pb::GetNodeStatsRequest*,
    pb::GetNodeStatsResponse* response) {
  absl::StatusOr<HostCpuTimes> times = ReadHostCpuTimes(options_.proc_root);
  if (!times.ok()) return ToGrpcStatus(times.status());
  absl::StatusOr<HostMemory> memory = ReadHostMemory(options_.proc_root);
  if (!memory.ok()) return ToGrpcStatus(memory.status());
  const int64_t now_ns = collector_options_.monotonic_ns();
  double percent = 0;
  {
    absl::MutexLock lock(&node_mu_);
    // The newest reading at least a second old, else the oldest there is.
    while (node_cpu_.size() > 1 &&
           now_ns - node_cpu_[1].first >= kNodeWindowNs) {
      node_cpu_.pop_front();
    }
    if (!node_cpu_.empty())
      percent = HostCpuPercent(node_cpu_.front().second, *times);
    if (node_cpu_.empty() ||
        now_ns - node_cpu_.back().first >= kNodeWindowNs / 10) {
      node_cpu_.emplace_back(now_ns, *times);
    }
  }
  SetTimestamp(collector_options_.now(), response->mutable_timestamp());
  response->set_cpu_cores(times->cores);
  response->set_cpu_core_mhz(collector_options_.cpu_mhz);
  response->set_cpu_percent(percent);
  response->set_cpu_total_mhz(times->cores * collector_options_.cpu_mhz);
  response->set_memory_total_bytes(memory->total_bytes);
  response->set_memory_available_bytes(memory->available_bytes);
  response->set_cgroup_layout(options_.cgroups.layout);
  return grpc::Status::OK;
}

std::vector<StatsServiceImpl::SubscriberInfo> StatsServiceImpl::Subscribers()
    const {
  std::vector<SubscriberInfo> out;
  absl::MutexLock lock(&samplers_mu_);
  for (const auto& [key, sampler] : samplers_) {
    for (const std::shared_ptr<Subscriber>& subscriber :
         sampler->subscribers()) {
      SubscriberInfo info;
      info.interval = sampler->interval();
      info.task_ids = subscriber->task_ids();
      info.dropped = subscriber->dropped();
      info.queued = subscriber->queued();
      out.push_back(std::move(info));
    }
  }
  return out;
}

size_t StatsServiceImpl::sampler_count() const {
  absl::MutexLock lock(&samplers_mu_);
  return samplers_.size();
}

size_t StatsServiceImpl::task_count() const {
  absl::MutexLock lock(&tasks_mu_);
  return tasks_.size();
}

}  // namespace stats
}  // namespace berth
