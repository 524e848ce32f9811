// A Clock (clock.h) that moves only when a test moves it (testonly), and
// tells the test when what waits on it has caught up: a Timer on it runs a
// callback when the test has advanced the time to it, and the test knows
// when that has happened without waiting for anything but the callback.

#ifndef SERVICES_PROXY_FAKE_CLOCK_H_
#define SERVICES_PROXY_FAKE_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/proxy/clock.h"

namespace berth {
namespace proxy {
namespace testing {

// Thread-safe. Its waits for what waits on it give up after 30 s of real
// time (returning false), so that a broken test fails rather than hangs.
class FakeClock final : public Clock {
 public:
  // Starts at `start`: any fixed time will do.
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1767225600));
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  absl::Time Now() override;
  void AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& condition,
                         absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until something waits on this clock for `deadline` or an earlier
  // time, with nothing else to wake it for: a Timer whose first entry is due
  // then, and which has seen every Schedule and Cancel made before.
  bool AwaitWaiter(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Moves the time on by `d`, wakes each wait whose deadline that reaches,
  // and returns once each of those waits again, for a later time and with
  // nothing else to wake it for: a Timer has then run, in order, every
  // callback that came due. Call it when the waits have caught up with what
  // the test did (AwaitWaiter): a wait that has not begun yet is not waited
  // for.
  bool Advance(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiter {
    absl::Mutex* mu;
    const absl::Condition* condition;
    absl::Time deadline;
  };

  // Whether `waiter` waits with its condition false (takes its mutex).
  static bool Idle(const Waiter& waiter);
  // Waits until `done` holds, asking again whenever the waiters change (and
  // every 10 ms: a condition may turn false again without a change).
  bool AwaitLocked(const std::function<bool()>& done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Read under the waiters' mutexes, inside their conditions: never takes
  // mu_. Written with mu_ held.
  std::atomic<int64_t> now_ns_;

  // Taken before any waiter's mutex, never after one.
  absl::Mutex mu_;
  std::list<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace testing
}  // namespace proxy
}  // namespace berth

#endif  // SERVICES_PROXY_FAKE_CLOCK_H_
