// The restart decision of berth-node: once a task's run has ended, whether
// its policy starts it again and after how long. A pure function, so that
// every policy is tested without running anything.

#ifndef SERVICES_NODE_RESTART_POLICY_H_
#define SERVICES_NODE_RESTART_POLICY_H_

#include <cstdint>

#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/node/v1/node.pb.h"

namespace berth::node {

// The delay when the policy sets none.
inline constexpr absl::Duration kDefaultRestartDelay = absl::Seconds(1);

// How restarts of a task whose runs end quickly slow down (berth-node's
// --restart_min_delay, --restart_max_delay, --restart_backoff_reset): a task
// that exits at once under `--restart always` must not keep the node busy
// starting it.
struct RestartBackoff {
  // No restart comes sooner than this, whatever the policy's delay.
  absl::Duration min_delay = absl::Milliseconds(100);
  // Doubling stops here (a policy's own delay above it is kept as is).
  absl::Duration max_delay = absl::Seconds(10);
  // A run that lasted at least this long starts the doubling over.
  absl::Duration reset_after = absl::Seconds(10);
};

struct RestartDecision {
  bool restart = false;
  // How long after the exit the next run starts (when restart).
  absl::Duration delay = kDefaultRestartDelay;
  // The backoff level to keep for the next decision (TaskRecord's
  // restart_backoff): how many quick runs in a row this one ends.
  uint32_t backoff_level = 0;
};

// `restarts` is how many times the task was restarted already; `stopped`
// that its user stopped it (a stopped task is never restarted). A run
// failed when it exited non-zero or was killed by a signal.
//   RESTART_MODE_NEVER (or unset): never.
//   RESTART_MODE_ON_FAILURE: after a failed run, while restarts < attempts
//     (attempts 0: no limit).
//   RESTART_MODE_ALWAYS: after every run.
// The delay is RestartDelay's, from `backoff_level` (the decision before
// this one's) and how long the run lasted.
RestartDecision DecideRestart(
    const v1::RestartPolicy& policy, const driver::v1::ExitResult& exit,
    uint32_t restarts, bool stopped, const RestartBackoff& backoff = {},
    uint32_t backoff_level = 0,
    absl::Duration run_lasted = absl::InfiniteDuration());

// The delay of a restart: the policy's delay (else kDefaultRestartDelay),
// at least backoff.min_delay, doubled for each of `level` quick runs before
// this one, up to backoff.max_delay (or the policy's delay, when longer).
absl::Duration RestartDelay(const v1::RestartPolicy& policy,
                            const RestartBackoff& backoff, uint32_t level);

}  // namespace berth::node

#endif  // SERVICES_NODE_RESTART_POLICY_H_
