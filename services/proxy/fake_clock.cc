#include "services/proxy/fake_clock.h"

#include <vector>

#include "absl/time/clock.h"

namespace berth {
namespace proxy {
namespace testing {
namespace {

// How long, in real time, FakeClock waits for its waiters.
constexpr absl::Duration kGiveUp = absl::Seconds(30);

}  // namespace

FakeClock::FakeClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}

absl::Time FakeClock::Now() { return absl::FromUnixNanos(now_ns_.load()); }

void FakeClock::AwaitWithDeadline(absl::Mutex* mu,
                                  const absl::Condition& condition,
                                  absl::Time deadline) {
  if (condition.Eval() || Now() >= deadline) return;
  // Registered without `mu` held: Advance and AwaitWaiter hold mu_ when
  // they take `mu`.
  mu->Unlock();
  std::list<Waiter>::iterator self;
  {
    absl::MutexLock lock(&mu_);
    self = waiters_.insert(waiters_.end(), Waiter{mu, &condition, deadline});
    ++changes_;
  }
  mu->Lock();
  // Advance changes the time, then takes and releases `mu`, which makes
  // absl::Mutex evaluate this again.
  struct Woken {
    bool operator()() const {
      return condition->Eval() || clock->Now() >= deadline;
    }
    const absl::Condition* condition;
    FakeClock* clock;
    absl::Time deadline;
  };
  const Woken woken = {&condition, this, deadline};
  mu->Await(absl::Condition(&woken));
  mu->Unlock();
  {
    absl::MutexLock lock(&mu_);
    waiters_.erase(self);
    ++changes_;
  }
  mu->Lock();
}

bool FakeClock::Idle(const Waiter& waiter) {
  absl::MutexLock lock(waiter.mu);
  return !waiter.condition->Eval();
}

bool FakeClock::AwaitLocked(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + kGiveUp;
  while (!done()) {
    if (absl::Now() >= give_up) return false;
    const uint64_t seen = changes_;
    const auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return changes_ != seen;
    };
    mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(10));
  }
  return true;
}

bool FakeClock::AwaitWaiter(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return AwaitLocked([this, deadline] {
    mu_.AssertHeld();
    for (const Waiter& waiter : waiters_) {
      if (waiter.deadline <= deadline && Idle(waiter)) return true;
    }
    return false;
  });
}

bool FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = Now() + d;
  now_ns_.store(absl::ToUnixNanos(now));
  std::vector<absl::Mutex*> due;
  for (const Waiter& waiter : waiters_) {
    if (waiter.deadline > now) continue;
    due.push_back(waiter.mu);
    // Wakes it: absl::Mutex evaluates the conditions of its waits when it is
    // released.
    waiter.mu->Lock();
    waiter.mu->Unlock();
  }
  return AwaitLocked([this, &due, now] {
    mu_.AssertHeld();
    for (absl::Mutex* mu : due) {
      bool caught_up = false;
      for (const Waiter& waiter : waiters_) {
        if (waiter.mu == mu && waiter.deadline > now && Idle(waiter)) {
          caught_up = true;
          break;
        }
      }
      if (!caught_up) return false;
    }
    return true;
  });
}

}  // namespace testing
}  // namespace proxy
}  // namespace berth
