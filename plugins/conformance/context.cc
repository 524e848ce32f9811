#include "plugins/conformance/context.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "glog/logging.h"
#include "plugins/conformance/task_config.h"

namespace berth::conformance {
namespace {

namespace driver = ::berth::driver::v1;
namespace host = ::berth::plugin::host;

constexpr char kSkipTypeUrl[] = "berth.dev/conformance-skip";

// "berth_python_driver.py" → "berth_python_driver": the name the host gives
// the plugin in its log lines and errors.
std::string PluginName(absl::string_view binary) {
  const size_t slash = binary.find_last_of('/');
  absl::string_view base =
      slash == absl::string_view::npos ? binary : binary.substr(slash + 1);
  const size_t dot = base.find('.');
  if (dot != absl::string_view::npos && dot > 0) base = base.substr(0, dot);
  std::string name;
  for (char c : base) {
    name.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                           c == '-'
                       ? c
                       : '-');
  }
  return name.empty() ? "driver" : name;
}

absl::Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot make directory ", path));
  }
  // As berth-node makes a task directory: 0755 whatever the umask.
  if (chmod(path.c_str(), 0755) != 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot chmod directory ", path));
  }
  return absl::OkStatus();
}

// Waits up to `timeout` for `path` (in directory `dir`) to exist, woken by
// inotify; whether it does.
bool WaitForHostFile(const std::string& dir, const std::string& path,
                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const base::UniqueFd inotify(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  const int fd = inotify.get();
  if (fd >= 0 &&
      inotify_add_watch(fd, dir.c_str(),
                        IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    PLOG(WARNING) << "inotify_add_watch " << dir;
  }
  bool exists = access(path.c_str(), F_OK) == 0;
  while (!exists && absl::Now() < deadline) {
    // Without inotify, look every 20 ms.
    int wait_ms =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()) + 1);
    if (fd < 0) wait_ms = std::min(wait_ms, 20);
    if (fd >= 0) {
      pollfd pfd = {fd, POLLIN, 0};
      poll(&pfd, 1, wait_ms);
      char events[4096];
      while (read(fd, events, sizeof(events)) > 0) {
      }
    } else {
      poll(nullptr, 0, wait_ms);
    }
    exists = access(path.c_str(), F_OK) == 0;
  }
  return exists;
}

}  // namespace

absl::string_view CapabilityName(Capability capability) {
  switch (capability) {
    case Capability::kSendSignals:
      return "send_signals";
    case Capability::kExec:
      return "exec";
    case Capability::kExecStreaming:
      return "exec_streaming";
    case Capability::kExecTty:
      return "exec_tty";
    case Capability::kRecover:
      return "recover";
    case Capability::kStats:
      return "stats";
    case Capability::kAttach:
      return "attach";
  }
  return "unknown";
}

bool HasCapability(const driver::DriverCapabilities& capabilities,
                   Capability capability) {
  switch (capability) {
    case Capability::kSendSignals:
      return capabilities.send_signals();
    case Capability::kExec:
      return capabilities.exec();
    case Capability::kExecStreaming:
      return capabilities.exec_streaming();
    case Capability::kExecTty:
      return capabilities.exec_tty();
    case Capability::kRecover:
      return capabilities.recover();
    case Capability::kStats:
      return capabilities.stats();
    case Capability::kAttach:
      return capabilities.attach();
  }
  return false;
}

absl::Status SkipCheck(absl::string_view reason) {
  absl::Status status = absl::CancelledError(reason);
  status.SetPayload(kSkipTypeUrl, absl::Cord("skip"));
  return status;
}

bool IsSkip(const absl::Status& status) {
  return status.GetPayload(kSkipTypeUrl).has_value();
}

absl::Status Mismatch(absl::string_view message) {
  return absl::UnknownError(message);
}

void Interruption::Interrupt() {
  interrupted_ = true;
  canceller_.Cancel();
}

absl::StatusOr<std::unique_ptr<Context>> Context::Create(
    SuiteOptions options, Interruption* interruption) {
  std::unique_ptr<Context> context(
      new Context(std::move(options), interruption));
  absl::StatusOr<google::protobuf::Struct> base =
      ParseTaskConfig(context->options_.task_config_json);
  if (!base.ok()) return base.status();
  context->base_config_ = *std::move(base);

  const std::string& plugin = context->options_.plugin;
  if (!plugin.empty() && plugin[0] == '/') {
    context->binary_ = plugin;
  } else {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) {
      return absl::ErrnoToStatus(errno, "getcwd");
    }
    context->binary_ = absl::StrCat(cwd, "/", plugin);
  }
  context->plugin_name_ = PluginName(context->binary_);

  char dir_template[] = "/tmp/berth-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    return absl::ErrnoToStatus(
        errno, "cannot make a temporary directory /tmp/berth-*");
  }
  context->work_dir_ = dir_template;
  // Traversable (not listable) by others, as the node's state directory is:
  // a task in a user namespace runs as an unprivileged host id, which must
  // reach its task directory inside.
  if (chmod(dir_template, 0711) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot chmod 0711 ", dir_template));
  }
  LOG(INFO) << "temporary directory " << context->work_dir_;
  context->socket_dir_ = context->options_.socket_dir.empty()
                             ? absl::StrCat(context->work_dir_, "/plugins")
                             : context->options_.socket_dir;
  context->state_dir_ = absl::StrCat(context->work_dir_, "/state");
  // Task directories where berth-node makes them, inside the state
  // directory the driver is given (the built-in drivers refuse others).
  for (const std::string& dir :
       {context->state_dir_, absl::StrCat(context->state_dir_, "/node"),
        absl::StrCat(context->state_dir_, "/node/tasks")}) {
    absl::Status made = MakeDir(dir);
    if (!made.ok()) return made;
  }
  return context;
}

Context::Context(SuiteOptions options, Interruption* interruption)
    : options_(std::move(options)), interruption_(interruption) {}

Context::~Context() {
  const absl::Status closed = Close();
  LOG_IF(WARNING, !closed.ok()) << closed.message();
}

absl::Status Context::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status result = CleanUpTasks();
  std::vector<TrackedTask> leftovers = std::move(leftovers_);
  leftovers_.clear();
  for (TrackedTask& task : leftovers) {
    const absl::Status destroyed = DestroyTracked(task);
    if (!destroyed.ok()) {
      LOG(WARNING) << "task " << task.id
                   << " could not be destroyed and may still run: "
                   << destroyed.message();
      if (result.ok()) result = destroyed;
    }
  }
  if (plugin_ != nullptr) {
    const host::PluginExit exit = plugin_->Stop();
    VLOG(1) << "plugin " << plugin_name_ << " " << exit.ToString();
  }
  plugin_.reset();
  retired_.clear();
  // Only what the suite made in a --socket_dir it was given.
  for (const std::string& dir : relaunch_dirs_) rmdir(dir.c_str());
  if (!work_dir_.empty()) {
    std::error_code error;
    std::filesystem::remove_all(work_dir_, error);
    if (error) {
      LOG(WARNING) << "cannot remove " << work_dir_ << ": " << error.message();
    }
  }
  return result;
}

// --- The plugin.

absl::Status Context::EnsurePlugin() {
  if (plugin_ != nullptr && !plugin_->lifetime()->gone()) {
    return absl::OkStatus();
  }
  if (first_launch_error_.has_value()) return *first_launch_error_;
  if (plugin_ != nullptr) {
    plugin_->Stop();  // reaps it and removes its stale socket
    retired_.push_back(std::move(plugin_));
  }
  const auto failed = [this](absl::Status status) {
    if (generation_ == 0) first_launch_error_ = status;
    return status;
  };

  host::LaunchOptions launch;
  launch.name = plugin_name_;
  launch.binary = binary_;
  // A relaunched plugin gets a socket directory of its own, so a socket
  // path of its own: //plugins/host dials with gRPC's global subchannel
  // pool, where a new channel to the path of a plugin killed a moment ago
  // can get that plugin's dead connection ("Broken pipe" in the health
  // check).
  launch.socket_dir = launches_ == 0
                          ? socket_dir_
                          : absl::StrCat(socket_dir_, "/relaunch-", launches_);
  ++launches_;
  if (launches_ > 1) relaunch_dirs_.push_back(launch.socket_dir);
  launch.start_timeout = options_.start_timeout;
  absl::StatusOr<std::unique_ptr<host::PluginProcess>> launched =
      host::PluginProcess::Launch(launch);
  if (!launched.ok()) return failed(launched.status());
  std::unique_ptr<host::PluginProcess> plugin = *std::move(launched);

  plugin::v1::SetConfigRequest set_config;
  set_config.mutable_config();
  set_config.mutable_node()->set_node_id("conformance");
  set_config.mutable_node()->set_runtime_dir(work_dir_);
  set_config.mutable_node()->set_state_dir(state_dir_);
  absl::StatusOr<plugin::v1::SetConfigResponse> configured =
      plugin->client()->SetConfig(set_config, CleanupRpc(kRpcTimeout));
  if (!configured.ok()) {
    plugin->Stop();
    return failed(absl::Status(configured.status().code(),
                               absl::StrCat("SetConfig with an empty config: ",
                                            configured.status().message())));
  }
  absl::StatusOr<driver::GetCapabilitiesResponse> capabilities =
      plugin->client()->GetCapabilities({}, CleanupRpc(kRpcTimeout));
  if (!capabilities.ok()) {
    plugin->Stop();
    return failed(capabilities.status());
  }
  capabilities_ = capabilities->capabilities();
  plugin_ = std::move(plugin);
  ++generation_;
  return absl::OkStatus();
}

host::PluginProcess& Context::plugin() {
  CHECK(plugin_ != nullptr) << "EnsurePlugin first";
  return *plugin_;
}

host::DriverClient& Context::driver() { return *plugin().client(); }

host::PluginExit Context::KillPlugin() {
  CHECK(plugin_ != nullptr) << "EnsurePlugin first";
  return plugin_->Kill();
}

host::PluginExit Context::StopPlugin() {
  CHECK(plugin_ != nullptr) << "EnsurePlugin first";
  return plugin_->Stop();
}

host::CallOptions Context::Rpc(absl::Duration timeout) const {
  return RpcUntil(absl::Now() + timeout);
}

host::CallOptions Context::RpcUntil(absl::Time deadline) const {
  host::CallOptions options;
  options.deadline = deadline;
  options.canceller = interruption_->canceller();
  return options;
}

host::CallOptions Context::CleanupRpc(absl::Duration timeout) {
  host::CallOptions options;
  options.deadline = absl::Now() + timeout;
  return options;
}

// --- Tasks.

absl::StatusOr<driver::TaskConfig> Context::NewTask(
    absl::string_view hint, google::protobuf::Struct driver_config) {
  const std::string id = absl::StrCat(hint, "-", ++task_counter_);
  const std::string task_dir = absl::StrCat(state_dir_, "/node/tasks/", id);
  absl::Status made = MakeDir(task_dir);
  if (!made.ok()) return made;
  driver::TaskConfig task;
  task.set_id(id);
  task.set_name(id);
  task.set_allocation_id("conformance");
  *task.mutable_driver_config() = std::move(driver_config);
  (*task.mutable_env())["BERTH_CONFORMANCE_TASK"] = id;
  task.set_task_dir(task_dir);
  return task;
}

absl::StatusOr<driver::TaskConfig> Context::ShellTask(
    absl::string_view hint, absl::string_view script) {
  return NewTask(
      hint, MergeCommand(base_config_, "/bin/sh", {"-c", std::string(script)}));
}

absl::StatusOr<driver::TaskConfig> Context::TaskWithoutCommand(
    absl::string_view hint) {
  return NewTask(hint, WithoutCommand(base_config_, {"-c", "exit 0"}));
}

absl::StatusOr<driver::StartTaskResponse> Context::StartTask(
    const driver::TaskConfig& task) {
  absl::Status running = EnsurePlugin();
  if (!running.ok()) return running;
  TrackedTask tracked;
  tracked.id = task.id();
  tracked.generation = generation_;
  // Tracked before the call: a StartTask that fails after starting
  // something is cleaned up too.
  tasks_.push_back(tracked);
  driver::StartTaskRequest request;
  *request.mutable_task() = task;
  absl::StatusOr<driver::StartTaskResponse> started =
      driver().StartTask(request, Rpc(absl::Seconds(30)));
  if (started.ok()) {
    for (TrackedTask& t : tasks_) {
      if (t.id == task.id()) t.handle = started->handle();
    }
  }
  return started;
}

std::optional<driver::TaskHandle> Context::HandleOf(
    const std::string& task_id) const {
  for (const TrackedTask& task : tasks_) {
    if (task.id == task_id) return task.handle;
  }
  return std::nullopt;
}

absl::Status Context::DestroyTask(const std::string& task_id, bool force) {
  driver::DestroyTaskRequest request;
  request.set_task_id(task_id);
  request.set_force(force);
  absl::StatusOr<driver::DestroyTaskResponse> destroyed =
      driver().DestroyTask(request, Rpc(absl::Seconds(30)));
  if (!destroyed.ok()) return destroyed.status();
  for (TrackedTask& task : tasks_) {
    if (task.id == task_id) task.destroyed = true;
  }
  return absl::OkStatus();
}

absl::Status Context::DestroyTracked(TrackedTask& task) {
  absl::Status running = EnsurePlugin();
  if (!running.ok()) {
    return absl::Status(
        running.code(),
        absl::StrCat("cannot launch the plugin to destroy task ", task.id, ": ",
                     running.message()));
  }
  driver::DestroyTaskRequest request;
  request.set_task_id(task.id);
  request.set_force(true);
  // A task an earlier instance of the plugin started is recovered first, as
  // berth-node does after a relaunch: a driver may take DestroyTask of an id
  // it does not know as leave to remove what an interrupted start left, the
  // running task included, and then it could not be recovered to say so.
  if (task.generation != generation_ &&
      (task.handle.has_config() || !task.handle.driver_state().empty()) &&
      (!capabilities_.has_value() || capabilities_->recover())) {
    driver::RecoverTaskRequest recover;
    *recover.mutable_handle() = task.handle;
    absl::StatusOr<driver::RecoverTaskResponse> recovered =
        driver().RecoverTask(recover, CleanupRpc());
    if (!recovered.ok() && !absl::IsNotFound(recovered.status())) {
      return absl::Status(
          recovered.status().code(),
          absl::StrCat("RecoverTask of task ", task.id,
                       " (started before the plugin was relaunched), to "
                       "destroy it: ",
                       recovered.status().message()));
    }
  }
  absl::StatusOr<driver::DestroyTaskResponse> destroyed =
      driver().DestroyTask(request, CleanupRpc());
  if (destroyed.ok()) {
    task.destroyed = true;
    return absl::OkStatus();
  }
  if (!absl::IsNotFound(destroyed.status())) {
    return absl::Status(destroyed.status().code(),
                        absl::StrCat("DestroyTask(force) of task ", task.id,
                                     ": ", destroyed.status().message()));
  }
  if (task.generation == generation_) {
    // This instance does not know it: it never started (StartTask failed).
    task.destroyed = true;
    return absl::OkStatus();
  }
  // Started by an instance of the plugin since killed: recover it first.
  if (!task.handle.has_config() && task.handle.driver_state().empty()) {
    task.destroyed = true;  // StartTask never answered: nothing to recover
    return absl::OkStatus();
  }
  if (capabilities_.has_value() && !capabilities_->recover()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", task.id,
        " was started before the plugin was relaunched and the driver does "
        "not report recover: it may still run"));
  }
  driver::RecoverTaskRequest recover;
  *recover.mutable_handle() = task.handle;
  absl::StatusOr<driver::RecoverTaskResponse> recovered =
      driver().RecoverTask(recover, CleanupRpc());
  if (!recovered.ok()) {
    return absl::Status(
        recovered.status().code(),
        absl::StrCat("RecoverTask of task ", task.id,
                     " (started before the plugin was relaunched), to "
                     "destroy it: ",
                     recovered.status().message()));
  }
  destroyed = driver().DestroyTask(request, CleanupRpc());
  if (!destroyed.ok()) {
    return absl::Status(
        destroyed.status().code(),
        absl::StrCat("DestroyTask(force) of recovered task ", task.id, ": ",
                     destroyed.status().message()));
  }
  task.destroyed = true;
  return absl::OkStatus();
}

absl::Status Context::CleanUpTasks() {
  absl::Status result;
  std::vector<TrackedTask> tasks = std::move(tasks_);
  tasks_.clear();
  for (TrackedTask& task : tasks) {
    if (task.destroyed) continue;
    const absl::Status destroyed = DestroyTracked(task);
    if (!destroyed.ok()) {
      leftovers_.push_back(task);
      if (result.ok()) result = destroyed;
    }
  }
  return result;
}

absl::StatusOr<driver::ExitResult> Context::WaitTask(const std::string& task_id,
                                                     absl::Duration timeout) {
  driver::WaitTaskRequest request;
  request.set_task_id(task_id);
  absl::StatusOr<driver::WaitTaskResponse> waited =
      driver().WaitTask(request, Rpc(timeout));
  if (absl::IsDeadlineExceeded(waited.status())) {
    return absl::DeadlineExceededError(
        absl::StrCat("WaitTask of task ", task_id, " did not return within ",
                     absl::FormatDuration(timeout)));
  }
  if (!waited.ok()) return waited.status();
  if (!waited->has_result()) {
    return Mismatch(absl::StrCat("WaitTask of task ", task_id,
                                 " answered without a result"));
  }
  return waited->result();
}

absl::StatusOr<driver::TaskStatus> Context::InspectTask(
    const std::string& task_id) {
  driver::InspectTaskRequest request;
  request.set_task_id(task_id);
  absl::StatusOr<driver::InspectTaskResponse> inspected =
      driver().InspectTask(request, Rpc());
  if (!inspected.ok()) return inspected.status();
  return inspected->status();
}

absl::Status Context::StopTask(const std::string& task_id,
                               absl::string_view signal,
                               absl::Duration timeout) {
  driver::StopTaskRequest request;
  request.set_task_id(task_id);
  request.set_signal(std::string(signal));
  request.mutable_timeout()->set_seconds(absl::ToInt64Seconds(timeout));
  request.mutable_timeout()->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(timeout % absl::Seconds(1))));
  return driver().StopTask(request, Rpc(timeout + kRpcTimeout)).status();
}

std::optional<std::string> Context::WhyTaskFilesUnobservable() const {
  if (!capabilities_.has_value())
    return "the driver's capabilities are unknown";
  if (capabilities_->fs_isolation() == driver::FS_ISOLATION_NONE ||
      capabilities_->exec()) {
    return std::nullopt;
  }
  return absl::StrCat(
      "the driver isolates the task's files (",
      driver::FsIsolation_Name(capabilities_->fs_isolation()),
      ") and does not report exec, so the suite cannot see when the task's "
      "shell is ready");
}

absl::Status Context::WaitForTaskFile(const driver::TaskConfig& task,
                                      absl::string_view name,
                                      absl::Duration timeout) {
  if (std::optional<std::string> why = WhyTaskFilesUnobservable()) {
    return SkipCheck(*why);
  }
  const absl::Time deadline = absl::Now() + timeout;
  const bool on_host =
      capabilities_->fs_isolation() == driver::FS_ISOLATION_NONE;
  const std::string path = absl::StrCat(task.task_dir(), "/", name);
  // In slices, looking between them whether the task ended without making
  // the file (its shell failed), which no wait would then see.
  constexpr absl::Duration kSlice = absl::Milliseconds(250);
  while (true) {
    bool found = false;
    if (on_host) {
      found = WaitForHostFile(task.task_dir(), path,
                              std::min(kSlice, deadline - absl::Now()));
    } else {
      driver::ExecTaskRequest request;
      request.set_task_id(task.id());
      request.add_command("/bin/sh");
      request.add_command("-c");
      request.add_command(absl::StrCat("test -e ", name));
      absl::StatusOr<driver::ExecTaskResponse> tested =
          driver().ExecTask(request, Rpc());
      if (!tested.ok()) return tested.status();
      found = tested->result().exit_code() == 0;
      if (!found) {
        // ExecTask takes its own time; a short pause between tries.
        absl::SleepFor(
            std::min(absl::Milliseconds(50),
                     std::max(absl::ZeroDuration(), deadline - absl::Now())));
      }
    }
    if (found) return absl::OkStatus();
    absl::StatusOr<driver::TaskStatus> status = InspectTask(task.id());
    if (!status.ok()) return status.status();
    if (status->state() == driver::TASK_STATE_EXITED) {
      return Mismatch(
          absl::StrCat("task ", task.id(), " exited (exit_code ",
                       status->exit_result().exit_code(), ", signal ",
                       status->exit_result().signal(), ") without making ",
                       name, " in its directory ", task.task_dir(),
                       " (is TaskConfig.task_dir its working directory?)"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "task ", task.id(), " did not make ", name, " in its directory ",
          task.task_dir(), " within ", absl::FormatDuration(timeout),
          " (is TaskConfig.task_dir its working directory?)"));
    }
  }
}

}  // namespace berth::conformance
