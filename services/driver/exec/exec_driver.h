// berth-driver-exec: tasks as processes in their own pid, mount, ipc and uts
// namespaces (and the network namespace the node gives), in a cgroup of
// their own, each with berth-task-init as PID 1 (init/task_init.cc) and no
// other per-task process. Tasks outlive the driver: RecoverTask re-adopts
// them from the handle's ExecTaskState, and an exit that happened while the
// driver was down is read back from the exit record the init left.
//
// A task's files, in its task directory (TaskConfig.task_dir, else
// <state dir>/tasks/<id>), which is also its default working directory:
//   logs/stdout.log, logs/stderr.log   output, rotated to .1, .2, ... at
//                                      LogConfig.max_file_bytes
//   .berth/exit                        how the program ended (the init)
//   .berth/init.log                    the init's own messages
//   .berth/attach.sock                 the run's attach socket (AttachTask),
//                                      served by the init
//
// In the driver's own state directory (which no task can write to):
//   starts/<id>                        the task's start record: the handle
//                                      StartTask returns (start_record.h),
//                                      written before the init starts,
//                                      again with its pid as soon as it is
//                                      spawned, removed by DestroyTask (or a
//                                      failed StartTask). A driver killed in
//                                      StartTask after the init started
//                                      finds the run from it when asked
//                                      next (InspectTask, HandleOf).

#ifndef SERVICES_DRIVER_EXEC_EXEC_DRIVER_H_
#define SERVICES_DRIVER_EXEC_EXEC_DRIVER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.pb.h"
#include "plugins/sdk/attach.h"
#include "plugins/sdk/driver.h"
#include "plugins/sdk/exec.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/driver/common/exit_watcher.h"
#include "services/driver/common/task_spec.h"
#include "services/driver/common/task_stats_source.h"

namespace berth::exec_driver {

inline constexpr char kDriverName[] = "exec";
inline constexpr char kDriverVersion[] = "0.1.0";

struct ExecDriverOptions {
  // berth-task-init.
  std::string init_path;
  // Where the cgroup file systems are mounted, and the parent cgroup of the
  // tasks' cgroups.
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string cgroup_parent = "/berth";
  // The driver's state directory until SetConfig names the node's (then
  // <node state dir>/exec).
  std::string state_dir;
  // berth-stats' socket until SetConfig says (NodeContext.stats_socket);
  // empty: measure in-process.
  std::string stats_socket;
  // How long StartTask waits for the init to report.
  absl::Duration start_timeout = absl::Seconds(10);
  // Host directories bound read-only into each task's root (--root_dirs).
  std::vector<std::string> root_host_dirs{
      std::begin(driver_common::kDefaultHostDirs),
      std::end(driver_common::kDefaultHostDirs)};

  // Tests only: StartTask stops as if the driver were killed there, undoing
  // nothing (start record, cgroup, task directory and any started init
  // stay) and answering ABORTED; the id is free again. kBeforeInit: just
  // before the init is started; kAfterInit: once the init reported the
  // task's program started.
  enum class InterruptStart { kNever, kBeforeInit, kAfterInit };
  InterruptStart interrupt_start_for_test = InterruptStart::kNever;
  // Tests only: called with the init's pid as soon as it exists, before its
  // pid is recorded; an error fails the start as a failure to record would.
  std::function<absl::Status(pid_t)> init_spawned_for_test;
  // Tests only: called by InspectTask's recovery from a start record while
  // it holds the id reserved, before it reads the run's state.
  std::function<void(const std::string&)> recovery_reserved_for_test;
};

class ExecDriver : public plugin::Driver, public plugin::ExecStreamingDriver {
 public:
  explicit ExecDriver(ExecDriverOptions options);
  ~ExecDriver() override;

  plugin::DriverInfo Info() const override;
  plugin::v1::ConfigSchema TaskConfigSchema() const override;
  absl::Status SetConfig(const google::protobuf::Struct& config,
                         const plugin::v1::NodeContext& node) override;
  driver::v1::DriverCapabilities Capabilities() const override;

  absl::StatusOr<driver::v1::StartTaskResponse> StartTask(
      const driver::v1::TaskConfig& task) override;
  absl::StatusOr<driver::v1::ExitResult> WaitTask(
      const std::string& task_id, const plugin::CancelToken& cancel) override;
  absl::Status StopTask(const std::string& task_id, absl::Duration timeout,
                        int signal) override;
  absl::Status DestroyTask(const std::string& task_id, bool force) override;
  // A task this instance does not hold is looked for in its start record:
  // a run an earlier instance started is recovered from it (as RecoverTask
  // does), one whose init never started or is gone without an exit record
  // is NOT_FOUND.
  absl::StatusOr<driver::v1::TaskStatus> InspectTask(
      const std::string& task_id) override;
  absl::StatusOr<driver::v1::TaskHandle> HandleOf(
      const std::string& task_id) override;
  absl::StatusOr<driver::v1::TaskStatus> RecoverTask(
      const driver::v1::TaskHandle& handle) override;
  absl::Status SignalTask(const std::string& task_id, int signal) override;
  absl::StatusOr<stats::v1::TaskResourceUsage> TaskStats(
      const std::string& task_id) override;
  absl::StatusOr<driver::v1::ExecTaskResponse> ExecTask(
      const std::string& task_id, const std::vector<std::string>& command,
      absl::Duration timeout, const plugin::CancelToken& cancel) override;
  absl::StatusOr<plugin::ExitStatus> ExecTaskStreaming(
      const plugin::ExecOptions& options) override;
  absl::Status AttachTask(plugin::AttachTaskStream* stream) override;

  // The fingerprint as of now (also published at construction and on
  // SetConfig).
  driver::v1::FingerprintResponse Probe() const;

 private:
  struct Task;

  absl::StatusOr<std::shared_ptr<Task>> Find(const std::string& task_id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Starts watching the task's init; `task` must be in tasks_.
  void Watch(const std::shared_ptr<Task>& task);
  // The init of `task` has exited: record how.
  void OnInitExited(const std::shared_ptr<Task>& task);
  // Kills every process of the task and waits (up to `timeout`) for the
  // init's exit to be recorded.
  absl::Status KillTask(const std::shared_ptr<Task>& task,
                        absl::Duration timeout);
  bool WaitExited(const std::shared_ptr<Task>& task, absl::Duration timeout);
  driver::v1::TaskStatus StatusOf(const Task& task) const;
  // InspectTask of an id not in tasks_ (`unknown` is its NOT_FOUND): the
  // run the task's start record names, recovered. The id is reserved
  // (tasks_[id] == nullptr) meanwhile, so that a DestroyTask waits for it.
  absl::StatusOr<driver::v1::TaskStatus> RecoverFromStartRecord(
      const std::string& task_id, const absl::Status& unknown);
  // DestroyTask of an id tasks_ holds as reserved by the caller (released
  // here): removes what an interrupted start left (its cgroup, task
  // directory and start record); NOT_FOUND when that went well.
  absl::Status DestroyUnknownTask(const std::string& task_id);
  // RecoverTask's work; `reserved`: the caller holds tasks_[id] == nullptr,
  // which the recovered task fills.
  absl::StatusOr<driver::v1::TaskStatus> Recover(
      const driver::v1::TaskHandle& handle, bool reserved);
  // ExecTask and ExecTaskStreaming: runs options.command in the task.
  absl::StatusOr<plugin::ExitStatus> RunExec(const plugin::ExecOptions& options,
                                             absl::Time deadline);
  std::string state_dir() const ABSL_LOCKS_EXCLUDED(mu_);

  const ExecDriverOptions options_;
  const stats::CgroupMounts mounts_;
  const absl::Status mounts_status_;
  // One core's MHz, for total_ticks of in-process samples (0 if unknown).
  const double cpu_mhz_;
  // berth-stats (NodeContext.stats_socket), else in-process collectors.
  driver_common::TaskStatsSource stats_;

  // Every task's isolation defaults: its root's host directories and the
  // default seccomp filter, compiled once here.
  driver_common::IsolationDefaults isolation_defaults_;
  // Why the default seccomp filter could not be compiled; tasks asking for
  // it are refused.
  absl::Status seccomp_status_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
  std::string state_dir_ ABSL_GUARDED_BY(mu_);

  // Last: its thread calls back into the driver until it is destroyed.
  driver_common::ExitWatcher watcher_;
};

}  // namespace berth::exec_driver

#endif  // SERVICES_DRIVER_EXEC_EXEC_DRIVER_H_
