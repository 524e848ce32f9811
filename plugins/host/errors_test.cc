#include "plugins/host/errors.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::plugin::host {
namespace {

using ::testing::HasSubstr;

TEST(ErrPluginShutdownTest, IsUnavailableNamingThePlugin) {
  const absl::Status status = ErrPluginShutdown("exec", "pid 42 exited");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("plugin exec is shut down"));
  EXPECT_THAT(status.message(), HasSubstr("pid 42 exited"));
  EXPECT_TRUE(IsPluginShutdown(status));
}

TEST(ErrPluginShutdownTest, OtherErrorsAreNotIt) {
  EXPECT_FALSE(IsPluginShutdown(absl::OkStatus()));
  EXPECT_FALSE(
      IsPluginShutdown(absl::UnavailableError("plugin exec is shut down")));
  absl::Status cancelled = absl::CancelledError("cancelled");
  cancelled.SetPayload(kPluginShutdownTypeUrl, absl::Cord("exec"));
  EXPECT_FALSE(IsPluginShutdown(cancelled));
}

TEST(ErrPluginShutdownTest, SurvivesCopies) {
  absl::Status status = ErrPluginShutdown("exec");
  const absl::Status copy = status;
  EXPECT_TRUE(IsPluginShutdown(copy));
  EXPECT_EQ(copy.message(), "plugin exec is shut down");
}

}  // namespace
}  // namespace berth::plugin::host
