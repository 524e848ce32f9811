// The supervisor of TaskManager: one thread per task that is not finished
// carries it through its runs (task_manager.h): the network (berth-netns'
// Prerun or the driver's CreateNetwork), the task directory, StartTask,
// WaitTask across restarts of the driver (RecoverTask), the exit, Postrun and
// the restart policy (restart_policy.h). The calls users make (Run, Stop,
// Remove, ...) are in task_manager.cc; both share TaskManager's lock.

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/proto_time.h"
#include "glog/logging.h"
#include "plugins/host/errors.h"
#include "services/common/remove_tree.h"
#include "services/node/restart_policy.h"
#include "services/node/task_etc_files.h"
#include "services/node/task_image.h"
#include "services/node/task_manager.h"
#include "services/node/task_network.h"
#include "services/node/task_userns.h"

namespace berth::node {
namespace {

using plugin::host::DriverClient;
using plugin::host::IsPluginShutdown;

// When a run ended: the driver's exit time, but never before the run's
// start as the node recorded it (taken before StartTask; a driver's clock
// or rounding must not make a task end before it began).
google::protobuf::Timestamp FinishedAt(const v1::Task& task,
                                       const driver::v1::ExitResult& result) {
  if (!result.has_exited_at()) return NowProto();
  if (task.has_started_at() &&
      base::FromProtoTimestamp(result.exited_at()) <
          base::FromProtoTimestamp(task.started_at())) {
    return task.started_at();
  }
  return result.exited_at();
}

// Reads `path` (at most 64 KiB) into `text`.
absl::Status ReadSmallFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
  }
  char buffer[4096];
  while (text->size() < 64 * 1024 &&
         in.read(buffer, sizeof(buffer)).gcount() > 0) {
    text->append(buffer, static_cast<size_t>(in.gcount()));
  }
  return absl::OkStatus();
}

// Whether a failed StartTask leaves open whether the driver started the run:
// the plugin died or the call broke (the reply may be what was lost), as
// opposed to a refusal a live driver gave (INVALID_ARGUMENT,
// FAILED_PRECONDITION, ...), after which nothing of the task is left.
bool StartOutcomeUnseen(const absl::Status& status) {
  return IsPluginShutdown(status) || absl::IsUnavailable(status) ||
         absl::IsCancelled(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsUnknown(status);
}

// Whether `status`, a run the driver holds of a RESTARTING task, is the run
// that ended (`task` records its end) rather than the next one.
bool IsEndedRun(const driver::v1::TaskStatus& status, const v1::Task& task) {
  if (!task.has_finished_at()) return false;
  if (status.has_started_at()) {
    return base::FromProtoTimestamp(status.started_at()) <
           base::FromProtoTimestamp(task.finished_at());
  }
  return status.has_exit_result() && task.has_exit_result() &&
         status.exit_result().SerializeAsString() ==
             task.exit_result().SerializeAsString();
}

// The handle InspectTask gave with the run of task `id`, when it is one
// RecoverTask can take (it names the task); nullptr otherwise. A handle
// naming another task is not taken (logged).
const driver::v1::TaskHandle* HandleFor(
    const driver::v1::InspectTaskResponse& inspected, const std::string& id,
    const std::string& driver_name) {
  if (!inspected.has_handle()) return nullptr;
  if (inspected.handle().config().id() != id) {
    LOG(WARNING) << "task " << id << ": driver " << driver_name
                 << " gave a handle in InspectTask whose config.id is \""
                 << inspected.handle().config().id() << "\": not taken";
    return nullptr;
  }
  return &inspected.handle();
}

std::string DescribeExit(const driver::v1::ExitResult& result) {
  if (result.signal() != 0) {
    return absl::StrCat("killed by signal ", result.signal(),
                        result.oom_killed() ? " (out of memory)" : "");
  }
  return absl::StrCat("exited with code ", result.exit_code());
}

}  // namespace

void TaskManager::KeepRunLogs(const std::string& id, uint32_t run) {
  const std::string history = HistoryDir(id);
  mkdir(absl::StrCat(options_.state_dir, "/logs").c_str(), 0711);
  mkdir(history.c_str(), 0711);
  const std::string kept = absl::StrCat(history, "/run-", run);
  if (rename(LogDir(id).c_str(), kept.c_str()) != 0 && errno != ENOENT) {
    LOG(WARNING) << "task " << id << ": cannot keep the output of run " << run
                 << " in " << kept << ": " << std::strerror(errno);
  }
  // Only the last restart_history runs' (a task restarting for ever must not
  // fill the disk with directories); a failed deletion is tried again at the
  // next restart.
  const int64_t keep = std::max(options_.restart_history, 0);
  for (const std::string& dir : EarlierLogDirs(id)) {
    absl::string_view name = dir;
    uint32_t earlier = 0;
    if (!absl::ConsumePrefix(&name, absl::StrCat(history, "/run-")) ||
        !absl::SimpleAtoi(name, &earlier) ||
        static_cast<int64_t>(earlier) + keep > static_cast<int64_t>(run)) {
      continue;
    }
    if (absl::Status s = RemoveTree(dir); !s.ok()) {
      LOG(WARNING) << "task " << id << ": cannot drop the output of run "
                   << earlier << " (--restart_history " << keep << "): " << s;
    }
  }
}

void TaskManager::Launch(std::shared_ptr<Entry> entry, Resume resume) {
  entry->supervisor = std::thread(
      [this, entry, resume]() mutable { Supervise(std::move(entry), resume); });
}

void TaskManager::Fail(Entry& entry, const absl::Status& error) {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    v1::Task& task = *entry.record.mutable_task();
    id = task.id();
    task.set_state(v1::TASK_STATE_FAILED);
    task.set_error(std::string(error.message()));
    *task.mutable_finished_at() = NowProto();
    entry.start_error = error;
  }
  Save(entry);
  LOG(WARNING) << "task " << id << ": failed to start: " << error.message();
  events_->Publish(v1::EVENT_TYPE_TASK_FAILED, id,
                   std::string(error.message()));
}

absl::StatusOr<std::shared_ptr<TaskNetwork>> TaskManager::NetworkOf(
    const std::string& driver_name) {
  absl::StatusOr<driver::v1::DriverCapabilities> caps =
      plugins_->Capabilities(driver_name);
  if (caps.ok() && caps->must_create_network()) {
    absl::StatusOr<std::shared_ptr<DriverClient>> driver =
        Driver(driver_name, options_.plugin_wait);
    if (!driver.ok()) return driver.status();
    return std::make_shared<DriverNetwork>(*std::move(driver),
                                           options_.network_timeout);
  }
  if (netns_ == nullptr) {
    return absl::FailedPreconditionError(
        "spec.network: this node runs without berth-netns");
  }
  return netns_;
}

absl::Status TaskManager::SetUpNetwork(Entry& entry) {
  v1::TaskSpec spec;
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    spec = entry.record.task().spec();
    id = entry.record.task().id();
  }
  if (spec.network().mode() == network::v1::NETWORK_MODE_HOST) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<TaskNetwork>> network =
      NetworkOf(spec.driver());
  if (!network.ok()) return network.status();
  absl::StatusOr<network::v1::NetworkStatus> status =
      (*network)->SetUp(id, spec);
  if (!status.ok()) return status.status();
  // Persisted with the handle once the task runs: a node that dies before
  // restarts the start, whose set-up (same allocation) is idempotent.
  absl::MutexLock lock(&mu_);
  entry.record.set_network_allocated(true);
  *entry.record.mutable_task()->mutable_network() = *std::move(status);
  return absl::OkStatus();
}

absl::Status TaskManager::TearDownNetwork(Entry& entry) {
  std::string id, driver_name;
  {
    absl::MutexLock lock(&mu_);
    if (!entry.record.network_allocated()) return absl::OkStatus();
    id = entry.record.task().id();
    driver_name = entry.record.task().spec().driver();
  }
  absl::StatusOr<std::shared_ptr<TaskNetwork>> network = NetworkOf(driver_name);
  // Without berth-netns (nor a driver making networks) nothing was made.
  if (!network.ok() && !absl::IsFailedPrecondition(network.status())) {
    return network.status();
  }
  if (network.ok()) {
    if (absl::Status s = (*network)->TearDown(id); !s.ok()) return s;
  }
  {
    absl::MutexLock lock(&mu_);
    entry.record.set_network_allocated(false);
  }
  Save(entry);
  return absl::OkStatus();
}

absl::Status TaskManager::DestroyDriverTask(Entry& entry,
                                            bool even_if_unrecorded) {
  std::string id, driver_name;
  driver::v1::TaskHandle handle;
  {
    absl::MutexLock lock(&mu_);
    if (!entry.record.driver_task() && !even_if_unrecorded) {
      return absl::OkStatus();
    }
    id = entry.record.task().id();
    driver_name = entry.record.task().spec().driver();
    handle = entry.record.handle();
  }
  absl::StatusOr<std::shared_ptr<DriverClient>> driver =
      Driver(driver_name, options_.plugin_wait);
  if (!driver.ok()) return driver.status();
  driver::v1::DestroyTaskRequest request;
  request.set_task_id(id);
  request.set_force(true);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::Status s = (*driver)->DestroyTask(request, {deadline}).status();
  if (absl::IsNotFound(s) && handle.has_config()) {
    // A driver relaunched since the task ended does not know it: it adopts
    // it again from the handle (its exit record), then removes its cgroup
    // and directory.
    driver::v1::RecoverTaskRequest recover;
    *recover.mutable_handle() = handle;
    if ((*driver)->RecoverTask(recover, {deadline}).ok()) {
      s = (*driver)->DestroyTask(request, {deadline}).status();
    }
  }
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  {
    absl::MutexLock lock(&mu_);
    entry.record.set_driver_task(false);
  }
  Save(entry);
  return absl::OkStatus();
}

absl::Status TaskManager::MakeTaskDir(const std::string& id) {
  const std::string dir = TaskDir(id);
  if (absl::Status s = RemoveTree(dir); !s.ok()) return s;
  // chmod: the umask must not narrow what drivers are promised.
  if (mkdir(dir.c_str(), 0755) != 0 || chmod(dir.c_str(), 0755) != 0) {
    return absl::InternalError(absl::StrCat("task ", id,
                                            ": cannot make its directory ", dir,
                                            ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TaskManager::SetUpEtcFiles(Entry& entry, const v1::TaskSpec& spec,
                                        driver::v1::TaskConfig* config) {
  std::optional<network::v1::NetworkStatus> network;
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    id = entry.record.task().id();
    if (spec.network().mode() != network::v1::NETWORK_MODE_HOST) {
      network = entry.record.task().network();
    }
  }
  std::string host_resolv_conf;
  if (absl::Status s =
          ReadSmallFile(options_.host_resolv_conf, &host_resolv_conf);
      !s.ok()) {
    // A host without one: the task gets the spec's DNS settings only.
    LOG(WARNING) << "task " << id << ": " << s;
  }
  const TaskEtcFiles files = MakeTaskEtcFiles(
      spec, config->hostname(), network.has_value() ? &*network : nullptr,
      host_resolv_conf);
  // Owned by the task's root, as the host sees it in a user namespace.
  uid_t uid = 0;
  gid_t gid = 0;
  const driver::v1::UserNamespace& userns =
      config->isolation().user_namespace();
  for (const driver::v1::IdMapping& mapping : userns.uid_mappings()) {
    if (mapping.container_id() == 0 && mapping.size() > 0) {
      uid = mapping.host_id();
    }
  }
  for (const driver::v1::IdMapping& mapping : userns.gid_mappings()) {
    if (mapping.container_id() == 0 && mapping.size() > 0) {
      gid = mapping.host_id();
    }
  }
  if (absl::Status s = WriteTaskEtcFiles(TaskDir(id), files, uid, gid);
      !s.ok()) {
    return s;
  }
  AddTaskEtcMounts(TaskDir(id), config->mutable_isolation());
  return absl::OkStatus();
}

absl::Status TaskManager::StartRun(Entry& entry) {
  std::string id;
  v1::TaskSpec spec;
  {
    absl::MutexLock lock(&mu_);
    v1::Task& task = *entry.record.mutable_task();
    task.set_state(v1::TASK_STATE_STARTING);
    task.clear_error();
    task.clear_exit_result();
    id = task.id();
    spec = task.spec();
    entry.start_unseen = false;
  }
  // Nothing is persisted until the task runs: a node that dies meanwhile
  // finds the record not running and asks the driver: a run it has is
  // adopted, else the task starts again (Recover, kAdoptOrStart). Two
  // commits per start.
  if (absl::Status s = SetUpNetwork(entry); !s.ok()) return s;

  absl::StatusOr<std::shared_ptr<DriverClient>> driver =
      Driver(spec.driver(), options_.plugin_wait);
  if (!driver.ok()) return driver.status();
  driver::v1::StartTaskRequest request;
  driver::v1::TaskConfig& config = *request.mutable_task();
  config.set_id(id);
  config.set_name(spec.name());
  config.set_allocation_id(id);
  *config.mutable_driver_config() = spec.driver_config();
  *config.mutable_env() = spec.env();
  const absl::StatusOr<driver::v1::DriverCapabilities> caps =
      plugins_->Capabilities(spec.driver());
  std::optional<driver::v1::UserNamespace> userns;
  {
    // The range goes into the record (stored with the run, kept until the
    // task is removed).
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::optional<driver::v1::UserNamespace>> chosen =
        ChooseUserNamespace(options_.default_userns, options_.id_ranges, caps,
                            &entry.record);
    if (!chosen.ok()) return chosen.status();
    userns = *std::move(chosen);
  }
  // User, group and isolation; the driver's claims are checked again.
  if (absl::Status s =
          ApplyTaskIsolation(spec, caps, options_.protected_dirs,
                             userns.has_value() ? &*userns : nullptr, &config);
      !s.ok()) {
    return s;
  }
  // The image's root, command, environment, user and working directory.
  if (spec.has_image()) {
    const bool driver_binds_idmapped =
        caps.ok() && caps->isolation().rootfs_idmapped();
    if (absl::Status s =
            PrepareImage(entry, spec, driver_binds_idmapped, &config);
        !s.ok()) {
      return s;
    }
  }
  {
    // The health check in force: the spec's, else its image's (with the
    // spec's settings over it); it needs a driver that can exec.
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::optional<v1::HealthCheck>> check = HealthCheckInForce(
        spec,
        entry.record.has_image() ? &entry.record.image().config() : nullptr);
    if (!check.ok()) return check.status();
    if (check->has_value() && caps.ok()) {
      const bool image_check = spec.healthcheck().test().empty();
      if (absl::Status s = CheckHealthCheckRunnable(
              spec.driver(), *caps,
              image_check ? spec.image().reference() : "");
          !s.ok()) {
        return s;
      }
    }
    v1::Task& task = *entry.record.mutable_task();
    if (check->has_value()) {
      *task.mutable_healthcheck() = **std::move(check);
    } else {
      task.clear_healthcheck();
    }
  }
  *config.mutable_resources() = spec.resources();
  *config.mutable_logs() = spec.logs();
  config.set_task_dir(TaskDir(id));
  {
    absl::MutexLock lock(&mu_);
    const network::v1::NetworkStatus& net = entry.record.task().network();
    if (spec.network().mode() == network::v1::NETWORK_MODE_HOST) {
      config.mutable_network()->set_mode(
          driver::v1::NETWORK_ISOLATION_MODE_HOST);
    } else {
      config.mutable_network()->set_mode(
          driver::v1::NETWORK_ISOLATION_MODE_GROUP);
      config.mutable_network()->set_namespace_path(net.namespace_path());
    }
  }
  // Every run starts in an empty task directory the node made (what a
  // driver left of an earlier run goes); the driver fills it
  // (plugins/DRIVERS.md, "The task directory").
  if (absl::Status s = MakeTaskDir(id); !s.ok()) return s;
  if (caps.ok() && WantsTaskEtcFiles(*caps)) {
    if (absl::Status s = SetUpEtcFiles(entry, spec, &config); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("task ", id,
                                       ": its /etc/hosts, "
                                       "/etc/hostname and /etc/resolv.conf: ",
                                       s.message()));
    }
  }
  // The run starts no earlier than the call (a quick task may have exited
  // by the time it returns).
  const google::protobuf::Timestamp start_called = NowProto();
  absl::StatusOr<driver::v1::StartTaskResponse> started = (*driver)->StartTask(
      request, {absl::Now() + absl::Seconds(60), &entry.canceller});
  if (!started.ok()) {
    // A failed start leaves nothing; an abandoned one (the node is shutting
    // down) is the next node's to clean up, as the driver may still be at it.
    // One whose outcome the node did not see (the driver or the call broke)
    // may have started: Supervise asks the driver first.
    if (!shutting_down() && StartOutcomeUnseen(started.status())) {
      absl::MutexLock lock(&mu_);
      entry.start_unseen = true;
    } else if (!shutting_down()) {
      if (absl::Status s = RemoveTree(TaskDir(id)); !s.ok()) {
        LOG(WARNING) << "task " << id << ": " << s;
      }
    }
    return started.status();
  }
  {
    absl::MutexLock lock(&mu_);
    entry.record.set_driver_task(true);
    *entry.record.mutable_handle() = started->handle();
    v1::Task& task = *entry.record.mutable_task();
    task.set_state(v1::TASK_STATE_RUNNING);
    *task.mutable_started_at() = start_called;
    task.clear_finished_at();
    if (started->has_network()) *task.mutable_network() = started->network();
  }
  Save(entry);
  events_->Publish(v1::EVENT_TYPE_TASK_STARTED, id,
                   absl::StrCat("task ", spec.name(), " started"));
  return absl::OkStatus();
}

absl::StatusOr<driver::v1::ExitResult> TaskManager::WaitRun(
    Entry& entry, bool recover_first) {
  std::string id, driver_name;
  driver::v1::TaskHandle handle;
  {
    absl::MutexLock lock(&mu_);
    id = entry.record.task().id();
    driver_name = entry.record.task().spec().driver();
    handle = entry.record.handle();
  }
  bool check_known = recover_first;
  // Whether the driver holds the run, for the health checks (task_health.cc
  // waits for it; Supervise sets it for the start): a recovered run once
  // the driver knows it again, not while the driver is away.
  auto set_held = [this, &entry](bool held) {
    absl::MutexLock lock(&mu_);
    entry.driver_holds_run = held;
  };
  int lost = 0;
  while (!shutting_down()) {
    absl::StatusOr<std::shared_ptr<DriverClient>> driver =
        Driver(driver_name, absl::Seconds(1));
    if (!driver.ok()) {
      // No longer configured: nothing will bring it back.
      if (absl::IsInvalidArgument(driver.status())) return driver.status();
      continue;  // Down: its supervisor relaunches it.
    }
    if (check_known) {
      // A driver that still knows the task (reattached) needs no recovery.
      driver::v1::InspectTaskRequest inspect;
      inspect.set_task_id(id);
      absl::StatusOr<driver::v1::InspectTaskResponse> known =
          (*driver)->InspectTask(inspect, {absl::Now() + absl::Seconds(10)});
      if (known.ok() && handle.config().id().empty()) {
        // A run adopted without a handle (the driver gave none then, or the
        // node predates InspectTaskResponse.handle): taken now if the driver
        // gives one, for its next restart.
        if (const driver::v1::TaskHandle* given =
                HandleFor(*known, id, driver_name);
            given != nullptr) {
          handle = *given;
          {
            absl::MutexLock lock(&mu_);
            *entry.record.mutable_handle() = handle;
          }
          Save(entry);
          LOG(INFO) << "task " << id << ": its handle taken from driver "
                    << driver_name << "'s InspectTask";
        }
      }
      if (!known.ok() && absl::IsNotFound(known.status()) &&
          handle.config().id().empty()) {
        // RecoverTask needs the handle; the driver would only refuse an
        // empty one ("handle.config.id is required").
        return absl::FailedPreconditionError(absl::StrCat(
            "driver ", driver_name, " could not recover task ", id,
            ": its run was adopted without a handle (driver ", driver_name,
            " gave none in InspectTask: it does not implement HandleOf), "
            "and the driver, restarted since, no longer knows it: ",
            known.status().message()));
      }
      if (!known.ok() && absl::IsNotFound(known.status())) {
        driver::v1::RecoverTaskRequest recover;
        *recover.mutable_handle() = handle;
        absl::StatusOr<driver::v1::RecoverTaskResponse> recovered =
            (*driver)->RecoverTask(recover, {absl::Now() + absl::Seconds(30)});
        if (!recovered.ok()) {
          if (IsPluginShutdown(recovered.status())) continue;
          return absl::Status(recovered.status().code(),
                              absl::StrCat("driver ", driver_name,
                                           " could not recover the task: ",
                                           recovered.status().message()));
        }
        LOG(INFO) << "task " << id << ": recovered by driver " << driver_name;
      } else if (!known.ok()) {
        if (IsPluginShutdown(known.status())) continue;
        LOG(WARNING) << "task " << id << ": " << known.status();
        absl::SleepFor(absl::Seconds(1));
        continue;
      }
      check_known = false;
      set_held(true);
    }
    driver::v1::WaitTaskRequest wait;
    wait.set_task_id(id);
    absl::StatusOr<driver::v1::WaitTaskResponse> waited =
        (*driver)->WaitTask(wait, {absl::InfiniteFuture(), &entry.canceller});
    if (waited.ok()) return waited->result();
    if (shutting_down()) break;
    if (IsPluginShutdown(waited.status())) {
      LOG(WARNING) << "task " << id << ": driver " << driver_name
                   << " went away; recovering the task once it is back";
      check_known = true;
      set_held(false);
      continue;
    }
    if (absl::IsNotFound(waited.status()) && ++lost <= 3) {
      check_known = true;
      set_held(false);
      continue;
    }
    if (absl::IsNotFound(waited.status())) {
      return absl::NotFoundError(
          absl::StrCat("driver ", driver_name,
                       " lost the task: ", waited.status().message()));
    }
    LOG(WARNING) << "task " << id << ": WaitTask: " << waited.status()
                 << "; waiting again";
    absl::SleepFor(absl::Seconds(1));
  }
  return absl::CancelledError("berth-node is shutting down");
}

absl::StatusOr<std::optional<driver::v1::InspectTaskResponse>>
TaskManager::FindUnseenRun(Entry& entry) {
  std::string id, driver_name;
  {
    absl::MutexLock lock(&mu_);
    id = entry.record.task().id();
    driver_name = entry.record.task().spec().driver();
  }
  // A driver still at the start (its InspectTask UNAVAILABLE "being
  // started") has up to StartTask's 60 s more.
  const absl::Time give_up =
      absl::Now() + options_.plugin_wait + absl::Seconds(60);
  absl::Status last;
  while (true) {
    if (shutting_down()) {
      return absl::CancelledError("berth-node is shutting down");
    }
    absl::StatusOr<std::shared_ptr<DriverClient>> driver =
        Driver(driver_name, absl::Seconds(1));
    if (driver.ok()) {
      driver::v1::InspectTaskRequest inspect;
      inspect.set_task_id(id);
      absl::StatusOr<driver::v1::InspectTaskResponse> known =
          (*driver)->InspectTask(inspect, {absl::Now() + absl::Seconds(10)});
      if (known.ok()) return std::optional(*std::move(known));
      if (absl::IsNotFound(known.status())) {
        return std::optional<driver::v1::InspectTaskResponse>();
      }
      last = known.status();
    } else {
      // No longer configured: nothing will answer.
      if (absl::IsInvalidArgument(driver.status())) return driver.status();
      last = driver.status();
    }
    // Away (relaunched by its supervisor) or failing: asked again.
    if (absl::Now() > give_up) {
      return absl::Status(
          last.code(), absl::StrCat("driver ", driver_name,
                                    " could not say whether it started task ",
                                    id, ": ", last.message()));
    }
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&shutting_down_),
                         absl::Milliseconds(200));
  }
}

void TaskManager::AdoptRun(Entry& entry,
                           const driver::v1::InspectTaskResponse& found) {
  const driver::v1::TaskStatus& status = found.status();
  std::string id, name, driver_name;
  bool with_handle;
  {
    absl::MutexLock lock(&mu_);
    id = entry.record.task().id();
    driver_name = entry.record.task().spec().driver();
    // The driver holds it. Its handle is the one the driver gave with the
    // run (RecoverTask takes it after the driver's next restart); without
    // one none is kept: the handle of an earlier run must not be taken for
    // this one (WaitRun asks the driver for it again).
    entry.record.set_driver_task(true);
    const driver::v1::TaskHandle* handle = HandleFor(found, id, driver_name);
    with_handle = handle != nullptr;
    if (with_handle) {
      *entry.record.mutable_handle() = *handle;
    } else {
      entry.record.clear_handle();
    }
    v1::Task& task = *entry.record.mutable_task();
    task.set_state(v1::TASK_STATE_RUNNING);
    task.clear_error();
    task.clear_exit_result();
    *task.mutable_started_at() =
        status.has_started_at() ? status.started_at() : NowProto();
    task.clear_finished_at();
    name = task.spec().name();
  }
  Save(entry);
  const bool exited = status.state() == driver::v1::TASK_STATE_EXITED;
  LOG(INFO) << "task " << id << ": driver " << driver_name
            << " has the run whose start was not seen through ("
            << (exited ? "already exited" : "running") << "): adopting it"
            << (with_handle ? "" : " without a handle (the driver gave none)");
  events_->Publish(v1::EVENT_TYPE_TASK_STARTED, id,
                   absl::StrCat("task ", name,
                                " started (adopted: its driver had started "
                                "it when the start was interrupted)"));
}

absl::StatusOr<bool> TaskManager::ResumeInterruptedStart(Entry& entry) {
  std::string id;
  bool restarting;
  uint32_t run;
  bool host_network;
  {
    absl::MutexLock lock(&mu_);
    const v1::Task& task = entry.record.task();
    id = task.id();
    restarting = task.state() == v1::TASK_STATE_RESTARTING;
    run = task.restarts();
    host_network =
        task.spec().network().mode() == network::v1::NETWORK_MODE_HOST;
  }
  absl::StatusOr<std::optional<driver::v1::InspectTaskResponse>> found =
      FindUnseenRun(entry);
  if (!found.ok()) return found.status();
  if (found->has_value() && restarting) {
    absl::MutexLock lock(&mu_);
    if (IsEndedRun((*found)->status(), entry.record.task())) {
      // The node died while waiting to restart it: the run the driver holds
      // is the one that ended.
      found->reset();
    }
  }
  if (restarting) {
    // Run `run` ended (the record says so); the next is run + 1. Its output
    // is kept unless the dead node kept it already (then the next run was
    // being started).
    if (!found->has_value()) KeepRunLogs(id, run);
    absl::MutexLock lock(&mu_);
    entry.record.mutable_task()->set_restarts(run + 1);
  }
  if (found->has_value()) {
    // Its network was set up before the start (the same allocation again:
    // idempotent); recorded now, so that its Postrun runs when it ends.
    if (!host_network) {
      if (absl::Status s = SetUpNetwork(entry); !s.ok()) {
        LOG(WARNING) << "task " << id << ": its network: " << s;
        absl::MutexLock lock(&mu_);
        entry.record.set_network_allocated(true);
      }
    }
    AdoptRun(entry, **found);
    return true;
  }
  // Not started (or the run that ended): what the driver made of it goes,
  // then it starts again from its spec, with the same allocation for
  // Prerun.
  if (absl::Status s = DestroyDriverTask(entry, /*even_if_unrecorded=*/true);
      !s.ok()) {
    return s;
  }
  return false;
}

bool TaskManager::EndRun(Entry& entry, const driver::v1::ExitResult& result) {
  std::string id;
  bool restart = false;
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    v1::Task& task = *entry.record.mutable_task();
    id = task.id();
    *task.mutable_exit_result() = result;
    *task.mutable_finished_at() = FinishedAt(task, result);
    // How long the run lasted (unknown for a run never seen starting: as a
    // quick one).
    const absl::Duration lasted =
        task.has_started_at() ? base::FromProtoTimestamp(task.finished_at()) -
                                    base::FromProtoTimestamp(task.started_at())
                              : absl::ZeroDuration();
    const RestartDecision decision = DecideRestart(
        task.spec().restart(), result, task.restarts(),
        entry.stop_requested || task.stopped(), options_.restart_backoff,
        entry.record.restart_backoff(), lasted);
    restart = decision.restart;
    delay = decision.delay;
    entry.record.set_restart_backoff(decision.backoff_level);
    if (entry.health_restart) {
      // Its health check's on_failure ended the run to restart it.
      entry.health_restart = false;
      restart = !(entry.stop_requested || task.stopped());
    }
    task.set_state(restart ? v1::TASK_STATE_RESTARTING : v1::TASK_STATE_EXITED);
  }
  Save(entry);
  LOG(INFO) << "task " << id << " " << DescribeExit(result);
  events_->Publish(v1::EVENT_TYPE_TASK_EXITED, id, DescribeExit(result));
  // Postrun, retried while berth-netns is away; a node that stops first
  // leaves network_allocated set and the next one runs it.
  for (absl::Duration backoff = absl::Milliseconds(200); !shutting_down();
       backoff = std::min(backoff * 2, absl::Seconds(10))) {
    absl::Status s = TearDownNetwork(entry);
    if (s.ok()) break;
    LOG(WARNING) << "task " << id << ": " << s << "; retrying in " << backoff;
    // Woken by Shutdown: the next node runs the Postrun.
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), backoff);
  }
  if (!restart) return false;
  events_->Publish(v1::EVENT_TYPE_TASK_RESTARTING, id,
                   absl::StrCat("restarting in ", absl::FormatDuration(delay)));
  {
    absl::MutexLock lock(&mu_);
    auto interrupted = [this, &entry]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return entry.stop_requested || shutting_down_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&interrupted), delay);
    if (shutting_down_) return false;  // the next node restarts it
    if (entry.stop_requested) {
      entry.record.mutable_task()->set_state(v1::TASK_STATE_EXITED);
      restart = false;
    }
  }
  if (!restart) {
    Save(entry);
    return false;
  }
  uint32_t run;
  {
    absl::MutexLock lock(&mu_);
    run = entry.record.task().restarts();
  }
  // The output stays readable (berth logs shows every run): out of the task
  // directory, which DestroyTask removes.
  KeepRunLogs(id, run);
  if (absl::Status s = DestroyDriverTask(entry); !s.ok()) {
    LOG(WARNING) << "task " << id << ": cannot destroy the last run: " << s;
  }
  {
    absl::MutexLock lock(&mu_);
    entry.record.mutable_task()->set_restarts(run + 1);
  }
  return true;
}

void TaskManager::Supervise(std::shared_ptr<Entry> entry, Resume resume) {
  const std::string id = entry->record.task().id();  // immutable
  if (resume == Resume::kPostrunOnly) {
    absl::Status s = TearDownNetwork(*entry);
    if (!s.ok()) LOG(WARNING) << "task " << id << ": missing Postrun: " << s;
    return;
  }
  bool recover = resume == Resume::kWait;
  // The driver's run of an interrupted or unseen start, taken as this run.
  bool adopted = false;
  if (resume == Resume::kAdoptOrStart) {
    // An interrupted start (the record does not say whether StartTask got
    // that far): the driver is asked; a run it has is not started again.
    absl::StatusOr<bool> resumed = ResumeInterruptedStart(*entry);
    if (!resumed.ok() && shutting_down()) return;  // the next node's
    if (!resumed.ok()) {
      Fail(*entry, resumed.status());
      return;
    }
    adopted = *resumed;
  }
  while (!shutting_down()) {
    if (!recover && !adopted) {
      absl::Status started = StartRun(*entry);
      if (!started.ok() && shutting_down()) {
        // Not a failure of the task: its record is not running, and the next
        // node starts it again.
        LOG(INFO) << "task " << id << ": start interrupted by the shutdown";
        return;
      }
      bool unseen;
      {
        absl::MutexLock lock(&mu_);
        unseen = !started.ok() && entry->start_unseen;
        entry->start_unseen = false;
      }
      if (unseen) {
        // The driver or the call broke: the driver may have started it
        // (the reply lost). A run the (relaunched) driver has is adopted;
        // else the start failed and nothing of it stays.
        absl::StatusOr<std::optional<driver::v1::InspectTaskResponse>> found =
            FindUnseenRun(*entry);
        if (!found.ok() && shutting_down()) {
          LOG(INFO) << "task " << id << ": start interrupted by the shutdown";
          return;  // not running: the next node asks again
        }
        if (found.ok() && found->has_value()) {
          LOG(INFO) << "task " << id << ": StartTask failed (" << started
                    << "), but its driver has the run";
          AdoptRun(*entry, **found);
          started = absl::OkStatus();
        } else {
          if (!found.ok()) {
            started = absl::Status(started.code(),
                                   absl::StrCat(started.message(), " (and ",
                                                found.status().message(), ")"));
          }
          if (absl::Status s =
                  DestroyDriverTask(*entry, /*even_if_unrecorded=*/true);
              !s.ok()) {
            LOG(WARNING) << "task " << id << ": " << s;
          }
          if (absl::Status s = RemoveTree(TaskDir(id)); !s.ok()) {
            LOG(WARNING) << "task " << id << ": " << s;
          }
        }
      }
      if (!started.ok()) {
        if (absl::Status s = DestroyDriverTask(*entry); !s.ok()) {
          LOG(WARNING) << "task " << id << ": " << s;
        }
        if (absl::Status s = TearDownNetwork(*entry); !s.ok()) {
          LOG(WARNING) << "task " << id << ": " << s;
        }
        if (absl::Status s = ReleaseImage(*entry); !s.ok()) {
          LOG(WARNING) << "task " << id << ": " << s;
        }
        Fail(*entry, started);
        return;
      }
    }
    if (!recover) {
      adopted = false;
      bool stop_now;
      {
        absl::MutexLock lock(&mu_);
        stop_now = entry->stop_requested;
      }
      if (stop_now) {
        // StopTask came while it started.
        absl::StatusOr<std::shared_ptr<DriverClient>> driver =
            Driver(entry->record.task().spec().driver(), absl::Seconds(5));
        if (driver.ok()) {
          driver::v1::StopTaskRequest stop;
          stop.set_task_id(id);
          absl::Duration timeout = absl::InfiniteDuration();
          std::string signal;
          {
            absl::MutexLock lock(&mu_);
            ResolveStopSettings(entry->record, &timeout, &signal);
          }
          *stop.mutable_timeout() = base::ToProtoDuration(timeout);
          stop.set_signal(signal);
          (void)(*driver)->StopTask(
              stop, {absl::Now() + timeout + absl::Seconds(30)});
        }
      }
    }
    {
      // Until WaitRun says otherwise: a started run is the driver's; a
      // recovered one is not before the driver knows it again.
      absl::MutexLock lock(&mu_);
      entry->driver_holds_run = !recover;
    }
    StartHealthCheck(*entry);  // task_health.cc
    absl::StatusOr<driver::v1::ExitResult> result = WaitRun(*entry, recover);
    StopHealthCheck(*entry);
    recover = false;
    if (!result.ok()) {
      if (absl::IsCancelled(result.status())) return;  // node shutdown
      {
        absl::MutexLock lock(&mu_);
        v1::Task& task = *entry->record.mutable_task();
        task.set_state(v1::TASK_STATE_FAILED);
        task.set_error(std::string(result.status().message()));
        *task.mutable_finished_at() = NowProto();
      }
      Save(*entry);
      events_->Publish(v1::EVENT_TYPE_TASK_FAILED, id,
                       std::string(result.status().message()));
      (void)TearDownNetwork(*entry);
      return;
    }
    if (!EndRun(*entry, *result)) return;
  }
}

}  // namespace berth::node
