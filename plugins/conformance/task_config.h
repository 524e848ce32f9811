// The driver configuration of the suite's tasks: the --task-config JSON object
// (driver-specific fields: resources, images, ...) with "command" and "args"
// merged in (plugins/conformance/CONVENTIONS.md).

#ifndef PLUGINS_CONFORMANCE_TASK_CONFIG_H_
#define PLUGINS_CONFORMANCE_TASK_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"

namespace berth::conformance {

// Parses the --task-config value: a JSON object. INVALID_ARGUMENT naming
// --task-config when it is not valid JSON or not an object. An empty string
// is the empty object.
absl::StatusOr<google::protobuf::Struct> ParseTaskConfig(
    absl::string_view json);

// `base` with "command" set to `command` and "args" to `args` (replacing any
// the base has).
google::protobuf::Struct MergeCommand(const google::protobuf::Struct& base,
                                      absl::string_view command,
                                      const std::vector<std::string>& args);

// `base` with "args" set to `args` and no "command": what a driver must
// refuse with INVALID_ARGUMENT naming "command".
google::protobuf::Struct WithoutCommand(const google::protobuf::Struct& base,
                                        const std::vector<std::string>& args);

// The config as compact JSON, for messages.
std::string ToJson(const google::protobuf::Struct& config);

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_TASK_CONFIG_H_
