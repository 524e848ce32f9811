#include "base/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::base {
namespace {

using ::testing::HasSubstr;

TEST(ParseProcStatTest, CommandNamesWithSpacesAndParentheses) {
  const std::string line =
      "42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
      "123456 1000 100 18446744073709551615";
  absl::StatusOr<ProcStat> stat = ParseProcStat(line);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->parent, 7);
  EXPECT_EQ(stat->pgrp, 42);
  EXPECT_EQ(stat->utime_ticks, 1u);
  EXPECT_EQ(stat->stime_ticks, 2u);
  EXPECT_EQ(stat->start_time, 123456u);
}

TEST(ParseProcStatTest, MalformedLinesAreQuoted) {
  for (const std::string line : {"", "42 no parenthesis", "1 (x) S 1 2",
                                 "1 (x) SS 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 "
                                 "1 9 9"}) {
    absl::StatusOr<ProcStat> stat = ParseProcStat(line);
    EXPECT_EQ(stat.status().code(), absl::StatusCode::kInvalidArgument) << line;
    EXPECT_THAT(stat.status().message(), HasSubstr(line)) << line;
  }
}

TEST(ReadProcStatTest, ThisProcessAndNoSuchProcess) {
  absl::StatusOr<ProcStat> stat = ReadProcStat(getpid());
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->state, 'R');
  EXPECT_EQ(stat->parent, getppid());
  EXPECT_GT(stat->start_time, 0u);
  EXPECT_EQ(ReadProcStat(1 << 23).status().code(), absl::StatusCode::kNotFound);
}

TEST(ProcessIdentityTest, AReapedProcessIsNotAlive) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  absl::StatusOr<ProcessIdentity> identity = ProcessIdentity::Of(child);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->pid, child);
  EXPECT_GT(identity->start_time, 0u);
  EXPECT_TRUE(identity->IsAlive());
  // Same pid, another start time: not this process.
  EXPECT_FALSE((ProcessIdentity{child, identity->start_time + 1}).IsAlive());
  const int pidfd = PidfdOpen(child);
  ASSERT_GE(pidfd, 0);
  ASSERT_EQ(PidfdSendSignal(pidfd, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(pidfd);
  EXPECT_EQ(DescribeWaitStatus(status), "was killed by signal 9 (Killed)");
  EXPECT_FALSE(identity->IsAlive());
  EXPECT_EQ(ProcessIdentity::Of(child).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DescribeWaitStatusTest, ExitCodes) {
  EXPECT_EQ(DescribeWaitStatus(3 << 8), "exited with code 3");
  EXPECT_EQ(DescribeWaitStatus(0), "exited with code 0");
}

TEST(CStringsTest, NullTerminatedPointersIntoTheStrings) {
  std::vector<std::string> strings = {"a", "bc"};
  std::vector<char*> c = CStrings(strings);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], strings[0].data());
  EXPECT_STREQ(c[1], "bc");
  EXPECT_EQ(c[2], nullptr);
}

}  // namespace
}  // namespace berth::base
