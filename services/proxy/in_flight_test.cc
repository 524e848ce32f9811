#include "services/proxy/in_flight.h"

#include <atomic>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace berth {
namespace proxy {
namespace {

TEST(InFlightTest, CountsTicketsUntilReleased) {
  InFlight in_flight;
  EXPECT_EQ(in_flight.count(), 0);
  {
    InFlight::Ticket a = in_flight.Enter();
    InFlight::Ticket b = in_flight.Enter();
    EXPECT_EQ(in_flight.count(), 2);
    InFlight::Ticket moved = std::move(a);
    EXPECT_EQ(in_flight.count(), 2);  // a move is still one ticket
    b = std::move(moved);             // b's own ticket is released
    EXPECT_EQ(in_flight.count(), 1);
  }
  EXPECT_EQ(in_flight.count(), 0);
  in_flight.AwaitNone();  // nothing in flight: returns at once
}

TEST(InFlightTest, AwaitNoneReturnsOnlyAfterTheLastRelease) {
  InFlight in_flight;
  auto ticket = std::make_unique<InFlight::Ticket>(in_flight.Enter());
  std::atomic<bool> released{false};
  absl::Notification waiting;
  std::thread releaser([&] {
    waiting.WaitForNotification();
    released = true;
    ticket.reset();
  });
  waiting.Notify();
  in_flight.AwaitNone();
  EXPECT_TRUE(released.load());
  releaser.join();
}

}  // namespace
}  // namespace proxy
}  // namespace berth
