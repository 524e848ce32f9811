#include "plugins/sdk/config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace berth::plugin {
namespace {

using google::protobuf::Value;

bool IsAbsent(const Value& value) {
  return value.kind_case() == Value::KIND_NOT_SET ||
         value.kind_case() == Value::kNullValue;
}

absl::Status CheckType(const Value& value, v1::ConfigFieldType type,
                       const std::string& name) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be ", what));
  };
  switch (type) {
    case v1::CONFIG_FIELD_TYPE_STRING:
      if (value.kind_case() != Value::kStringValue) return bad("a string");
      return absl::OkStatus();
    case v1::CONFIG_FIELD_TYPE_INTEGER:
      if (value.kind_case() != Value::kNumberValue ||
          value.number_value() != std::trunc(value.number_value()) ||
          std::fabs(value.number_value()) > 9007199254740992.0) {
        return bad("a whole number");
      }
      return absl::OkStatus();
    case v1::CONFIG_FIELD_TYPE_NUMBER:
      if (value.kind_case() != Value::kNumberValue) return bad("a number");
      return absl::OkStatus();
    case v1::CONFIG_FIELD_TYPE_BOOL:
      if (value.kind_case() != Value::kBoolValue) return bad("true or false");
      return absl::OkStatus();
    case v1::CONFIG_FIELD_TYPE_STRING_LIST:
      if (value.kind_case() != Value::kListValue) {
        return bad("a list of strings");
      }
      for (const Value& item : value.list_value().values()) {
        if (item.kind_case() != Value::kStringValue) {
          return bad("a list of strings");
        }
      }
      return absl::OkStatus();
    case v1::CONFIG_FIELD_TYPE_STRING_MAP:
      if (value.kind_case() != Value::kStructValue) {
        return bad("an object of strings");
      }
      for (const auto& [key, item] : value.struct_value().fields()) {
        if (item.kind_case() != Value::kStringValue) {
          return bad(
              absl::StrCat("an object of strings (", key, " is not a string)"));
        }
      }
      return absl::OkStatus();
    case v1::CONFIG_FIELD_TYPE_DURATION: {
      if (value.kind_case() != Value::kStringValue) {
        return bad("a duration string such as \"1.5s\"");
      }
      absl::StatusOr<absl::Duration> duration =
          ParseConfigDuration(value.string_value());
      if (!duration.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": ", duration.status().message()));
      }
      return absl::OkStatus();
    }
    case v1::CONFIG_FIELD_TYPE_ANY:
    case v1::CONFIG_FIELD_TYPE_UNSPECIFIED:
    default:
      return absl::OkStatus();
  }
}

}  // namespace

absl::Status ValidateConfig(const google::protobuf::Struct& config,
                            const v1::ConfigSchema& schema,
                            absl::string_view where) {
  absl::flat_hash_set<std::string> known;
  std::vector<std::string> known_names;
  for (const v1::ConfigField& field : schema.fields()) {
    known.insert(field.name());
    known_names.push_back(field.name());
    const std::string name = absl::StrCat(where, ".", field.name());
    auto it = config.fields().find(field.name());
    if (it == config.fields().end() || IsAbsent(it->second)) {
      if (field.required()) {
        return absl::InvalidArgumentError(absl::StrCat(name, " is required"));
      }
      continue;
    }
    if (absl::Status typed = CheckType(it->second, field.type(), name);
        !typed.ok()) {
      return typed;
    }
  }
  // Sorted, so that the message does not depend on the map's order.
  std::vector<std::string> unknown;
  for (const auto& [key, value] : config.fields()) {
    if (!known.contains(key)) unknown.push_back(key);
  }
  if (!unknown.empty()) {
    std::sort(unknown.begin(), unknown.end());
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".", unknown.front(), " is not a known field (known: ",
        known_names.empty() ? "none" : absl::StrJoin(known_names, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> ParseConfigDuration(absl::string_view text) {
  absl::Duration duration;
  if (!absl::ParseDuration(text, &duration) ||
      duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a duration (e.g. \"1.5s\", \"300ms\", \"2m\")"));
  }
  if (duration < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration \"", text, "\" is negative"));
  }
  return duration;
}

void AddConfigField(v1::ConfigSchema* schema, absl::string_view name,
                    v1::ConfigFieldType type, bool required,
                    absl::string_view description) {
  v1::ConfigField* field = schema->add_fields();
  field->set_name(std::string(name));
  field->set_type(type);
  field->set_required(required);
  field->set_description(std::string(description));
}

}  // namespace berth::plugin
