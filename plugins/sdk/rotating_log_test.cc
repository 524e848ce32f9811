#include "plugins/sdk/rotating_log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plugins/sdk/testing.h"

namespace berth::plugin {
namespace {

using ::berth::plugin::testing::PathExists;
using ::berth::plugin::testing::ReadFileOrEmpty;
using ::berth::plugin::testing::ShortTempDir;

TEST(RotatingLogTest, KeepsTheNewestBytesInOrderWithinTheBound) {
  ShortTempDir temp;
  const std::string dir = temp.path();
  RotatingLog log(dir, "stdout", 10, 2);
  ASSERT_TRUE(log.Open());
  const std::string data = "0123456789abcdefghijKLMNOPQRSTuvw";
  // Odd write sizes so that writes straddle file boundaries.
  for (size_t i = 0; i < data.size(); i += 7) {
    ASSERT_TRUE(
        log.Write(data.data() + i, std::min<size_t>(7, data.size() - i)));
  }
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log"), "uvw");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log.1"), "KLMNOPQRST");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log.2"), "abcdefghij");
  EXPECT_FALSE(PathExists(dir + "/stdout.log.3"));
}

TEST(RotatingLogTest, AppendsToAnExistingFileAfterARestart) {
  ShortTempDir temp;
  const std::string dir = temp.path();
  {
    RotatingLog log(dir, "stderr", 8, 1);
    ASSERT_TRUE(log.Open());
    ASSERT_TRUE(log.Write("abcde", 5));
  }
  RotatingLog log(dir, "stderr", 8, 1);
  ASSERT_TRUE(log.Open());
  ASSERT_TRUE(log.Write("fghij", 5));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stderr.log.1"), "abcdefgh");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stderr.log"), "ij");
}

TEST(RotatingLogTest, WithoutRotatedFilesTruncates) {
  ShortTempDir temp;
  const std::string dir = temp.path();
  RotatingLog log(dir, "stdout", 4, 0);
  ASSERT_TRUE(log.Open());
  ASSERT_TRUE(log.Write("abcdef", 6));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log"), "ef");
  EXPECT_FALSE(PathExists(dir + "/stdout.log.1"));
}

TEST(RotatingLogTest, ManyRotatedFilesKeepTheirOrder) {
  ShortTempDir temp;
  const std::string dir = temp.path();
  RotatingLog log(dir, "stdout", 1, 12);
  ASSERT_TRUE(log.Open());
  const std::string data = "abcdefghijklmnopq";  // 17 bytes: 17 files of 1
  ASSERT_TRUE(log.Write(data.data(), data.size()));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log"), "q");
  std::string kept;
  for (int i = 12; i >= 1; --i) {
    kept += ReadFileOrEmpty(absl::StrCat(dir, "/stdout.log.", i));
  }
  kept += ReadFileOrEmpty(dir + "/stdout.log");
  EXPECT_EQ(kept, "efghijklmnopq");
  EXPECT_FALSE(PathExists(dir + "/stdout.log.13"));
}

TEST(RotatingLogTest, WriteOpensTheFileWhenNotOpen) {
  ShortTempDir temp;
  RotatingLog log(temp.path(), "stderr", 100, 1);
  ASSERT_TRUE(log.Write("hello", 5));
  EXPECT_EQ(log.CurrentPath(), temp.path() + "/stderr.log");
  EXPECT_EQ(ReadFileOrEmpty(log.CurrentPath()), "hello");
}

TEST(RotatingLogTest, DefaultsAndPathsOfTheContract) {
  EXPECT_EQ(TaskLogDir("/t/x"), "/t/x/logs");
  const LogLimits defaults = ResolveLogLimits(0, 0);
  EXPECT_EQ(defaults.max_file_bytes, 10u << 20);
  EXPECT_EQ(defaults.max_files, 4u);
  const LogLimits set = ResolveLogLimits(100, 2);
  EXPECT_EQ(set.max_file_bytes, 100u);
  EXPECT_EQ(set.max_files, 2u);
}

// A link planted where the log goes (a task that can write in the log
// directory) is not followed: the writer may be root.
TEST(RotatingLogTest, ASymbolicLinkAtTheLogIsNotFollowed) {
  ShortTempDir temp;
  const std::string target = temp.Join("target");
  ASSERT_EQ(symlink(target.c_str(), temp.Join("stdout.log").c_str()), 0);
  RotatingLog log(temp.path(), "stdout", 4, 1);
  EXPECT_FALSE(log.Open());
  EXPECT_EQ(errno, ELOOP);
  EXPECT_FALSE(log.Write("abcdef", 6));
  EXPECT_FALSE(PathExists(target));
  // Nor when a full NAME.log is truncated in place (no rotated files kept).
  ASSERT_EQ(unlink(temp.Join("stdout.log").c_str()), 0);
  RotatingLog truncating(temp.path(), "stdout", 4, 0);
  ASSERT_TRUE(truncating.Write("abcd", 4));
  ASSERT_EQ(unlink(temp.Join("stdout.log").c_str()), 0);
  ASSERT_EQ(symlink(target.c_str(), temp.Join("stdout.log").c_str()), 0);
  EXPECT_FALSE(truncating.Write("efgh", 4));
  EXPECT_FALSE(PathExists(target));
}

TEST(RotatingLogTest, OpenFailsInAMissingDirectory) {
  ShortTempDir temp;
  RotatingLog log(temp.Join("missing"), "stdout", 4, 0);
  EXPECT_FALSE(log.Open());
}

}  // namespace
}  // namespace berth::plugin
