#include "plugins/sdk/signals.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::plugin {
namespace {

TEST(ParseSignalTest, ByNameOrNumber) {
  EXPECT_EQ(ParseSignal("SIGTERM").value(), SIGTERM);
  EXPECT_EQ(ParseSignal("TERM").value(), SIGTERM);
  EXPECT_EQ(ParseSignal("sigusr1").value(), SIGUSR1);
  EXPECT_EQ(ParseSignal("9").value(), SIGKILL);
  EXPECT_EQ(ParseSignal(" HUP ").value(), SIGHUP);
}

TEST(ParseSignalTest, RefusesNamingTheField) {
  absl::StatusOr<int> unknown = ParseSignal("SIGFOO", "stop_signal");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "stop_signal: unknown signal \"SIGFOO\"");
  EXPECT_FALSE(ParseSignal("0").ok());
  EXPECT_FALSE(ParseSignal("1000").ok());
  EXPECT_FALSE(ParseSignal("").ok());
}

TEST(SignalNameTest, NamesSignals) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGRTMIN + 1), absl::StrCat("SIG", SIGRTMIN + 1));
}

}  // namespace
}  // namespace berth::plugin
