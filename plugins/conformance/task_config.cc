#include "plugins/conformance/task_config.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace berth::conformance {
namespace {

void SetArgs(google::protobuf::Struct& config,
             const std::vector<std::string>& args) {
  google::protobuf::ListValue* list =
      (*config.mutable_fields())["args"].mutable_list_value();
  list->clear_values();
  for (const std::string& arg : args) list->add_values()->set_string_value(arg);
}

}  // namespace

absl::StatusOr<google::protobuf::Struct> ParseTaskConfig(
    absl::string_view json) {
  google::protobuf::Struct config;
  if (absl::StripAsciiWhitespace(json).empty()) return config;
  // Parse as a Value first: Struct's own parser reports a non-object
  // (e.g. `[1]`) less clearly.
  google::protobuf::Value value;
  const auto status =
      google::protobuf::util::JsonStringToMessage(std::string(json), &value);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task-config: not valid JSON (",
                     status.message().ToString(), "): ", json));
  }
  if (!value.has_struct_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task-config: must be a JSON object, got: ", json));
  }
  return value.struct_value();
}

google::protobuf::Struct MergeCommand(const google::protobuf::Struct& base,
                                      absl::string_view command,
                                      const std::vector<std::string>& args) {
  google::protobuf::Struct config = base;
  (*config.mutable_fields())["command"].set_string_value(std::string(command));
  SetArgs(config, args);
  return config;
}

google::protobuf::Struct WithoutCommand(const google::protobuf::Struct& base,
                                        const std::vector<std::string>& args) {
  google::protobuf::Struct config = base;
  config.mutable_fields()->erase("command");
  SetArgs(config, args);
  return config;
}

std::string ToJson(const google::protobuf::Struct& config) {
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(config, &json).ok()) {
    return "(not representable as JSON)";
  }
  return json;
}

}  // namespace berth::conformance
