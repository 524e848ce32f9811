#include "services/node/event_bus.h"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace berth::node {
namespace {

// Next without waiting: the subscriber's queue is filled before.
std::optional<v1::EventsResponse> NextNow(EventBus::Subscription& sub) {
  return sub.Next(absl::Now());
}

TEST(EventBusTest, EverySubscriberGetsEachEventInOrder) {
  EventBus bus;
  std::unique_ptr<EventBus::Subscription> a = bus.Subscribe();
  std::unique_ptr<EventBus::Subscription> b = bus.Subscribe();
  bus.Publish(v1::EVENT_TYPE_TASK_STARTED, "t1", "task one started");
  bus.Publish(v1::EVENT_TYPE_TASK_EXITED, "t1", "task one exited",
              {{"exit_code", "3"}});
  for (EventBus::Subscription* sub : {a.get(), b.get()}) {
    std::optional<v1::EventsResponse> first = NextNow(*sub);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->type(), v1::EVENT_TYPE_TASK_STARTED);
    EXPECT_EQ(first->task_id(), "t1");
    EXPECT_EQ(first->message(), "task one started");
    EXPECT_TRUE(first->has_timestamp());
    std::optional<v1::EventsResponse> second = NextNow(*sub);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->type(), v1::EVENT_TYPE_TASK_EXITED);
    EXPECT_EQ(second->annotations().at("exit_code"), "3");
    EXPECT_FALSE(NextNow(*sub).has_value());
  }
}

// A subscriber that never reads holds at most kMaxQueued events: the oldest
// go, and the next event it reads says how many ("dropped"). One that reads
// is not affected.
TEST(EventBusTest, ASlowSubscribersQueueIsBoundedAndSaysWhatItDropped) {
  EventBus bus;
  std::unique_ptr<EventBus::Subscription> slow = bus.Subscribe();
  std::unique_ptr<EventBus::Subscription> reader = bus.Subscribe();
  constexpr size_t kExtra = 37;
  const size_t published = EventBus::kMaxQueued + kExtra;
  size_t read = 0;
  for (size_t i = 0; i < published; ++i) {
    bus.Publish(v1::EVENT_TYPE_TASK_STARTED, absl::StrCat("t", i), "started");
    std::optional<v1::EventsResponse> got = NextNow(*reader);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->task_id(), absl::StrCat("t", i));
    EXPECT_EQ(got->annotations().count("dropped"), 0u);
    ++read;
  }
  EXPECT_EQ(read, published);

  // The first kept is event kExtra, with the count of the dropped ones.
  std::optional<v1::EventsResponse> first = NextNow(*slow);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->task_id(), absl::StrCat("t", kExtra));
  EXPECT_EQ(first->annotations().at("dropped"), absl::StrCat(kExtra));
  size_t kept = 1;
  while (std::optional<v1::EventsResponse> next = NextNow(*slow)) {
    EXPECT_EQ(next->task_id(), absl::StrCat("t", kExtra + kept));
    EXPECT_EQ(next->annotations().count("dropped"), 0u) << next->task_id();
    ++kept;
  }
  EXPECT_EQ(kept, EventBus::kMaxQueued);

  // Having caught up, it gets the next event whole, with no count.
  bus.Publish(v1::EVENT_TYPE_TASK_EXITED, "late", "exited");
  std::optional<v1::EventsResponse> late = NextNow(*slow);
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->task_id(), "late");
  EXPECT_EQ(late->annotations().count("dropped"), 0u);
}

TEST(EventBusTest, AnUnsubscribedStreamGetsNothingMore) {
  EventBus bus;
  std::unique_ptr<EventBus::Subscription> sub = bus.Subscribe();
  sub.reset();                                                // unsubscribes
  bus.Publish(v1::EVENT_TYPE_TASK_STARTED, "t1", "started");  // no crash
  std::unique_ptr<EventBus::Subscription> later = bus.Subscribe();
  EXPECT_FALSE(NextNow(*later).has_value());
}

}  // namespace
}  // namespace berth::node
