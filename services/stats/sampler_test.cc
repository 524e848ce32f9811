#include "services/stats/sampler.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/stats/test_util.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;
using ::berth::stats::testing::WaitFor;
using ::testing::ElementsAre;

SharedSample MakeSample(const std::string& task_id, int seconds) {
  auto sample = std::make_shared<pb::TaskResourceUsage>();
  sample->set_task_id(task_id);
  sample->mutable_timestamp()->set_seconds(seconds);
  return sample;
}

std::vector<int> Seconds(const std::vector<SharedSample>& samples) {
  std::vector<int> out;
  for (const SharedSample& s : samples) {
    out.push_back(static_cast<int>(s->timestamp().seconds()));
  }
  return out;
}

TEST(SubscriberTest, DropsTheOldestWhenFullAndCountsThem) {
  Subscriber subscriber({}, 3);
  for (int i = 1; i <= 5; ++i) subscriber.Push({MakeSample("t", i)});
  EXPECT_EQ(subscriber.dropped(), 2u);
  EXPECT_EQ(subscriber.queued(), 3u);
  std::vector<SharedSample> samples;
  uint64_t dropped = 0;
  absl::Status end;
  ASSERT_EQ(
      subscriber.Take(absl::ZeroDuration(), 100, &samples, &dropped, &end),
      Subscriber::Next::kSamples);
  EXPECT_THAT(Seconds(samples), ElementsAre(3, 4, 5));
  EXPECT_EQ(dropped, 2u);
}

TEST(SubscriberTest, HoldsTwoTicksWhenATickIsLargerThanItsCapacity) {
  Subscriber subscriber({}, 2);
  subscriber.Push({MakeSample("a", 1), MakeSample("b", 1), MakeSample("c", 1)});
  EXPECT_EQ(subscriber.dropped(), 0u);
  subscriber.Push({MakeSample("a", 2), MakeSample("b", 2), MakeSample("c", 2)});
  EXPECT_EQ(subscriber.dropped(), 0u);
  subscriber.Push({MakeSample("a", 3), MakeSample("b", 3), MakeSample("c", 3)});
  EXPECT_EQ(subscriber.dropped(), 3u);
  EXPECT_EQ(subscriber.queued(), 6u);
}

TEST(SubscriberTest, TakesAtMostMax) {
  Subscriber subscriber({}, 10);
  subscriber.Push({MakeSample("t", 1), MakeSample("t", 2), MakeSample("t", 3)});
  std::vector<SharedSample> samples;
  uint64_t dropped = 0;
  absl::Status end;
  subscriber.Take(absl::ZeroDuration(), 2, &samples, &dropped, &end);
  EXPECT_THAT(Seconds(samples), ElementsAre(1, 2));
}

TEST(SubscriberTest, EndComesAfterTheQueuedSamples) {
  Subscriber subscriber({}, 10);
  subscriber.Push({MakeSample("t", 1)});
  subscriber.End(absl::NotFoundError("task \"t\": gone"));
  subscriber.End(absl::OkStatus());       // the first End wins
  subscriber.Push({MakeSample("t", 2)});  // ignored after End
  std::vector<SharedSample> samples;
  uint64_t dropped = 0;
  absl::Status end;
  EXPECT_EQ(subscriber.Take(absl::ZeroDuration(), 10, &samples, &dropped, &end),
            Subscriber::Next::kSamples);
  EXPECT_THAT(Seconds(samples), ElementsAre(1));
  EXPECT_EQ(subscriber.Take(absl::ZeroDuration(), 10, &samples, &dropped, &end),
            Subscriber::Next::kEnded);
  EXPECT_TRUE(absl::IsNotFound(end));
}

TEST(SubscriberTest, TimesOutWhenNothingComes) {
  Subscriber subscriber({}, 10);
  std::vector<SharedSample> samples;
  uint64_t dropped = 0;
  absl::Status end;
  EXPECT_EQ(
      subscriber.Take(absl::Milliseconds(1), 10, &samples, &dropped, &end),
      Subscriber::Next::kTimeout);
}

TEST(SubscriberTest, ChosenTasksEndOkWhenTheLastIsUnregistered) {
  Subscriber subscriber({"a", "b"}, 10);
  EXPECT_FALSE(subscriber.all_tasks());
  EXPECT_TRUE(subscriber.Wants("a"));
  EXPECT_FALSE(subscriber.Wants("c"));
  subscriber.TaskUnregistered("c");
  subscriber.TaskUnregistered("a");
  EXPECT_FALSE(subscriber.ended());
  EXPECT_THAT(subscriber.task_ids(), ElementsAre("b"));
  subscriber.TaskUnregistered("b");
  EXPECT_TRUE(subscriber.ended());
  std::vector<SharedSample> samples;
  uint64_t dropped = 0;
  absl::Status end = absl::UnknownError("not set");
  EXPECT_EQ(subscriber.Take(absl::ZeroDuration(), 10, &samples, &dropped, &end),
            Subscriber::Next::kEnded);
  EXPECT_TRUE(end.ok());
}

TEST(SubscriberTest, AllTasksNeverEndOnUnregister) {
  Subscriber subscriber({}, 10);
  EXPECT_TRUE(subscriber.all_tasks());
  EXPECT_TRUE(subscriber.Wants("anything"));
  subscriber.TaskUnregistered("anything");
  EXPECT_FALSE(subscriber.ended());
}

TEST(SubscriberTest, AGoneTaskEndsTheStreamsThatIncludeIt) {
  const absl::Status gone = absl::NotFoundError("task \"a\": gone");
  Subscriber chosen({"a"}, 10);
  Subscriber other({"b"}, 10);
  Subscriber all({}, 10);
  for (Subscriber* s : {&chosen, &other, &all}) s->TaskGone("a", gone);
  EXPECT_TRUE(chosen.ended());
  EXPECT_FALSE(other.ended());
  EXPECT_TRUE(all.ended());
}

TEST(SamplerTest, TicksAtOnceAndThenAtItsInterval) {
  std::atomic<int> ticks{0};
  auto subscriber =
      std::make_shared<Subscriber>(absl::flat_hash_set<std::string>{}, 10);
  {
    Sampler sampler(
        absl::Milliseconds(5),
        [&](const std::vector<std::shared_ptr<Subscriber>>& subscribers) {
          EXPECT_EQ(subscribers.size(), 1u);
          ++ticks;
        },
        subscriber);
    EXPECT_EQ(sampler.interval(), absl::Milliseconds(5));
    EXPECT_TRUE(WaitFor([&] { return ticks >= 3; }));
  }
}

TEST(SamplerTest, AddsAndRemovesSubscribers) {
  auto first =
      std::make_shared<Subscriber>(absl::flat_hash_set<std::string>{}, 10);
  auto second =
      std::make_shared<Subscriber>(absl::flat_hash_set<std::string>{"x"}, 10);
  std::atomic<size_t> seen{0};
  Sampler sampler(
      absl::Milliseconds(2),
      [&](const std::vector<std::shared_ptr<Subscriber>>& subscribers) {
        seen = subscribers.size();
      },
      first);
  sampler.Add(second);
  EXPECT_TRUE(WaitFor([&] { return seen == 2; }));
  EXPECT_EQ(sampler.Remove(first.get()), 1u);
  EXPECT_TRUE(WaitFor([&] { return seen == 1; }));
  EXPECT_EQ(sampler.subscribers().size(), 1u);
  EXPECT_EQ(sampler.Remove(second.get()), 0u);
}

}  // namespace
}  // namespace stats
}  // namespace berth
