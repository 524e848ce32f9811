#include "plugins/examples/mock_driver/mock_driver.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "plugins/examples/mock_driver/launcher.h"
#include "plugins/examples/mock_driver/procfs.h"
#include "plugins/examples/mock_driver/task_state.h"
#include "plugins/sdk/child_io.h"
#include "plugins/sdk/config.h"
#include "plugins/sdk/proto_time.h"
#include "plugins/sdk/rotating_log.h"
#include "plugins/sdk/signals.h"

namespace berth::mock {
namespace {

using google::protobuf::Value;

constexpr char kDefaultPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// How long a task gets to die after SIGKILL.
constexpr absl::Duration kKillTimeout = absl::Seconds(30);
// How long the output of an exec'd command that exited may stay silent
// before it is no longer waited for: a process that left its process group
// may hold it open.
constexpr absl::Duration kDrainAfterExit = absl::Seconds(2);
// The most ExecTask returns of each of stdout and stderr.
constexpr size_t kMaxExecTaskOutput = 1 << 20;

struct FakeStats {
  double cpu_percent = 0;
  uint64_t rss_bytes = 0;
};

// TaskConfig.driver_config, checked.
struct Knobs {
  std::string command;
  std::vector<std::string> args;
  std::string work_dir;  // as given; "" for the task directory
  std::optional<int> exit_code;
  absl::Duration run_for = absl::ZeroDuration();
  std::optional<FakeStats> fake_stats;
};

// The config passed the SDK's check against TaskConfigSchema(): the types
// are right; the ranges are checked here.
absl::StatusOr<Knobs> ParseKnobs(const google::protobuf::Struct& config) {
  Knobs knobs;
  const auto& fields = config.fields();
  auto field = [&](const char* name) -> const Value* {
    auto it = fields.find(name);
    if (it == fields.end() || it->second.has_null_value()) return nullptr;
    return &it->second;
  };
  const Value* command = field("command");
  if (command == nullptr || command->string_value().empty()) {
    return absl::InvalidArgumentError("task.driver_config.command is required");
  }
  knobs.command = command->string_value();
  if (const Value* args = field("args")) {
    for (const Value& arg : args->list_value().values()) {
      knobs.args.push_back(arg.string_value());
    }
  }
  if (const Value* work_dir = field("work_dir")) {
    knobs.work_dir = work_dir->string_value();
  }
  if (const Value* exit_code = field("exit_code")) {
    const double code = exit_code->number_value();
    if (code < 0 || code > 255 || code != std::trunc(code)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task.driver_config.exit_code must be 0 to 255, not ", code));
    }
    knobs.exit_code = static_cast<int>(code);
  }
  if (const Value* run_for = field("run_for")) {
    absl::StatusOr<absl::Duration> duration =
        plugin::ParseConfigDuration(run_for->string_value());
    if (!duration.ok() || *duration <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task.driver_config.run_for must be a positive duration such as "
          "\"2s\", not \"",
          run_for->string_value(), "\""));
    }
    knobs.run_for = *duration;
  }
  if (const Value* fake = field("fake_stats")) {
    if (fake->kind_case() != Value::kStructValue) {
      return absl::InvalidArgumentError(
          "task.driver_config.fake_stats must be an object such as "
          "{\"cpu_percent\": 12.5, \"rss_bytes\": 1048576}");
    }
    FakeStats stats;
    for (const auto& [key, value] : fake->struct_value().fields()) {
      const std::string name =
          absl::StrCat("task.driver_config.fake_stats.", key);
      if (value.kind_case() != Value::kNumberValue ||
          value.number_value() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " must be a number >= 0"));
      }
      if (key == "cpu_percent") {
        stats.cpu_percent = value.number_value();
      } else if (key == "rss_bytes") {
        stats.rss_bytes = static_cast<uint64_t>(value.number_value());
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            name, " is not a known field (known: cpu_percent, rss_bytes)"));
      }
    }
    knobs.fake_stats = stats;
  }
  return knobs;
}

// A task id becomes part of file names.
absl::Status CheckTaskId(const std::string& id) {
  const bool valid =
      !id.empty() && id.size() <= 200 && id != "." && id != ".." &&
      std::all_of(id.begin(), id.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
      });
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "task.id \"", id,
      "\" is not usable by the mock driver: letters, digits, '-', '_' and '.' "
      "only, at most 200"));
}

std::vector<std::string> TaskEnv(const driver::v1::TaskConfig& config,
                                 bool tty) {
  std::map<std::string, std::string> env = {
      {"PATH", kDefaultPath}, {"HOME", "/"}, {"BERTH_TASK_ID", config.id()}};
  if (tty) env["TERM"] = "xterm";
  for (const auto& [key, value] : config.env()) env[key] = value;
  std::vector<std::string> entries;
  for (const auto& [key, value] : env) {
    entries.push_back(absl::StrCat(key, "=", value));
  }
  return entries;
}

// mkdir -p with `mode` for what it makes; `what` names the directory in
// errors. The topmost directory it made, "" if there was nothing to make.
absl::StatusOr<std::string> MakeDirectories(const std::string& path,
                                            mode_t mode,
                                            absl::string_view what) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", path, "\" is not absolute"));
  }
  std::string made;
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix =
        slash == std::string::npos ? path : path.substr(0, slash);
    if (mkdir(prefix.c_str(), mode) == 0) {
      if (made.empty()) made = prefix;
    } else if (errno != EEXIST) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("cannot create ", what, " ", prefix));
    }
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " ", path, " is not a directory"));
  }
  return made;
}

// Removes `path` and everything below it (symbolic links are removed, not
// followed); logs what it cannot remove.
void RemoveTree(const std::string& path, absl::string_view task_id) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error) {
    LOG(WARNING) << "task " << task_id << ": cannot remove " << path << ": "
                 << error.message();
  }
}

// The task's directory and working directory (driver_config.work_dir),
// checked; nothing made yet.
struct TaskDirs {
  std::string task_dir;
  std::string work_dir;
};

absl::StatusOr<TaskDirs> ResolveTaskDirs(const driver::v1::TaskConfig& config,
                                         const Knobs& knobs,
                                         const std::string& state_dir) {
  TaskDirs dirs;
  if (config.task_dir().empty()) {
    dirs.task_dir =
        NormalizePath(absl::StrCat(state_dir, "/tasks/", config.id()));
    if (dirs.task_dir.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", config.id(), ": the state directory \"", state_dir,
          "\" is not an absolute path to keep its task directory in"));
    }
  } else {
    dirs.task_dir = NormalizePath(config.task_dir());
    if (dirs.task_dir.empty() || dirs.task_dir == "/") {
      return absl::InvalidArgumentError(
          absl::StrCat("task.task_dir \"", config.task_dir(), "\" of task ",
                       config.id(), " must be an absolute path below /"));
    }
  }
  if (knobs.work_dir.empty()) {
    dirs.work_dir = dirs.task_dir;
    return dirs;
  }
  dirs.work_dir =
      NormalizePath(knobs.work_dir[0] == '/'
                        ? knobs.work_dir
                        : absl::StrCat(dirs.task_dir, "/", knobs.work_dir));
  if (dirs.work_dir.empty() || !IsInside(dirs.work_dir, dirs.task_dir)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task.driver_config.work_dir \"", knobs.work_dir, "\" of task ",
        config.id(), " is outside the task directory ", dirs.task_dir));
  }
  return dirs;
}

// The network namespace a task (and what is exec'd in it) joins: a GROUP's
// namespace_path (accepted with join_networks or must_create_network only);
// "" for the host's.
std::string TaskNetns(const driver::v1::TaskConfig& config) {
  return config.network().mode() == driver::v1::NETWORK_ISOLATION_MODE_GROUP
             ? config.network().namespace_path()
             : "";
}

// What the mock driver can do with TaskConfig.network.
absl::Status CheckNetwork(const driver::v1::TaskConfig& config,
                          bool joins_groups) {
  const driver::v1::NetworkIsolationMode mode = config.network().mode();
  if (mode == driver::v1::NETWORK_ISOLATION_MODE_UNSPECIFIED ||
      mode == driver::v1::NETWORK_ISOLATION_MODE_HOST) {
    return absl::OkStatus();
  }
  // With join_networks or must_create_network it joins a GROUP's
  // namespace_path; its own networks are records without a namespace, so
  // tasks of those stay on the host's network.
  if (mode == driver::v1::NETWORK_ISOLATION_MODE_GROUP && joins_groups) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "task.network.mode ", driver::v1::NetworkIsolationMode_Name(mode),
      " of task ", config.id(),
      ": the mock driver cannot join a network namespace; it runs tasks on "
      "the host's network only (NETWORK_ISOLATION_MODE_HOST)"));
}

int MakeEventFd() { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

void Notify(int event_fd) {
  const uint64_t one = 1;
  (void)!write(event_fd, &one, sizeof(one));
}

// Waits for `fd` to become readable, up to `timeout` (Infinite for ever) or
// until `cancel_fd` (if >= 0) is readable. Whether `fd` is.
bool PollReadable(int fd, absl::Duration timeout, int cancel_fd = -1) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    int wait_ms = -1;
    if (timeout != absl::InfiniteDuration()) {
      wait_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(deadline - absl::Now()) + 1, 0, 1 << 30));
    }
    const int ready = poll(fds, cancel_fd >= 0 ? 2 : 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (fds[0].revents != 0) return true;
    if (ready != 0 || absl::Now() >= deadline) return false;
  }
}

driver::v1::ExitResult ResultOf(const ExitRecord& record, const Knobs& knobs) {
  plugin::ExitStatus status = ToExitStatus(record.wait_status);
  if (record.run_for_expired) {
    status.signal = 0;
    status.exit_code = knobs.exit_code.value_or(0);
  } else if (knobs.exit_code.has_value() && status.signal == 0) {
    status.exit_code = *knobs.exit_code;
  }
  driver::v1::ExitResult result = plugin::ToExitResult(status);
  *result.mutable_exited_at() = plugin::ToProtoTimestamp(record.exited_at);
  return result;
}

std::string Describe(const driver::v1::ExitResult& result) {
  if (result.signal() != 0) {
    return absl::StrCat("killed by ", plugin::SignalName(result.signal()));
  }
  return absl::StrCat("exited with code ", result.exit_code());
}

// ---- Exec'd commands ----

// Kills the child's process group and reaps it.
void KillAndReap(const Child& child, int* wait_status) {
  kill(-child.pid, SIGKILL);  // not reaped yet: its group id is still ours
  while (waitpid(child.pid, wait_status, 0) < 0 && errno == EINTR) {
  }
}

// Carries `options` (stdin, output, resizes, cancel) to and from the child
// until it exited and its output ended, or the deadline. The child is
// reaped either way, its wait status in `*wait_status`; its descriptors but
// the pidfd are closed.
absl::Status PumpExec(Child& child, const plugin::ExecOptions& options,
                      absl::Time deadline, int* wait_status) {
  plugin::ChildStdio stdio;
  stdio.terminal = base::UniqueFd(std::exchange(child.terminal, -1));
  stdio.stdin_fd = base::UniqueFd(std::exchange(child.stdin_fd, -1));
  stdio.stdout_fd = base::UniqueFd(std::exchange(child.stdout_fd, -1));
  stdio.stderr_fd = base::UniqueFd(std::exchange(child.stderr_fd, -1));
  plugin::ChildIoOptions io;
  io.exit_fd = child.pidfd;
  io.has_exited = [&child] {
    siginfo_t info = {};
    return waitid(P_PID, child.pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == child.pid;
  };
  // At its end, whatever it left in its process group goes with it, so
  // that nothing keeps its output open; what left the group may, for
  // kDrainAfterExit.
  io.on_exit = [&child, wait_status] { KillAndReap(child, wait_status); };
  io.kill = io.on_exit;
  io.deadline = deadline;
  io.drain_grace = kDrainAfterExit;
  return plugin::PumpChildIo(options, std::move(stdio), io);
}

// ExecTask's stdout or stderr: the first kMaxExecTaskOutput bytes.
class CappedOutput : public plugin::ExecOutput {
 public:
  explicit CappedOutput(std::string* into) : into_(into) {}
  bool Write(absl::string_view data) override {
    if (into_->size() < kMaxExecTaskOutput) {
      const absl::string_view kept =
          data.substr(0, kMaxExecTaskOutput - into_->size());
      into_->append(kept.data(), kept.size());
    }
    return true;
  }

 private:
  std::string* const into_;
};

}  // namespace

// ---- Tasks ----

struct MockDriver::Task {
  ~Task() {
    for (int fd : {monitor_pidfd, task_pidfd, exited_fd, stop_fd}) {
      if (fd >= 0) close(fd);
    }
  }

  driver::v1::TaskConfig config;
  Knobs knobs;
  HandleState handle;
  std::string exit_path;
  std::string stdout_path;
  std::string stderr_path;
  int monitor_pidfd = -1;
  int task_pidfd = -1;
  int exited_fd = MakeEventFd();  // readable once exited
  int stop_fd = MakeEventFd();    // stops the watcher
  std::thread watcher;

  // Guarded by MockDriver::mu_.
  bool exited = false;
  driver::v1::ExitResult result;
  struct CpuSample {
    absl::Time time;
    uint64_t utime_ticks;
    uint64_t stime_ticks;
  };
  std::optional<CpuSample> last_cpu;
};

namespace {

// The task's files: its exit record in the state directory, its output in
// <task_dir>/logs.
void SetPaths(const std::string& id, const HandleState& handle,
              std::string* exit_path, std::string* stdout_path,
              std::string* stderr_path) {
  *exit_path = absl::StrCat(handle.state_dir, "/", id, ".exit");
  const std::string logs = plugin::TaskLogDir(handle.task_dir);
  *stdout_path = absl::StrCat(logs, "/", plugin::kStdoutLogName, ".log");
  *stderr_path = absl::StrCat(logs, "/", plugin::kStderrLogName, ".log");
}

// Where --keep_handles keeps a task's handle.
std::string HandlePath(const std::string& state_dir, const std::string& id) {
  return absl::StrCat(state_dir, "/", id, ".handle");
}

bool WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  return !out.fail();
}

bool ReadWholeFile(const std::string& path, std::string* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in),
                std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

MockDriver::MockDriver(MockDriverOptions options)
    : must_create_network_(options.must_create_network),
      join_networks_(options.join_networks || options.must_create_network),
      attach_(options.attach),
      no_exec_(options.no_exec),
      recover_delay_(options.recover_delay),
      keep_handles_(options.keep_handles),
      die_after_start_(std::move(options.die_after_start)),
      start_reply_delay_(options.start_reply_delay),
      no_handle_of_(options.no_handle_of),
      state_dir_(std::move(options.default_state_dir)) {
  driver::v1::FingerprintResponse fingerprint;
  fingerprint.set_health(driver::v1::HEALTH_STATE_HEALTHY);
  fingerprint.set_health_description("runs tasks as plain host processes");
  (*fingerprint.mutable_attributes())["driver.mock.version"] = kDriverVersion;
  PublishFingerprint(fingerprint);
}

MockDriver::~MockDriver() {
  std::map<std::string, std::shared_ptr<Task>> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks.swap(tasks_);
  }
  for (auto& [id, task] : tasks) {
    Notify(task->stop_fd);
    if (task->watcher.joinable()) task->watcher.join();
  }
}

plugin::DriverInfo MockDriver::Info() const {
  return {kDriverName, kDriverVersion,
          "runs a configurable command as a plain host process, for tests"};
}

plugin::v1::ConfigSchema MockDriver::TaskConfigSchema() const {
  plugin::v1::ConfigSchema schema;
  plugin::AddConfigField(&schema, "command",
                         plugin::v1::CONFIG_FIELD_TYPE_STRING, true,
                         "The program to run, looked up on the task's PATH.");
  plugin::AddConfigField(&schema, "args",
                         plugin::v1::CONFIG_FIELD_TYPE_STRING_LIST, false,
                         "Its arguments.");
  plugin::AddConfigField(
      &schema, "work_dir", plugin::v1::CONFIG_FIELD_TYPE_STRING, false,
      "Where the task and its exec'd commands run: a path relative to the "
      "task directory (an absolute one must lie inside it); made if "
      "missing. Default: the task directory.");
  plugin::AddConfigField(
      &schema, "exit_code", plugin::v1::CONFIG_FIELD_TYPE_INTEGER, false,
      "Report this exit code (0-255) instead of the process's.");
  plugin::AddConfigField(
      &schema, "run_for", plugin::v1::CONFIG_FIELD_TYPE_DURATION, false,
      "Kill the process after this long; it then counts as exited with "
      "exit_code (default 0).");
  plugin::AddConfigField(
      &schema, "fake_stats", plugin::v1::CONFIG_FIELD_TYPE_ANY, false,
      "{\"cpu_percent\": x, \"rss_bytes\": n}: report these instead of "
      "measured stats.");
  return schema;
}

absl::Status MockDriver::SetConfig(const google::protobuf::Struct&,
                                   const plugin::v1::NodeContext& node) {
  if (node.state_dir().empty()) return absl::OkStatus();
  if (node.state_dir()[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "node.state_dir \"", node.state_dir(), "\" is not an absolute path"));
  }
  absl::MutexLock lock(&mu_);
  state_dir_ = absl::StrCat(node.state_dir(), "/", kDriverName);
  return absl::OkStatus();
}

std::string MockDriver::state_dir() const {
  absl::MutexLock lock(&mu_);
  return state_dir_;
}

driver::v1::DriverCapabilities MockDriver::Capabilities() const {
  driver::v1::DriverCapabilities capabilities;
  capabilities.set_send_signals(true);
  capabilities.set_exec(true);
  capabilities.set_exec_streaming(true);
  capabilities.set_exec_tty(true);
  capabilities.set_fs_isolation(driver::v1::FS_ISOLATION_NONE);
  capabilities.add_network_isolation_modes(
      driver::v1::NETWORK_ISOLATION_MODE_HOST);
  capabilities.set_recover(true);
  capabilities.set_stats(true);
  if (must_create_network_) capabilities.set_must_create_network(true);
  if (attach_) capabilities.set_attach(true);
  if (no_exec_) {
    capabilities.set_exec(false);
    capabilities.set_exec_streaming(false);
    capabilities.set_exec_tty(false);
  }
  if (join_networks_) {
    capabilities.add_network_isolation_modes(
        driver::v1::NETWORK_ISOLATION_MODE_GROUP);
  }
  return capabilities;
}

absl::Status MockDriver::AttachTask(plugin::AttachTaskStream* stream) {
  if (!attach_) return Driver::AttachTask(stream);
  const std::string& id = stream->setup().task_id();
  absl::StatusOr<std::shared_ptr<Task>> task = Find(id);
  if (!task.ok()) return task.status();
  if (stream->setup().stdin() && !(*task)->config.stdin_open()) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", id, " was started without stdin_open"));
  }
  // The echo: the caller's stdin comes back as stdout.
  std::thread echo([stream] {
    driver::v1::AttachTaskRequest request;
    while (stream->Recv(&request)) {
      if (!request.has_stdin()) continue;
      driver::v1::AttachTaskResponse response;
      response.set_stdout(request.stdin());
      if (!stream->Send(response)) break;
    }
  });
  // The output ends when the task exits (or the caller goes).
  absl::StatusOr<driver::v1::ExitResult> exited =
      WaitTask(id, stream->cancel());
  stream->CloseRecv();
  echo.join();
  return exited.status();
}

absl::StatusOr<std::shared_ptr<MockDriver::Task>> MockDriver::Find(
    const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<MockDriver::Task>> MockDriver::FindRunning(
    const std::string& task_id, absl::string_view what) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  absl::MutexLock lock(&mu_);
  if ((*task)->exited) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", task_id, " is not running: cannot ", what, " it"));
  }
  return task;
}

driver::v1::TaskStatus MockDriver::StatusOf(const Task& task) {
  driver::v1::TaskStatus status;
  status.set_id(task.config.id());
  status.set_name(task.config.name());
  status.set_state(task.exited ? driver::v1::TASK_STATE_EXITED
                               : driver::v1::TASK_STATE_RUNNING);
  *status.mutable_started_at() =
      plugin::ToProtoTimestamp(task.handle.started_at);
  if (task.exited) {
    *status.mutable_completed_at() = task.result.exited_at();
    *status.mutable_exit_result() = task.result;
  }
  auto& attributes = *status.mutable_driver_attributes();
  attributes["pid"] = absl::StrCat(task.handle.task_pid);
  attributes["monitor_pid"] = absl::StrCat(task.handle.monitor_pid);
  attributes["state_dir"] = task.handle.state_dir;
  attributes["task_dir"] = task.handle.task_dir;
  attributes["work_dir"] = task.handle.work_dir;
  attributes["stdout_path"] = task.stdout_path;
  attributes["stderr_path"] = task.stderr_path;
  return status;
}

void MockDriver::Adopt(std::shared_ptr<Task> task, absl::string_view event) {
  {
    absl::MutexLock lock(&mu_);
    tasks_[task->config.id()] = task;
    if (task->exited) {
      // Recovered after its exit: WaitTask must return at once.
      Notify(task->exited_fd);
    } else {
      task->watcher = std::thread([this, task] { Watch(task); });
    }
  }
  driver::v1::TaskEventsResponse message;
  message.set_task_id(task->config.id());
  message.set_allocation_id(task->config.allocation_id());
  message.set_message(absl::StrCat("task ", event));
  (*message.mutable_annotations())["event"] = std::string(event);
  (*message.mutable_annotations())["pid"] = absl::StrCat(task->handle.task_pid);
  PublishTaskEvent(message);
}

void MockDriver::Watch(std::shared_ptr<Task> task) {
  const pid_t monitor = task->handle.monitor_pid;
  if (task->monitor_pidfd >= 0 &&
      !PollReadable(task->monitor_pidfd, absl::InfiniteDuration(),
                    task->stop_fd)) {
    return;  // the driver goes away; the task does not
  }
  int status;
  waitpid(monitor, &status, WNOHANG);  // reaps it if it is our child
  absl::StatusOr<ExitRecord> record = ReadExitRecord(task->exit_path);
  if (record.ok() && record->monitor_pid == monitor) {
    MarkExited(*task, ResultOf(*record, task->knobs));
    return;
  }
  // The monitor died without a record (it was killed): the exit status is
  // lost. Wait for the task itself if it still runs.
  LOG(WARNING) << "task " << task->config.id() << ": its monitor (pid "
               << monitor << ") ended without recording an exit status in "
               << task->exit_path
               << (record.ok()
                       ? ""
                       : absl::StrCat(" (", record.status().message(), ")"));
  if (task->task_pidfd >= 0 &&
      !PollReadable(task->task_pidfd, absl::InfiniteDuration(),
                    task->stop_fd)) {
    return;
  }
  plugin::ExitStatus lost;
  lost.exit_code = 255;
  MarkExited(*task, plugin::ToExitResult(lost));
}

void MockDriver::MarkExited(Task& task, const driver::v1::ExitResult& result) {
  {
    absl::MutexLock lock(&mu_);
    if (task.exited) return;
    task.exited = true;
    task.result = result;
    Notify(task.exited_fd);
  }
  VLOG(1) << "task " << task.config.id() << " " << Describe(result);
  driver::v1::TaskEventsResponse event;
  event.set_task_id(task.config.id());
  event.set_allocation_id(task.config.allocation_id());
  event.set_message(absl::StrCat("task ", Describe(result)));
  (*event.mutable_annotations())["event"] = "exited";
  (*event.mutable_annotations())["exit_code"] =
      absl::StrCat(result.exit_code());
  (*event.mutable_annotations())["signal"] = absl::StrCat(result.signal());
  PublishTaskEvent(event);
}

absl::StatusOr<driver::v1::StartTaskResponse> MockDriver::StartTask(
    const driver::v1::TaskConfig& config) {
  if (absl::Status id = CheckTaskId(config.id()); !id.ok()) return id;
  absl::StatusOr<Knobs> knobs = ParseKnobs(config.driver_config());
  if (!knobs.ok()) {
    return absl::Status(
        knobs.status().code(),
        absl::StrCat(knobs.status().message(), " (task ", config.id(), ")"));
  }
  if (absl::Status network = CheckNetwork(config, join_networks_);
      !network.ok()) {
    return network;
  }
  const std::vector<std::string> env = TaskEnv(config, /*tty=*/false);
  absl::StatusOr<std::string> program =
      ResolveProgram(knobs->command, env, "task.driver_config.command");
  if (!program.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(program.status().message(), " (task ", config.id(), ")"));
  }
  absl::MutexLock start_lock(&start_mu_);
  std::string state_dir;
  {
    absl::MutexLock lock(&mu_);
    if (tasks_.count(config.id()) > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("task ", config.id(), " already exists"));
    }
    state_dir = state_dir_;
  }
  absl::StatusOr<TaskDirs> dirs = ResolveTaskDirs(config, *knobs, state_dir);
  if (!dirs.ok()) return dirs.status();

  auto task = std::make_shared<Task>();
  task->config = config;
  task->knobs = *knobs;
  task->handle.state_dir = state_dir;
  task->handle.task_dir = dirs->task_dir;
  task->handle.work_dir = dirs->work_dir;
  SetPaths(config.id(), task->handle, &task->exit_path, &task->stdout_path,
           &task->stderr_path);

  // What this call made, removed again if it fails.
  std::vector<std::string> made;
  auto fail = [&](absl::Status status) {
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      RemoveTree(*it, config.id());
    }
    unlink(task->exit_path.c_str());
    return status;
  };
  if (absl::StatusOr<std::string> made_state =
          MakeDirectories(state_dir, 0750, "state directory");
      !made_state.ok()) {
    return made_state.status();
  }
  // The node makes the task's directory (empty) before StartTask; made
  // here when it is missing, or when the driver chose it.
  absl::StatusOr<std::string> made_task =
      MakeDirectories(dirs->task_dir, 0755, "task directory");
  if (!made_task.ok()) {
    return absl::Status(
        made_task.status().code(),
        absl::StrCat("task ", config.id(), ": ", made_task.status().message()));
  }
  // Only the task directory itself counts: parents it made stay.
  if (!made_task->empty()) {
    task->handle.made_task_dir = true;
    made.push_back(dirs->task_dir);
  }
  const std::string log_dir = plugin::TaskLogDir(dirs->task_dir);
  absl::StatusOr<std::string> made_logs =
      MakeDirectories(log_dir, 0755, "log directory");
  if (!made_logs.ok()) {
    return fail(absl::Status(made_logs.status().code(),
                             absl::StrCat("task ", config.id(), ": ",
                                          made_logs.status().message())));
  }
  if (!made_logs->empty() && !task->handle.made_task_dir) {
    made.push_back(log_dir);
  }
  absl::StatusOr<std::string> made_work =
      MakeDirectories(dirs->work_dir, 0755, "task.driver_config.work_dir");
  if (!made_work.ok()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        made_work.status().message(), " (task ", config.id(), ")")));
  }
  if (!made_work->empty() && !task->handle.made_task_dir) {
    task->handle.made_work_dir = *made_work;
    made.push_back(*made_work);
  }
  unlink(task->exit_path.c_str());  // of an earlier task of that id

  std::vector<std::string> argv = {knobs->command};
  argv.insert(argv.end(), knobs->args.begin(), knobs->args.end());
  ExecSpec exec(*program, argv, env, dirs->work_dir);
  exec.set_netns(TaskNetns(config));
  MonitorSpec monitor;
  monitor.log_dir = log_dir;
  const plugin::LogLimits limits = plugin::ResolveLogLimits(
      config.logs().max_file_bytes(), config.logs().max_files());
  monitor.log_max_file_bytes = limits.max_file_bytes;
  monitor.log_max_files = limits.max_files;
  monitor.exit_path = task->exit_path;
  monitor.run_for = knobs->run_for;

  absl::Status identified = absl::OkStatus();
  absl::StatusOr<MonitoredPids> pids =
      LaunchMonitored(exec, monitor, [&](const MonitoredPids& launched) {
        // Both are there: the monitor waits for us, and does not reap the
        // task before.
        absl::StatusOr<ProcStat> monitor_stat = ReadProcStat(launched.monitor);
        absl::StatusOr<ProcStat> task_stat = ReadProcStat(launched.task);
        if (!monitor_stat.ok()) identified = monitor_stat.status();
        if (!task_stat.ok()) identified = task_stat.status();
        if (!identified.ok()) return;
        task->handle.monitor_start_ticks = monitor_stat->start_time;
        task->handle.task_start_ticks = task_stat->start_time;
        // Opened before the task can be reaped: they pin the processes.
        task->monitor_pidfd = PidfdOpen(launched.monitor);
        task->task_pidfd = PidfdOpen(launched.task);
        if (task->monitor_pidfd < 0) {
          identified = absl::ErrnoToStatus(
              errno, "pidfd_open (Linux 5.3 or later is needed)");
        }
      });
  if (!pids.ok()) {
    return fail(absl::Status(pids.status().code(),
                             absl::StrCat("cannot start task ", config.id(),
                                          ": ", pids.status().message())));
  }
  if (!identified.ok()) {
    // Leave nothing behind: the task, its monitor, its files.
    kill(-pids->task, SIGKILL);
    int status;
    waitpid(pids->monitor, &status, 0);
    return fail(absl::InternalError(absl::StrCat(
        "cannot start task ", config.id(), ": ", identified.message())));
  }
  task->handle.monitor_pid = pids->monitor;
  task->handle.task_pid = pids->task;
  task->handle.started_at = absl::Now();

  driver::v1::StartTaskResponse response;
  driver::v1::TaskHandle* handle = response.mutable_handle();
  *handle = MakeHandle(*task, driver::v1::TASK_STATE_RUNNING);
  LOG(INFO) << "task " << config.id() << " started: pid " << pids->task
            << " (monitor " << pids->monitor << ") in " << dirs->work_dir;
  if (keep_handles_) {
    const std::string path = HandlePath(task->handle.state_dir, config.id());
    const std::string tmp = absl::StrCat(path, ".tmp");
    std::string bytes;
    if (!handle->SerializeToString(&bytes) || !WriteWholeFile(tmp, bytes) ||
        rename(tmp.c_str(), path.c_str()) != 0) {
      PLOG(WARNING) << "task " << config.id() << ": cannot keep its handle in "
                    << path;
    }
  }
  Adopt(task, "started");
  if (!die_after_start_.empty() && unlink(die_after_start_.c_str()) == 0) {
    LOG(WARNING) << "task " << config.id() << " runs; dying before the reply ("
                 << die_after_start_ << ")";
    kill(getpid(), SIGKILL);
  }
  if (start_reply_delay_ > absl::ZeroDuration()) {
    absl::SleepFor(start_reply_delay_);
  }
  return response;
}

absl::StatusOr<driver::v1::ExitResult> MockDriver::WaitTask(
    const std::string& task_id, const plugin::CancelToken& cancel) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  if (!PollReadable((*task)->exited_fd, absl::InfiniteDuration(),
                    cancel.fd())) {
    return absl::CancelledError(
        absl::StrCat("WaitTask of task ", task_id, " cancelled"));
  }
  absl::MutexLock lock(&mu_);
  return (*task)->result;
}

bool MockDriver::SignalGroup(Task& task, int signal) {
  absl::MutexLock lock(&mu_);
  if (task.exited) return false;
  // The group id is the task's pid, safe to use while the task is not
  // reaped (the monitor kills the group before it reaps).
  if (task.task_pidfd >= 0 && PidfdSendSignal(task.task_pidfd, 0) != 0) {
    return false;
  }
  if (kill(-task.handle.task_pid, signal) != 0) {
    return false;
  }
  return true;
}

bool MockDriver::AwaitExit(const Task& task, absl::Duration timeout) {
  return PollReadable(task.exited_fd, timeout);
}

absl::Status MockDriver::StopTask(const std::string& task_id,
                                  absl::Duration timeout, int signal) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  Task& stopping = **task;
  if (!SignalGroup(stopping, signal)) {
    // Already exited, or exiting: its watcher records it.
    AwaitExit(stopping, kKillTimeout);
    return absl::OkStatus();
  }
  if (AwaitExit(stopping, timeout)) return absl::OkStatus();
  LOG(INFO) << "task " << task_id << " still runs "
            << absl::FormatDuration(timeout) << " after "
            << plugin::SignalName(signal) << ": killing it";
  SignalGroup(stopping, SIGKILL);
  if (!AwaitExit(stopping, kKillTimeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("task ", task_id, " did not exit within ",
                     absl::FormatDuration(kKillTimeout), " of SIGKILL"));
  }
  return absl::OkStatus();
}

absl::Status MockDriver::DestroyTask(const std::string& task_id, bool force) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (!found.ok()) return found.status();
  std::shared_ptr<Task> task = *std::move(found);
  bool running;
  {
    absl::MutexLock lock(&mu_);
    running = !task->exited;
  }
  if (running) {
    if (!force) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", task_id,
                       " is running: stop it first, or destroy it with force"));
    }
    SignalGroup(*task, SIGKILL);
    if (!AwaitExit(*task, kKillTimeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("task ", task_id, " did not exit within ",
                       absl::FormatDuration(kKillTimeout), " of SIGKILL"));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end() || it->second != task) {
      return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
    }
    tasks_.erase(it);
  }
  Notify(task->stop_fd);
  if (task->watcher.joinable()) task->watcher.join();
  if (unlink(task->exit_path.c_str()) != 0 && errno != ENOENT) {
    PLOG(WARNING) << "task " << task_id << ": cannot remove "
                  << task->exit_path;
  }
  if (const std::string path = HandlePath(task->handle.state_dir, task_id);
      unlink(path.c_str()) != 0 && errno != ENOENT) {
    PLOG(WARNING) << "task " << task_id << ": cannot remove " << path;
  }
  // What the driver made in the task directory (the node removes the
  // directory it made itself).
  const HandleState& made = task->handle;
  if (made.made_task_dir) {
    RemoveTree(made.task_dir, task_id);
  } else {
    RemoveTree(plugin::TaskLogDir(made.task_dir), task_id);
    if (!made.made_work_dir.empty()) RemoveTree(made.made_work_dir, task_id);
  }
  driver::v1::TaskEventsResponse event;
  event.set_task_id(task_id);
  event.set_allocation_id(task->config.allocation_id());
  event.set_message("task destroyed");
  (*event.mutable_annotations())["event"] = "destroyed";
  PublishTaskEvent(event);
  return absl::OkStatus();
}

absl::StatusOr<driver::v1::TaskStatus> MockDriver::InspectTask(
    const std::string& task_id) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok() && keep_handles_ && CheckTaskId(task_id).ok()) {
    // Started by an earlier instance: recovered from the handle it kept.
    std::string bytes;
    driver::v1::TaskHandle handle;
    if (ReadWholeFile(HandlePath(state_dir(), task_id), &bytes) &&
        handle.ParseFromString(bytes) && handle.config().id() == task_id) {
      return RecoverTask(handle);
    }
  }
  if (!task.ok()) return task.status();
  absl::MutexLock lock(&mu_);
  return StatusOf(**task);
}

driver::v1::TaskHandle MockDriver::MakeHandle(const Task& task,
                                              driver::v1::TaskState state) {
  driver::v1::TaskHandle handle;
  handle.set_version(kHandleVersion);
  *handle.mutable_config() = task.config;
  handle.set_state(state);
  handle.set_driver_state(EncodeTaskState(task.handle));
  return handle;
}

absl::StatusOr<driver::v1::TaskHandle> MockDriver::HandleOf(
    const std::string& task_id) {
  if (no_handle_of_) return plugin::Driver::HandleOf(task_id);
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  absl::MutexLock lock(&mu_);
  return MakeHandle(**task, (*task)->exited ? driver::v1::TASK_STATE_EXITED
                                            : driver::v1::TASK_STATE_RUNNING);
}

absl::StatusOr<driver::v1::TaskStatus> MockDriver::RecoverTask(
    const driver::v1::TaskHandle& handle) {
  const std::string& id = handle.config().id();
  if (absl::Status valid = CheckTaskId(id); !valid.ok()) return valid;
  if (handle.version() != kHandleVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handle.version ", handle.version(), " of task ", id,
        " is not one the mock driver wrote (", kHandleVersion, ")"));
  }
  absl::StatusOr<HandleState> state = DecodeTaskState(handle.driver_state());
  if (!state.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handle.driver_state of task ", id, ": ", state.status().message()));
  }
  absl::StatusOr<Knobs> knobs = ParseKnobs(handle.config().driver_config());
  if (!knobs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handle.config of task ", id, ": ", knobs.status().message()));
  }
  if (recover_delay_ > absl::ZeroDuration()) absl::SleepFor(recover_delay_);
  absl::MutexLock start_lock(&start_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = tasks_.find(id); it != tasks_.end()) {
      return StatusOf(*it->second);  // already ours
    }
  }

  auto task = std::make_shared<Task>();
  task->config = handle.config();
  task->knobs = *knobs;
  task->handle = *state;
  SetPaths(id, task->handle, &task->exit_path, &task->stdout_path,
           &task->stderr_path);

  // Exited while nobody watched?
  absl::StatusOr<ExitRecord> record = ReadExitRecord(task->exit_path);
  if (record.ok() && record->monitor_pid == state->monitor_pid) {
    task->exited = true;
    task->result = ResultOf(*record, *knobs);
    LOG(INFO) << "task " << id << " recovered: it " << Describe(task->result)
              << " while the driver was away";
    Adopt(task, "recovered");
    absl::MutexLock lock(&mu_);
    return StatusOf(*task);
  }
  if (!record.ok() && record.status().code() != absl::StatusCode::kNotFound) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", id,
        ": cannot read its exit record: ", record.status().message()));
  }

  // Still running: both processes must be the ones the handle names.
  auto check = [&](pid_t pid, uint64_t start_ticks, absl::string_view what,
                   bool must_exist) -> absl::Status {
    absl::StatusOr<ProcStat> stat = ReadProcStat(pid);
    if (!stat.ok()) {
      if (!must_exist) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", id, ": its ", what, " (pid ", pid,
          ") is gone and recorded no exit status in ", task->exit_path));
    }
    if (stat->start_time != start_ticks) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", id, ": pid ", pid, " of its ", what,
          " was reused by another process (started at tick ", stat->start_time,
          ", the handle says ", start_ticks, ")"));
    }
    return absl::OkStatus();
  };
  if (absl::Status monitor =
          check(state->monitor_pid, state->monitor_start_ticks, "monitor",
                /*must_exist=*/true);
      !monitor.ok()) {
    return monitor;
  }
  // The monitor reaps the task just before it records the exit: a missing
  // task is one that is exiting now.
  if (absl::Status process = check(state->task_pid, state->task_start_ticks,
                                   "process", /*must_exist=*/false);
      !process.ok()) {
    return process;
  }
  // Pin both, then make sure the pins are the right processes.
  task->monitor_pidfd = PidfdOpen(state->monitor_pid);
  task->task_pidfd = PidfdOpen(state->task_pid);
  if (absl::Status monitor =
          check(state->monitor_pid, state->monitor_start_ticks, "monitor",
                /*must_exist=*/false);
      !monitor.ok()) {
    return monitor;
  }
  if (task->monitor_pidfd < 0) {
    // Gone between the checks: its record is there now.
    record = ReadExitRecord(task->exit_path);
    if (!record.ok() || record->monitor_pid != state->monitor_pid) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", id, ": its monitor (pid ", state->monitor_pid,
                       ") ended without an exit status in ", task->exit_path));
    }
    task->exited = true;
    task->result = ResultOf(*record, *knobs);
  }
  LOG(INFO) << "task " << id << " recovered: pid " << state->task_pid
            << (task->exited ? " (exited)" : " running");
  Adopt(task, "recovered");
  absl::MutexLock lock(&mu_);
  return StatusOf(*task);
}

absl::Status MockDriver::SignalTask(const std::string& task_id, int signal) {
  absl::StatusOr<std::shared_ptr<Task>> task = FindRunning(task_id, "signal");
  if (!task.ok()) return task.status();
  absl::MutexLock lock(&mu_);
  int result = -1;
  if ((*task)->task_pidfd >= 0) {
    result = PidfdSendSignal((*task)->task_pidfd, signal);
  }
  if (result != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot send ", plugin::SignalName(signal), " to task ", task_id,
        " (pid ", (*task)->handle.task_pid, "): ",
        (*task)->task_pidfd >= 0 ? std::strerror(errno) : "it has exited"));
  }
  return absl::OkStatus();
}

absl::StatusOr<stats::v1::TaskResourceUsage> MockDriver::TaskStats(
    const std::string& task_id) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (!found.ok()) return found.status();
  Task& task = **found;
  stats::v1::TaskResourceUsage usage;
  usage.set_task_id(task_id);
  usage.set_backend(stats::v1::BACKEND_PROCFS);
  stats::v1::CpuStats* cpu = usage.mutable_usage()->mutable_cpu();
  stats::v1::MemoryStats* memory = usage.mutable_usage()->mutable_memory();
  const double mhz = CpuCoreMhz();
  if (task.knobs.fake_stats.has_value()) {
    cpu->set_percent(task.knobs.fake_stats->cpu_percent);
    cpu->add_measured(stats::v1::CPU_FIELD_PERCENT);
    cpu->set_total_ticks(task.knobs.fake_stats->cpu_percent / 100 * mhz);
    memory->set_rss(task.knobs.fake_stats->rss_bytes);
    memory->add_measured(stats::v1::MEMORY_FIELD_RSS);
    return usage;
  }
  cpu->set_total_ticks(0);
  {
    absl::MutexLock lock(&mu_);
    if (task.exited) return usage;  // nothing left to measure
  }
  absl::StatusOr<ProcStat> stat = ReadProcStat(task.handle.task_pid);
  if (!stat.ok() || stat->start_time != task.handle.task_start_ticks) {
    return usage;  // exiting now
  }
  const absl::Time now = absl::Now();
  const double ticks_per_second = static_cast<double>(ClockTicksPerSecond());
  auto ticks = [&](uint64_t count) {
    return absl::Seconds(static_cast<double>(count) / ticks_per_second);
  };
  *cpu->mutable_user_mode() = plugin::ToProtoDuration(ticks(stat->utime_ticks));
  *cpu->mutable_system_mode() =
      plugin::ToProtoDuration(ticks(stat->stime_ticks));
  *cpu->mutable_usage() =
      plugin::ToProtoDuration(ticks(stat->utime_ticks + stat->stime_ticks));
  cpu->add_measured(stats::v1::CPU_FIELD_USER_MODE);
  cpu->add_measured(stats::v1::CPU_FIELD_SYSTEM_MODE);
  cpu->add_measured(stats::v1::CPU_FIELD_USAGE);
  {
    absl::MutexLock lock(&mu_);
    if (task.last_cpu.has_value() && now > task.last_cpu->time &&
        stat->utime_ticks >= task.last_cpu->utime_ticks &&
        stat->stime_ticks >= task.last_cpu->stime_ticks) {
      const double seconds = absl::ToDoubleSeconds(now - task.last_cpu->time);
      auto percent = [&](uint64_t delta) {
        return static_cast<double>(delta) / ticks_per_second / seconds * 100;
      };
      const double user =
          percent(stat->utime_ticks - task.last_cpu->utime_ticks);
      const double system =
          percent(stat->stime_ticks - task.last_cpu->stime_ticks);
      cpu->set_user_mode_percent(user);
      cpu->set_system_mode_percent(system);
      cpu->set_percent(user + system);
      cpu->set_total_ticks((user + system) / 100 * mhz);
      cpu->add_measured(stats::v1::CPU_FIELD_PERCENT);
      cpu->add_measured(stats::v1::CPU_FIELD_USER_MODE_PERCENT);
      cpu->add_measured(stats::v1::CPU_FIELD_SYSTEM_MODE_PERCENT);
    }
    task.last_cpu = Task::CpuSample{now, stat->utime_ticks, stat->stime_ticks};
  }
  if (absl::StatusOr<uint64_t> rss = ReadVmRssBytes(task.handle.task_pid);
      rss.ok()) {
    memory->set_rss(*rss);
    memory->add_measured(stats::v1::MEMORY_FIELD_RSS);
  }
  (*usage.mutable_processes())[task.handle.task_pid] = usage.usage();
  return usage;
}

absl::StatusOr<driver::v1::ExecTaskResponse> MockDriver::ExecTask(
    const std::string& task_id, const std::vector<std::string>& command,
    absl::Duration timeout, const plugin::CancelToken& cancel) {
  if (no_exec_) {
    return absl::UnimplementedError("this mock driver runs with --no_exec");
  }
  absl::StatusOr<std::shared_ptr<Task>> task = FindRunning(task_id, "exec in");
  if (!task.ok()) return task.status();
  const std::vector<std::string> env = TaskEnv((*task)->config, false);
  absl::StatusOr<std::string> program =
      ResolveProgram(command[0], env, "command");
  if (!program.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(program.status().message(), " (task ", task_id, ")"));
  }
  ExecSpec exec(*program, command, env, (*task)->handle.work_dir);
  exec.set_netns(TaskNetns((*task)->config));
  absl::StatusOr<Child> child = SpawnChild(exec, /*tty=*/false, {});
  if (!child.ok()) {
    return absl::Status(
        child.status().code(),
        absl::StrCat(child.status().message(), " (task ", task_id, ")"));
  }
  driver::v1::ExecTaskResponse response;
  CappedOutput out(response.mutable_stdout());
  CappedOutput err(response.mutable_stderr());
  plugin::ExecOptions options;  // no stdin: end of file at once
  options.out = &out;
  options.err = &err;
  options.cancel = &cancel;
  int wait_status = 0;
  const absl::Time deadline = timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + timeout;
  const absl::Status pumped = PumpExec(*child, options, deadline, &wait_status);
  CloseChild(*child);
  if (pumped.ok()) {
    *response.mutable_result() =
        plugin::ToExitResult(ToExitStatus(wait_status));
    return response;
  }
  if (absl::IsDeadlineExceeded(pumped)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "command ", command[0], " in task ", task_id, " did not finish within ",
        absl::FormatDuration(timeout), " and was killed"));
  }
  return absl::CancelledError(absl::StrCat("ExecTask of ", command[0],
                                           " in task ", task_id, " cancelled"));
}

absl::StatusOr<plugin::ExitStatus> MockDriver::ExecTaskStreaming(
    const plugin::ExecOptions& options) {
  if (no_exec_) {
    return absl::UnimplementedError("this mock driver runs with --no_exec");
  }
  const std::string& id = options.task_id;
  absl::StatusOr<std::shared_ptr<Task>> task = FindRunning(id, "exec in");
  if (!task.ok()) return task.status();
  const std::vector<std::string> env = TaskEnv((*task)->config, options.tty);
  absl::StatusOr<std::string> program =
      ResolveProgram(options.command[0], env, "setup.command");
  if (!program.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(program.status().message(), " (task ", id, ")"));
  }
  ExecSpec exec(*program, options.command, env, (*task)->handle.work_dir);
  exec.set_netns(TaskNetns((*task)->config));
  absl::StatusOr<Child> child =
      SpawnChild(exec, options.tty, options.terminal_size);
  if (!child.ok()) {
    return absl::Status(
        child.status().code(),
        absl::StrCat(child.status().message(), " (task ", id, ")"));
  }
  int wait_status = 0;
  const absl::Status pumped =
      PumpExec(*child, options, absl::InfiniteFuture(), &wait_status);
  CloseChild(*child);
  if (pumped.ok()) return ToExitStatus(wait_status);
  if (absl::IsUnavailable(pumped)) {
    return absl::UnavailableError(absl::StrCat("ExecTaskStreaming in task ", id,
                                               ": the caller went away"));
  }
  return absl::CancelledError(
      absl::StrCat("ExecTaskStreaming in task ", id, " cancelled"));
}

absl::StatusOr<std::string> MockDriver::NetworkRecordPath(
    const std::string& allocation_id) const {
  if (allocation_id.empty() || allocation_id == "." || allocation_id == ".." ||
      allocation_id.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allocation_id \"", allocation_id, "\" is not a valid name"));
  }
  return absl::StrCat(state_dir(), "/networks/", allocation_id);
}

absl::StatusOr<driver::v1::CreateNetworkResponse> MockDriver::CreateNetwork(
    const driver::v1::CreateNetworkRequest& request) {
  if (!must_create_network_) return plugin::Driver::CreateNetwork(request);
  absl::StatusOr<std::string> path = NetworkRecordPath(request.allocation_id());
  if (!path.ok()) return path.status();
  // <state dir>/networks
  if (absl::StatusOr<std::string> made = MakeDirectories(
          path->substr(0, path->rfind('/')), 0750, "state directory");
      !made.ok()) {
    return made.status();
  }
  driver::v1::CreateNetworkResponse response;
  const int fd =
      open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const std::string content = absl::StrCat(request.hostname(), "\n");
    const bool written = write(fd, content.data(), content.size()) ==
                         static_cast<ssize_t>(content.size());
    const int error = errno;
    close(fd);
    if (!written) {
      unlink(path->c_str());
      return absl::InternalError(
          absl::StrCat("write ", *path, ": ", std::strerror(error)));
    }
    response.set_created(true);
  } else if (errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("create ", *path, ": ", std::strerror(errno)));
  }
  network::v1::NetworkStatus& status = *response.mutable_status();
  status.set_allocation_id(request.allocation_id());
  status.set_mode(network::v1::NETWORK_MODE_BRIDGE);
  status.set_interface_name("mock0");
  network::v1::InterfaceAddress& address = *status.add_addresses();
  address.set_cidr("192.0.2.1/24");
  LOG(INFO) << "network of allocation " << request.allocation_id()
            << (response.created() ? " created" : " already there");
  return response;
}

absl::Status MockDriver::DestroyNetwork(const std::string& allocation_id) {
  if (!must_create_network_) {
    return plugin::Driver::DestroyNetwork(allocation_id);
  }
  absl::StatusOr<std::string> path = NetworkRecordPath(allocation_id);
  if (!path.ok()) return path.status();
  if (unlink(path->c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("unlink ", *path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace berth::mock
