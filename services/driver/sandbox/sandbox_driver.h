// berth-driver-sandbox: every task gets a sandbox (ARCHITECTURE.md, "A
// sandboxed task"). berth-agent runs as the program of a berth-task-init (new
// pid, mount, uts and ipc namespaces, joining the task's network namespace);
// the driver registers it with berth-proxy, allocates a token, starts
// berth-shim (stdin /dev/null; --task_log_dir=<task_dir>/logs: the shim
// writes the task's output files itself, rotated; its own stdout and stderr,
// its messages, go to .berth/shim.log), and asks the proxy for NewContainer.
// Each sandbox (the init, the agent and every process in it) is in a cgroup
// of its own with the task's limits, measured for TaskStats. The task has
// ended when its shim has (all output written); how it ended (code, signal)
// comes from the agent's WaitProcess, not from the shim's exit status, which
// cannot tell exit code 130 from SIGINT. Exec: a token and a shim of its own,
// over pipes pumped to the SDK's streams, then ExecCmd. AttachTask: the
// task's shim serves the run's attach socket, made by the driver and passed
// to it (services/driver/common/attach_client.h); a tty task's process has
// a terminal in the agent, a stdin_open or tty one its stdin from the
// attached callers.
//
// Tasks are recoverable: StartTask's handle carries the init, shim, token,
// process and cgroup (sandbox_state.proto); the sandbox outlives the driver
// (killed or shut down), and RecoverTask re-adopts it, or reports how it
// ended while no driver ran.
//
// A task's files, in its task directory:
//   logs/stdout.log, logs/stderr.log   the task's output (written by the shim)
//   .berth/agent.sock                  the agent's socket
//   .berth/init.log, .berth/agent-logs the init's and the agent's own messages
//   .berth/shim.log                    the task's shim's own messages
//   .berth/attach.sock                 the run's attach socket (the shim
//                                      serves it: AttachTask)
//   .berth/exit                        how the task ended, once it has
//
// The code: the lifecycle (start, wait, signals, stop, destroy, stats) in
// sandbox_driver.cc, RecoverTask in recovery.cc, ExecTask and
// ExecTaskStreaming in exec.cc, a task's state in sandbox_task.h; the calls
// to the agent in agent_client.h, starting berth-shim in shim_launcher.h.

#ifndef SERVICES_DRIVER_SANDBOX_SANDBOX_DRIVER_H_
#define SERVICES_DRIVER_SANDBOX_SANDBOX_DRIVER_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "berth/stats/v1/stats.pb.h"
#include "plugins/sdk/driver.h"
#include "plugins/sdk/exec.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/driver/common/exit_watcher.h"
#include "services/driver/common/task_spec.h"
#include "services/driver/common/task_stats_source.h"
#include "services/driver/sandbox/agent_libraries.h"

namespace berth::sandbox_driver {

inline constexpr char kDriverName[] = "sandbox";
inline constexpr char kDriverVersion[] = "0.1.0";
// The least pids limit a sandbox task takes: its init and berth-agent share
// the task's cgroup and count in it (the agent has 14 threads idle and one
// more per process started through it); below this the agent cannot start.
inline constexpr uint64_t kMinSandboxPids = 32;

struct SandboxDriverOptions {
  std::string agent_path;  // berth-agent
  // berth-agent-boot (static; services/agent/boot.h), which starts the agent
  // in a task's own root. Empty: next to agent_path (in its directory, else
  // in the directory of its real path).
  std::string agent_boot_path;
  std::string shim_path;  // berth-shim
  std::string init_path;  // berth-task-init
  // berth-proxy's socket until SetConfig names one (NodeContext.proxy_socket).
  std::string proxy_socket;
  // Task directories (<dir>/tasks/<id>) until SetConfig names the node's
  // state directory (then <state dir>/sandbox).
  std::string state_dir;
  // How long StartTask waits for the agent's socket.
  absl::Duration start_timeout = absl::Seconds(10);
  // Where the cgroup file systems are, and the parent of the tasks' cgroups
  // (<parent>/<task id>).
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string cgroup_parent = "/berth-sandbox";
  // berth-stats' socket until SetConfig says (NodeContext.stats_socket);
  // empty: TaskStats measures the cgroup in-process.
  std::string stats_socket;
  // Tests only: StartTask as a kill -9 or a lost reply cuts it off.
  enum class StartCut {
    kNone,
    // Ends (ABORTED, nothing undone) before NewContainer is sent.
    kBeforeNewContainer,
    // Ends (ABORTED, nothing undone) after NewContainer, before the start
    // record has the process id.
    kAfterNewContainer,
    // NewContainer's reply is taken as lost (UNAVAILABLE): the start goes on
    // as it does when berth-proxy or the shim dies with the reply.
    kLoseNewContainerReply,
  };
  StartCut start_cut_for_test = StartCut::kNone;
};

class SandboxDriver : public plugin::Driver,
                      public plugin::ExecStreamingDriver {
 public:
  explicit SandboxDriver(SandboxDriverOptions options);
  // Leaves every sandbox running, for RecoverTask after a restart.
  ~SandboxDriver() override;

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
  absl::StatusOr<driver::v1::TaskStatus> InspectTask(
      const std::string& task_id) override;
  absl::StatusOr<driver::v1::TaskStatus> RecoverTask(
      const driver::v1::TaskHandle& handle) override;
  absl::StatusOr<driver::v1::TaskHandle> HandleOf(
      const std::string& task_id) override;
  absl::StatusOr<stats::v1::TaskResourceUsage> TaskStats(
      const std::string& task_id) override;
  absl::Status SignalTask(const std::string& task_id, int signal) override;
  absl::StatusOr<driver::v1::ExecTaskResponse> ExecTask(
      const std::string& task_id, const std::vector<std::string>& command,
      absl::Duration timeout, const plugin::CancelToken& cancel) override;
  absl::StatusOr<plugin::ExitStatus> ExecTaskStreaming(
      const plugin::ExecOptions& options) override;
  absl::Status AttachTask(plugin::AttachTaskStream* stream) override;

  driver::v1::FingerprintResponse Probe() const;

 private:
  struct Task;  // sandbox_task.h

  absl::StatusOr<std::shared_ptr<Task>> Find(const std::string& task_id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnShimExited(const std::shared_ptr<Task>& task);
  // Watches the task's shim: OnShimExited when it ends. `prefix` names the
  // task in the error logged when the watch cannot be set.
  void WatchShim(const std::shared_ptr<Task>& task, const std::string& prefix);
  // Records how the task ended (its exit file), tears the sandbox down and
  // marks the task exited.
  void Finish(const std::shared_ptr<Task>& task, driver::v1::ExitResult result);
  // Ends the sandbox: DestroySandbox on the agent, its init killed and
  // reaped, the sandbox unregistered from the proxy. Idempotent.
  void Teardown(Task& task);
  // The handle of `task`'s run, as StartTask returns it.
  driver::v1::TaskHandle HandleOfTask(const Task& task) const;
  // Keeps `task`'s handle as its start record (start_record.h): a driver
  // killed before StartTask returns finds the run by it.
  absl::Status KeepStartRecord(const Task& task);
  // InspectTask of a task this driver does not hold: the run a driver killed
  // during its StartTask left, recovered from its start record; NOT_FOUND
  // when there is none or its process never started.
  absl::StatusOr<driver::v1::TaskStatus> RecoverFromStartRecord(
      const std::string& task_id);
  // RecoverTask's work; `reserved`: the caller holds the id's slot in
  // tasks_ (nullptr), which the recovered task fills.
  absl::StatusOr<driver::v1::TaskStatus> Recover(
      const driver::v1::TaskHandle& handle, bool reserved);
  // DestroyTask of a task this driver has no record of: removes what the
  // driver's naming says is that task's, left by an instance of the driver
  // killed during its StartTask (the node then records the start failed, and
  // its DestroyTask comes to the next instance). Its cgroup
  // <cgroup_parent>/<task_id> with every process in it (the sandbox's init,
  // berth-agent and the task's processes), its record at berth-proxy, and
  // the task directory the driver chose (<state_dir>/tasks/<task_id>). The
  // id names paths and comes from the caller: INVALID_ARGUMENT naming it
  // unless it is one StartTask accepts. Nothing for an id being started.
  absl::Status RemoveUnknownTask(const std::string& task_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // stats_.Register for a task that has a cgroup.
  void RegisterStats(const Task& task);
  bool WaitExited(const std::shared_ptr<Task>& task, absl::Duration timeout);
  absl::Status ProxySignal(const std::string& task_id, const std::string& token,
                           int signal);
  // The signal to the task's process through the proxy, else (the proxy
  // forgot it) straight through its agent.
  absl::Status SignalMain(const Task& task, int signal);
  absl::StatusOr<plugin::ExitStatus> RunExec(const plugin::ExecOptions& options,
                                             absl::Time deadline);
  driver::v1::TaskStatus StatusOf(const Task& task) const;
  std::string state_dir() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::shared_ptr<proxy::v1::ProxyService::Stub>> Proxy()
      ABSL_LOCKS_EXCLUDED(mu_);

  // Where berth-agent's loader and libraries are, listed once per agent
  // binary (its device, inode, size and modification time) and bound into
  // every own root.
  absl::StatusOr<AgentLibraries> Libraries() ABSL_LOCKS_EXCLUDED(libraries_mu_);

  const SandboxDriverOptions options_;
  // Every task gets its own root, Docker's default capabilities,
  // no_new_privs and the default seccomp filter unless it asks otherwise.
  driver_common::IsolationDefaults isolation_defaults_;
  // Why there is no default seccomp filter (tasks needing it are refused).
  absl::Status seccomp_status_;

  absl::Mutex libraries_mu_;
  std::string libraries_key_ ABSL_GUARDED_BY(libraries_mu_);
  AgentLibraries libraries_ ABSL_GUARDED_BY(libraries_mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
  std::string state_dir_ ABSL_GUARDED_BY(mu_);
  std::string proxy_socket_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<proxy::v1::ProxyService::Stub> proxy_ ABSL_GUARDED_BY(mu_);
  const stats::CgroupMounts mounts_;
  const absl::Status mounts_status_;
  const double cpu_mhz_;
  // berth-stats (NodeContext.stats_socket), else in-process collectors.
  driver_common::TaskStatsSource stats_;

  // Last: its thread calls back into the driver until it is destroyed.
  driver_common::ExitWatcher watcher_;
};

}  // namespace berth::sandbox_driver

#endif  // SERVICES_DRIVER_SANDBOX_SANDBOX_DRIVER_H_
