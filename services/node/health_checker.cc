#include "services/node/health_checker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/proto_time.h"

namespace berth::node {
namespace {

constexpr char kCmd[] = "CMD";
constexpr char kCmdShell[] = "CMD-SHELL";
constexpr char kNone[] = "NONE";

// The length of the UTF-8 sequence starting at s[i], or 0 when it is not a
// valid one (overlong forms, surrogates and code points past U+10FFFF too).
size_t Utf8SequenceLength(const std::string& s, size_t i) {
  const auto byte = [&s](size_t j) { return static_cast<unsigned char>(s[j]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char min2 = 0x80, max2 = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) min2 = 0xA0;
    if (c == 0xED) max2 = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) min2 = 0x90;
    if (c == 0xF4) max2 = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < min2 || byte(i + 1) > max2) return 0;
  for (size_t j = 2; j < n; ++j) {
    if (byte(i + j) < 0x80 || byte(i + j) > 0xBF) return 0;
  }
  return n;
}

// `value` when positive, else `fallback` (unset and 0 mean the default).
absl::Duration PositiveOr(const google::protobuf::Duration& value,
                          absl::Duration fallback) {
  const absl::Duration d = base::FromProtoDuration(value);
  return d > absl::ZeroDuration() ? d : fallback;
}

}  // namespace

absl::Status ValidateHealthCheck(const v1::HealthCheck& check,
                                 const std::string& field) {
  const auto& test = check.test();
  if (!test.empty()) {
    const std::string& kind = test[0];
    if (kind == kNone) {
      if (test.size() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".test: [\"NONE\"] takes nothing after it"));
      }
    } else if (kind == kCmd) {
      if (test.size() < 2 || test[1].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".test: [\"CMD\", program, args...] needs a program"));
      }
    } else if (kind == kCmdShell) {
      if (test.size() != 2 || test[1].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".test: [\"CMD-SHELL\", command] takes one command"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          field,
          ".test: starts with \"CMD\", \"CMD-SHELL\" or \"NONE\", not \"", kind,
          "\""));
    }
    for (const std::string& arg : test) {
      if (arg.find('\0') != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".test: holds a NUL byte"));
      }
    }
  }
  const struct {
    const char* name;
    bool has;
    const google::protobuf::Duration& value;
    bool positive;
  } durations[] = {
      {"interval", check.has_interval(), check.interval(), true},
      {"timeout", check.has_timeout(), check.timeout(), true},
      {"start_period", check.has_start_period(), check.start_period(), false},
  };
  for (const auto& d : durations) {
    if (!d.has) continue;
    const absl::Duration value = base::FromProtoDuration(d.value);
    // 0 is the default (docker's); a positive interval or timeout is at
    // least 1ms.
    if (value < absl::ZeroDuration() ||
        (d.positive && value > absl::ZeroDuration() &&
         value < absl::Milliseconds(1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".", d.name, ": ", absl::FormatDuration(value), " is ",
          value < absl::ZeroDuration() ? "negative" : "less than 1ms"));
    }
  }
  if (!v1::HealthFailureAction_IsValid(check.on_failure())) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".on_failure: unknown action ", check.on_failure()));
  }
  return absl::OkStatus();
}

std::optional<v1::HealthCheck> HealthCheckInForce(
    const v1::HealthCheck& check) {
  if (check.test().empty() || check.test(0) == kNone) return std::nullopt;
  v1::HealthCheck in_force = check;
  // Unset or 0: the default (docker's).
  if (base::FromProtoDuration(in_force.interval()) <= absl::ZeroDuration()) {
    *in_force.mutable_interval() =
        base::ToProtoDuration(kDefaultHealthInterval);
  }
  if (base::FromProtoDuration(in_force.timeout()) <= absl::ZeroDuration()) {
    *in_force.mutable_timeout() = base::ToProtoDuration(kDefaultHealthTimeout);
  }
  if (in_force.retries() == 0) in_force.set_retries(kDefaultHealthRetries);
  if (in_force.on_failure() == v1::HEALTH_FAILURE_ACTION_UNSPECIFIED) {
    in_force.set_on_failure(v1::HEALTH_FAILURE_ACTION_NONE);
  }
  return in_force;
}

bool HealthCheckSetsOptions(const v1::HealthCheck& check) {
  return base::FromProtoDuration(check.interval()) > absl::ZeroDuration() ||
         base::FromProtoDuration(check.timeout()) > absl::ZeroDuration() ||
         base::FromProtoDuration(check.start_period()) > absl::ZeroDuration() ||
         check.retries() > 0 ||
         check.on_failure() != v1::HEALTH_FAILURE_ACTION_UNSPECIFIED;
}

absl::Status CheckHealthCheckRunnable(
    const std::string& driver, const driver::v1::DriverCapabilities& caps,
    const std::string& image) {
  if (caps.exec()) return absl::OkStatus();
  if (image.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "spec.healthcheck: driver \"", driver,
        "\" cannot run health checks (each is an exec in the task, and its "
        "capabilities claim no exec)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "spec.healthcheck: the HEALTHCHECK of image \"", image,
      "\" cannot run on driver \"", driver,
      "\" (each check is an exec in the task, and its capabilities claim no "
      "exec); turn it off with [\"NONE\"] (berth run --no-healthcheck)"));
}

absl::StatusOr<std::vector<std::string>> HealthCommand(
    const v1::HealthCheck& check) {
  const auto& test = check.test();
  if (test.size() >= 2 && test[0] == kCmd) {
    return std::vector<std::string>(test.begin() + 1, test.end());
  }
  if (test.size() == 2 && test[0] == kCmdShell) {
    return std::vector<std::string>{"/bin/sh", "-c", test[1]};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("health check test [", absl::StrJoin(test, ", "),
                   "] is not [\"CMD\", ...] nor [\"CMD-SHELL\", command]"));
}

std::string HealthOutput(const std::string& output, size_t max_bytes) {
  std::string clean;
  clean.reserve(std::min(output.size(), max_bytes));
  for (size_t i = 0; i < output.size();) {
    const size_t n = Utf8SequenceLength(output, i);
    if (clean.size() + std::max<size_t>(n, 1) > max_bytes) break;
    if (n == 0) {
      clean.push_back('?');
      ++i;
    } else {
      clean.append(output, i, n);
      i += n;
    }
  }
  return clean;
}

bool RecordHealthResult(const v1::HealthCheck& check, absl::Time started,
                        const v1::HealthCheckResult& result,
                        v1::TaskHealth* health) {
  auto* log = health->mutable_log();
  *log->Add() = result;
  if (log->size() > kHealthLogSize) {
    log->DeleteSubrange(0, log->size() - kHealthLogSize);
  }
  const v1::HealthStatus before = health->status();
  if (health->status() == v1::HEALTH_STATUS_UNSPECIFIED) {
    health->set_status(v1::HEALTH_STATUS_STARTING);
  }
  if (result.exit_code() == 0) {
    health->set_failing_streak(0);
    health->set_status(v1::HEALTH_STATUS_HEALTHY);
  } else {
    bool counts = true;
    if (health->status() == v1::HEALTH_STATUS_STARTING) {
      // As docker: while starting, failures of checks begun within the start
      // period do not count.
      const absl::Duration start_period =
          base::FromProtoDuration(check.start_period());
      counts = base::FromProtoTimestamp(result.started_at()) >=
               started + start_period;
    }
    if (counts) {
      health->set_failing_streak(health->failing_streak() + 1);
      const uint32_t retries =
          check.retries() == 0 ? kDefaultHealthRetries : check.retries();
      if (health->failing_streak() >= retries) {
        health->set_status(v1::HEALTH_STATUS_UNHEALTHY);
      }
    }
  }
  return health->status() != before;
}

HealthChecker::HealthChecker(Options options) : options_(std::move(options)) {
  absl::StatusOr<std::vector<std::string>> command =
      HealthCommand(options_.check);
  if (command.ok()) {
    command_ = *std::move(command);
  } else {
    command_error_ = std::string(command.status().message());
  }
  absl::MutexLock lock(&mu_);
  health_ = options_.previous;
  health_.set_status(v1::HEALTH_STATUS_STARTING);
  health_.set_failing_streak(0);
}

HealthChecker::~HealthChecker() { Stop(); }

v1::TaskHealth HealthChecker::health() const {
  absl::MutexLock lock(&mu_);
  return health_;
}

int HealthChecker::checks() const {
  absl::MutexLock lock(&mu_);
  return checks_;
}

v1::TaskHealth HealthChecker::CheckOnce() {
  // Asked outside the lock: `ready` takes its owner's.
  if (options_.ready && !options_.ready()) return health();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return health_;
    ++checks_;
  }
  const absl::Duration timeout =
      PositiveOr(options_.check.timeout(), kDefaultHealthTimeout);
  v1::HealthCheckResult result;
  const absl::Time start = options_.now();
  *result.mutable_started_at() = base::ToProtoTimestamp(start);
  if (command_.empty()) {
    result.set_exit_code(-1);
    result.set_output(HealthOutput(command_error_));
  } else {
    absl::StatusOr<driver::v1::ExecTaskResponse> response =
        options_.exec(command_, timeout);
    if (!response.ok() && options_.ready && !options_.ready()) {
      // The driver lost the run meanwhile (it went away): the failure is
      // its, not the task's.
      return health();
    }
    if (!response.ok()) {
      result.set_exit_code(-1);
      result.set_output(
          HealthOutput(absl::IsDeadlineExceeded(response.status())
                           ? absl::StrCat("health check exceeded its timeout (",
                                          absl::FormatDuration(timeout),
                                          "): ", response.status().message())
                           : absl::StrCat("health check could not run: ",
                                          response.status().message())));
    } else {
      const driver::v1::ExitResult& exit = response->result();
      if (exit.signal() == 0) {
        result.set_exit_code(exit.exit_code());
      } else if (options_.now() - start >= timeout) {
        result.set_exit_code(-1);  // killed at its timeout
      } else {
        result.set_exit_code(128 + exit.signal());
      }
      result.set_output(
          HealthOutput(absl::StrCat(response->stdout(), response->stderr())));
    }
  }
  *result.mutable_finished_at() = base::ToProtoTimestamp(options_.now());
  v1::TaskHealth health;
  bool changed;
  {
    absl::MutexLock lock(&mu_);
    // A check interrupted by Stop says nothing of the task.
    if (stopping_) return health_;
    changed =
        RecordHealthResult(options_.check, options_.started, result, &health_);
    health = health_;
  }
  if (options_.on_update) options_.on_update(health, changed);
  return health;
}

void HealthChecker::Start() {
  absl::MutexLock lock(&mu_);
  if (stopping_ || thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void HealthChecker::Loop() {
  const absl::Duration interval =
      PositiveOr(options_.check.interval(), kDefaultHealthInterval);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) return;
    }
    CheckOnce();
  }
}

void HealthChecker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (options_.cancel) options_.cancel();
  if (thread_.joinable()) thread_.join();
}

}  // namespace berth::node
