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

struct RestartDecision {
  bool restart = false;
  // How long after the exit the next run starts (when restart).
  absl::Duration delay = kDefaultRestartDelay;
};

// `restarts` is how many times the task was restarted already; `stopped`
// that its user stopped it (a stopped task is never restarted). A run
// failed when it exited non-zero or was killed by a signal.
//   RESTART_MODE_NEVER (or unset): never.
//   RESTART_MODE_ON_FAILURE: after a failed run, while restarts < attempts
//     (attempts 0: no limit).
//   RESTART_MODE_ALWAYS: after every run.
RestartDecision DecideRestart(const v1::RestartPolicy& policy,
                              const driver::v1::ExitResult& exit,
                              uint32_t restarts, bool stopped);

}  // namespace berth::node

#endif  // SERVICES_NODE_RESTART_POLICY_H_
