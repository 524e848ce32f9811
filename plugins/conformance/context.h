// What the suite's checks share: the driver plugin under test (launched
// through the handshake with //plugins/host, relaunched after a check killed
// it), its capabilities, a temporary directory, the tasks a check started
// (destroyed after it) and deadlines for every call.

#ifndef PLUGINS_CONFORMANCE_CONTEXT_H_
#define PLUGINS_CONFORMANCE_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "google/protobuf/struct.pb.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/plugin_process.h"

namespace berth::conformance {

// The deadline of a call that should answer at once.
inline constexpr absl::Duration kRpcTimeout = absl::Seconds(10);
// How long a task expected to end soon may take (WaitTask's deadline).
inline constexpr absl::Duration kTaskEndTimeout = absl::Seconds(30);

// What the command line asks of the suite.
struct SuiteOptions {
  // The driver plugin's executable.
  std::string plugin;
  // Driver-specific task configuration (JSON object); "command" and "args"
  // are merged into it.
  std::string task_config_json;
  // Where the plugin puts its socket; empty: a directory in the suite's own
  // temporary directory.
  std::string socket_dir;
  // How long the plugin has to print its handshake line and be healthy.
  absl::Duration start_timeout = absl::Seconds(10);
  // Only the checks whose name contains this; empty: all.
  std::string filter;
  // The first host id the isolation_user_namespaces check maps the task's
  // root to (a range of 65536 ids from it, unused on the host).
  uint32_t userns_base = 3400000;
};

// The DriverCapabilities a check may need.
enum class Capability {
  kSendSignals,
  kExec,
  kExecStreaming,
  kExecTty,
  kRecover,
  kStats,
  kAttach,
};

// The field's name in DriverCapabilities, e.g. "exec_tty".
absl::string_view CapabilityName(Capability capability);
bool HasCapability(const driver::v1::DriverCapabilities& capabilities,
                   Capability capability);

// A check's outcome that is neither a pass nor a failure: the check cannot
// run against this driver, for `reason`.
absl::Status SkipCheck(absl::string_view reason);
bool IsSkip(const absl::Status& status);

// A check's failure that is not an error returned by a call: the driver
// answered, but not what the conventions say (UNKNOWN, marked so that the
// report prints only the message).
absl::Status Mismatch(absl::string_view message);

// Cancels the calls of checks (not those of the clean-up) when the user
// interrupts the suite. Thread-safe.
class Interruption {
 public:
  void Interrupt();
  bool interrupted() const { return interrupted_.load(); }
  plugin::host::CallCanceller* canceller() { return &canceller_; }

 private:
  std::atomic<bool> interrupted_{false};
  plugin::host::CallCanceller canceller_;
};

class Context {
 public:
  // Makes the suite's temporary directory (mkdtemp "/tmp/berth-XXXXXX":
  // short enough for socket paths) and parses the task configuration.
  // `interruption` is not owned and must outlive the context.
  static absl::StatusOr<std::unique_ptr<Context>> Create(
      SuiteOptions options, Interruption* interruption);

  // Close().
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Destroys what tasks are left, stops the plugin (Shutdown, then kill)
  // and removes the temporary directory. Returns what could not be cleaned
  // up. Idempotent.
  absl::Status Close();

  const SuiteOptions& options() const { return options_; }
  // The suite's temporary directory.
  const std::string& work_dir() const { return work_dir_; }
  // The directory the plugin puts its socket in.
  const std::string& socket_dir() const { return socket_dir_; }
  // The state directory the plugin is given (NodeContext.state_dir); task
  // directories are in it.
  const std::string& state_dir() const { return state_dir_; }
  // The plugin's executable, absolute.
  const std::string& binary() const { return binary_; }

  // --- The plugin.

  // Launches the plugin unless one runs: the handshake (plugins/host), then
  // PluginService.SetConfig with an empty config and a node whose state
  // directory is in the temporary directory, then
  // DriverService.GetCapabilities. Once the very first launch failed, every
  // later call returns that error at once.
  absl::Status EnsurePlugin();
  // Whether the very first launch failed (nothing can be checked then), and
  // why.
  bool launch_failed() const { return first_launch_error_.has_value(); }
  absl::Status launch_error() const {
    return first_launch_error_.value_or(absl::OkStatus());
  }
  // The running plugin and its client; only after EnsurePlugin succeeded.
  plugin::host::PluginProcess& plugin();
  plugin::host::DriverClient& driver();
  // The capabilities of the last plugin launched; null before.
  const driver::v1::DriverCapabilities* capabilities() const {
    return capabilities_ ? &*capabilities_ : nullptr;
  }
  // Kills the plugin (SIGKILL), as a crash would; the next EnsurePlugin
  // launches another.
  plugin::host::PluginExit KillPlugin();
  // Stops the plugin the way a host does (Shutdown, wait, then kill).
  plugin::host::PluginExit StopPlugin();

  // Options of a call of a check: a deadline `timeout` from now, cancelled
  // when the suite is interrupted.
  plugin::host::CallOptions Rpc(absl::Duration timeout = kRpcTimeout) const;
  plugin::host::CallOptions RpcUntil(absl::Time deadline) const;

  // --- Tasks.

  // A task config running `/bin/sh -c SCRIPT`: a fresh id (from `hint`), the
  // --task-config fields with "command" and "args" merged in, env
  // BERTH_CONFORMANCE_TASK=<id>, and task_dir a fresh directory in the
  // temporary directory (the task's working directory, CONVENTIONS.md).
  absl::StatusOr<driver::v1::TaskConfig> ShellTask(absl::string_view hint,
                                                   absl::string_view script);
  // A config as ShellTask's but whose driver config lacks "command".
  absl::StatusOr<driver::v1::TaskConfig> TaskWithoutCommand(
      absl::string_view hint);
  // StartTask, remembering the task (and its handle) so that it is
  // destroyed after the check, whatever happens.
  absl::StatusOr<driver::v1::StartTaskResponse> StartTask(
      const driver::v1::TaskConfig& task);
  // The handle StartTask returned for `task_id`.
  std::optional<driver::v1::TaskHandle> HandleOf(
      const std::string& task_id) const;
  // DestroyTask; on success the task is not destroyed again after the check.
  absl::Status DestroyTask(const std::string& task_id, bool force);
  // Destroys (force) every task the check started and did not destroy; a
  // task that an earlier instance of the plugin started is recovered first.
  // Called by the runner after every check.
  absl::Status CleanUpTasks();

  // WaitTask with a deadline `timeout` away.
  absl::StatusOr<driver::v1::ExitResult> WaitTask(
      const std::string& task_id, absl::Duration timeout = kTaskEndTimeout);
  absl::StatusOr<driver::v1::TaskStatus> InspectTask(
      const std::string& task_id);
  absl::Status StopTask(const std::string& task_id, absl::string_view signal,
                        absl::Duration timeout);

  // Why the suite cannot see the files a task writes in its directory:
  // only with FS_ISOLATION_NONE (read on the host) or the exec capability
  // (read with ExecTask) can it. nullopt when it can.
  std::optional<std::string> WhyTaskFilesUnobservable() const;
  // Waits (polling, up to `timeout`) until the task has made the file
  // `name` in its directory: how a check knows that a task's shell has set
  // its traps. DEADLINE_EXCEEDED naming the file after `timeout`.
  absl::Status WaitForTaskFile(const driver::v1::TaskConfig& task,
                               absl::string_view name,
                               absl::Duration timeout = absl::Seconds(15));

 private:
  struct TrackedTask {
    std::string id;
    driver::v1::TaskHandle handle;
    // The launch of the plugin that started it.
    int generation = 0;
    bool destroyed = false;
  };

  Context(SuiteOptions options, Interruption* interruption);

  absl::StatusOr<driver::v1::TaskConfig> NewTask(
      absl::string_view hint, google::protobuf::Struct driver_config);
  // Options of a clean-up call: a deadline, never cancelled.
  static plugin::host::CallOptions CleanupRpc(
      absl::Duration timeout = absl::Seconds(30));
  absl::Status DestroyTracked(TrackedTask& task);

  const SuiteOptions options_;
  Interruption* const interruption_;
  std::string binary_;
  std::string plugin_name_;
  std::string work_dir_;
  std::string socket_dir_;
  std::string state_dir_;
  google::protobuf::Struct base_config_;
  bool closed_ = false;

  std::unique_ptr<plugin::host::PluginProcess> plugin_;
  // Plugins killed or stopped by checks, kept until Close so that a client
  // or stream a check still holds stays valid.
  std::vector<std::unique_ptr<plugin::host::PluginProcess>> retired_;
  // Successful launches so far; a task remembers the one that started it.
  int generation_ = 0;
  // Launches tried so far, and the socket directories made for relaunches.
  int launches_ = 0;
  std::vector<std::string> relaunch_dirs_;
  std::optional<absl::Status> first_launch_error_;
  std::optional<driver::v1::DriverCapabilities> capabilities_;

  int task_counter_ = 0;
  std::vector<TrackedTask> tasks_;
  // Tasks whose clean-up failed after their check: tried again by Close.
  std::vector<TrackedTask> leftovers_;
};

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_CONTEXT_H_
