#include "plugins/conformance/suite.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/driver/v1/driver.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/conformance/context.h"

namespace berth::conformance {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(const std::vector<const Check*>& checks) {
  std::vector<std::string> names;
  for (const Check* check : checks) names.push_back(check->name);
  return names;
}

TEST(AllChecksTest, NamesAreUniqueAndPlain) {
  std::set<std::string> seen;
  for (const Check& check : AllChecks()) {
    const std::string name = check.name;
    EXPECT_TRUE(seen.insert(name).second) << "twice: " << name;
    EXPECT_FALSE(name.empty());
    for (char c : name) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
          << name;
    }
    EXPECT_NE(std::string(check.description), "") << name;
    EXPECT_NE(check.run, nullptr) << name;
  }
  // At least what the issue asks for.
  for (const char* name : {"cookie_refused",
                           "health",
                           "plugin_info",
                           "api_versions",
                           "fingerprint",
                           "start_wait_inspect",
                           "stop_signal",
                           "stop_timeout_kill",
                           "destroy",
                           "exit_code",
                           "exit_signal",
                           "wait_twice",
                           "signal_task",
                           "task_events",
                           "task_stats",
                           "task_stats_plugin_killed",
                           "exec_task",
                           "exec_streaming_output",
                           "exec_streaming_stdin",
                           "exec_streaming_100mb",
                           "exec_streaming_tty",
                           "attach_tty",
                           "attach_stdin",
                           "recover_task",
                           "unknown_task_not_found",
                           "missing_command"}) {
    EXPECT_TRUE(seen.count(name)) << "missing check " << name;
  }
}

TEST(AllChecksTest, OnlyTheCookieCheckRunsWithoutThePlugin) {
  for (const Check& check : AllChecks()) {
    EXPECT_EQ(check.needs_plugin, std::string(check.name) != "cookie_refused")
        << check.name;
  }
}

// CONVENTIONS.md is the contract: every check is described there.
TEST(AllChecksTest, ConventionsNameEveryCheck) {
  std::ifstream file("plugins/conformance/CONVENTIONS.md");
  ASSERT_TRUE(file.good()) << "CONVENTIONS.md not in the runfiles";
  std::stringstream text;
  text << file.rdbuf();
  for (const Check& check : AllChecks()) {
    EXPECT_THAT(text.str(), HasSubstr(absl::StrCat("`", check.name, "`")))
        << "CONVENTIONS.md does not describe the check " << check.name;
  }
}

TEST(SelectChecksTest, BySubstring) {
  EXPECT_EQ(SelectChecks("").size(), AllChecks().size());
  EXPECT_THAT(Names(SelectChecks("exec_streaming")),
              ElementsAre("exec_streaming_output", "exec_streaming_stdin",
                          "exec_streaming_100mb", "exec_streaming_tty"));
  EXPECT_THAT(Names(SelectChecks("plugin_info")), ElementsAre("plugin_info"));
  EXPECT_TRUE(SelectChecks("nothing like it").empty());
}

TEST(ResultOfTest, Pass) {
  const CheckResult result =
      ResultOf("health", absl::OkStatus(), absl::OkStatus());
  EXPECT_EQ(FormatResult(result), "PASS health");
}

TEST(ResultOfTest, SkipCarriesItsReason) {
  const CheckResult result =
      ResultOf("exec_streaming_tty",
               SkipCheck("driver does not report exec_tty"), absl::OkStatus());
  EXPECT_EQ(FormatResult(result),
            "SKIP exec_streaming_tty: driver does not report exec_tty");
}

TEST(ResultOfTest, MismatchIsItsMessage) {
  const CheckResult result = ResultOf(
      "exit_code", Mismatch("WaitTask gave exit_code 4"), absl::OkStatus());
  EXPECT_EQ(FormatResult(result), "FAIL exit_code: WaitTask gave exit_code 4");
}

TEST(ResultOfTest, AnErrorKeepsItsCode) {
  const CheckResult result = ResultOf(
      "destroy", absl::NotFoundError("task x not found"), absl::OkStatus());
  EXPECT_EQ(FormatResult(result), "FAIL destroy: NOT_FOUND: task x not found");
}

TEST(ResultOfTest, AFailedCleanUpFailsTheCheck) {
  EXPECT_EQ(FormatResult(ResultOf("a", absl::OkStatus(),
                                  absl::InternalError("cannot destroy"))),
            "FAIL a: passed, but cleaning up its tasks failed: INTERNAL: "
            "cannot destroy");
  EXPECT_EQ(FormatResult(ResultOf("a", SkipCheck("why"),
                                  absl::InternalError("cannot destroy"))),
            "FAIL a: skipped, but cleaning up its tasks failed: INTERNAL: "
            "cannot destroy");
  EXPECT_EQ(FormatResult(ResultOf("a", Mismatch("wrong"),
                                  absl::InternalError("cannot destroy"))),
            "FAIL a: wrong; cleaning up its tasks failed too: INTERNAL: "
            "cannot destroy");
}

TEST(SkipCheckTest, IsToldApart) {
  EXPECT_TRUE(IsSkip(SkipCheck("why")));
  EXPECT_FALSE(IsSkip(absl::CancelledError("why")));
  EXPECT_FALSE(IsSkip(absl::OkStatus()));
}

TEST(CapabilityTest, NamesAndFields) {
  driver::v1::DriverCapabilities capabilities;
  const std::vector<std::pair<Capability, std::string>> all = {
      {Capability::kSendSignals, "send_signals"},
      {Capability::kExec, "exec"},
      {Capability::kExecStreaming, "exec_streaming"},
      {Capability::kExecTty, "exec_tty"},
      {Capability::kRecover, "recover"},
      {Capability::kStats, "stats"},
      {Capability::kAttach, "attach"},
  };
  for (const auto& [capability, name] : all) {
    EXPECT_EQ(CapabilityName(capability), name);
    EXPECT_FALSE(HasCapability(capabilities, capability)) << name;
    // The name is the field's: setting that field grants it.
    driver::v1::DriverCapabilities with;
    const auto* field =
        driver::v1::DriverCapabilities::descriptor()->FindFieldByName(name);
    ASSERT_NE(field, nullptr) << name;
    with.GetReflection()->SetBool(&with, field, true);
    EXPECT_TRUE(HasCapability(with, capability)) << name;
  }
}

}  // namespace
}  // namespace berth::conformance
