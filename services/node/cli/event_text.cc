#include "services/node/cli/event_text.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/proto_time.h"
#include "services/node/cli/table.h"

namespace berth::cli {

namespace nodepb = ::berth::node::v1;

std::string EventLine(const nodepb::EventsResponse& event,
                      absl::TimeZone zone) {
  const absl::Time when = base::FromProtoTimestamp(event.timestamp());
  const std::string type_name = nodepb::EventType_Name(event.type());
  absl::string_view type_view = type_name;
  absl::ConsumePrefix(&type_view, "EVENT_TYPE_");
  absl::ConsumePrefix(&type_view, "TASK_");
  std::string type = absl::AsciiStrToLower(type_view);
  if (type.empty()) type = absl::StrCat("type ", event.type());
  std::string message = event.message();
  if (event.type() == nodepb::EVENT_TYPE_TASK_HEALTH) {
    auto it = event.annotations().find("health_status");
    if (it != event.annotations().end() && !it->second.empty()) {
      type = absl::StrCat("health_status: ", it->second);
      // The node's message only for what it says beyond the status
      // ("health: unhealthy (2 failed checks ...)" adds the parenthesis).
      absl::string_view rest = message;
      if (absl::StrContains(rest, "health_status") || rest == it->second) {
        rest = "";
      }
      absl::ConsumePrefix(&rest, absl::StrCat("health: ", it->second));
      message = std::string(absl::StripLeadingAsciiWhitespace(rest));
    }
  }
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", when, zone), " ", type, " ",
      event.task_id().empty() ? "-" : ShortId(event.task_id()));
  if (!message.empty()) absl::StrAppend(&line, " ", message);
  return absl::StrCat(line, "\n");
}

}  // namespace berth::cli
