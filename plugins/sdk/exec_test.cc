#include "plugins/sdk/exec.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace berth::plugin {
namespace {

TEST(ExecTaskThroughStreamingTest, GathersOutputAndExit) {
  CancelToken cancel;
  absl::Time seen_deadline;
  auto response = ExecTaskThroughStreaming(
      "t1", {"/bin/echo", "hi"}, absl::Seconds(30), cancel,
      [&](const ExecOptions& options, absl::Time deadline) {
        EXPECT_EQ(options.task_id, "t1");
        EXPECT_EQ(options.command,
                  (std::vector<std::string>{"/bin/echo", "hi"}));
        EXPECT_EQ(options.in, nullptr);
        EXPECT_EQ(options.cancel, &cancel);
        seen_deadline = deadline;
        options.out->Write("out ");
        options.out->Write("more");
        options.err->Write("err");
        ExitStatus status;
        status.exit_code = 3;
        return absl::StatusOr<ExitStatus>(status);
      });
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->stdout(), "out more");
  EXPECT_EQ(response->stderr(), "err");
  EXPECT_EQ(response->result().exit_code(), 3);
  EXPECT_TRUE(response->result().has_exited_at());
  EXPECT_GT(seen_deadline, absl::Now());
  EXPECT_LE(seen_deadline, absl::Now() + absl::Seconds(30));
}

TEST(ExecTaskThroughStreamingTest, NoTimeoutIsNoDeadlineAndErrorsPassThrough) {
  CancelToken cancel;
  auto response = ExecTaskThroughStreaming(
      "t1", {"x"}, absl::InfiniteDuration(), cancel,
      [](const ExecOptions&, absl::Time deadline) {
        EXPECT_EQ(deadline, absl::InfiniteFuture());
        return absl::StatusOr<ExitStatus>(
            absl::FailedPreconditionError("task t1 is not running"));
      });
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(response.status().message(), "task t1 is not running");
}

}  // namespace
}  // namespace berth::plugin
