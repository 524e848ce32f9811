#include "services/node/cli/table.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

namespace nodepb = ::berth::node::v1;

TEST(TableTest, AlignsColumnsAndDoesNotPadTheLast) {
  Table table({"ID", "NAME", "COMMAND"});
  table.AddRow({"abc", "a-long-name", "sleep 1"});
  table.AddRow({"abcdef", "x", ""});
  EXPECT_EQ(table.Render(),
            "ID       NAME          COMMAND\n"
            "abc      a-long-name   sleep 1\n"
            "abcdef   x\n");
}

TEST(HumanAgoTest, DockerWording) {
  const absl::Time now = absl::FromUnixSeconds(1000000000);
  EXPECT_EQ(HumanAgo(now, now), "Less than a second ago");
  EXPECT_EQ(HumanAgo(now - absl::Seconds(1), now), "1 second ago");
  EXPECT_EQ(HumanAgo(now - absl::Seconds(5), now), "5 seconds ago");
  EXPECT_EQ(HumanAgo(now - absl::Seconds(90), now), "About a minute ago");
  EXPECT_EQ(HumanAgo(now - absl::Minutes(3), now), "3 minutes ago");
  EXPECT_EQ(HumanAgo(now - absl::Minutes(61), now), "About an hour ago");
  EXPECT_EQ(HumanAgo(now - absl::Hours(5), now), "5 hours ago");
  EXPECT_EQ(HumanAgo(now - absl::Hours(24 * 3), now), "3 days ago");
  EXPECT_EQ(HumanAgo(now - absl::Hours(24 * 21), now), "3 weeks ago");
  EXPECT_EQ(HumanAgo(now - absl::Hours(24 * 365 * 3), now), "3 years ago");
}

TEST(HumanBytesTest, BinaryUnits) {
  EXPECT_EQ(HumanBytes(512), "512B");
  EXPECT_EQ(HumanBytes(1536), "1.5KiB");
  EXPECT_EQ(HumanBytes(64 << 20), "64MiB");
  EXPECT_EQ(HumanBytes(0), "0B");
}

TEST(CommandTextTest, QuotesAndCuts) {
  nodepb::TaskSpec spec;
  auto& fields = *spec.mutable_driver_config()->mutable_fields();
  fields["command"].set_string_value("/bin/sh");
  auto* args = fields["args"].mutable_list_value();
  args->add_values()->set_string_value("-c");
  args->add_values()->set_string_value("echo it's");
  EXPECT_EQ(CommandText(spec, 0), "/bin/sh -c 'echo it'\\''s'");
  EXPECT_EQ(CommandText(spec, 10), "/bin/sh -…");
}

TEST(ExitTextTest, CodeSignalOom) {
  nodepb::Task task;
  task.set_state(nodepb::TASK_STATE_RUNNING);
  EXPECT_EQ(ExitText(task), "-");
  task.set_state(nodepb::TASK_STATE_EXITED);
  task.mutable_exit_result()->set_exit_code(3);
  EXPECT_EQ(ExitText(task), "3");
  task.mutable_exit_result()->set_exit_code(0);
  task.mutable_exit_result()->set_signal(9);
  task.mutable_exit_result()->set_oom_killed(true);
  EXPECT_EQ(ExitText(task), "SIGKILL (OOM)");
  EXPECT_EQ(ExitCodeOf(task.exit_result()), 137);
}

TEST(StateTextTest, LowerCaseWithoutPrefix) {
  EXPECT_EQ(StateText(nodepb::TASK_STATE_RUNNING), "running");
  EXPECT_EQ(StateText(nodepb::TASK_STATE_FAILED), "failed");
}

}  // namespace
}  // namespace berth::cli
