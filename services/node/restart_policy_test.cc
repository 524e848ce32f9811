#include "services/node/restart_policy.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace berth::node {
namespace {

driver::v1::ExitResult Exit(int code, int signal = 0) {
  driver::v1::ExitResult exit;
  exit.set_exit_code(code);
  exit.set_signal(signal);
  return exit;
}

v1::RestartPolicy Policy(v1::RestartMode mode, uint32_t attempts = 0) {
  v1::RestartPolicy policy;
  policy.set_mode(mode);
  policy.set_attempts(attempts);
  return policy;
}

TEST(DecideRestartTest, EveryPolicy) {
  struct Case {
    std::string name;
    v1::RestartPolicy policy;
    driver::v1::ExitResult exit;
    uint32_t restarts;
    bool stopped;
    bool want;
  };
  const Case cases[] = {
      {"unset, failed", v1::RestartPolicy(), Exit(1), 0, false, false},
      {"never, failed", Policy(v1::RESTART_MODE_NEVER), Exit(1), 0, false,
       false},
      {"on-failure, success", Policy(v1::RESTART_MODE_ON_FAILURE, 3), Exit(0),
       0, false, false},
      {"on-failure, exit 1, first", Policy(v1::RESTART_MODE_ON_FAILURE, 2),
       Exit(1), 0, false, true},
      {"on-failure, exit 1, last attempt",
       Policy(v1::RESTART_MODE_ON_FAILURE, 2), Exit(1), 1, false, true},
      {"on-failure, exit 1, attempts used",
       Policy(v1::RESTART_MODE_ON_FAILURE, 2), Exit(1), 2, false, false},
      {"on-failure, killed by a signal", Policy(v1::RESTART_MODE_ON_FAILURE, 2),
       Exit(0, 9), 0, false, true},
      {"on-failure without a limit", Policy(v1::RESTART_MODE_ON_FAILURE, 0),
       Exit(3), 1000, false, true},
      {"on-failure, stopped", Policy(v1::RESTART_MODE_ON_FAILURE), Exit(0, 15),
       0, true, false},
      {"always, success", Policy(v1::RESTART_MODE_ALWAYS), Exit(0), 7, false,
       true},
      {"always, failed", Policy(v1::RESTART_MODE_ALWAYS), Exit(2), 0, false,
       true},
      {"always, stopped", Policy(v1::RESTART_MODE_ALWAYS), Exit(0, 15), 0, true,
       false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DecideRestart(c.policy, c.exit, c.restarts, c.stopped).restart,
              c.want)
        << c.name;
  }
}

TEST(DecideRestartTest, DelayIsThePolicysOrOneSecond) {
  v1::RestartPolicy policy = Policy(v1::RESTART_MODE_ALWAYS);
  EXPECT_EQ(DecideRestart(policy, Exit(0), 0, false).delay, absl::Seconds(1));
  policy.mutable_delay()->set_nanos(250'000'000);
  EXPECT_EQ(DecideRestart(policy, Exit(0), 0, false).delay,
            absl::Milliseconds(250));
}

TEST(DecideRestartTest, NoRestartSoonerThanTheMinimumDelay) {
  RestartBackoff backoff;
  backoff.min_delay = absl::Milliseconds(100);
  v1::RestartPolicy policy = Policy(v1::RESTART_MODE_ALWAYS);
  policy.mutable_delay();  // zero: as soon as possible
  EXPECT_EQ(DecideRestart(policy, Exit(0), 0, false, backoff).delay,
            absl::Milliseconds(100));
  policy.mutable_delay()->set_nanos(10'000'000);
  EXPECT_EQ(DecideRestart(policy, Exit(0), 0, false, backoff).delay,
            absl::Milliseconds(100));
  // A longer delay of the policy's is kept.
  policy.mutable_delay()->set_seconds(3);
  policy.mutable_delay()->set_nanos(0);
  EXPECT_EQ(DecideRestart(policy, Exit(0), 0, false, backoff).delay,
            absl::Seconds(3));
}

TEST(DecideRestartTest, QuickRunsDoubleTheDelayUpToTheMaximum) {
  RestartBackoff backoff;
  backoff.min_delay = absl::Milliseconds(100);
  backoff.max_delay = absl::Seconds(10);
  backoff.reset_after = absl::Seconds(10);
  v1::RestartPolicy policy = Policy(v1::RESTART_MODE_ALWAYS);
  policy.mutable_delay();  // zero
  // Each run lasts 1 ms: the level recorded by one decision feeds the next.
  std::vector<absl::Duration> delays;
  uint32_t level = 0;
  for (int run = 0; run < 12; ++run) {
    RestartDecision decision = DecideRestart(
        policy, Exit(1), run, false, backoff, level, absl::Milliseconds(1));
    ASSERT_TRUE(decision.restart);
    delays.push_back(decision.delay);
    level = decision.backoff_level;
  }
  const std::vector<absl::Duration> want = {
      absl::Milliseconds(100),  absl::Milliseconds(200),
      absl::Milliseconds(400),  absl::Milliseconds(800),
      absl::Milliseconds(1600), absl::Milliseconds(3200),
      absl::Milliseconds(6400), absl::Seconds(10),
      absl::Seconds(10),        absl::Seconds(10),
      absl::Seconds(10),        absl::Seconds(10)};
  EXPECT_EQ(delays, want);
  // A run that lasted long enough starts over.
  RestartDecision after_long_run = DecideRestart(
      policy, Exit(1), 12, false, backoff, level, absl::Seconds(10));
  EXPECT_EQ(after_long_run.delay, absl::Milliseconds(100));
  EXPECT_EQ(after_long_run.backoff_level, 1u);
  // The level saturates instead of wrapping.
  RestartDecision high = DecideRestart(policy, Exit(1), 0, false, backoff,
                                       UINT32_MAX, absl::ZeroDuration());
  EXPECT_EQ(high.delay, absl::Seconds(10));
  EXPECT_LE(high.backoff_level, 64u);
}

TEST(DecideRestartTest, OnFailureBacksOffToo) {
  RestartBackoff backoff;
  backoff.min_delay = absl::Milliseconds(100);
  v1::RestartPolicy policy = Policy(v1::RESTART_MODE_ON_FAILURE);
  RestartDecision decision = DecideRestart(policy, Exit(1), 3, false, backoff,
                                           3, absl::Milliseconds(5));
  EXPECT_TRUE(decision.restart);
  // One second (the default delay), doubled three times, under 10 s.
  EXPECT_EQ(decision.delay, absl::Seconds(8));
  EXPECT_EQ(decision.backoff_level, 4u);
}

TEST(DecideRestartTest, AZeroMinimumAndDelayMeanNoWait) {
  RestartBackoff backoff;
  backoff.min_delay = absl::ZeroDuration();
  v1::RestartPolicy policy = Policy(v1::RESTART_MODE_ALWAYS);
  policy.mutable_delay();
  EXPECT_EQ(
      DecideRestart(policy, Exit(1), 0, false, backoff, 5, absl::ZeroDuration())
          .delay,
      absl::ZeroDuration());
}

}  // namespace
}  // namespace berth::node
