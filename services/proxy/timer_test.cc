#include "services/proxy/timer.h"

#include <atomic>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth {
namespace proxy {
namespace {

TEST(TimerTest, RunsInOrderAndSkipsCancelled) {
  Timer timer;
  absl::Mutex mu;
  std::vector<int> ran;
  absl::Time now = absl::Now();
  auto add = [&](int i) {
    return [&, i] {
      absl::MutexLock lock(&mu);
      ran.push_back(i);
    };
  };
  timer.Schedule(now + absl::Milliseconds(300), add(3));
  timer.Schedule(now + absl::Milliseconds(100), add(1));
  uint64_t cancelled = timer.Schedule(now + absl::Milliseconds(200), add(2));
  timer.Schedule(now - absl::Seconds(1), add(0));
  timer.Cancel(cancelled);
  ASSERT_TRUE(testing::WaitFor([&] {
    absl::MutexLock lock(&mu);
    return ran.size() == 3;
  }));
  absl::SleepFor(absl::Milliseconds(300));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 3}));
}

TEST(TimerTest, CallbackMaySchedule) {
  Timer timer;
  std::atomic<bool> second{false};
  timer.Schedule(absl::Now(),
                 [&] { timer.Schedule(absl::Now(), [&] { second = true; }); });
  EXPECT_TRUE(testing::WaitFor([&] { return second.load(); }));
}

}  // namespace
}  // namespace proxy
}  // namespace berth
