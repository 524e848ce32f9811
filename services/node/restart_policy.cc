#include "services/node/restart_policy.h"

#include <algorithm>

#include "base/proto_time.h"

namespace berth::node {
namespace {

// Levels kept beyond this change nothing (2^32 times any delay is past any
// cap) and would only grow the record.
constexpr uint32_t kMaxBackoffLevel = 64;

}  // namespace

absl::Duration RestartDelay(const v1::RestartPolicy& policy,
                            const RestartBackoff& backoff, uint32_t level) {
  const absl::Duration asked = policy.has_delay()
                                   ? base::FromProtoDuration(policy.delay())
                                   : kDefaultRestartDelay;
  const absl::Duration base = std::max(asked, backoff.min_delay);
  const absl::Duration cap = std::max(backoff.max_delay, base);
  absl::Duration delay = base;
  for (uint32_t i = 0; i < level && delay < cap; ++i) {
    // Doubling a zero delay stays zero: a zero minimum means no backoff.
    delay *= 2;
  }
  return std::min(delay, cap);
}

RestartDecision DecideRestart(const v1::RestartPolicy& policy,
                              const driver::v1::ExitResult& exit,
                              uint32_t restarts, bool stopped,
                              const RestartBackoff& backoff,
                              uint32_t backoff_level,
                              absl::Duration run_lasted) {
  RestartDecision decision;
  // A run that lasted long enough starts the doubling over.
  const uint32_t level = run_lasted >= backoff.reset_after ? 0 : backoff_level;
  decision.delay = RestartDelay(policy, backoff, level);
  decision.backoff_level = std::min(level + 1, kMaxBackoffLevel);
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
