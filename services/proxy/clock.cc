#include "services/proxy/clock.h"

#include "absl/time/clock.h"

namespace berth {
namespace proxy {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& condition,
                         absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    mu->AwaitWithDeadline(condition, deadline);
  }
};

}  // namespace

Clock* Clock::Real() {
  static Clock* const clock = new RealClock();
  return clock;
}

}  // namespace proxy
}  // namespace berth
