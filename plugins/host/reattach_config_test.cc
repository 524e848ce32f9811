#include "plugins/host/reattach_config.h"

#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/host/process_util.h"

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

TEST(ProcStatTest, ParsesACommandWithSpacesAndParentheses) {
  absl::StatusOr<internal::ProcStat> stat = internal::ParseProcStat(
      "123 (a b) c)) S 1 123 123 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
      "987654 1000 200 18446744073709551615");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->start_time, 987654u);
}

TEST(ProcStatTest, RefusesATruncatedLine) {
  EXPECT_FALSE(internal::ParseProcStat("123 (x) S 1 2").ok());
  EXPECT_FALSE(internal::ParseProcStat("garbage").ok());
}

TEST(ProcStatTest, ReadsThisProcess) {
  absl::StatusOr<internal::ProcStat> stat = internal::ReadProcStat(getpid());
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->state, 'R');
  EXPECT_GT(stat->start_time, 0u);
}

TEST(ProcStatTest, NoSuchProcessIsNotFound) {
  // pid_max is at most 2^22.
  EXPECT_EQ(internal::ReadProcStat(1 << 23).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace berth::plugin::host
