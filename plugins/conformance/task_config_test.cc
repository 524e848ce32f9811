#include "plugins/conformance/task_config.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace berth::conformance {
namespace {

using ::testing::HasSubstr;

google::protobuf::Struct Json(const std::string& json) {
  google::protobuf::Struct config;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &config).ok())
      << json;
  return config;
}

// `config` equals the JSON object `json` (map order aside).
::testing::AssertionResult Is(const google::protobuf::Struct& config,
                              const std::string& json) {
  if (google::protobuf::util::MessageDifferencer::Equals(config, Json(json))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << ToJson(config) << " is not " << json;
}

TEST(ParseTaskConfigTest, EmptyIsTheEmptyObject) {
  absl::StatusOr<google::protobuf::Struct> config = ParseTaskConfig("");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->fields().empty());
  config = ParseTaskConfig("  {} ");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->fields().empty());
}

TEST(ParseTaskConfigTest, KeepsDriverSpecificFields) {
  absl::StatusOr<google::protobuf::Struct> config =
      ParseTaskConfig(R"({"image": "debian:12", "resources": {"cpu": 2}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->fields().at("image").string_value(), "debian:12");
  EXPECT_EQ(config->fields()
                .at("resources")
                .struct_value()
                .fields()
                .at("cpu")
                .number_value(),
            2);
}

TEST(ParseTaskConfigTest, RefusesWhatIsNotAnObject) {
  for (const char* bad : {"[1, 2]", "\"text\"", "3", "{not json", "{\"a\":"}) {
    const absl::Status status = ParseTaskConfig(bad).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << bad << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("--task-config")) << bad;
  }
}

TEST(MergeCommandTest, AddsCommandAndArgsToTheBase) {
  const google::protobuf::Struct merged = MergeCommand(
      Json(R"({"image": "debian:12"})"), "/bin/sh", {"-c", "exit 3"});
  EXPECT_TRUE(Is(
      merged,
      R"({"args":["-c","exit 3"],"command":"/bin/sh","image":"debian:12"})"));
}

TEST(MergeCommandTest, ReplacesCommandAndArgsOfTheBase) {
  const google::protobuf::Struct merged = MergeCommand(
      Json(R"({"command": "/bin/false", "args": ["x", "y", "z"], "n": 1})"),
      "/bin/sh", {"-c", "true"});
  EXPECT_TRUE(
      Is(merged, R"({"args":["-c","true"],"command":"/bin/sh","n":1})"));
}

TEST(MergeCommandTest, EmptyArgsAreAnEmptyList) {
  EXPECT_TRUE(
      Is(MergeCommand({}, "cat", {}), R"({"args":[],"command":"cat"})"));
}

TEST(WithoutCommandTest, DropsTheCommand) {
  const google::protobuf::Struct config = WithoutCommand(
      Json(R"({"command": "/bin/sh", "image": "x"})"), {"-c", "exit 0"});
  EXPECT_TRUE(Is(config, R"({"args":["-c","exit 0"],"image":"x"})"));
}

}  // namespace
}  // namespace berth::conformance
