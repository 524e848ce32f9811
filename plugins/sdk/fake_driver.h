// A driver for the SDK's own tests: tasks are entries in a map (nothing
// runs), plus exec behaviours chosen by the command's first word.

#ifndef PLUGINS_SDK_FAKE_DRIVER_H_
#define PLUGINS_SDK_FAKE_DRIVER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "plugins/sdk/driver.h"
#include "plugins/sdk/exec.h"

namespace berth::plugin::testing {

// Tasks: StartTask adds a RUNNING task (config {"command": ...} required by
// its schema); Exit(id, code) makes it exit; WaitTask blocks until then.
class FakeDriver : public Driver {
 public:
  DriverInfo Info() const override;
  v1::ConfigSchema TaskConfigSchema() const override;
  driver::v1::DriverCapabilities Capabilities() const override;
  absl::StatusOr<driver::v1::StartTaskResponse> StartTask(
      const driver::v1::TaskConfig& task) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<driver::v1::ExitResult> WaitTask(
      const std::string& task_id, const CancelToken& cancel) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StopTask(const std::string& task_id, absl::Duration timeout,
                        int signal) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DestroyTask(const std::string& task_id, bool force) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<driver::v1::TaskStatus> InspectTask(
      const std::string& task_id) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<stats::v1::TaskResourceUsage> TaskStats(
      const std::string& task_id) override ABSL_LOCKS_EXCLUDED(mu_);
  // Per handle_mode(): the Driver default (UNIMPLEMENTED), the task's own
  // handle (config, state, driver_state "fake-run:<id>" as StartTask's), or
  // a handle whose config names another task.
  absl::StatusOr<driver::v1::TaskHandle> HandleOf(
      const std::string& task_id) override ABSL_LOCKS_EXCLUDED(mu_);

  enum class HandleMode { kUnimplemented, kOwn, kOtherTask };
  void set_handle_mode(HandleMode mode) ABSL_LOCKS_EXCLUDED(mu_);

  void Exit(const std::string& task_id, int exit_code) ABSL_LOCKS_EXCLUDED(mu_);
  // The last StopTask's signal and timeout.
  int last_stop_signal() const ABSL_LOCKS_EXCLUDED(mu_);
  int stats_samples() const ABSL_LOCKS_EXCLUDED(mu_);
  // WaitTask calls that returned because they were cancelled.
  int cancelled_waits() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Task {
    driver::v1::TaskConfig config;
    std::optional<driver::v1::ExitResult> exit;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Task> tasks_ ABSL_GUARDED_BY(mu_);
  int last_stop_signal_ ABSL_GUARDED_BY(mu_) = 0;
  int stats_samples_ ABSL_GUARDED_BY(mu_) = 0;
  int cancelled_waits_ ABSL_GUARDED_BY(mu_) = 0;
  HandleMode handle_mode_ ABSL_GUARDED_BY(mu_) = HandleMode::kUnimplemented;
};

// FakeDriver with the high-level exec interface. Commands:
//   echo            copies stdin to stdout until its end; exit 0
//   mixed           "out" on stdout, "err" on stderr; exit 43
//   concurrent N    two threads write N numbered lines each, to stdout and
//                   stderr at once; exit 7
//   big N           one Write of N bytes of 'x' to stdout; exit 0
//   resize-last     copies stdin to stdout without looking at resizes; at
//                   the end of stdin writes the latest resize
//                   ("ROWSxCOLUMNS", or "none") to stderr and whether a
//                   second TakeLatest found one ("again" / "empty"); exit 0
//   wait-cancel     blocks until cancelled; counts it in cancelled_execs()
class FakeExecDriver : public FakeDriver, public ExecStreamingDriver {
 public:
  absl::StatusOr<ExitStatus> ExecTaskStreaming(
      const ExecOptions& options) override;

  // Notified when a wait-cancel exec has started.
  absl::Notification& wait_cancel_started() { return wait_cancel_started_; }
  int cancelled_execs() const ABSL_LOCKS_EXCLUDED(exec_mu_);

 private:
  absl::Notification wait_cancel_started_;
  mutable absl::Mutex exec_mu_;
  int cancelled_execs_ ABSL_GUARDED_BY(exec_mu_) = 0;
};

// FakeDriver with the raw exec interface: sends "setup: <command>" on
// stdout, echoes stdin frames as stdout frames, and at stdin_close (or the
// end of the requests) sends exit 5.
class FakeRawExecDriver : public FakeDriver, public RawExecStreamingDriver {
 public:
  absl::Status ExecTaskStreamingRaw(ExecTaskStream* stream) override;
};

}  // namespace berth::plugin::testing

#endif  // PLUGINS_SDK_FAKE_DRIVER_H_
