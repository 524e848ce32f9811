// The mock driver: a configurable task driver for tests, built on the plugin
// SDK like any third-party driver (it depends on //plugins/sdk and the API
// only).
//
// A task is a real, unisolated process on the host, started through a
// monitor process (launcher.h) so that it, its output and its exit status
// survive the plugin. TaskConfig.driver_config:
//   command    string, required: the program (looked up on the task's PATH)
//   args       list of strings: its arguments
//   work_dir   string: where it runs, relative to the task directory (an
//              absolute path must lie inside it); made if missing; default
//              the task directory. Outside it: INVALID_ARGUMENT naming
//              driver_config.work_dir
//   exit_code  integer 0-255: report this exit code instead of the
//              process's when it exits (or when run_for ends it)
//   run_for    duration ("2s"): kill the process after this long; it is
//              then reported as exited with exit_code (default 0)
//   fake_stats {"cpu_percent": x, "rss_bytes": n}: TaskStats reports these
//              instead of what /proc says
// The task's environment is PATH (a default), HOME=/, BERTH_TASK_ID and
// TaskConfig.env; its stdin is /dev/null; the monitor copies its stdout and
// stderr to <task dir>/logs/stdout.log and stderr.log, rotated per
// TaskConfig.logs (plugins/sdk/rotating_log.h).
//
// Task directory: TaskConfig.task_dir (the node makes it, empty; made here
// if missing), or <state dir>/tasks/<task id> when that is empty. The driver
// makes logs/ and work_dir in it; DestroyTask removes those (or the whole
// directory when the driver made it).
//
// State directory: <NodeContext.state_dir>/mock once SetConfig gave one,
// before that MockDriverOptions.default_state_dir (main.cc: --state_dir, by
// default <parent of $BERTH_PLUGIN_SOCKET_DIR>/mock-state). It holds
// <task id>.exit (the raw wait status, written by the monitor); DestroyTask
// removes it. A task keeps the directories it started with (they are
// recorded in its handle).
//
// Networks: the capabilities list NETWORK_ISOLATION_MODE_HOST only, and a
// task asking for another mode is refused (INVALID_ARGUMENT naming
// network.mode, nothing left behind). With
// MockDriverOptions.must_create_network, the capabilities say so and list
// GROUP too: a GROUP task (and what is exec'd in it) joins
// network.namespace_path (setns; none: the host's network). The host calls
// CreateNetwork/DestroyNetwork instead of its network hook: a network is a
// record, <state dir>/networks/<allocation id> (its hostname), with a
// documentation address (192.0.2.1/24, never routed) and no namespace.
//
// Exec (ExecTask, ExecTaskStreaming) runs the command on the host with the
// task's environment and working directory, in a session of its own, with a
// terminal (TERM=xterm unless the task's env sets TERM) or pipes. When the
// command exits, what is left of its process group is killed; cancelling
// kills it.

#ifndef PLUGINS_EXAMPLES_MOCK_DRIVER_MOCK_DRIVER_H_
#define PLUGINS_EXAMPLES_MOCK_DRIVER_MOCK_DRIVER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "plugins/sdk/attach.h"
#include "plugins/sdk/driver.h"
#include "plugins/sdk/exec.h"

namespace berth::mock {

inline constexpr char kDriverName[] = "mock";
inline constexpr char kDriverVersion[] = "0.1.0";

struct MockDriverOptions {
  // Where task files go until SetConfig names the node's state directory.
  std::string default_state_dir;
  // Whether the host must call CreateNetwork (see above).
  bool must_create_network = false;
  // Lists NETWORK_ISOLATION_MODE_GROUP and joins namespace_path, as with
  // must_create_network but with the node's own networks (berth-netns).
  bool join_networks = false;
  // Claims attach (and serves AttachTask) as an echo, for the node's tests:
  // what a caller sends to a task's stdin comes back as its stdout, until
  // the task exits (the stream then ends OK, without an exit frame). Asking
  // for stdin of a task started without TaskConfig.stdin_open is
  // FAILED_PRECONDITION.
  bool attach = false;
  // Claims no exec (exec, exec_streaming, exec_tty unset) and refuses
  // ExecTask and ExecTaskStreaming as UNIMPLEMENTED, for the node's tests of
  // what needs exec (health checks).
  bool no_exec = false;
  // RecoverTask waits this long before it looks at the task, as a slow
  // driver recovering many tasks would (for the node's tests of recovery).
  absl::Duration recover_delay = absl::ZeroDuration();
  // Each started task's handle is also kept in <state dir>/<id>.handle
  // (removed by DestroyTask), and InspectTask of a task this instance does
  // not know recovers it from there: a driver that finds its tasks again
  // after a restart without the node's handle.
  bool keep_handles = false;
  // When this file exists, StartTask removes it and, once the task runs,
  // the mock kills itself (SIGKILL) before replying: one start whose reply
  // is lost with the driver.
  std::string die_after_start;
  // StartTask waits this long once the task runs before it replies.
  absl::Duration start_reply_delay = absl::ZeroDuration();
  // HandleOf answers UNIMPLEMENTED (InspectTask gives no handle), as a
  // driver built before Driver::HandleOf.
  bool no_handle_of = false;
};

class MockDriver : public plugin::Driver, public plugin::ExecStreamingDriver {
 public:
  explicit MockDriver(MockDriverOptions options);
  // Stops watching the tasks; they keep running (a new instance recovers
  // them from their handles).
  ~MockDriver() override;

  plugin::DriverInfo Info() const override;
  plugin::v1::ConfigSchema TaskConfigSchema() const override;
  absl::Status SetConfig(const google::protobuf::Struct& config,
                         const plugin::v1::NodeContext& node) override
      ABSL_LOCKS_EXCLUDED(mu_);
  driver::v1::DriverCapabilities Capabilities() const override;
  absl::StatusOr<driver::v1::StartTaskResponse> StartTask(
      const driver::v1::TaskConfig& task) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<driver::v1::ExitResult> WaitTask(
      const std::string& task_id, const plugin::CancelToken& cancel) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StopTask(const std::string& task_id, absl::Duration timeout,
                        int signal) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DestroyTask(const std::string& task_id, bool force) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<driver::v1::TaskStatus> InspectTask(
      const std::string& task_id) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<driver::v1::TaskStatus> RecoverTask(
      const driver::v1::TaskHandle& handle) override ABSL_LOCKS_EXCLUDED(mu_);
  // The handle StartTask returned for the task (or RecoverTask took), with
  // its state now (running or exited).
  absl::StatusOr<driver::v1::TaskHandle> HandleOf(
      const std::string& task_id) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SignalTask(const std::string& task_id, int signal) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<stats::v1::TaskResourceUsage> TaskStats(
      const std::string& task_id) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<driver::v1::ExecTaskResponse> ExecTask(
      const std::string& task_id, const std::vector<std::string>& command,
      absl::Duration timeout, const plugin::CancelToken& cancel) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<plugin::ExitStatus> ExecTaskStreaming(
      const plugin::ExecOptions& options) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AttachTask(plugin::AttachTaskStream* stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<driver::v1::CreateNetworkResponse> CreateNetwork(
      const driver::v1::CreateNetworkRequest& request) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DestroyNetwork(const std::string& allocation_id) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // The directory new tasks put their files in.
  std::string state_dir() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Task;

  // The task, or NOT_FOUND naming the id.
  absl::StatusOr<std::shared_ptr<Task>> Find(const std::string& task_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  driver::v1::TaskStatus StatusOf(const Task& task)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The task's handle, in state `state`.
  static driver::v1::TaskHandle MakeHandle(const Task& task,
                                           driver::v1::TaskState state);
  // Adds a running task and starts watching it.
  void Adopt(std::shared_ptr<Task> task, absl::string_view event)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Watch(std::shared_ptr<Task> task) ABSL_LOCKS_EXCLUDED(mu_);
  void MarkExited(Task& task, const driver::v1::ExitResult& result)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `signal` to the task's process group while its leader is not
  // reaped; false if it already exited.
  bool SignalGroup(Task& task, int signal) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `timeout` for the task to exit; whether it did.
  bool AwaitExit(const Task& task, absl::Duration timeout);
  // The exec'd command's spec for a running task.
  absl::StatusOr<std::shared_ptr<Task>> FindRunning(const std::string& task_id,
                                                    absl::string_view what)
      ABSL_LOCKS_EXCLUDED(mu_);

  // <state dir>/networks/<allocation_id>, or INVALID_ARGUMENT naming the
  // field when the id cannot be a file name.
  absl::StatusOr<std::string> NetworkRecordPath(
      const std::string& allocation_id) const ABSL_LOCKS_EXCLUDED(mu_);

  const bool must_create_network_;
  const bool join_networks_;
  const bool attach_;
  const bool no_exec_;
  const absl::Duration recover_delay_;
  const bool keep_handles_;
  const std::string die_after_start_;
  const absl::Duration start_reply_delay_;
  const bool no_handle_of_;
  // Serializes StartTask and RecoverTask, so that a task id is taken once.
  absl::Mutex start_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::string state_dir_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::mock

#endif  // PLUGINS_EXAMPLES_MOCK_DRIVER_MOCK_DRIVER_H_
