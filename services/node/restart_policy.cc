#include "services/node/restart_policy.h"

#include "base/proto_time.h"

namespace berth::node {

RestartDecision DecideRestart(const v1::RestartPolicy& policy,
                              const driver::v1::ExitResult& exit,
                              uint32_t restarts, bool stopped) {
  RestartDecision decision;
  if (policy.has_delay()) {
    decision.delay = base::FromProtoDuration(policy.delay());
  }
  if (stopped) return decision;
  const bool failed = exit.exit_code() != 0 || exit.signal() != 0;
  switch (policy.mode()) {
    case v1::RESTART_MODE_ALWAYS:
      decision.restart = true;
      break;
    case v1::RESTART_MODE_ON_FAILURE:
      decision.restart =
          failed && (policy.attempts() == 0 || restarts < policy.attempts());
      break;
    default:
      break;
  }
  return decision;
}

}  // namespace berth::node
