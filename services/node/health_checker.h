// Health checks of running tasks (TaskSpec.healthcheck, or the image's
// HEALTHCHECK), as docker runs them: a command run in the task as ExecTask
// every interval, its result recorded in the task's TaskHealth (the last 5,
// the failing streak), the status STARTING at each start of a run, HEALTHY
// after a success, UNHEALTHY after `retries` failures in a row (failures
// while still STARTING within start_period of the start do not count).
//
// HealthChecker knows nothing of drivers or tasks: it is given a function
// that runs the command and one that hears of each result; TaskManager wires
// them (task_health.cc). Its tests drive it a check at a time with a fake
// clock (CheckOnce).

#ifndef SERVICES_NODE_HEALTH_CHECKER_H_
#define SERVICES_NODE_HEALTH_CHECKER_H_

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/node/v1/node.pb.h"

namespace berth::node {

// docker's defaults.
inline constexpr absl::Duration kDefaultHealthInterval = absl::Seconds(30);
inline constexpr absl::Duration kDefaultHealthTimeout = absl::Seconds(30);
inline constexpr uint32_t kDefaultHealthRetries = 3;
// What a TaskHealth keeps of the checks, and of each check's output.
inline constexpr int kHealthLogSize = 5;
inline constexpr size_t kHealthOutputBytes = 4096;

// Checks a spec's health check; errors name the field (prefix, e.g.
// "spec.healthcheck"). An unset check is valid.
absl::Status ValidateHealthCheck(const v1::HealthCheck& check,
                                 const std::string& field = "spec.healthcheck");

// The check in force for `check`: its defaults filled in (interval and
// timeout 30 s, retries 3, on_failure NONE); nullopt when it checks nothing
// (no test, or ["NONE"]).
std::optional<v1::HealthCheck> HealthCheckInForce(const v1::HealthCheck& check);

// Whether `check` sets anything besides its test: a positive interval,
// timeout or start_period, retries or on_failure. A spec's check that sets
// some of these and no test changes the image's HEALTHCHECK (docker's
// merge; task_image.h).
bool HealthCheckSetsOptions(const v1::HealthCheck& check);

// OK when `driver`'s capabilities claim exec; else FAILED_PRECONDITION
// naming spec.healthcheck and the driver (each check is an ExecTask).
// `image` is the reference of the image whose HEALTHCHECK is in force, ""
// for the spec's own check.
absl::Status CheckHealthCheckRunnable(
    const std::string& driver, const driver::v1::DriverCapabilities& caps,
    const std::string& image = "");

// The command ExecTask runs for a check's test: ["CMD", prog, args...] as
// prog args..., ["CMD-SHELL", cmd] as /bin/sh -c cmd. INVALID_ARGUMENT for
// anything else.
absl::StatusOr<std::vector<std::string>> HealthCommand(
    const v1::HealthCheck& check);

// The start of `output` that fits `max_bytes`, cut at a character boundary,
// with invalid UTF-8 bytes replaced by '?' (a proto string must be UTF-8).
std::string HealthOutput(const std::string& output,
                         size_t max_bytes = kHealthOutputBytes);

// Adds `result` to `health` as docker does (`check` with its defaults,
// `started` the start of the run); returns whether the status changed.
bool RecordHealthResult(const v1::HealthCheck& check, absl::Time started,
                        const v1::HealthCheckResult& result,
                        v1::TaskHealth* health);

// One run's checks. Thread-safe.
class HealthChecker {
 public:
  // Runs `command` in the task, giving it `timeout`.
  using Exec = std::function<absl::StatusOr<driver::v1::ExecTaskResponse>(
      const std::vector<std::string>& command, absl::Duration timeout)>;
  // Hears of each recorded check: the health after it, and whether its
  // status changed. Runs on the checker's thread, outside its lock; it must
  // not call Stop.
  using OnUpdate =
      std::function<void(const v1::TaskHealth& health, bool status_changed)>;

  struct Options {
    // The check in force (HealthCheckInForce).
    v1::HealthCheck check;
    // When the run started: start_period counts from it.
    absl::Time started;
    // The health the task had: its log is kept; the status is STARTING and
    // the streak 0 again.
    v1::TaskHealth previous;
    Exec exec;
    OnUpdate on_update;
    // Interrupts a running exec (called by Stop); may be empty.
    std::function<void()> cancel;
    // Whether the task's driver holds the run now; may be empty (always).
    // While it says no (a new node's driver has not recovered the task yet,
    // or a relaunched driver has not), a check is not run and nothing is
    // recorded, and a check whose exec failed is not recorded when it says
    // no after it: an exec the driver could not run then says nothing of
    // the task's health, and must not count towards unhealthy (and its
    // on_failure).
    std::function<bool()> ready;
    // The clock of the results and of start_period.
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };

  explicit HealthChecker(Options options);
  ~HealthChecker();  // Stop()
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  const v1::HealthCheck& check() const { return options_.check; }
  v1::TaskHealth health() const ABSL_LOCKS_EXCLUDED(mu_);

  // Runs the check now, records it and calls on_update; returns the health.
  // After Stop, or while `ready` says no, nothing is run or recorded.
  v1::TaskHealth CheckOnce() ABSL_LOCKS_EXCLUDED(mu_);

  // Checks every interval on a thread of its own, the first an interval
  // after the call (as docker). Once.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the checks: a running one is interrupted (cancel) and not
  // recorded; the thread is joined. Idempotent; not from on_update.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Checks run so far (recorded or not).
  int checks() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  std::vector<std::string> command_;  // empty: the test is not runnable
  std::string command_error_;

  mutable absl::Mutex mu_;
  v1::TaskHealth health_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int checks_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace berth::node

#endif  // SERVICES_NODE_HEALTH_CHECKER_H_
