#include "plugins/host/reattach_config.h"

#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::plugin::host {
namespace {

using ::testing::HasSubstr;

ReattachConfig Sample() {
  ReattachConfig config;
  config.name = "exec";
  config.socket_path = "/run/berth/plugins/exec.sock";
  config.pid = 4242;
  config.start_time = 18446744073709551615ull;  // more than a double holds
  return config;
}

TEST(ReattachConfigTest, RoundTrips) {
  const ReattachConfig config = Sample();
  const std::string text = config.Serialize();
  EXPECT_THAT(text, HasSubstr("\"name\":\"exec\""));
  absl::StatusOr<ReattachConfig> parsed = ReattachConfig::Parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, config);
}

TEST(ReattachConfigTest, RoundTripsAwkwardStrings) {
  ReattachConfig config = Sample();
  config.name = "we\"ird\\name\n\x01\xc3\xa9";
  config.socket_path = "/run/berth/plugins/a b\"c.sock";
  absl::StatusOr<ReattachConfig> parsed =
      ReattachConfig::Parse(config.Serialize());
  ASSERT_TRUE(parsed.ok()) << parsed.status() << " " << config.Serialize();
  EXPECT_EQ(*parsed, config);
}

TEST(ReattachConfigTest, ReadsAnyJsonSpellingOfIt) {
  absl::StatusOr<ReattachConfig> parsed = ReattachConfig::Parse(
      " { \"startTime\" : \"7\", \"pid\": 3, \"name\": \"\\u00e9x\\/\", "
      "\"socketPath\": \"/s.sock\", \"version\": 1 } ");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->name, "\xc3\xa9x/");
  EXPECT_EQ(parsed->pid, 3);
  EXPECT_EQ(parsed->start_time, 7u);
}

TEST(ReattachConfigTest, RefusesTrailingGarbageAndDuplicateKeys) {
  const std::string text = Sample().Serialize();
  EXPECT_FALSE(ReattachConfig::Parse(text + "x").ok());
  EXPECT_FALSE(ReattachConfig::Parse(
                   R"({"version":1,"version":1,"name":"a","socketPath":"/s",)"
                   R"("pid":3,"startTime":"5"})")
                   .ok());
}

TEST(ReattachConfigTest, RefusesTextThatIsNotJson) {
  absl::StatusOr<ReattachConfig> parsed = ReattachConfig::Parse("pid=3");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("\"pid=3\""));
}

TEST(ReattachConfigTest, NamesAMissingField) {
  absl::StatusOr<ReattachConfig> parsed = ReattachConfig::Parse(
      R"({"version":1,"name":"exec","socketPath":"/s.sock","pid":3})");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("startTime"));
}

TEST(ReattachConfigTest, RefusesAnotherVersion) {
  absl::StatusOr<ReattachConfig> parsed = ReattachConfig::Parse(
      R"({"version":2,"name":"exec","socketPath":"/s.sock","pid":3,)"
      R"("startTime":"5"})");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("version 2"));
}

TEST(ReattachConfigTest, RefusesABadPid) {
  absl::StatusOr<ReattachConfig> parsed = ReattachConfig::Parse(
      R"({"version":1,"name":"exec","socketPath":"/s.sock","pid":-3,)"
      R"("startTime":"5"})");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("pid"));
}

}  // namespace
}  // namespace berth::plugin::host
