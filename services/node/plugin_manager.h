// The driver plugins of a node: read from the plugin configuration file,
// launched (or found again after a restart of berth-node), configured,
// health-checked, relaunched with backoff when they crash, and stopped
// (without their tasks) when the node stops. A plugin found serving on its
// socket (<socket_dir>/<name>.sock) that the node cannot reattach to, e.g.
// after its state directory was wiped, is stopped before a fresh one is
// launched (orphans.h).
//
// Configuration file (JSON):
//   {"plugins": [
//     {"name": "exec", "binary": "berth-driver-exec",
//      "args": ["--cgroup_parent=/berth"], "config": {}}
//   ]}
// `binary` is absolute or relative to the plugin directory.

#ifndef SERVICES_NODE_PLUGIN_MANAGER_H_
#define SERVICES_NODE_PLUGIN_MANAGER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "google/protobuf/struct.pb.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/plugin_process.h"
#include "services/node/task_store.h"

namespace berth::node {

// One plugin of the configuration file.
struct PluginSpec {
  std::string name;
  // Absolute path of the executable.
  std::string binary;
  std::vector<std::string> args;
  // Added to the plugin's environment (over the node's own), in the order of
  // the configuration file, e.g. PYTHONPATH for a driver in Python.
  std::vector<std::pair<std::string, std::string>> env;
  // Given to the plugin's SetConfig with the node's context.
  google::protobuf::Struct config;
};

// Reads the configuration file. Errors name the file and the field: a
// missing or duplicate name, a binary that is not an executable file (with
// the path looked at).
absl::StatusOr<std::vector<PluginSpec>> LoadPluginConfig(
    const std::string& path, const std::string& plugin_dir);

// Thread-safe.
class PluginManager {
 public:
  struct Options {
    // Where the plugins put their sockets (<runtime_dir>/plugins).
    std::string socket_dir;
    // What SetConfig tells every plugin of the node.
    plugin::v1::NodeContext node;
    // Reattach configurations are kept here; not owned.
    TaskStore* store = nullptr;
    // Backoff between relaunches: doubling from min to max.
    absl::Duration min_backoff = absl::Milliseconds(250);
    absl::Duration max_backoff = absl::Seconds(30);
    // Time between health checks of a running plugin; three failed checks
    // in a row and the plugin is killed and relaunched.
    absl::Duration health_interval = absl::Seconds(5);
    absl::Duration start_timeout = absl::Seconds(10);
    // How long a plugin found on its socket without a reattach record (see
    // orphans.h) has between SIGTERM and SIGKILL.
    absl::Duration orphan_grace = absl::Seconds(5);
  };

  // Called each time a plugin is up (launched, reattached or relaunched),
  // from the plugin's supervisor thread; berth-node publishes a "plugin is
  // up" event there. Tasks are not recovered here: each task's supervisor
  // (TaskManager::WaitRun, task_supervisor.cc) waits for the plugin's client
  // and recovers its own task (InspectTask, RecoverTask).
  using UpCallback = std::function<void(const std::string& name)>;
  // Called with each event a plugin's TaskEvents stream reports.
  using EventCallback = std::function<void(
      const std::string& name, const driver::v1::TaskEventsResponse& event)>;

  PluginManager(Options options, std::vector<PluginSpec> plugins);
  ~PluginManager();  // Stop()
  PluginManager(const PluginManager&) = delete;
  PluginManager& operator=(const PluginManager&) = delete;

  // Starts one supervisor thread per plugin: each reattaches to the plugin
  // it finds in the store or launches it, then keeps it up, and one thread
  // per plugin that follows its TaskEvents stream into `on_event` while it
  // is up.
  void Start(UpCallback on_up, EventCallback on_event = nullptr);

  // Whether `name` is a configured plugin.
  bool Has(const std::string& name) const;
  // The configured names, sorted.
  std::vector<std::string> Names() const;

  // The client of plugin `name` once it is up, waiting until `deadline`.
  // INVALID_ARGUMENT for a name not configured (listing those that are),
  // UNAVAILABLE with the last launch error when it is not up by `deadline`,
  // CANCELLED once the manager stops.
  absl::StatusOr<std::shared_ptr<plugin::host::DriverClient>> Client(
      const std::string& name, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Capabilities of plugin `name`, read when it came up.
  absl::StatusOr<driver::v1::DriverCapabilities> Capabilities(
      const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);

  // Each plugin's health, socket and pid.
  std::vector<v1::ComponentStatus> Status() ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the supervisors, then every plugin (Shutdown: their tasks keep
  // running) and forgets their reattach configurations. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Plugin {
    PluginSpec spec;
    std::unique_ptr<plugin::host::PluginProcess> process;
    driver::v1::DriverCapabilities capabilities;
    std::string last_error;
    int restarts = 0;
  };

  void Supervise(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads the plugin's TaskEvents until the stream ends (the plugin went or
  // the manager stops).
  void FollowEvents(const std::string& name,
                    std::shared_ptr<plugin::host::DriverClient> client)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Reattaches or launches, then configures; on success the process is
  // stored in the plugin.
  absl::Status BringUp(const std::string& name, bool may_reattach)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sleeps up to `d`; false once stopping.
  bool SleepUnlessStopping(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  UpCallback on_up_;
  EventCallback on_event_;
  std::vector<std::thread> supervisors_;
  // Cancels the event streams when the manager stops.
  plugin::host::CallCanceller events_canceller_;

  mutable absl::Mutex mu_;
  std::map<std::string, Plugin> plugins_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace berth::node

#endif  // SERVICES_NODE_PLUGIN_MANAGER_H_
