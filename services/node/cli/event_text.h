// One line of `berth events` for a person.

#ifndef SERVICES_NODE_CLI_EVENT_TEXT_H_
#define SERVICES_NODE_CLI_EVENT_TEXT_H_

#include <string>

#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"

namespace berth::cli {

// "2026-11-30T14:56:01.123 exited 95519fa74aef exited with code 2\n": the
// time in `zone`, the type without EVENT_TYPE_ and TASK_ in lower case, the
// short task id ("-" for none) and the node's message. A health event says
// its status as docker's does: "... health_status: healthy 95519fa74aef",
// followed by the node's message when it adds something.
std::string EventLine(const node::v1::EventsResponse& event,
                      absl::TimeZone zone);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_EVENT_TEXT_H_
