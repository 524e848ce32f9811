#include "services/node/cli/event_text.h"

#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

namespace nodepb = ::berth::node::v1;
using ::google::protobuf::util::TimeUtil;

nodepb::EventsResponse Event(nodepb::EventType type, const std::string& task,
                             const std::string& message) {
  nodepb::EventsResponse event;
  *event.mutable_timestamp() =
      TimeUtil::MillisecondsToTimestamp(int64_t{1700000000} * 1000 + 123);
  event.set_type(type);
  event.set_task_id(task);
  event.set_message(message);
  return event;
}

TEST(EventTextTest, TypeIdAndMessage) {
  EXPECT_EQ(
      EventLine(Event(nodepb::EVENT_TYPE_TASK_EXITED,
                      "95519fa74aef00000000000000000000", "exited with code 2"),
                absl::UTCTimeZone()),
      "2023-11-14T22:13:20.123 exited 95519fa74aef exited with code 2\n");
  EXPECT_EQ(EventLine(Event(nodepb::EVENT_TYPE_NODE, "", "exec is up"),
                      absl::UTCTimeZone()),
            "2023-11-14T22:13:20.123 node - exec is up\n");
}

TEST(EventTextTest, HealthSaysItsStatusAsDocker) {
  nodepb::EventsResponse event =
      Event(nodepb::EVENT_TYPE_TASK_HEALTH, "95519fa74aef00000000000000000000",
            "task web health_status: healthy");
  (*event.mutable_annotations())["health_status"] = "healthy";
  // The node's message is left out when it only repeats the status.
  EXPECT_EQ(EventLine(event, absl::UTCTimeZone()),
            "2023-11-14T22:13:20.123 health_status: healthy 95519fa74aef\n");
  event.set_message("task web: check exited with code 1 (3 in a row)");
  (*event.mutable_annotations())["health_status"] = "unhealthy";
  EXPECT_EQ(EventLine(event, absl::UTCTimeZone()),
            "2023-11-14T22:13:20.123 health_status: unhealthy 95519fa74aef "
            "task web: check exited with code 1 (3 in a row)\n");
  // The node's own wording: its "health: STATUS" is not said twice.
  event.set_message("health: healthy");
  (*event.mutable_annotations())["health_status"] = "healthy";
  EXPECT_EQ(EventLine(event, absl::UTCTimeZone()),
            "2023-11-14T22:13:20.123 health_status: healthy 95519fa74aef\n");
  event.set_message(
      "health: unhealthy (1 failed check in a row; the last exited 1)");
  (*event.mutable_annotations())["health_status"] = "unhealthy";
  EXPECT_EQ(EventLine(event, absl::UTCTimeZone()),
            "2023-11-14T22:13:20.123 health_status: unhealthy 95519fa74aef "
            "(1 failed check in a row; the last exited 1)\n");
  event.set_message("task web: check exited with code 1 (3 in a row)");
  // Without the annotation: the type and the message.
  event.clear_annotations();
  EXPECT_EQ(EventLine(event, absl::UTCTimeZone()),
            "2023-11-14T22:13:20.123 health 95519fa74aef "
            "task web: check exited with code 1 (3 in a row)\n");
}

}  // namespace
}  // namespace berth::cli
