#include "services/node/restart_policy.h"

#include <string>

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

}  // namespace
}  // namespace berth::node
