#include "services/proxy/timer.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/proxy/fake_clock.h"

namespace berth {
namespace proxy {
namespace {

using ::berth::proxy::testing::FakeClock;

TEST(TimerTest, RunsInOrderAtTheirTimesAndSkipsCancelled) {
  FakeClock clock;
  Timer timer(&clock);
  absl::Mutex mu;
  std::vector<int> ran;
  auto add = [&](int i) {
    return [&, i] {
      absl::MutexLock lock(&mu);
      ran.push_back(i);
    };
  };
  auto ran_so_far = [&] {
    absl::MutexLock lock(&mu);
    return ran;
  };
  const absl::Time start = clock.Now();
  timer.Schedule(start + absl::Milliseconds(300), add(3));
  const uint64_t cancelled =
      timer.Schedule(start + absl::Milliseconds(200), add(2));
  timer.Cancel(cancelled);
  timer.Schedule(start - absl::Seconds(1), add(0));  // passed: at once
  timer.Schedule(start + absl::Milliseconds(100), add(1));
  // The timer waits for the next entry only once it has run the passed one.
  ASSERT_TRUE(clock.AwaitWaiter(start + absl::Milliseconds(100)));
  EXPECT_EQ(ran_so_far(), std::vector<int>{0});
  ASSERT_TRUE(clock.Advance(absl::Milliseconds(100)));
  EXPECT_EQ(ran_so_far(), (std::vector<int>{0, 1}));
  // The cancelled entry's time, and just before the last one's.
  ASSERT_TRUE(clock.Advance(absl::Milliseconds(100)));
  ASSERT_TRUE(clock.Advance(absl::Milliseconds(99)));
  EXPECT_EQ(ran_so_far(), (std::vector<int>{0, 1}));
  ASSERT_TRUE(clock.Advance(absl::Milliseconds(1)));
  EXPECT_EQ(ran_so_far(), (std::vector<int>{0, 1, 3}));
}

// On the real clock, Timer's default.
TEST(TimerTest, CallbackMaySchedule) {
  Timer timer;
  std::atomic<bool> second{false};
  timer.Schedule(absl::Now(),
                 [&] { timer.Schedule(absl::Now(), [&] { second = true; }); });
  EXPECT_TRUE(berth::testing::WaitFor([&] { return second.load(); }));
}

}  // namespace
}  // namespace proxy
}  // namespace berth
