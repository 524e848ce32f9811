#include "plugins/conformance/subprocess.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::conformance {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<ProcessResult> Shell(const std::string& script,
                                    absl::Duration timeout = absl::Seconds(30),
                                    std::vector<std::string> env = {
                                        "PATH=/usr/bin:/bin"}) {
  return RunProcess("/bin/sh", {"-c", script}, env, timeout);
}

TEST(RunProcessTest, CapturesOutputAndExitCode) {
  absl::StatusOr<ProcessResult> result =
      Shell("echo out; echo err >&2; exit 3");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->exited);
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_FALSE(result->timed_out);
  EXPECT_EQ(result->stdout_data, "out\n");
  EXPECT_EQ(result->stderr_data, "err\n");
  EXPECT_EQ(result->Describe(), "exited with code 3");
}

TEST(RunProcessTest, ReportsASignal) {
  absl::StatusOr<ProcessResult> result = Shell("kill -TERM $$");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->exited);
  EXPECT_EQ(result->signal, 15);
  EXPECT_THAT(result->Describe(), HasSubstr("killed by signal 15"));
}

TEST(RunProcessTest, UsesExactlyTheEnvironmentGiven) {
  absl::StatusOr<ProcessResult> result =
      Shell("echo \"$FOO-$HOME\"", absl::Seconds(30), {"FOO=bar"});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stdout_data, "bar-\n");
}

TEST(RunProcessTest, StdinIsDevNull) {
  absl::StatusOr<ProcessResult> result = Shell("cat; echo done");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stdout_data, "done\n");
}

TEST(RunProcessTest, KillsAtTheDeadline) {
  absl::StatusOr<ProcessResult> result =
      Shell("echo started; sleep 30 & wait", absl::Milliseconds(300));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->timed_out);
  EXPECT_FALSE(result->exited);
  EXPECT_EQ(result->stdout_data, "started\n");
  EXPECT_THAT(result->Describe(), HasSubstr("did not exit"));
  // The background sleep, in the same process group, was killed too (else
  // it would hold the output pipe, and the call would wait for it).
}

TEST(RunProcessTest, NamesABinaryThatCannotRun) {
  const absl::Status status =
      RunProcess("/nonexistent/driver", {}, {}, absl::Seconds(5)).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/driver"));
}

TEST(EnvironmentWithoutTest, DropsThePrefix) {
  setenv("BERTH_SUBPROCESS_TEST_A", "1", 1);
  setenv("SUBPROCESS_TEST_KEEP", "2", 1);
  const std::vector<std::string> env =
      EnvironmentWithout("BERTH_SUBPROCESS_TEST_");
  EXPECT_THAT(env, Not(Contains("BERTH_SUBPROCESS_TEST_A=1")));
  EXPECT_THAT(env, Contains("SUBPROCESS_TEST_KEEP=2"));
}

}  // namespace
}  // namespace berth::conformance
