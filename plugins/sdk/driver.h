// The interface a C++ task driver implements: berth.plugin.v1 (identity,
// configuration) and berth.driver.v1 (tasks). Serve() (serve.h) puts a
// Driver on a socket; the SDK does everything at the RPC edge: it checks
// requests (missing ids, the task configuration against TaskConfigSchema(),
// signals, intervals), converts absl::Status to gRPC statuses, runs the
// stream loops (Fingerprint, TaskEvents, TaskStats at the requested
// interval, ExecTaskStreaming, see exec.h) and handles cancellation.
//
//   class MyDriver : public berth::plugin::Driver {
//    public:
//     DriverInfo Info() const override { return {"mine", "1.0.0", "..."}; }
//     ...
//   };
//
//   int main(int argc, char** argv) {
//     berth::plugin::InitPlugin(argc, argv, "my driver", "1.0.0");
//     MyDriver driver;
//     return berth::plugin::Serve(driver);
//   }
//
// Every method may be called from several threads at once. Errors are
// absl::Status whose message names the task id or field at fault:
// NOT_FOUND for an unknown task id, INVALID_ARGUMENT for a bad field,
// FAILED_PRECONDITION for a state that forbids the call, UNIMPLEMENTED for
// what the driver does not do (the default of the optional methods).

#ifndef PLUGINS_SDK_DRIVER_H_
#define PLUGINS_SDK_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "berth/stats/v1/stats.pb.h"
#include "google/protobuf/struct.pb.h"
#include "plugins/sdk/cancel.h"

namespace berth::plugin {

// Who a driver is (GetPluginInfo).
struct DriverInfo {
  // Unique on a node, e.g. "exec": the socket is <socket dir>/<name>.sock.
  // Letters, digits, '-' and '_'.
  std::string name;
  // The driver's own version (semantic versioning recommended).
  std::string version;
  // One line for `berth node status`.
  std::string description;
};

class TaskEventSubscription;
class AttachTaskStream;  // attach.h

class Driver {
 public:
  Driver();
  virtual ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // ---- berth.plugin.v1 ----

  virtual DriverInfo Info() const = 0;

  // Schema of SetConfig's config; the default accepts only an empty object.
  virtual v1::ConfigSchema PluginConfigSchema() const;

  // Schema of TaskConfig.driver_config; StartTask gets only configs that
  // pass it (ValidateConfig in config.h).
  virtual v1::ConfigSchema TaskConfigSchema() const = 0;

  // Configures the driver; `config` passed PluginConfigSchema(). Called once
  // after the launch and again whenever the node's configuration changes.
  // The default accepts it and does nothing.
  virtual absl::Status SetConfig(const google::protobuf::Struct& config,
                                 const v1::NodeContext& node);

  // ---- berth.driver.v1 ----

  // What the driver can do; constant. The SDK sets exec_streaming (and
  // clears exec_tty) from whether the driver implements an interface of
  // exec.h, whatever this says.
  virtual driver::v1::DriverCapabilities Capabilities() const = 0;

  // Starts `task` (task.id is set and unique to the caller; driver_config
  // passed TaskConfigSchema()). On failure nothing of the task is left. The
  // SDK fills in handle.config with `task` if the driver leaves it unset.
  virtual absl::StatusOr<driver::v1::StartTaskResponse> StartTask(
      const driver::v1::TaskConfig& task) = 0;

  // Blocks until the task has exited and returns how; at once for a task
  // that already has. Must return soon after `cancel` is cancelled (any
  // status: the SDK answers CANCELLED).
  virtual absl::StatusOr<driver::v1::ExitResult> WaitTask(
      const std::string& task_id, const CancelToken& cancel) = 0;

  // Sends `signal` (the SDK defaults it to SIGTERM), waits up to `timeout`
  // (default 5 s) for the task to exit, then kills what is left of it.
  // Stopping an exited task succeeds and does nothing.
  virtual absl::Status StopTask(const std::string& task_id,
                                absl::Duration timeout, int signal) = 0;

  // Forgets the task and removes what the driver made for it;
  // FAILED_PRECONDITION for a running task unless `force` (then kill it
  // first). On success the SDK ends the task's TaskStats streams (OK).
  virtual absl::Status DestroyTask(const std::string& task_id, bool force) = 0;

  virtual absl::StatusOr<driver::v1::TaskStatus> InspectTask(
      const std::string& task_id) = 0;

  // The handle of the task's current run: the one StartTask returned for it
  // (or would have returned, for a start still under way), config included,
  // so that RecoverTask accepts it after the driver's next restart. The SDK
  // sends it in InspectTaskResponse.handle: berth-node adopts a run whose
  // StartTask reply it never got (it or the driver was killed meanwhile)
  // with it. NOT_FOUND for an unknown task id. The default answers
  // UNIMPLEMENTED (InspectTask then answers without a handle, and the node
  // cannot recover such an adopted run after a restart of the driver). The
  // SDK leaves out a handle whose config.id is not `task_id`.
  virtual absl::StatusOr<driver::v1::TaskHandle> HandleOf(
      const std::string& task_id);

  // Re-adopts a task from a handle StartTask returned, after a restart: its
  // status, running or exited (with the exit result). FAILED_PRECONDITION
  // when its process is gone without a trace or its pid was reused.
  virtual absl::StatusOr<driver::v1::TaskStatus> RecoverTask(
      const driver::v1::TaskHandle& handle);

  virtual absl::Status SignalTask(const std::string& task_id, int signal);

  // One sample of the task's resource usage, now. The SDK calls it at the
  // interval a TaskStats stream asks for; NOT_FOUND ends the stream (with
  // NOT_FOUND if it is the first sample, else OK: the task is gone). The SDK
  // fills in task_id and timestamp when left unset.
  virtual absl::StatusOr<stats::v1::TaskResourceUsage> TaskStats(
      const std::string& task_id);

  // Runs `command` (never empty) in the task and returns its output and
  // exit; kills it after `timeout` (InfiniteDuration when unset) or when
  // `cancel` is cancelled.
  virtual absl::StatusOr<driver::v1::ExecTaskResponse> ExecTask(
      const std::string& task_id, const std::vector<std::string>& command,
      absl::Duration timeout, const CancelToken& cancel);

  // Serves one AttachTask call (attach.h): the task's output to the caller,
  // the caller's stdin and terminal resizes to the task, until the task's
  // output ends (OK). For drivers whose capabilities say attach; the
  // default answers UNIMPLEMENTED.
  virtual absl::Status AttachTask(AttachTaskStream* stream);

  // For drivers whose capabilities say must_create_network.
  virtual absl::StatusOr<driver::v1::CreateNetworkResponse> CreateNetwork(
      const driver::v1::CreateNetworkRequest& request);
  virtual absl::Status DestroyNetwork(const std::string& allocation_id);

  // ---- Fingerprints and events: for the driver to publish ----

  // Replaces the driver's fingerprint; every Fingerprint stream sends it.
  // Until the first call the fingerprint is HEALTHY without attributes.
  void PublishFingerprint(driver::v1::FingerprintResponse fingerprint)
      ABSL_LOCKS_EXCLUDED(fingerprint_mu_);

  // Sends `event` to every TaskEvents stream open now (the SDK fills in the
  // timestamp when unset). A stream that reads too slowly loses its oldest
  // events beyond its capacity.
  void PublishTaskEvent(driver::v1::TaskEventsResponse event)
      ABSL_LOCKS_EXCLUDED(events_mu_);

  // ---- For the SDK's streams (and tests) ----

  // The current fingerprint and its version (1 for the initial one, one
  // more per PublishFingerprint).
  driver::v1::FingerprintResponse CurrentFingerprint(uint64_t* version) const
      ABSL_LOCKS_EXCLUDED(fingerprint_mu_);

  // Blocks until the fingerprint's version differs from *version (true: sets
  // both) or `cancel` is cancelled (false).
  bool WaitForFingerprint(uint64_t* version,
                          driver::v1::FingerprintResponse* fingerprint,
                          const CancelToken& cancel) const
      ABSL_LOCKS_EXCLUDED(fingerprint_mu_);

  // How many TaskEvents subscriptions are open (streams listening).
  size_t TaskEventSubscriberCount() const ABSL_LOCKS_EXCLUDED(events_mu_);

  // Events published from now on, until the subscription is destroyed.
  std::unique_ptr<TaskEventSubscription> SubscribeTaskEvents(
      size_t capacity = 4096) ABSL_LOCKS_EXCLUDED(events_mu_);

 private:
  friend class TaskEventSubscription;

  mutable absl::Mutex fingerprint_mu_;
  driver::v1::FingerprintResponse fingerprint_ ABSL_GUARDED_BY(fingerprint_mu_);
  uint64_t fingerprint_version_ ABSL_GUARDED_BY(fingerprint_mu_) = 1;

  mutable absl::Mutex events_mu_;
  std::vector<TaskEventSubscription*> subscriptions_
      ABSL_GUARDED_BY(events_mu_);
};

// Task events for one TaskEvents stream. Thread-safe.
class TaskEventSubscription {
 public:
  ~TaskEventSubscription();
  TaskEventSubscription(const TaskEventSubscription&) = delete;
  TaskEventSubscription& operator=(const TaskEventSubscription&) = delete;

  // Blocks until the next event (true) or until `cancel` is cancelled
  // (false).
  bool Next(driver::v1::TaskEventsResponse* event, const CancelToken& cancel)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Events dropped so far because the reader was too slow.
  uint64_t dropped() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class Driver;
  TaskEventSubscription(Driver* driver, size_t capacity);
  void Push(const driver::v1::TaskEventsResponse& event)
      ABSL_LOCKS_EXCLUDED(mu_);

  Driver* const driver_;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<driver::v1::TaskEventsResponse> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_DRIVER_H_
