// berth.stats.v1.StatsService: registered tasks, snapshots, streams at an
// interval (one sampler thread per distinct interval, for all tasks and all
// subscribers), and node totals.

#ifndef SERVICES_STATS_STATS_SERVICE_H_
#define SERVICES_STATS_STATS_SERVICE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.grpc.pb.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/stats/collector.h"
#include "services/common/stats/host_info.h"
#include "services/stats/sampler.h"

namespace berth {
namespace stats {

struct StatsServiceOptions {
  // The host's cgroup mounts (DetectCgroupLayout), which decide the backend
  // of a task registered by cgroup_path.
  CgroupMounts cgroups;
  // Where tasks registered by root_pid, and the node's CPU and memory, are
  // read.
  std::string proc_root = "/proc";
  // For the MHz of a core where <proc_root>/cpuinfo lacks it.
  std::string sys_root = "/sys";
  // Clocks and units; cpu_mhz 0 means HostCpuMhz(proc_root, sys_root).
  CollectorOptions collector;
  // Samples a subscriber's queue holds before the oldest are dropped (or two
  // ticks' worth, if more: see Subscriber).
  size_t queue_capacity = 64;
  // The interval of a stream that does not choose one.
  absl::Duration default_interval = absl::Seconds(1);
  // The shortest interval a stream may choose.
  absl::Duration min_interval = absl::Milliseconds(1);
  // How often a waiting stream handler checks whether its caller cancelled.
  absl::Duration cancel_poll = absl::Milliseconds(100);
};

// Serves berth.stats.v1.StatsService:
// - RegisterTask makes the task's collector (cgroup v1 or v2 by the host's
//   layout, procfs for root_pid) and takes a first sample, the baseline of
//   the first percent; nothing is registered when that fails.
// - Each task has one collector: a sample's percent covers the time since
//   the task's previous sample, whoever took it (a stream's tick or a
//   GetTaskStats).
// - StreamTaskStats joins the sampler of its interval (one thread per
//   distinct interval, started by its first subscriber, stopped with its
//   last) and writes what its queue receives. A task whose target is gone is
//   forgotten and ends every stream that includes it with NOT_FOUND naming
//   it.
// Thread-safe. Lock order: samplers_mu_, a sampler's, a subscriber's;
// tasks_mu_ and a task's lock are never held with them.
class StatsServiceImpl final : public berth::stats::v1::StatsService::Service {
 public:
  explicit StatsServiceImpl(StatsServiceOptions options);
  // Ends every stream; the gRPC server must have shut down first.
  ~StatsServiceImpl() override;

  StatsServiceImpl(const StatsServiceImpl&) = delete;
  StatsServiceImpl& operator=(const StatsServiceImpl&) = delete;

  // Ends every stream with UNAVAILABLE and refuses new ones. Call before
  // the server's Shutdown, so that open streams do not hold it for its grace.
  void Shutdown() ABSL_LOCKS_EXCLUDED(samplers_mu_);

  grpc::Status RegisterTask(
      grpc::ServerContext* context,
      const berth::stats::v1::RegisterTaskRequest* request,
      berth::stats::v1::RegisterTaskResponse* response) override
      ABSL_LOCKS_EXCLUDED(tasks_mu_, samplers_mu_);
  grpc::Status UnregisterTask(
      grpc::ServerContext* context,
      const berth::stats::v1::UnregisterTaskRequest* request,
      berth::stats::v1::UnregisterTaskResponse* response) override
      ABSL_LOCKS_EXCLUDED(tasks_mu_, samplers_mu_);
  grpc::Status GetTaskStats(
      grpc::ServerContext* context,
      const berth::stats::v1::GetTaskStatsRequest* request,
      berth::stats::v1::GetTaskStatsResponse* response) override
      ABSL_LOCKS_EXCLUDED(tasks_mu_, samplers_mu_);
  grpc::Status StreamTaskStats(
      grpc::ServerContext* context,
      const berth::stats::v1::StreamTaskStatsRequest* request,
      grpc::ServerWriter<berth::stats::v1::StreamTaskStatsResponse>* writer)
      override ABSL_LOCKS_EXCLUDED(tasks_mu_, samplers_mu_);
  grpc::Status GetNodeStats(
      grpc::ServerContext* context,
      const berth::stats::v1::GetNodeStatsRequest* request,
      berth::stats::v1::GetNodeStatsResponse* response) override
      ABSL_LOCKS_EXCLUDED(node_mu_);

  // What a stream is doing, for tests and benchmarks.
  struct SubscriberInfo {
    absl::Duration interval;
    std::vector<std::string> task_ids;  // empty: all tasks
    uint64_t dropped = 0;
    size_t queued = 0;
  };
  std::vector<SubscriberInfo> Subscribers() const
      ABSL_LOCKS_EXCLUDED(samplers_mu_);
  // Sampler threads running (one per distinct interval in use).
  size_t sampler_count() const ABSL_LOCKS_EXCLUDED(samplers_mu_);
  size_t task_count() const ABSL_LOCKS_EXCLUDED(tasks_mu_);
  // The MHz of one core that total_ticks is computed with.
  double cpu_mhz() const { return collector_options_.cpu_mhz; }

 private:
  // A registered task: its collector, one sample at a time.
  struct Task {
    Task(std::string id, std::unique_ptr<Collector> collector)
        : id(std::move(id)), collector(std::move(collector)) {}
    const std::string id;
    absl::Mutex mu;
    std::unique_ptr<Collector> collector ABSL_GUARDED_BY(mu);
  };

  // Samples `task`; NOT_FOUND (naming the task id) when its target has gone,
  // in which case the task is forgotten and every stream of it ends.
  absl::Status SampleTask(const std::shared_ptr<Task>& task,
                          berth::stats::v1::TaskResourceUsage* usage)
      ABSL_LOCKS_EXCLUDED(tasks_mu_, samplers_mu_);
  // A sampler's tick: samples the tasks its subscribers want, once each.
  void Tick(const std::vector<std::shared_ptr<Subscriber>>& subscribers)
      ABSL_LOCKS_EXCLUDED(tasks_mu_, samplers_mu_);
  // Calls `f` on every subscriber of every sampler.
  template <typename F>
  void ForEachSubscriber(F f) ABSL_LOCKS_EXCLUDED(samplers_mu_);

  const StatsServiceOptions options_;
  CollectorOptions collector_options_;

  mutable absl::Mutex tasks_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Task>> tasks_
      ABSL_GUARDED_BY(tasks_mu_);

  mutable absl::Mutex samplers_mu_;
  bool shutting_down_ ABSL_GUARDED_BY(samplers_mu_) = false;
  // By interval in nanoseconds.
  absl::flat_hash_map<int64_t, std::unique_ptr<Sampler>> samplers_
      ABSL_GUARDED_BY(samplers_mu_);

  absl::Mutex node_mu_;
  // Recent /proc/stat readings (monotonic ns), oldest first, for the CPU use
  // over the last second.
  std::deque<std::pair<int64_t, HostCpuTimes>> node_cpu_
      ABSL_GUARDED_BY(node_mu_);
};

}  // namespace stats
}  // namespace berth

#endif  // SERVICES_STATS_STATS_SERVICE_H_
