// The time berth-proxy's timer (timer.h) goes by: the real clock, or in tests
// a fake one (fake_clock.h) that they move on themselves, so that a token's
// expiry or a shim's timeout comes when the test says, not after a wait.

#ifndef SERVICES_PROXY_CLOCK_H_
#define SERVICES_PROXY_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace berth {
namespace proxy {

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() = 0;

  // With `mu` held: waits until `condition` holds or Now() reaches
  // `deadline`, releasing `mu` meanwhile, and returns with `mu` held. Like a
  // condition variable's wait it may return with neither: callers check
  // again.
  virtual void AwaitWithDeadline(absl::Mutex* mu,
                                 const absl::Condition& condition,
                                 absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  // absl::Now() and absl::Mutex's own waits; never destroyed.
  static Clock* Real();
};

}  // namespace proxy
}  // namespace berth

#endif  // SERVICES_PROXY_CLOCK_H_
