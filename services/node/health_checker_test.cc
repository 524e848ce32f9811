#include "services/node/health_checker.h"

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::HealthCheck Check(std::vector<std::string> test) {
  v1::HealthCheck check;
  for (std::string& arg : test) check.add_test(std::move(arg));
  return check;
}

driver::v1::ExecTaskResponse Exited(int code, const std::string& out = "",
                                    const std::string& err = "") {
  driver::v1::ExecTaskResponse response;
  response.mutable_result()->set_exit_code(code);
  response.set_stdout(out);
  response.set_stderr(err);
  return response;
}

// A checker driven a check at a time: each exec takes the next scripted
// answer and moves the fake clock by `exec_takes`.
class Harness {
 public:
  explicit Harness(v1::HealthCheck check, v1::TaskHealth previous = {}) {
    HealthChecker::Options options;
    options.check = *HealthCheckInForce(check);
    options.started = start_;
    options.previous = std::move(previous);
    options.now = [this] { return now_; };
    options.exec = [this](const std::vector<std::string>& command,
                          absl::Duration timeout)
        -> absl::StatusOr<driver::v1::ExecTaskResponse> {
      commands_.push_back(command);
      timeouts_.push_back(timeout);
      now_ += exec_takes_;
      absl::StatusOr<driver::v1::ExecTaskResponse> answer = answers_.front();
      answers_.pop_front();
      return answer;
    };
    options.on_update = [this](const v1::TaskHealth& health, bool changed) {
      if (changed) changes_.push_back(health.status());
    };
    checker_ = std::make_unique<HealthChecker>(std::move(options));
  }

  // Moves the clock by `after`, then checks once with `answer`.
  v1::TaskHealth Step(absl::StatusOr<driver::v1::ExecTaskResponse> answer,
                      absl::Duration after = absl::Seconds(30)) {
    now_ += after;
    answers_.push_back(std::move(answer));
    return checker_->CheckOnce();
  }

  absl::Time start_ = absl::FromUnixSeconds(1000000);
  absl::Time now_ = start_;
  absl::Duration exec_takes_ = absl::Milliseconds(10);
  std::deque<absl::StatusOr<driver::v1::ExecTaskResponse>> answers_;
  std::vector<std::vector<std::string>> commands_;
  std::vector<absl::Duration> timeouts_;
  std::vector<v1::HealthStatus> changes_;
  std::unique_ptr<HealthChecker> checker_;
};

TEST(HealthCheckInForceTest, FillsDockersDefaultsAndTurnsOffNone) {
  const std::optional<v1::HealthCheck> check =
      HealthCheckInForce(Check({"CMD", "true"}));
  ASSERT_TRUE(check.has_value());
  EXPECT_EQ(base::FromProtoDuration(check->interval()), absl::Seconds(30));
  EXPECT_EQ(base::FromProtoDuration(check->timeout()), absl::Seconds(30));
  EXPECT_EQ(check->retries(), 3u);
  EXPECT_FALSE(check->has_start_period());
  EXPECT_EQ(check->on_failure(), v1::HEALTH_FAILURE_ACTION_NONE);

  v1::HealthCheck given = Check({"CMD-SHELL", "true"});
  *given.mutable_interval() = base::ToProtoDuration(absl::Seconds(2));
  given.set_retries(7);
  const std::optional<v1::HealthCheck> kept = HealthCheckInForce(given);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(base::FromProtoDuration(kept->interval()), absl::Seconds(2));
  EXPECT_EQ(kept->retries(), 7u);

  v1::HealthCheck zeros = Check({"CMD", "true"});
  zeros.mutable_interval();
  zeros.mutable_timeout();
  const std::optional<v1::HealthCheck> defaulted = HealthCheckInForce(zeros);
  ASSERT_TRUE(defaulted.has_value());
  EXPECT_EQ(base::FromProtoDuration(defaulted->interval()), absl::Seconds(30));
  EXPECT_EQ(base::FromProtoDuration(defaulted->timeout()), absl::Seconds(30));

  EXPECT_FALSE(HealthCheckInForce(Check({"NONE"})).has_value());
  EXPECT_FALSE(HealthCheckInForce(v1::HealthCheck()).has_value());
}

TEST(HealthCommandTest, CmdAsIsAndCmdShellThroughBinSh) {
  EXPECT_THAT(*HealthCommand(Check({"CMD", "curl", "-f", "http://x/"})),
              ElementsAre("curl", "-f", "http://x/"));
  EXPECT_THAT(*HealthCommand(Check({"CMD-SHELL", "test -f /ok || exit 1"})),
              ElementsAre("/bin/sh", "-c", "test -f /ok || exit 1"));
  EXPECT_FALSE(HealthCommand(Check({"NONE"})).ok());
  EXPECT_FALSE(HealthCommand(Check({"curl"})).ok());
}

TEST(ValidateHealthCheckTest, NamesTheField) {
  EXPECT_TRUE(ValidateHealthCheck(v1::HealthCheck()).ok());
  EXPECT_TRUE(ValidateHealthCheck(Check({"NONE"})).ok());
  EXPECT_TRUE(ValidateHealthCheck(Check({"CMD", "true"})).ok());
  EXPECT_TRUE(ValidateHealthCheck(Check({"CMD-SHELL", "true"})).ok());

  absl::Status bad = ValidateHealthCheck(Check({"SHELL", "true"}));
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_THAT(bad.message(), HasSubstr("spec.healthcheck.test"));
  EXPECT_THAT(bad.message(), HasSubstr("SHELL"));
  EXPECT_FALSE(ValidateHealthCheck(Check({"CMD"})).ok());
  EXPECT_FALSE(ValidateHealthCheck(Check({"CMD-SHELL", "a", "b"})).ok());
  EXPECT_FALSE(ValidateHealthCheck(Check({"NONE", "x"})).ok());
  EXPECT_FALSE(
      ValidateHealthCheck(Check({"CMD", std::string("a\0b", 3)})).ok());

  v1::HealthCheck short_interval = Check({"CMD", "true"});
  *short_interval.mutable_interval() =
      base::ToProtoDuration(absl::Microseconds(10));
  bad = ValidateHealthCheck(short_interval);
  EXPECT_THAT(bad.message(), HasSubstr("spec.healthcheck.interval"));
  v1::HealthCheck negative_timeout = Check({"CMD", "true"});
  *negative_timeout.mutable_timeout() =
      base::ToProtoDuration(-absl::Seconds(1));
  EXPECT_THAT(ValidateHealthCheck(negative_timeout).message(),
              HasSubstr("spec.healthcheck.timeout"));
  v1::HealthCheck zero_interval = Check({"CMD", "true"});
  zero_interval.mutable_interval();  // set, 0: the default
  EXPECT_TRUE(ValidateHealthCheck(zero_interval).ok());

  v1::HealthCheck negative_start = Check({"CMD", "true"});
  *negative_start.mutable_start_period() =
      base::ToProtoDuration(-absl::Seconds(1));
  bad = ValidateHealthCheck(negative_start);
  EXPECT_THAT(bad.message(), HasSubstr("spec.healthcheck.start_period"));
  v1::HealthCheck zero_start = Check({"CMD", "true"});
  zero_start.mutable_start_period();
  EXPECT_TRUE(ValidateHealthCheck(zero_start).ok());

  v1::HealthCheck bad_action = Check({"CMD", "true"});
  bad_action.set_on_failure(static_cast<v1::HealthFailureAction>(99));
  EXPECT_THAT(ValidateHealthCheck(bad_action).message(),
              HasSubstr("spec.healthcheck.on_failure"));
}

TEST(HealthOutputTest, TruncatesAtACharacterAndCleansInvalidUtf8) {
  EXPECT_EQ(HealthOutput("ok\n"), "ok\n");
  EXPECT_EQ(HealthOutput(std::string(10000, 'x')).size(), kHealthOutputBytes);
  // "é" is 2 bytes: 5 bytes hold two of them, not two and a half.
  EXPECT_EQ(HealthOutput("\xC3\xA9\xC3\xA9\xC3\xA9", 5), "\xC3\xA9\xC3\xA9");
  EXPECT_EQ(HealthOutput("a\xFF"
                         "b\xC3"),
            "a?b?");
  EXPECT_EQ(HealthOutput("\xED\xA0\x80"), "???");  // a surrogate
}

TEST(HealthCheckerTest, StartingThenHealthyThenUnhealthyAfterRetries) {
  Harness h(Check({"CMD-SHELL", "test -f /ok"}));
  EXPECT_EQ(h.checker_->health().status(), v1::HEALTH_STATUS_STARTING);

  v1::TaskHealth health = h.Step(Exited(0, "fine\n"));
  EXPECT_EQ(health.status(), v1::HEALTH_STATUS_HEALTHY);
  EXPECT_THAT(h.commands_[0], ElementsAre("/bin/sh", "-c", "test -f /ok"));
  EXPECT_EQ(h.timeouts_[0], absl::Seconds(30));
  ASSERT_EQ(health.log_size(), 1);
  EXPECT_EQ(health.log(0).exit_code(), 0);
  EXPECT_EQ(health.log(0).output(), "fine\n");
  EXPECT_EQ(base::FromProtoTimestamp(health.log(0).started_at()),
            h.start_ + absl::Seconds(30));
  EXPECT_EQ(base::FromProtoTimestamp(health.log(0).finished_at()),
            h.start_ + absl::Seconds(30) + absl::Milliseconds(10));

  // Two failures in a row: still healthy (retries 3).
  EXPECT_EQ(h.Step(Exited(1)).status(), v1::HEALTH_STATUS_HEALTHY);
  health = h.Step(Exited(2, "", "no file\n"));
  EXPECT_EQ(health.status(), v1::HEALTH_STATUS_HEALTHY);
  EXPECT_EQ(health.failing_streak(), 2u);
  EXPECT_EQ(health.log(2).output(), "no file\n");
  // The third makes it unhealthy; more keep it so.
  health = h.Step(Exited(1));
  EXPECT_EQ(health.status(), v1::HEALTH_STATUS_UNHEALTHY);
  EXPECT_EQ(health.failing_streak(), 3u);
  EXPECT_EQ(h.Step(Exited(1)).status(), v1::HEALTH_STATUS_UNHEALTHY);
  // One success: healthy again, streak 0.
  health = h.Step(Exited(0));
  EXPECT_EQ(health.status(), v1::HEALTH_STATUS_HEALTHY);
  EXPECT_EQ(health.failing_streak(), 0u);

  EXPECT_THAT(h.changes_, ElementsAre(v1::HEALTH_STATUS_HEALTHY,
                                      v1::HEALTH_STATUS_UNHEALTHY,
                                      v1::HEALTH_STATUS_HEALTHY));
}

TEST(HealthCheckerTest, UnhealthyFromStartingWithoutASuccess) {
  v1::HealthCheck check = Check({"CMD", "false"});
  check.set_retries(2);
  Harness h(check);
  EXPECT_EQ(h.Step(Exited(1)).status(), v1::HEALTH_STATUS_STARTING);
  EXPECT_EQ(h.Step(Exited(1)).status(), v1::HEALTH_STATUS_UNHEALTHY);
  EXPECT_THAT(h.commands_[0], ElementsAre("false"));
  EXPECT_THAT(h.changes_, ElementsAre(v1::HEALTH_STATUS_UNHEALTHY));
}

TEST(HealthCheckerTest, FailuresWithinTheStartPeriodDoNotCount) {
  v1::HealthCheck check = Check({"CMD", "probe"});
  *check.mutable_start_period() = base::ToProtoDuration(absl::Seconds(100));
  check.set_retries(1);
  Harness h(check);
  // Checks begun at 30 s, 60 s, 90 s: inside the start period.
  for (int i = 0; i < 3; ++i) {
    const v1::TaskHealth health = h.Step(Exited(1));
    EXPECT_EQ(health.status(), v1::HEALTH_STATUS_STARTING) << i;
    EXPECT_EQ(health.failing_streak(), 0u) << i;
    EXPECT_EQ(health.log_size(), i + 1) << "recorded all the same";
  }
  // At 120 s: past it, and one failure is enough.
  const v1::TaskHealth health = h.Step(Exited(1));
  EXPECT_EQ(health.status(), v1::HEALTH_STATUS_UNHEALTHY);
  EXPECT_EQ(health.failing_streak(), 1u);
}

TEST(HealthCheckerTest, StartPeriodEndsAtTheFirstSuccess) {
  v1::HealthCheck check = Check({"CMD", "probe"});
  *check.mutable_start_period() = base::ToProtoDuration(absl::Minutes(10));
  check.set_retries(1);
  Harness h(check);
  EXPECT_EQ(h.Step(Exited(0)).status(), v1::HEALTH_STATUS_HEALTHY);
  // Once healthy, failures count even within the start period (docker).
  EXPECT_EQ(h.Step(Exited(1)).status(), v1::HEALTH_STATUS_UNHEALTHY);
}

TEST(HealthCheckerTest, TimeoutAndErrorsCountAsFailuresWithMinusOne) {
  v1::HealthCheck check = Check({"CMD", "slow"});
  *check.mutable_timeout() = base::ToProtoDuration(absl::Seconds(2));
  Harness h(check);
  v1::TaskHealth health =
      h.Step(absl::DeadlineExceededError("command slow was killed"));
  EXPECT_EQ(h.timeouts_[0], absl::Seconds(2));
  EXPECT_EQ(health.log(0).exit_code(), -1);
  EXPECT_THAT(health.log(0).output(), HasSubstr("exceeded its timeout (2s)"));
  EXPECT_EQ(health.failing_streak(), 1u);

  health = h.Step(absl::NotFoundError("no program slow"));
  EXPECT_EQ(health.log(1).exit_code(), -1);
  EXPECT_THAT(health.log(1).output(), HasSubstr("could not run"));
  EXPECT_THAT(health.log(1).output(), HasSubstr("no program slow"));

  // A driver that kills the command at its timeout and reports the signal.
  h.exec_takes_ = absl::Seconds(2);
  driver::v1::ExecTaskResponse killed;
  killed.mutable_result()->set_signal(9);
  health = h.Step(killed);
  EXPECT_EQ(health.log(2).exit_code(), -1);
  EXPECT_EQ(health.status(), v1::HEALTH_STATUS_UNHEALTHY);

  // Killed by a signal before its timeout: 128 + the signal.
  h.exec_takes_ = absl::Milliseconds(1);
  killed.mutable_result()->set_signal(15);
  EXPECT_EQ(h.Step(killed).log(3).exit_code(), 128 + 15);
}

TEST(HealthCheckerTest, OutputTruncatedTo4KiBStdoutThenStderr) {
  Harness h(Check({"CMD", "chatty"}));
  v1::TaskHealth health =
      h.Step(Exited(0, std::string(3000, 'o'), std::string(3000, 'e')));
  const std::string& output = health.log(0).output();
  ASSERT_EQ(output.size(), kHealthOutputBytes);
  EXPECT_EQ(output.substr(0, 3000), std::string(3000, 'o'));
  EXPECT_EQ(output.substr(3000), std::string(kHealthOutputBytes - 3000, 'e'));
}

TEST(HealthCheckerTest, KeepsTheLastFiveOldestFirst) {
  Harness h(Check({"CMD", "count"}));
  v1::TaskHealth health;
  for (int i = 0; i < 8; ++i) {
    health = h.Step(Exited(0, std::to_string(i)));
  }
  ASSERT_EQ(health.log_size(), kHealthLogSize);
  std::vector<std::string> outputs;
  for (const v1::HealthCheckResult& result : health.log()) {
    outputs.push_back(result.output());
  }
  EXPECT_THAT(outputs, ElementsAre("3", "4", "5", "6", "7"));
}

TEST(HealthCheckerTest, ANewRunStartsAgainKeepingTheLog) {
  v1::TaskHealth previous;
  previous.set_status(v1::HEALTH_STATUS_UNHEALTHY);
  previous.set_failing_streak(4);
  previous.add_log()->set_exit_code(1);
  Harness h(Check({"CMD", "probe"}), previous);
  const v1::TaskHealth health = h.checker_->health();
  EXPECT_EQ(health.status(), v1::HEALTH_STATUS_STARTING);
  EXPECT_EQ(health.failing_streak(), 0u);
  EXPECT_EQ(health.log_size(), 1);
  // One failure is not three.
  EXPECT_EQ(h.Step(Exited(1)).status(), v1::HEALTH_STATUS_STARTING);
}

TEST(HealthCheckerTest, AnUnrunnableTestFailsEachCheck) {
  v1::HealthCheck check;  // HealthCheckInForce refuses it: build by hand
  check.add_test("BOGUS");
  HealthChecker::Options options;
  options.check = check;
  bool ran = false;
  options.exec =
      [&ran](const std::vector<std::string>&,
             absl::Duration) -> absl::StatusOr<driver::v1::ExecTaskResponse> {
    ran = true;
    return Exited(0);
  };
  HealthChecker checker(std::move(options));
  const v1::TaskHealth health = checker.CheckOnce();
  EXPECT_FALSE(ran);
  EXPECT_EQ(health.log(0).exit_code(), -1);
  EXPECT_THAT(health.log(0).output(), HasSubstr("BOGUS"));
}

// The thread: checks go on until Stop, which interrupts a running one (its
// result dropped) and joins.
TEST(HealthCheckerTest, ThreadChecksUntilStopAndDropsAnInterruptedCheck) {
  absl::Mutex mu;
  int execs = 0;
  bool cancelled = false;
  int updates = 0;
  HealthChecker::Options options;
  options.check = *HealthCheckInForce(Check({"CMD", "probe"}));
  *options.check.mutable_interval() =
      base::ToProtoDuration(absl::Milliseconds(1));
  options.started = absl::Now();
  options.exec =
      [&](const std::vector<std::string>&,
          absl::Duration) -> absl::StatusOr<driver::v1::ExecTaskResponse> {
    absl::MutexLock lock(&mu);
    if (++execs < 3) return Exited(0);
    // The third blocks until cancelled.
    mu.Await(absl::Condition(&cancelled));
    return absl::CancelledError("cancelled");
  };
  options.cancel = [&] {
    absl::MutexLock lock(&mu);
    cancelled = true;
  };
  options.on_update = [&](const v1::TaskHealth&, bool) {
    absl::MutexLock lock(&mu);
    ++updates;
  };
  HealthChecker checker(std::move(options));
  checker.Start();
  {
    absl::MutexLock lock(&mu);
    auto blocked = [&] { return execs == 3; };
    mu.Await(absl::Condition(&blocked));
  }
  checker.Stop();
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(execs, 3);
  EXPECT_EQ(updates, 2) << "the interrupted check is not recorded";
  EXPECT_EQ(checker.health().log_size(), 2);
  EXPECT_EQ(checker.health().status(), v1::HEALTH_STATUS_HEALTHY);
  EXPECT_EQ(checker.checks(), 3);
}

TEST(HealthCheckerTest, NothingRunsAfterStop) {
  Harness h(Check({"CMD", "probe"}));
  h.checker_->Stop();
  h.checker_->Stop();  // idempotent
  h.now_ += absl::Seconds(30);
  const v1::TaskHealth health = h.checker_->CheckOnce();
  EXPECT_TRUE(h.commands_.empty());
  EXPECT_EQ(health.log_size(), 0);
}

}  // namespace
}  // namespace berth::node
