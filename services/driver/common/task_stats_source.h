// Where the built-in drivers' TaskStats come from, and their tasks'
// registration with berth-stats.
//
// berth-driver-exec and berth-driver-sandbox measure their tasks the same way:
// when berth-stats' socket is configured (DriverOptions.stats_socket, then
// NodeContext.stats_socket in SetConfig) they register each task's cgroup
// with it, sample through it and unregister the task when it is destroyed; a
// task berth-stats answers NOT_FOUND for (it restarted and forgot) is
// registered again and asked once more. Without a socket, or when berth-stats
// cannot be reached or fails otherwise, the task's cgroup is measured
// in-process by a collector of //services/common/stats. This library is that
// logic, once, for both drivers.
//
//   TaskStatsSource stats(mounts, cpu_mhz, options.stats_socket);
//   stats.Register(task_id, cgroup.path());       // StartTask, RecoverTask
//   absl::StatusOr<stats::v1::TaskResourceUsage> usage =
//       stats.Sample(task_id, cgroup.path(), task->in_process_stats);
//   stats.Unregister(task_id);                    // DestroyTask
//   stats.SetSocket(node.stats_socket());         // SetConfig

#ifndef SERVICES_DRIVER_COMMON_TASK_STATS_SOURCE_H_
#define SERVICES_DRIVER_COMMON_TASK_STATS_SOURCE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "berth/stats/v1/stats.grpc.pb.h"
#include "berth/stats/v1/stats.pb.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/stats/collector.h"

namespace berth::driver_common {

// The in-process measurement of one task: its cgroup's collector, made on the
// first in-process sample and kept for the next ones (CPU percent is the delta
// between two samples of one collector). One per task, owned by the driver's
// record of the task, so that it goes with the task. Thread-safe.
class InProcessStats {
 public:
  InProcessStats() = default;
  InProcessStats(const InProcessStats&) = delete;
  InProcessStats& operator=(const InProcessStats&) = delete;

 private:
  friend class TaskStatsSource;
  absl::Mutex mu_;
  std::unique_ptr<stats::Collector> collector_ ABSL_GUARDED_BY(mu_);
};

// berth-stats' socket and the stub dialled to it, and the sampling of a task
// with its in-process fallback. Thread-safe.
class TaskStatsSource {
 public:
  // `mounts`: the host's cgroup layout, for in-process collectors; `cpu_mhz`:
  // one core's MHz, for their total_ticks (0 if unknown); `socket`:
  // berth-stats' socket, empty for in-process measurement only.
  TaskStatsSource(stats::CgroupMounts mounts, double cpu_mhz,
                  std::string socket);

  TaskStatsSource(const TaskStatsSource&) = delete;
  TaskStatsSource& operator=(const TaskStatsSource&) = delete;

  // Uses berth-stats at `socket` from now on (empty: none); a change drops
  // the stub dialled to the old one. Tasks already registered are not moved:
  // the new berth-stats answers NOT_FOUND for them and Sample registers them.
  void SetSocket(const std::string& socket) ABSL_LOCKS_EXCLUDED(mu_);

  // Registers the task's cgroup with berth-stats, if it is configured and can
  // be reached. ALREADY_EXISTS is success; other failures are logged (a
  // WARNING naming the task), not returned: Sample then measures in-process.
  void Register(const std::string& task_id, const std::string& cgroup_path)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Unregisters the task from berth-stats, if it is configured and can be
  // reached. NOT_FOUND is success; other failures are logged.
  void Unregister(const std::string& task_id) ABSL_LOCKS_EXCLUDED(mu_);

  // One sample of the task: from berth-stats when it is configured and
  // answers (a NOT_FOUND registers the task again and asks once more), else
  // from the task's cgroup in-process through `in_process`. In-process errors
  // are the collector's, prefixed with "task <id>: ". The sample's task_id is
  // `task_id`.
  absl::StatusOr<stats::v1::TaskResourceUsage> Sample(
      const std::string& task_id, const std::string& cgroup_path,
      InProcessStats& in_process) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The stub to berth-stats, dialled on first use; null when no socket is
  // configured or it cannot be reached (logged; dialled again next time).
  std::shared_ptr<stats::v1::StatsService::Stub> Stub()
      ABSL_LOCKS_EXCLUDED(mu_);
  void Register(stats::v1::StatsService::Stub& stub, const std::string& task_id,
                const std::string& cgroup_path);
  absl::StatusOr<stats::v1::TaskResourceUsage> SampleInProcess(
      const std::string& task_id, const std::string& cgroup_path,
      InProcessStats& in_process);

  const stats::CgroupMounts mounts_;
  const double cpu_mhz_;

  absl::Mutex mu_;
  std::string socket_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<stats::v1::StatsService::Stub> stub_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_TASK_STATS_SOURCE_H_
