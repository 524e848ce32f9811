// Health checks of TaskManager's tasks (health_checker.h): the supervisor
// starts a HealthChecker when a run starts (or is recovered by a new node)
// and ends it when the run ends. Each check is an ExecTask of the task's
// driver, once the driver holds the run (a recovered one: once the driver
// has recovered it); each result is recorded in Task.health and persisted;
// a change of status is an EVENT_TYPE_TASK_HEALTH event ("health_status"
// annotation); turning unhealthy runs the check's on_failure (NONE:
// nothing; KILL: SIGKILL, the restart policy then decides; RESTART: stopped
// and started again whatever the policy; STOP: as StopTask). Without
// on_failure the restart policy does not act on unhealthy, as in docker.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/proto_time.h"
#include "glog/logging.h"
#include "services/node/health_checker.h"
#include "services/node/task_manager.h"

namespace berth::node {
namespace {

using plugin::host::CallCanceller;
using plugin::host::DriverClient;

std::string StatusName(v1::HealthStatus status) {
  switch (status) {
    case v1::HEALTH_STATUS_STARTING:
      return "starting";
    case v1::HEALTH_STATUS_HEALTHY:
      return "healthy";
    case v1::HEALTH_STATUS_UNHEALTHY:
      return "unhealthy";
    default:
      return "none";
  }
}

std::string ActionName(v1::HealthFailureAction action) {
  switch (action) {
    case v1::HEALTH_FAILURE_ACTION_KILL:
      return "killing";
    case v1::HEALTH_FAILURE_ACTION_RESTART:
      return "restarting";
    case v1::HEALTH_FAILURE_ACTION_STOP:
      return "stopping";
    default:
      return "nothing";
  }
}

// "health: unhealthy (3 failed checks in a row; last exited 1: no file)".
std::string Describe(const v1::TaskHealth& health) {
  std::string text = absl::StrCat("health: ", StatusName(health.status()));
  if (health.status() == v1::HEALTH_STATUS_UNHEALTHY && health.log_size() > 0) {
    const v1::HealthCheckResult& last = health.log(health.log_size() - 1);
    std::string output = last.output().substr(0, 200);
    if (size_t eol = output.find('\n'); eol != std::string::npos) {
      output.resize(eol);
    }
    absl::StrAppend(
        &text, " (", health.failing_streak(),
        health.failing_streak() == 1 ? " failed check" : " failed checks",
        " in a row; the last ",
        last.exit_code() == -1 ? std::string("did not run to its end")
                               : absl::StrCat("exited ", last.exit_code()),
        output.empty() ? "" : ": ", output, ")");
  }
  return text;
}

}  // namespace

void TaskManager::StartHealthCheck(Entry& entry) {
  std::string id, driver_name;
  std::optional<v1::HealthCheck> check;
  v1::TaskHealth previous;
  absl::Time started;
  {
    absl::MutexLock lock(&mu_);
    const v1::Task& task = entry.record.task();
    if (task.state() != v1::TASK_STATE_RUNNING) return;
    // The check in force as the start recorded it (the spec's, else its
    // image's); a record without it: the spec's.
    check =
        HealthCheckInForce(task.has_healthcheck() ? task.healthcheck()
                                                  : task.spec().healthcheck());
    if (!check.has_value()) return;
    id = task.id();
    driver_name = task.spec().driver();
    previous = task.health();
    started = task.has_started_at()
                  ? base::FromProtoTimestamp(task.started_at())
                  : absl::Now();
  }
  auto canceller = std::make_shared<CallCanceller>();
  HealthChecker::Options options;
  options.check = *check;
  options.started = started;
  options.previous = std::move(previous);
  options.exec = [this, id, driver_name, canceller](
                     const std::vector<std::string>& command,
                     absl::Duration timeout)
      -> absl::StatusOr<driver::v1::ExecTaskResponse> {
    absl::StatusOr<std::shared_ptr<DriverClient>> driver =
        Driver(driver_name, absl::Seconds(1));
    if (!driver.ok()) return driver.status();
    driver::v1::ExecTaskRequest request;
    request.set_task_id(id);
    for (const std::string& arg : command) request.add_command(arg);
    *request.mutable_timeout() = base::ToProtoDuration(timeout);
    // The driver kills the command at its timeout; the call gives it a few
    // seconds more to say so.
    return (*driver)->ExecTask(
        request, {absl::Now() + timeout + absl::Seconds(5), canceller.get()});
  };
  options.cancel = [canceller] { canceller->Cancel(); };
  // The checks wait for the driver to hold the run. A new node starts them
  // with the recovered run, before its driver has recovered the task
  // (WaitRun's RecoverTask, which a driver with many tasks may take long
  // over), and a relaunched driver knows no task until then: an ExecTask
  // then fails (NOT_FOUND, UNAVAILABLE) for the driver's sake, not the
  // task's, and counted as failures those could turn a healthy task
  // unhealthy and have on_failure kill or restart it. Gating on what
  // WaitRun knows, rather than forgiving error codes, keeps every failure
  // of a check the driver could run counted (a check's program missing
  // too), and also covers a driver relaunched while the task runs.
  options.ready = [this, &entry] {
    absl::MutexLock lock(&mu_);
    return entry.driver_holds_run;
  };
  options.on_update = [this, &entry, action = check->on_failure(), canceller](
                          const v1::TaskHealth& health, bool status_changed) {
    OnHealthUpdate(entry, health, status_changed, action, canceller.get());
  };
  entry.health_checker = std::make_unique<HealthChecker>(std::move(options));
  const v1::TaskHealth health = entry.health_checker->health();
  bool changed;
  {
    absl::MutexLock lock(&mu_);
    v1::TaskHealth& recorded = *entry.record.mutable_task()->mutable_health();
    changed = recorded.status() != health.status();
    recorded = health;
  }
  Save(entry);
  if (changed) {
    events_->Publish(v1::EVENT_TYPE_TASK_HEALTH, id, Describe(health),
                     {{"health_status", StatusName(health.status())}});
  }
  entry.health_checker->Start();
}

void TaskManager::StopHealthCheck(Entry& entry) {
  if (entry.health_checker == nullptr) return;
  entry.health_checker->Stop();
  entry.health_checker.reset();
}

void TaskManager::OnHealthUpdate(Entry& entry, const v1::TaskHealth& health,
                                 bool status_changed,
                                 v1::HealthFailureAction action,
                                 CallCanceller* canceller) {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    v1::Task& task = *entry.record.mutable_task();
    id = task.id();
    *task.mutable_health() = health;
  }
  Save(entry);
  if (!status_changed) return;
  const std::string description = Describe(health);
  LOG(INFO) << "task " << id << ": " << description;
  events_->Publish(v1::EVENT_TYPE_TASK_HEALTH, id, description,
                   {{"health_status", StatusName(health.status())}});
  if (health.status() == v1::HEALTH_STATUS_UNHEALTHY) {
    ActOnUnhealthy(entry, action, canceller);
  }
}

void TaskManager::ActOnUnhealthy(Entry& entry, v1::HealthFailureAction action,
                                 CallCanceller* canceller) {
  if (action != v1::HEALTH_FAILURE_ACTION_KILL &&
      action != v1::HEALTH_FAILURE_ACTION_RESTART &&
      action != v1::HEALTH_FAILURE_ACTION_STOP) {
    return;
  }
  std::string id, driver_name, stop_signal;
  absl::Duration stop_timeout = -absl::Seconds(1);  // the task's own
  {
    absl::MutexLock lock(&mu_);
    v1::Task& task = *entry.record.mutable_task();
    // A run that is being stopped (or ends) is left to that.
    if (task.state() != v1::TASK_STATE_RUNNING || entry.stop_requested) return;
    id = task.id();
    driver_name = task.spec().driver();
    // As StopTask without a signal or timeout: the spec's, else the
    // image's StopSignal, else SIGTERM and 5 s.
    ResolveStopSettings(entry.record, &stop_timeout, &stop_signal);
    if (action == v1::HEALTH_FAILURE_ACTION_RESTART) {
      entry.health_restart = true;
    } else if (action == v1::HEALTH_FAILURE_ACTION_STOP) {
      entry.stop_requested = true;
      task.set_stopped(true);
    }
  }
  if (action == v1::HEALTH_FAILURE_ACTION_STOP) Save(entry);
  LOG(WARNING) << "task " << id << " is unhealthy: " << ActionName(action)
               << " it (healthcheck.on_failure)";
  absl::StatusOr<std::shared_ptr<DriverClient>> driver =
      Driver(driver_name, absl::Seconds(10));
  absl::Status s = driver.status();
  if (driver.ok() && action == v1::HEALTH_FAILURE_ACTION_KILL) {
    driver::v1::SignalTaskRequest request;
    request.set_task_id(id);
    request.set_signal("SIGKILL");
    s = (*driver)
            ->SignalTask(request, {absl::Now() + absl::Seconds(30), canceller})
            .status();
  } else if (driver.ok()) {
    driver::v1::StopTaskRequest request;
    request.set_task_id(id);
    request.set_signal(stop_signal);
    *request.mutable_timeout() = base::ToProtoDuration(stop_timeout);
    s = (*driver)
            ->StopTask(request, {absl::Now() + stop_timeout + absl::Seconds(30),
                                 canceller})
            .status();
  }
  // Cancelled: the run ended (the stop's doing, most likely) or the node
  // stops; the restart stands.
  if (!s.ok() && canceller->cancelled()) return;
  if (!s.ok() && action == v1::HEALTH_FAILURE_ACTION_RESTART) {
    absl::MutexLock lock(&mu_);
    entry.health_restart = false;  // its policy decides when it ends
  }
  if (!s.ok() && !absl::IsNotFound(s)) {
    LOG(WARNING) << "task " << id << ": " << ActionName(action)
                 << " it for its health check: " << s;
  }
}

}  // namespace berth::node
