#include "base/subprocess.h"

#include <signal.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::base {
namespace {

using ::testing::HasSubstr;

SubprocessOptions Shell(const std::string& script) {
  SubprocessOptions options;
  options.args = {"-c", script};
  options.env = {"PATH=/usr/bin:/bin", "ONLY=this"};
  return options;
}

TEST(RunSubprocessTest, OutputExitCodeAndExactlyItsEnvironment) {
  absl::StatusOr<SubprocessResult> result = RunSubprocess(
      "/bin/sh", Shell("echo \"out $ONLY ${HOME:-nohome}\"; echo err >&2; "
                       "exit 3"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->exited());
  EXPECT_EQ(result->exit_code(), 3);
  EXPECT_EQ(result->stdout_data, "out this nohome\n");
  EXPECT_EQ(result->stderr_data, "err\n");
  EXPECT_EQ(result->Describe(), "exited with code 3");
}

TEST(RunSubprocessTest, StdinData) {
  SubprocessOptions options = Shell("cat");
  options.stdin_data = "{\"cniVersion\": \"1.0.0\"}";
  absl::StatusOr<SubprocessResult> result = RunSubprocess("/bin/sh", options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stdout_data, options.stdin_data);
}

TEST(RunSubprocessTest, WithoutStdinDataStdinIsDevNull) {
  absl::StatusOr<SubprocessResult> result =
      RunSubprocess("/bin/sh", Shell("cat; readlink /proc/self/fd/0"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stdout_data, "/dev/null\n");
}

TEST(RunSubprocessTest, StdinDataLargerThanAPipeHolds) {
  SubprocessOptions options = Shell("wc -c");
  options.stdin_data = std::string(300 * 1000, 'x');
  absl::StatusOr<SubprocessResult> result = RunSubprocess("/bin/sh", options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stdout_data, "300000\n");
}

TEST(RunSubprocessTest, KilledBySignal) {
  absl::StatusOr<SubprocessResult> result =
      RunSubprocess("/bin/sh", Shell("kill -SEGV $$"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->exited());
  EXPECT_EQ(result->signal(), SIGSEGV);
  EXPECT_THAT(result->Describe(), HasSubstr("killed by signal 11"));
}

TEST(RunSubprocessTest, TheDeadlineKillsItsProcessGroup) {
  SubprocessOptions options = Shell("sleep 300 & sleep 300");
  options.timeout = absl::Milliseconds(300);
  absl::StatusOr<SubprocessResult> result = RunSubprocess("/bin/sh", options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->timed_out);
  EXPECT_EQ(result->Describe(), "did not exit within the deadline (killed)");
}

TEST(RunSubprocessTest, WhatItLeftInItsGroupGoesWithIt) {
  // The background sleep holds stdout; it is killed once the shell exited,
  // so the call returns with the shell's output long before the deadline
  // would have ended it (the deadline is never reached: timed_out false).
  SubprocessOptions options = Shell("sleep 300 & echo started");
  options.timeout = absl::Seconds(120);
  absl::StatusOr<SubprocessResult> result = RunSubprocess("/bin/sh", options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->timed_out);
  EXPECT_EQ(result->stdout_data, "started\n");
}

TEST(RunSubprocessTest, OutputBeyondTheBoundIsDropped) {
  SubprocessOptions options = Shell("head -c 100000 /dev/zero");
  options.max_stdout = 1000;
  absl::StatusOr<SubprocessResult> result = RunSubprocess("/bin/sh", options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stdout_data.size(), 1000u);
  EXPECT_TRUE(result->stdout_truncated);
  EXPECT_FALSE(result->stderr_truncated);
}

TEST(RunSubprocessTest, AMissingBinaryIsNamed) {
  absl::StatusOr<SubprocessResult> result =
      RunSubprocess("/nonexistent/plugin", Shell("true"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(),
              HasSubstr("cannot run /nonexistent/plugin"));
}

TEST(EnvironmentWithoutTest, DropsThePrefix) {
  setenv("BERTH_BASE_TEST_DROP", "x", 1);
  setenv("BERTH_BASE_TEST_KEEP", "y", 1);
  const std::vector<std::string> env = EnvironmentWithout("BERTH_BASE_TEST_D");
  EXPECT_THAT(env, ::testing::Contains("BERTH_BASE_TEST_KEEP=y"));
  EXPECT_THAT(env,
              ::testing::Not(::testing::Contains("BERTH_BASE_TEST_DROP=x")));
}

}  // namespace
}  // namespace berth::base
