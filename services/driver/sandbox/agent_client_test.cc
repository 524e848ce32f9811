#include "services/driver/sandbox/agent_client.h"

#include <signal.h>

#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::sandbox_driver {
namespace {

using ::berth::testing::ShortTempDir;
using ::testing::HasSubstr;

TEST(FromProcessExitTest, KeepsCodeSignalAndTime) {
  agent::v1::ProcessExit exit;
  exit.set_exit_code(3);
  exit.set_signal(SIGTERM);
  const absl::Time at = absl::FromUnixSeconds(1700000000);
  *exit.mutable_exited_at() = base::ToProtoTimestamp(at);

  const driver::v1::ExitResult result = FromProcessExit(exit);

  EXPECT_EQ(result.exit_code(), 3);
  EXPECT_EQ(result.signal(), SIGTERM);
  EXPECT_EQ(base::FromProtoTimestamp(result.exited_at()), at);
}

TEST(FromProcessExitTest, WithoutATimeNow) {
  agent::v1::ProcessExit exit;
  exit.set_exit_code(1);
  const absl::Time before = absl::Now();

  const driver::v1::ExitResult result = FromProcessExit(exit);

  EXPECT_EQ(result.exit_code(), 1);
  EXPECT_GE(base::FromProtoTimestamp(result.exited_at()), before);
  EXPECT_LE(base::FromProtoTimestamp(result.exited_at()), absl::Now());
}

TEST(AgentClientTest, NoAgentOnTheSocketIsUnavailableNamingIt) {
  ShortTempDir dir;
  const std::string socket = dir.Join("agent.sock");

  absl::StatusOr<agent::v1::ProcessExit> exit =
      AgentWait(socket, "task-1", "process-1", absl::Seconds(1));
  EXPECT_EQ(exit.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(exit.status().message(), HasSubstr(socket));

  absl::Status signalled =
      AgentSignal(socket, "task-1", "process-1", SIGTERM, absl::Seconds(1));
  EXPECT_EQ(signalled.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(signalled.message(), HasSubstr(socket));

  // Best effort: nothing to ask, nothing to fail.
  AgentDestroySandbox(socket, "task-1", absl::Milliseconds(500),
                      absl::Seconds(1));
}

}  // namespace
}  // namespace berth::sandbox_driver
