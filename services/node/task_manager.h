// The life of the node's tasks: persisted first, then network (berth-netns
// Prerun, or the driver's CreateNetwork), StartTask, the handle persisted,
// WaitTask, the exit persisted, Postrun, the restart policy. One supervisor
// thread per task that is not finished carries it through, across restarts
// of its driver (RecoverTask) and of the node itself (Recover). The calls
// users make are in task_manager.cc, the supervisor in task_supervisor.cc.

#ifndef SERVICES_NODE_TASK_MANAGER_H_
#define SERVICES_NODE_TASK_MANAGER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"
#include "plugins/host/driver_client.h"
#include "services/node/event_bus.h"
#include "services/node/health_checker.h"
#include "services/node/id_ranges.h"
#include "services/node/images_client.h"
#include "services/node/plugin_manager.h"
#include "services/node/restart_policy.h"
#include "services/node/task_isolation.h"
#include "services/node/task_network.h"
#include "services/node/task_store.h"

namespace berth::node {

// Thread-safe.
class TaskManager {
 public:
  struct Options {
    // Tasks' directories are <state_dir>/tasks/<id>: made empty by the node
    // before each run, filled by the driver, removed with the task.
    std::string state_dir;
    // berth-netns' socket; empty: only host networking is available.
    std::string netns_socket;
    // How long a start waits for its driver plugin to be up.
    absl::Duration plugin_wait = absl::Seconds(30);
    // Deadline of each call to berth-netns (which waits for it to be back
    // when it restarts).
    absl::Duration network_timeout = absl::Seconds(60);
    // How long a start waits for berth-netns to answer at all before it
    // fails saying so (a restart takes less; a berth-netns that is not
    // running would otherwise hold the start for network_timeout).
    absl::Duration netns_wait = absl::Seconds(10);
    // berth's runtime and state directories, which no task may mount.
    ProtectedDirs protected_dirs;
    // The user namespace of a task whose spec says none: "host" or "auto"
    // (--default_userns).
    std::string default_userns = "host";
    // Host id ranges for userns "auto" (task_userns.h); null: none, and
    // "auto" fails.
    IdRangeAllocator* id_ranges = nullptr;
    // berth-images, for tasks with spec.image (their snapshots); null: the
    // node runs without it and refuses image tasks.
    ImagesClient* images = nullptr;
    // The process limit (pids.max) of a task whose spec sets none
    // (--default_pids_limit), written into its spec when it is accepted:
    // inspect shows it, and every run gets it. 0: none.
    uint64_t default_pids_limit = 0;
    // The host's resolv.conf, which tasks' /etc/resolv.conf starts from
    // (task_etc_files.h).
    std::string host_resolv_conf = "/etc/resolv.conf";
    // The most tasks the node keeps, running or not (--max_tasks): Run
    // beyond it is RESOURCE_EXHAUSTED until tasks are removed.
    int max_tasks = 1024;
    // The earlier runs of a task whose output is kept (--restart_history):
    // older ones are deleted as a restart keeps the last run's.
    // Task.restarts still counts every restart.
    int restart_history = 10;
    // How restarts of tasks whose runs end quickly slow down.
    RestartBackoff restart_backoff;
  };

  TaskManager(Options options, TaskStore* store, PluginManager* plugins,
              EventBus* events);
  ~TaskManager();  // Shutdown()
  TaskManager(const TaskManager&) = delete;
  TaskManager& operator=(const TaskManager&) = delete;

  // Loads every stored task and resumes it: running ones are recovered
  // through their driver (an exit while the node was down is recorded with
  // its real result), interrupted starts are adopted when their driver has
  // the run (it is not run twice) and started again when it has not,
  // missing Postruns are run. Call once, before serving. With berth-images, a
  // thread then releases every snapshot that is no task's (once berth-images
  // answers).
  absl::Status Recover() ABSL_LOCKS_EXCLUDED(mu_);

  // Checks and persists the task, then starts it; returns once the first
  // start succeeded (RUNNING) or failed. A failed start returns its error
  // (the task stays listed as FAILED, or is removed with
  // `remove_on_start_failure`). INVALID_ARGUMENT names the field at fault
  // (e.g. "spec.driver: unknown driver ...") and persists nothing.
  absl::StatusOr<v1::Task> Run(v1::TaskSpec spec,
                               bool remove_on_start_failure = false)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Newest first; only tasks not finished unless `all`.
  std::vector<v1::Task> List(bool all) ABSL_LOCKS_EXCLUDED(mu_);

  // `ref` is an id, a name or a unique id prefix. NOT_FOUND "no task REF",
  // INVALID_ARGUMENT when a prefix matches several.
  absl::StatusOr<v1::Task> Inspect(const std::string& ref)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the task (signal, timeout, kill) and returns it once ended; its
  // restart policy no longer applies. A finished task is returned as is.
  // A negative `timeout` and an empty `signal` are the task's own
  // (ResolveStopSettings).
  absl::StatusOr<v1::Task> Stop(const std::string& ref, absl::Duration timeout,
                                std::string signal) ABSL_LOCKS_EXCLUDED(mu_);

  // Removes a finished task (its driver task, network and record).
  // FAILED_PRECONDITION for a running one unless `force` (then killed).
  absl::Status Remove(const std::string& ref, bool force)
      ABSL_LOCKS_EXCLUDED(mu_);

  // For the pass-through calls: the task's id and a client of its driver
  // (waiting briefly for it); FAILED_PRECONDITION when it is not running.
  struct Target {
    std::string id;
    std::shared_ptr<plugin::host::DriverClient> driver;
    // Its driver's name and the run that is running (Task.restarts).
    std::string driver_name;
    uint32_t run = 0;
  };
  absl::StatusOr<Target> RunningTarget(const std::string& ref)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `timeout` for the run `run` (Task.restarts) of the task to
  // end: its exit result; nullopt when it ended without one (it failed, or
  // the task is gone); DEADLINE_EXCEEDED when it still runs, UNAVAILABLE
  // when the node is shutting down.
  absl::StatusOr<std::optional<driver::v1::ExitResult>> AwaitRunExit(
      const std::string& id, uint32_t run, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `timeout` for the task to be finished (or gone); returns
  // whether it is.
  bool AwaitFinished(const std::string& id, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Where a task's output files are: <task dir>/logs.
  std::string LogDir(const std::string& id) const;
  // The output of the task's earlier runs (restarts), oldest first:
  // <state_dir>/logs/<id>/run-<N>.
  std::vector<std::string> EarlierLogDirs(const std::string& id) const;

  // Stops supervising: waits are cancelled, threads joined; tasks keep
  // running and are recovered by the next node. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Health of berth-netns, for GetNodeStatus; nullopt without it.
  std::optional<v1::ComponentStatus> NetnsStatus();

  // `id` is exactly the id of one of the node's tasks.
  bool IsTask(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One task: its record and its supervisor.
  struct Entry {
    internal::TaskRecord record;  // guarded by TaskManager::mu_
    std::thread supervisor;
    // Cancels the supervisor's WaitTask at shutdown.
    plugin::host::CallCanceller canceller;
    // StopTask was called (guarded by mu_).
    bool stop_requested = false;
    // Why the first start failed, for Run (guarded by mu_).
    absl::Status start_error;
    // Serializes Save of this task so the last state written is the last.
    absl::Mutex save_mu;
    // The health checks of the current run, while it runs; only its
    // supervisor thread touches it (task_health.cc).
    std::unique_ptr<HealthChecker> health_checker;
    // The health check's on_failure "restart" ended the run: it starts
    // again whatever its restart policy (guarded by mu_).
    bool health_restart = false;
    // The driver holds the current run (WaitRun): false while a new node's
    // (or a relaunched) driver has not recovered it yet. The health checks
    // wait for it (guarded by mu_).
    bool driver_holds_run = false;
    // StartRun's StartTask failed in a way that does not say whether the
    // driver started the run (the driver or the call broke): Supervise asks
    // the driver before recording the failure (guarded by mu_).
    bool start_unseen = false;
  };
  // kAdoptOrStart: a start a node did not see through (the record is
  // PENDING, STARTING or RESTARTING): the driver's run is adopted if it has
  // one, else the task starts again.
  enum class Resume { kStart, kAdoptOrStart, kWait, kPostrunOnly };

  // --- Shared by the calls and the supervisor (task_manager.cc).
  std::shared_ptr<Entry> Find(const std::string& ref, absl::Status* error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Save(Entry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // FAILED_PRECONDITION naming spec.network when the task's driver does not
  // list the isolation mode the spec's network needs.
  absl::Status CheckNetworkSupported(const v1::TaskSpec& spec) const;
  absl::StatusOr<std::shared_ptr<plugin::host::DriverClient>> Driver(
      const std::string& name, absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  bool shutting_down() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string TaskDir(const std::string& id) const;
  std::string HistoryDir(const std::string& id) const;

  // --- The supervisor (task_supervisor.cc).
  void Launch(std::shared_ptr<Entry> entry, Resume resume)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Supervise(std::shared_ptr<Entry> entry, Resume resume)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StartRun(Entry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the run's /etc/hosts, /etc/hostname and /etc/resolv.conf into
  // the task directory and binds them in config's isolation
  // (task_etc_files.h).
  absl::Status SetUpEtcFiles(Entry& entry, const v1::TaskSpec& spec,
                             driver::v1::TaskConfig* config)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Empties (or makes) the task's directory, 0755, before a run.
  absl::Status MakeTaskDir(const std::string& id);
  // Asks the task's driver (waiting for one that is being relaunched or
  // still at the start, up to options_.plugin_wait + 60 s) whether it holds a
  // run of the task whose start the node did not see through: InspectTask's
  // answer (the run's status, running or exited, and its handle when the driver
  // gives one), nullopt when the driver does not know the task (NOT_FOUND), an
  // error when the driver cannot be asked (CANCELLED once the node shuts down).
  absl::StatusOr<std::optional<driver::v1::InspectTaskResponse>> FindUnseenRun(
      Entry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Records the driver's run found by FindUnseenRun as the task's current
  // run (started, held by the driver; its handle the one InspectTask gave,
  // none if it gave none): saved, TASK_STARTED.
  void AdoptRun(Entry& entry, const driver::v1::InspectTaskResponse& found)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Resume::kAdoptOrStart before anything else: true when the driver's run
  // was adopted; false when the task is to start again (what the driver had
  // of it destroyed; a RESTARTING task's ended run's output kept and its
  // run number advanced).
  absl::StatusOr<bool> ResumeInterruptedStart(Entry& entry)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<driver::v1::ExitResult> WaitRun(Entry& entry,
                                                 bool recover_first)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records the exit and runs Postrun; true when the policy restarts it.
  bool EndRun(Entry& entry, const driver::v1::ExitResult& result)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Fail(Entry& entry, const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);
  // Who makes the networks of `driver_name`'s tasks: the driver itself
  // (must_create_network) or berth-netns; FAILED_PRECONDITION naming
  // spec.network when neither can.
  absl::StatusOr<std::shared_ptr<TaskNetwork>> NetworkOf(
      const std::string& driver_name) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SetUpNetwork(Entry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status TearDownNetwork(Entry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // DestroyTask of the task's current run, when the record says the driver
  // holds it, or always with `even_if_unrecorded`; NOT_FOUND is success.
  absl::Status DestroyDriverTask(Entry& entry, bool even_if_unrecorded = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the run's logs/ to HistoryDir(id)/run-<run> before the driver
  // destroys the run (and its directory) for a restart, and deletes those
  // of runs before the last options_.restart_history.
  void KeepRunLogs(const std::string& id, uint32_t run);

  // --- Health checks (task_health.cc).
  // Starts the checks of the run that is starting or recovered, when the
  // task has a health check: its health STARTING (persisted, an event).
  void StartHealthCheck(Entry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends them (the run ended, or the node stops); the health stays.
  void StopHealthCheck(Entry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // From the checker's thread: the health recorded and persisted, an event
  // on a change of status, the check's on_failure when it turned unhealthy.
  // `canceller` interrupts its driver calls when the checks end.
  void OnHealthUpdate(Entry& entry, const v1::TaskHealth& health,
                      bool status_changed, v1::HealthFailureAction action,
                      plugin::host::CallCanceller* canceller)
      ABSL_LOCKS_EXCLUDED(mu_);
  void ActOnUnhealthy(Entry& entry, v1::HealthFailureAction action,
                      plugin::host::CallCanceller* canceller)
      ABSL_LOCKS_EXCLUDED(mu_);

  // --- Image snapshots (task_snapshots.cc).
  // For a spec with an image: the task's snapshot (on a restart the one it
  // has, prepared again with its image's digest and mappings so that
  // berth-images mounts it again if its mount went; else a new one),
  // recorded in the entry, and the image's configuration applied to
  // `config` with the snapshot as its root. For a task in a user namespace
  // (config's isolation.user_namespace) whose driver claims
  // isolation.rootfs_idmapped (`driver_binds_idmapped`), the snapshot's
  // layers are idmapped to its mappings and isolation.rootfs_idmapped set.
  // Errors name the image.
  absl::Status PrepareImage(Entry& entry, const v1::TaskSpec& spec,
                            bool driver_binds_idmapped,
                            driver::v1::TaskConfig* config)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Releases the task's snapshot (none: success). A berth-images that is
  // away is an error only when the task had a snapshot.
  absl::Status ReleaseImage(Entry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Releases every snapshot berth-images has that is no task's, once
  // berth-images answers (retrying until then, or until shutdown).
  void ReconcileSnapshots() ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  TaskStore* const store_;
  PluginManager* const plugins_;
  EventBus* const events_;
  // Null without berth-netns.
  std::shared_ptr<NetnsNetwork> netns_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> tasks_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // ReconcileSnapshots, started by Recover.
  std::thread reconciler_;
};

// The stop settings of a task where the caller gives none (a negative
// `timeout`, an empty `signal`): spec.stop_timeout, else 5 seconds;
// spec.stop_signal, else its image's StopSignal (when it names a signal),
// else SIGTERM.
void ResolveStopSettings(const internal::TaskRecord& record,
                         absl::Duration* timeout, std::string* signal);

// Checks a spec before anything is persisted; errors name the field.
absl::Status ValidateTaskSpec(const v1::TaskSpec& spec);

}  // namespace berth::node

#endif  // SERVICES_NODE_TASK_MANAGER_H_
