#include "plugins/sdk/config.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace berth::plugin {
namespace {

using ::testing::HasSubstr;

google::protobuf::Struct Json(const std::string& json) {
  google::protobuf::Struct value;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &value).ok());
  return value;
}

v1::ConfigSchema Schema() {
  v1::ConfigSchema schema;
  auto add = [&](const std::string& name, v1::ConfigFieldType type,
                 bool required) {
    v1::ConfigField* field = schema.add_fields();
    field->set_name(name);
    field->set_type(type);
    field->set_required(required);
  };
  add("command", v1::CONFIG_FIELD_TYPE_STRING, true);
  add("args", v1::CONFIG_FIELD_TYPE_STRING_LIST, false);
  add("count", v1::CONFIG_FIELD_TYPE_INTEGER, false);
  add("ratio", v1::CONFIG_FIELD_TYPE_NUMBER, false);
  add("on", v1::CONFIG_FIELD_TYPE_BOOL, false);
  add("labels", v1::CONFIG_FIELD_TYPE_STRING_MAP, false);
  add("wait", v1::CONFIG_FIELD_TYPE_DURATION, false);
  add("extra", v1::CONFIG_FIELD_TYPE_ANY, false);
  return schema;
}

absl::Status Validate(const std::string& json) {
  return ValidateConfig(Json(json), Schema(), "cfg");
}

TEST(ValidateConfigTest, AcceptsAGoodConfig) {
  EXPECT_TRUE(Validate(R"({"command": "/bin/sh", "args": ["-c", "x"],
      "count": 3, "ratio": 0.5, "on": true, "labels": {"a": "b"},
      "wait": "1.5s", "extra": {"any": [1, 2]}})")
                  .ok());
  EXPECT_TRUE(Validate(R"({"command": "x", "count": null})").ok());
}

TEST(ValidateConfigTest, NamesTheFieldAtFault) {
  EXPECT_EQ(Validate(R"({"args": []})").message(), "cfg.command is required");
  EXPECT_EQ(Validate(R"({"command": null})").message(),
            "cfg.command is required");
  EXPECT_EQ(Validate(R"({"command": "x", "args": ["a", 1]})").message(),
            "cfg.args must be a list of strings");
  EXPECT_EQ(Validate(R"({"command": "x", "count": 1.5})").message(),
            "cfg.count must be a whole number");
  EXPECT_EQ(Validate(R"({"command": "x", "ratio": "1"})").message(),
            "cfg.ratio must be a number");
  EXPECT_EQ(Validate(R"({"command": "x", "on": 1})").message(),
            "cfg.on must be true or false");
  EXPECT_THAT(Validate(R"({"command": "x", "labels": {"a": 1}})").message(),
              HasSubstr("cfg.labels must be an object of strings"));
  EXPECT_THAT(Validate(R"({"command": "x", "wait": "soon"})").message(),
              HasSubstr("cfg.wait: \"soon\" is not a duration"));
  EXPECT_THAT(Validate(R"({"command": "x", "zeta": 1, "alpha": 2})").message(),
              HasSubstr("cfg.alpha is not a known field (known: command"));
  EXPECT_EQ(Validate(R"({"args": []})").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ValidateConfigTest, EmptySchemaRefusesEveryField) {
  absl::Status status = ValidateConfig(Json(R"({"x": 1})"), {}, "config");
  EXPECT_EQ(status.message(), "config.x is not a known field (known: none)");
  EXPECT_TRUE(ValidateConfig(Json("{}"), {}, "config").ok());
}

TEST(ParseConfigDurationTest, ParsesAndRefuses) {
  EXPECT_EQ(ParseConfigDuration("1.5s").value(), absl::Milliseconds(1500));
  EXPECT_EQ(ParseConfigDuration("2m").value(), absl::Minutes(2));
  EXPECT_FALSE(ParseConfigDuration("-1s").ok());
  EXPECT_FALSE(ParseConfigDuration("inf").ok());
  EXPECT_FALSE(ParseConfigDuration("2").ok());
}

TEST(AddConfigFieldTest, AppendsAFieldThatValidateConfigUses) {
  v1::ConfigSchema schema;
  AddConfigField(&schema, "command", v1::CONFIG_FIELD_TYPE_STRING, true,
                 "The program.");
  ASSERT_EQ(schema.fields_size(), 1);
  EXPECT_EQ(schema.fields(0).name(), "command");
  EXPECT_EQ(schema.fields(0).type(), v1::CONFIG_FIELD_TYPE_STRING);
  EXPECT_TRUE(schema.fields(0).required());
  EXPECT_EQ(schema.fields(0).description(), "The program.");
  absl::Status status =
      ValidateConfig(google::protobuf::Struct(), schema, "task.driver_config");
  EXPECT_EQ(status.message(), "task.driver_config.command is required");
}

}  // namespace
}  // namespace berth::plugin
