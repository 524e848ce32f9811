#include "services/node/task_manager.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/proto_time.h"
#include "glog/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "plugins/host/errors.h"
#include "services/common/dial.h"
#include "services/common/remove_tree.h"
#include "services/common/status.h"
#include "services/node/health_checker.h"
#include "services/node/restart_policy.h"
#include "services/node/task_image.h"
#include "services/node/task_network.h"
#include "services/node/task_userns.h"

namespace berth::node {
namespace {

using plugin::host::DriverClient;

constexpr absl::Duration kDefaultStopTimeout = absl::Seconds(5);

bool Finished(v1::TaskState state) {
  return state == v1::TASK_STATE_EXITED || state == v1::TASK_STATE_FAILED;
}

std::string NewTaskId() {
  absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint64_t>(gen));
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (!absl::ascii_isalnum(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

// The bounds of the integers a spec carries: what the kernel and the drivers
// take, so that no conversion or multiplication of theirs wraps (cpu.max's
// quota is millicores times the period in microseconds; cpu.weight is
// computed from cpu_shares; sizes become off_t and int64).
constexpr uint64_t kMaxCpuMillicores = 1'000'000'000;  // a million CPUs
constexpr uint64_t kMaxCpuShares = 262'144;            // cgroup v1's largest
constexpr uint64_t kMaxBytes = INT64_MAX;
constexpr uint64_t kMaxPids = 4'194'304;  // PID_MAX_LIMIT
constexpr uint32_t kMaxLogFiles = 1024;
// The longest a delay or health check setting may be.
constexpr absl::Duration kMaxSettingDuration = absl::Hours(24);

absl::Status OutOfRange(absl::string_view field, uint64_t value,
                        absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", value, " is out of range (", range, ")"));
}

// A google.protobuf.Duration as the proto defines one (nanos within a
// second, of the seconds' sign), at most `max`.
absl::Status CheckDuration(const google::protobuf::Duration& duration,
                           absl::string_view field, absl::Duration max) {
  const int64_t seconds = duration.seconds();
  const int32_t nanos = duration.nanos();
  if (nanos <= -1'000'000'000 || nanos >= 1'000'000'000 ||
      (seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": {seconds: ", seconds, ", nanos: ", nanos,
                     "} is not a duration (nanos within a second, of the "
                     "seconds' sign)"));
  }
  if (base::FromProtoDuration(duration) > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", absl::FormatDuration(base::FromProtoDuration(duration)),
        " is above the most allowed, ", absl::FormatDuration(max)));
  }
  return absl::OkStatus();
}

// The integers of a spec within what the kernel and drivers take; errors
// name the field and the value.
absl::Status CheckSpecIntegers(const v1::TaskSpec& spec) {
  const driver::v1::Resources& resources = spec.resources();
  if (resources.cpu_millicores() > kMaxCpuMillicores) {
    return OutOfRange("spec.resources.cpu_millicores",
                      resources.cpu_millicores(),
                      "10 to 1000000000, a million CPUs; 0: no limit");
  }
  if (resources.cpu_shares() == 1 || resources.cpu_shares() > kMaxCpuShares) {
    return OutOfRange("spec.resources.cpu_shares", resources.cpu_shares(),
                      "2 to 262144; 0: the default");
  }
  if (resources.memory_bytes() > kMaxBytes) {
    return OutOfRange("spec.resources.memory_bytes", resources.memory_bytes(),
                      "at most 9223372036854775807; 0: no limit");
  }
  if (resources.pids_limit() > kMaxPids) {
    return OutOfRange("spec.resources.pids_limit", resources.pids_limit(),
                      "at most 4194304, the kernel's most pids; 0: no limit");
  }
  if (spec.logs().max_file_bytes() > kMaxBytes) {
    return OutOfRange("spec.logs.max_file_bytes", spec.logs().max_file_bytes(),
                      "at most 9223372036854775807; 0: the driver's default");
  }
  if (spec.logs().max_files() > kMaxLogFiles) {
    return OutOfRange("spec.logs.max_files", spec.logs().max_files(),
                      "at most 1024; 0: the driver's default");
  }
  if (spec.restart().has_delay()) {
    if (absl::Status s = CheckDuration(
            spec.restart().delay(), "spec.restart.delay", kMaxSettingDuration);
        !s.ok()) {
      return s;
    }
  }
  if (spec.has_stop_timeout()) {
    if (absl::Status s = CheckDuration(spec.stop_timeout(), "spec.stop_timeout",
                                       absl::InfiniteDuration());
        !s.ok()) {
      return s;
    }
  }
  const v1::HealthCheck& check = spec.healthcheck();
  for (const auto& [name, has, value] :
       {std::tuple<const char*, bool, const google::protobuf::Duration*>{
            "spec.healthcheck.interval", check.has_interval(),
            &check.interval()},
        {"spec.healthcheck.timeout", check.has_timeout(), &check.timeout()},
        {"spec.healthcheck.start_period", check.has_start_period(),
         &check.start_period()}}) {
    if (!has) continue;
    if (absl::Status s = CheckDuration(*value, name, kMaxSettingDuration);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

void ResolveStopSettings(const internal::TaskRecord& record,
                         absl::Duration* timeout, std::string* signal) {
  const v1::TaskSpec& spec = record.task().spec();
  if (*timeout < absl::ZeroDuration() || *timeout == absl::InfiniteDuration()) {
    *timeout = spec.has_stop_timeout()
                   ? base::FromProtoDuration(spec.stop_timeout())
                   : kDefaultStopTimeout;
  }
  if (!signal->empty()) return;
  const std::string& image_signal = record.image().config().stop_signal();
  if (!spec.stop_signal().empty()) {
    *signal = spec.stop_signal();
  } else if (!image_signal.empty() &&
             ParseSignalName(image_signal).has_value()) {
    *signal = image_signal;
  } else {
    *signal = "SIGTERM";
  }
}

absl::Status ValidateTaskSpec(const v1::TaskSpec& spec) {
  if (spec.driver().empty()) {
    return absl::InvalidArgumentError("spec.driver is required");
  }
  if (!spec.name().empty() && !ValidName(spec.name())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.name: \"", spec.name(),
        "\" is not a valid name (letters, digits, '-', '_', '.'; starting "
        "with a letter or digit; at most 128)"));
  }
  const v1::NetworkSpec& net = spec.network();
  if (net.mode() == network::v1::NETWORK_MODE_CNI &&
      net.cni_network().empty()) {
    return absl::InvalidArgumentError(
        "spec.network.cni_network is required for NETWORK_MODE_CNI");
  }
  if (net.mode() != network::v1::NETWORK_MODE_CNI &&
      !net.cni_network().empty()) {
    return absl::InvalidArgumentError(
        "spec.network.cni_network is only for NETWORK_MODE_CNI");
  }
  for (int i = 0; i < net.port_mappings_size(); ++i) {
    const network::v1::PortMapping& port = net.port_mappings(i);
    if (port.host_port() == 0 || port.host_port() > 65535 ||
        port.container_port() == 0 || port.container_port() > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.network.port_mappings[", i, "]: ports must be 1..65535"));
    }
    if (net.mode() == network::v1::NETWORK_MODE_HOST ||
        net.mode() == network::v1::NETWORK_MODE_NONE) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.network.port_mappings[", i,
                       "]: port mappings need bridge or CNI networking"));
    }
  }
  if (absl::Status s = CheckSpecIntegers(spec); !s.ok()) return s;
  if (spec.restart().has_delay()) {
    if (base::FromProtoDuration(spec.restart().delay()) <
        absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "spec.restart.delay must not be negative");
    }
  }
  if (spec.has_image()) {
    if (spec.image().reference().empty()) {
      return absl::InvalidArgumentError(
          "spec.image.reference is required (e.g. \"busybox\"); leave "
          "spec.image unset for a task without an image");
    }
    if (spec.image().entrypoint_size() > 0 &&
        !spec.image().override_entrypoint()) {
      return absl::InvalidArgumentError(
          "spec.image.entrypoint is only used with "
          "spec.image.override_entrypoint set");
    }
  }
  if (spec.resources().cpu_millicores() > 0 &&
      spec.resources().cpu_millicores() < 10) {
    return absl::InvalidArgumentError(
        "spec.resources.cpu_millicores: at least 10 (0.01 CPU)");
  }
  if (spec.has_healthcheck()) {
    if (absl::Status s = ValidateHealthCheck(spec.healthcheck()); !s.ok()) {
      return s;
    }
    // Settings without a test change the image's HEALTHCHECK; without an
    // image there is none (an image's is looked at when the run starts).
    if (!spec.has_image()) {
      if (absl::StatusOr<std::optional<v1::HealthCheck>> check =
              HealthCheckInForce(spec, nullptr);
          !check.ok()) {
        return check.status();
      }
    }
  }
  // Labels, hostname, extra hosts, ulimits, stop settings.
  return ValidateTaskSettings(spec);
}

TaskManager::TaskManager(Options options, TaskStore* store,
                         PluginManager* plugins, EventBus* events)
    : options_(std::move(options)),
      store_(store),
      plugins_(plugins),
      events_(events) {
  if (!options_.netns_socket.empty()) {
    NetnsNetwork::Options netns;
    netns.socket = options_.netns_socket;
    netns.call_timeout = options_.network_timeout;
    netns.connect_wait = options_.netns_wait;
    netns_ = std::make_shared<NetnsNetwork>(std::move(netns));
  }
  mkdir(absl::StrCat(options_.state_dir, "/tasks").c_str(), 0711);
}

TaskManager::~TaskManager() { Shutdown(); }

std::string TaskManager::TaskDir(const std::string& id) const {
  return absl::StrCat(options_.state_dir, "/tasks/", id);
}

std::string TaskManager::LogDir(const std::string& id) const {
  return absl::StrCat(TaskDir(id), "/logs");
}

std::string TaskManager::HistoryDir(const std::string& id) const {
  return absl::StrCat(options_.state_dir, "/logs/", id);
}

std::vector<std::string> TaskManager::EarlierLogDirs(
    const std::string& id) const {
  std::vector<int> runs;
  if (DIR* listing = opendir(HistoryDir(id).c_str()); listing != nullptr) {
    while (const dirent* entry = readdir(listing)) {
      absl::string_view name = entry->d_name;
      int run = 0;
      if (absl::ConsumePrefix(&name, "run-") && absl::SimpleAtoi(name, &run)) {
        runs.push_back(run);
      }
    }
    closedir(listing);
  }
  std::sort(runs.begin(), runs.end());
  std::vector<std::string> dirs;
  for (int run : runs) {
    dirs.push_back(absl::StrCat(HistoryDir(id), "/run-", run));
  }
  return dirs;
}

bool TaskManager::shutting_down() const {
  absl::MutexLock lock(&mu_);
  return shutting_down_;
}

void TaskManager::Save(Entry& entry) {
  absl::MutexLock save_lock(&entry.save_mu);
  internal::TaskRecord copy;
  {
    absl::MutexLock lock(&mu_);
    copy = entry.record;
  }
  if (absl::Status s = store_->Put(copy); !s.ok()) {
    // The record in memory stays right; the next Save writes it again.
    LOG(ERROR) << "task " << copy.task().id() << ": cannot persist: " << s;
  }
}

absl::StatusOr<std::shared_ptr<DriverClient>> TaskManager::Driver(
    const std::string& name, absl::Duration wait) {
  // In slices of a second, so that a node shutting down is not held up by a
  // wait for a plugin that is relaunching.
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    absl::StatusOr<std::shared_ptr<DriverClient>> client = plugins_->Client(
        name, std::min(deadline, absl::Now() + absl::Seconds(1)));
    if (client.ok() || !absl::IsUnavailable(client.status()) ||
        absl::Now() >= deadline || shutting_down()) {
      return client;
    }
  }
}

std::shared_ptr<TaskManager::Entry> TaskManager::Find(const std::string& ref,
                                                      absl::Status* error) {
  if (ref.empty()) {
    *error = absl::InvalidArgumentError("task_id is required");
    return nullptr;
  }
  if (auto it = tasks_.find(ref); it != tasks_.end()) return it->second;
  std::vector<std::shared_ptr<Entry>> matches;
  for (const auto& [id, entry] : tasks_) {
    if (entry->record.task().spec().name() == ref) return entry;
    if (absl::StartsWith(id, ref)) matches.push_back(entry);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) {
    *error = absl::NotFoundError(absl::StrCat("no task ", ref));
  } else {
    *error = absl::InvalidArgumentError(
        absl::StrCat("task id prefix ", ref, " matches ", matches.size(),
                     " tasks; give more of the id"));
  }
  return nullptr;
}

absl::Status TaskManager::CheckNetworkSupported(
    const v1::TaskSpec& spec) const {
  absl::StatusOr<driver::v1::DriverCapabilities> caps =
      plugins_->Capabilities(spec.driver());
  // A driver that is down is asked again when it starts the task.
  if (!caps.ok()) return absl::OkStatus();
  const bool host = spec.network().mode() == network::v1::NETWORK_MODE_HOST;
  const driver::v1::NetworkIsolationMode wanted =
      host ? driver::v1::NETWORK_ISOLATION_MODE_HOST
           : driver::v1::NETWORK_ISOLATION_MODE_GROUP;
  for (int listed : caps->network_isolation_modes()) {
    if (listed == wanted) return absl::OkStatus();
  }
  if (host) {
    return absl::FailedPreconditionError(
        absl::StrCat("spec.network: driver ", spec.driver(),
                     " cannot run a task in the host's network namespace"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "spec.network: driver ", spec.driver(),
      " cannot join a network namespace (it runs tasks in the host's network "
      "only): use host networking (berth run --net host)"));
}

absl::StatusOr<v1::Task> TaskManager::Run(v1::TaskSpec spec,
                                          bool remove_on_start_failure) {
  if (absl::Status s = ValidateTaskSpec(spec); !s.ok()) return s;
  if (absl::Status s = ValidateTaskIsolation(spec, options_.protected_dirs);
      !s.ok()) {
    return s;
  }
  if (!plugins_->Has(spec.driver())) {
    std::vector<std::string> names = plugins_->Names();
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.driver: unknown driver \"", spec.driver(), "\" (this node has: ",
        names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  const network::v1::NetworkMode mode = spec.network().mode();
  if (absl::Status s = CheckNetworkSupported(spec); !s.ok()) return s;
  // A driver that is down is asked again when it starts the task.
  if (auto caps = plugins_->Capabilities(spec.driver()); caps.ok()) {
    if (absl::Status s = CheckIsolationSupported(spec, spec.driver(), *caps);
        !s.ok()) {
      return s;
    }
    // The spec's own health check runs as an exec (an image's is looked at
    // when the run starts).
    if (HealthCheckInForce(spec.healthcheck()).has_value()) {
      if (absl::Status s = CheckHealthCheckRunnable(spec.driver(), *caps);
          !s.ok()) {
        return s;
      }
    }
  }
  if (spec.has_image() && options_.images == nullptr) {
    return absl::FailedPreconditionError(
        "spec.image: this node runs without berth-images "
        "(--images_socket=none); only tasks without an image can run");
  }
  if (mode != network::v1::NETWORK_MODE_HOST && netns_ == nullptr) {
    // A driver that makes its own network needs no berth-netns.
    absl::StatusOr<driver::v1::DriverCapabilities> caps =
        plugins_->Capabilities(spec.driver());
    if (!caps.ok() || !caps->must_create_network()) {
      return absl::FailedPreconditionError(
          "spec.network: this node runs without berth-netns "
          "(--netns_socket=none); only host networking is available");
    }
  }
  std::shared_ptr<Entry> entry = std::make_shared<Entry>();
  v1::Task& task = *entry->record.mutable_task();
  task.set_id(NewTaskId());
  if (spec.name().empty())
    spec.set_name(absl::StrCat("task-", task.id().substr(0, 8)));
  // The node's process limit for a spec without one (a fork bomb in a task
  // must not exhaust the host's pids), kept in the spec as what is in force.
  if (spec.resources().pids_limit() == 0 && options_.default_pids_limit != 0) {
    spec.mutable_resources()->set_pids_limit(options_.default_pids_limit);
  }
  *task.mutable_spec() = std::move(spec);
  task.set_state(v1::TASK_STATE_PENDING);
  *task.mutable_created_at() = NowProto();
  const std::string id = task.id();
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return absl::UnavailableError("berth-node is shutting down");
    }
    // Every record counts, running or not: each holds a row, a directory
    // and (running) a supervisor thread.
    if (tasks_.size() >= static_cast<size_t>(std::max(options_.max_tasks, 0))) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "berth-node holds ", tasks_.size(),
          " tasks, the most its --max_tasks (", options_.max_tasks,
          ") allows; remove finished tasks (berth rm) before running more"));
    }
    for (const auto& [other_id, other] : tasks_) {
      if (other->record.task().spec().name() == task.spec().name()) {
        return absl::AlreadyExistsError(
            absl::StrCat("spec.name: the name ", task.spec().name(),
                         " is used by task ", other_id, " (remove it first)"));
      }
    }
    // Persisted before anything else happens, under the lock so that a
    // name is never taken twice.
    if (absl::Status s = store_->Put(entry->record); !s.ok()) return s;
    tasks_[id] = entry;
    Launch(entry, Resume::kStart);
  }
  events_->Publish(v1::EVENT_TYPE_TASK_CREATED, id,
                   absl::StrCat("task ", entry->record.task().spec().name(),
                                " created (driver ",
                                entry->record.task().spec().driver(), ")"));
  absl::Status start_error;
  {
    absl::MutexLock lock(&mu_);
    auto started = [this, &entry]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      v1::TaskState state = entry->record.task().state();
      return shutting_down_ || (state != v1::TASK_STATE_PENDING &&
                                state != v1::TASK_STATE_STARTING);
    };
    mu_.Await(absl::Condition(&started));
    const v1::TaskState state = entry->record.task().state();
    if (state == v1::TASK_STATE_PENDING || state == v1::TASK_STATE_STARTING) {
      return absl::UnavailableError(absl::StrCat(
          "task ", id,
          " is accepted, but berth-node is shutting down; the next berth-node "
          "starts it"));
    }
    if (entry->start_error.ok()) return entry->record.task();
    start_error = entry->start_error;
  }
  if (!absl::StrContains(start_error.message(), id)) {
    start_error =
        absl::Status(start_error.code(),
                     absl::StrCat("task ", id, ": ", start_error.message()));
  }
  if (remove_on_start_failure) {
    // Forced: a restart policy may be about to start it again.
    if (absl::Status removed = Remove(id, /*force=*/true); !removed.ok()) {
      LOG(WARNING) << "task " << id
                   << " failed to start and stays listed: " << removed;
      return absl::Status(start_error.code(),
                          absl::StrCat(start_error.message(), " (and ",
                                       removed.message(), ")"));
    }
  }
  return start_error;
}

absl::Status TaskManager::Recover() {
  absl::StatusOr<std::vector<internal::TaskRecord>> records = store_->List();
  if (!records.ok()) return records.status();
  absl::MutexLock lock(&mu_);
  for (internal::TaskRecord& record : *records) {
    auto entry = std::make_shared<Entry>();
    entry->record = std::move(record);
    const std::string id = entry->record.task().id();
    tasks_[id] = entry;
    // Its user namespace's ids stay its own until it is removed.
    if (absl::Status s =
            RestoreUserNamespace(entry->record, options_.id_ranges);
        !s.ok()) {
      LOG(ERROR) << s;
    }
    switch (entry->record.task().state()) {
      case v1::TASK_STATE_RUNNING:
        LOG(INFO) << "task " << id << ": recovering it from its driver "
                  << entry->record.task().spec().driver();
        Launch(entry, Resume::kWait);
        break;
      case v1::TASK_STATE_PENDING:
      case v1::TASK_STATE_STARTING:
      case v1::TASK_STATE_RESTARTING:
        LOG(INFO) << "task " << id
                  << ": its start was interrupted; adopting the run if its "
                     "driver has it, else starting it again";
        Launch(entry, Resume::kAdoptOrStart);
        break;
      default:
        if (entry->record.network_allocated()) {
          LOG(INFO) << "task " << id << ": running its missing Postrun";
          Launch(entry, Resume::kPostrunOnly);
        }
        break;
    }
  }
  LOG(INFO) << "recovered " << tasks_.size() << " tasks from the state store";
  if (options_.images != nullptr) {
    reconciler_ = std::thread([this] { ReconcileSnapshots(); });
  }
  return absl::OkStatus();
}

std::vector<v1::Task> TaskManager::List(bool all) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Task> tasks;
  for (const auto& [id, entry] : tasks_) {
    if (!all && Finished(entry->record.task().state())) continue;
    tasks.push_back(entry->record.task());
  }
  std::sort(tasks.begin(), tasks.end(),
            [](const v1::Task& a, const v1::Task& b) {
              return base::FromProtoTimestamp(a.created_at()) >
                     base::FromProtoTimestamp(b.created_at());
            });
  return tasks;
}

bool TaskManager::AwaitFinished(const std::string& id, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto finished = [this, &id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = tasks_.find(id);
    return it == tasks_.end() || Finished(it->second->record.task().state());
  };
  return mu_.AwaitWithTimeout(absl::Condition(&finished), timeout);
}

absl::StatusOr<std::optional<driver::v1::ExitResult>> TaskManager::AwaitRunExit(
    const std::string& id, uint32_t run, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ended = [this, &id, run]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = tasks_.find(id);
    if (shutting_down_ || it == tasks_.end()) return true;
    const v1::Task& task = it->second->record.task();
    return task.restarts() != run || (task.state() != v1::TASK_STATE_RUNNING &&
                                      task.state() != v1::TASK_STATE_STARTING &&
                                      task.state() != v1::TASK_STATE_PENDING);
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ended), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("task ", id, " is still running"));
  }
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return std::optional<driver::v1::ExitResult>();
  const v1::Task& task = it->second->record.task();
  // The run's exit stays recorded until the next run starts.
  if (task.restarts() == run && task.has_exit_result()) {
    return std::optional<driver::v1::ExitResult>(task.exit_result());
  }
  if (shutting_down_) {
    return absl::UnavailableError("berth-node is shutting down");
  }
  return std::optional<driver::v1::ExitResult>();
}

absl::StatusOr<v1::Task> TaskManager::Inspect(const std::string& ref) {
  absl::MutexLock lock(&mu_);
  absl::Status error;
  std::shared_ptr<Entry> entry = Find(ref, &error);
  if (entry == nullptr) return error;
  return entry->record.task();
}

absl::StatusOr<v1::Task> TaskManager::Stop(const std::string& ref,
                                           absl::Duration timeout,
                                           std::string signal) {
  std::shared_ptr<Entry> entry;
  bool running;
  {
    absl::MutexLock lock(&mu_);
    absl::Status error;
    entry = Find(ref, &error);
    if (entry == nullptr) return error;
    if (Finished(entry->record.task().state())) return entry->record.task();
    ResolveStopSettings(entry->record, &timeout, &signal);
    entry->stop_requested = true;
    entry->record.mutable_task()->set_stopped(true);
    running = entry->record.task().state() == v1::TASK_STATE_RUNNING;
  }
  Save(*entry);
  const std::string id = entry->record.task().id();
  if (running) {
    absl::StatusOr<std::shared_ptr<DriverClient>> driver =
        Driver(entry->record.task().spec().driver(), absl::Seconds(10));
    if (!driver.ok()) return driver.status();
    driver::v1::StopTaskRequest request;
    request.set_task_id(id);
    *request.mutable_timeout() = base::ToProtoDuration(timeout);
    request.set_signal(signal);
    absl::StatusOr<driver::v1::StopTaskResponse> stopped = (*driver)->StopTask(
        request, {absl::Now() + timeout + absl::Seconds(30)});
    if (!stopped.ok() && !absl::IsNotFound(stopped.status())) {
      return stopped.status();
    }
  }
  absl::MutexLock lock(&mu_);
  auto done = [&entry]() { return Finished(entry->record.task().state()); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done),
                            timeout + absl::Seconds(30))) {
    return absl::DeadlineExceededError(
        absl::StrCat("task ", id, " was told to stop but has not ended yet"));
  }
  return entry->record.task();
}

absl::Status TaskManager::Remove(const std::string& ref, bool force) {
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    absl::Status error;
    entry = Find(ref, &error);
    if (entry == nullptr) return error;
    if (!Finished(entry->record.task().state()) && !force) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", entry->record.task().id(), " (",
                       entry->record.task().spec().name(),
                       ") is running; stop it first or remove it with force"));
    }
  }
  const std::string id = entry->record.task().id();
  if (force) {
    absl::StatusOr<v1::Task> stopped =
        Stop(id, absl::ZeroDuration(), "SIGKILL");
    if (!stopped.ok()) return stopped.status();
  }
  if (entry->supervisor.joinable() &&
      entry->supervisor.get_id() != std::this_thread::get_id()) {
    entry->supervisor.join();
  }
  if (absl::Status s = DestroyDriverTask(*entry); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("cannot remove task ", id, ": ", s.message()));
  }
  if (absl::Status s = TearDownNetwork(*entry); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("cannot remove task ", id, ": ", s.message()));
  }
  if (absl::Status s = ReleaseImage(*entry); !s.ok()) {
    Save(*entry);
    return absl::Status(
        s.code(), absl::StrCat("cannot remove task ", id, ": ", s.message()));
  }
  // What the driver left of the task's directory (a driver that made it
  // removes it in DestroyTask; not every driver does).
  if (absl::Status s = RemoveTree(TaskDir(id)); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("cannot remove task ", id, ": ", s.message()));
  }
  if (absl::Status s = RemoveTree(HistoryDir(id)); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("cannot remove task ", id, ": ", s.message()));
  }
  if (absl::Status s = store_->Delete(id); !s.ok()) return s;
  if (options_.id_ranges != nullptr) options_.id_ranges->Release(id);
  {
    absl::MutexLock lock(&mu_);
    tasks_.erase(id);
  }
  events_->Publish(v1::EVENT_TYPE_TASK_REMOVED, id, "removed");
  return absl::OkStatus();
}

absl::StatusOr<TaskManager::Target> TaskManager::RunningTarget(
    const std::string& ref) {
  std::string id, driver_name;
  uint32_t run;
  {
    absl::MutexLock lock(&mu_);
    absl::Status error;
    std::shared_ptr<Entry> entry = Find(ref, &error);
    if (entry == nullptr) return error;
    id = entry->record.task().id();
    if (entry->record.task().state() != v1::TASK_STATE_RUNNING) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", id, " (", entry->record.task().spec().name(),
                       ") is not running (",
                       v1::TaskState_Name(entry->record.task().state()), ")"));
    }
    driver_name = entry->record.task().spec().driver();
    run = entry->record.task().restarts();
  }
  absl::StatusOr<std::shared_ptr<DriverClient>> driver =
      Driver(driver_name, absl::Seconds(10));
  if (!driver.ok()) return driver.status();
  return Target{id, *std::move(driver), driver_name, run};
}

std::optional<v1::ComponentStatus> TaskManager::NetnsStatus() {
  if (netns_ == nullptr) return std::nullopt;
  return netns_->Status();
}

void TaskManager::Shutdown() {
  std::vector<std::shared_ptr<Entry>> entries;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    for (auto& [id, entry] : tasks_) entries.push_back(entry);
  }
  for (auto& entry : entries) entry->canceller.Cancel();
  for (auto& entry : entries) {
    if (entry->supervisor.joinable()) entry->supervisor.join();
  }
  if (reconciler_.joinable()) reconciler_.join();
}

}  // namespace berth::node
