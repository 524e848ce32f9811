#include "plugins/sdk/rotating_log.h"

#include <fcntl.h>
#include <sys/stat.h>
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

// The attack of issue 15: whoever can write above the log directory renames
// it away and plants a link to a directory of its choice at its path, so
// that root's next rotation creates (or appends to) files there. The
// directory taken at the first Open is kept: the link is never resolved.
TEST(RotatingLogTest, ALinkPlantedAtTheDirectoryAfterOpenIsNotFollowed) {
  ShortTempDir temp;
  const std::string dir = temp.Join("logs");
  const std::string outside = temp.Join("outside");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  RotatingLog log(dir, "stdout", 4, 2);
  ASSERT_TRUE(log.Open());
  ASSERT_TRUE(log.Write("abcd", 4));
  ASSERT_EQ(rename(dir.c_str(), temp.Join("moved").c_str()), 0);
  ASSERT_EQ(symlink(outside.c_str(), dir.c_str()), 0);
  ASSERT_TRUE(log.Write("efghij", 6));  // rotates twice
  EXPECT_FALSE(PathExists(outside + "/stdout.log"));
  EXPECT_FALSE(PathExists(outside + "/stdout.log.1"));
  EXPECT_EQ(ReadFileOrEmpty(temp.Join("moved/stdout.log.2")), "abcd");
  EXPECT_EQ(ReadFileOrEmpty(temp.Join("moved/stdout.log.1")), "efgh");
  EXPECT_EQ(ReadFileOrEmpty(temp.Join("moved/stdout.log")), "ij");
}

// Planted before the first Open: the link at the directory's path is
// refused, not followed.
TEST(RotatingLogTest, ALinkAtTheDirectoryIsRefused) {
  ShortTempDir temp;
  const std::string outside = temp.Join("outside");
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  ASSERT_EQ(symlink(outside.c_str(), temp.Join("logs").c_str()), 0);
  RotatingLog log(temp.Join("logs"), "stdout", 4, 2);
  EXPECT_FALSE(log.Open());
  EXPECT_FALSE(log.Write("abcd", 4));
  EXPECT_FALSE(PathExists(outside + "/stdout.log"));
}

// berth-task-init's way: the directory opened before it pivots into the
// task's root, written through the descriptor after its path is gone.
TEST(RotatingLogTest, RotatesThroughADirectoryDescriptorAfterARename) {
  ShortTempDir temp;
  const std::string dir = temp.Join("logs");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const int dir_fd =
      open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ASSERT_GE(dir_fd, 0);
  RotatingLog log(dir_fd, "stderr", 4, 1);
  // The object keeps its own copy of the descriptor.
  ASSERT_EQ(close(dir_fd), 0);
  ASSERT_TRUE(log.Open());
  EXPECT_EQ(log.CurrentPath(), "stderr.log");
  ASSERT_TRUE(log.Write("abc", 3));
  ASSERT_EQ(rename(dir.c_str(), temp.Join("moved").c_str()), 0);
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);  // a new directory at the old path
  ASSERT_TRUE(log.Write("defgh", 5));
  EXPECT_EQ(ReadFileOrEmpty(temp.Join("moved/stderr.log.1")), "abcd");
  EXPECT_EQ(ReadFileOrEmpty(temp.Join("moved/stderr.log")), "efgh");
  EXPECT_FALSE(PathExists(dir + "/stderr.log"));
}

TEST(RotatingLogTest, AnInvalidDescriptorOrNameFails) {
  RotatingLog no_dir(-1, "stdout", 4, 1);
  EXPECT_FALSE(no_dir.Open());
  EXPECT_EQ(errno, EBADF);
  ShortTempDir temp;
  RotatingLog nested(temp.path(), "a/stdout", 4, 1);
  EXPECT_FALSE(nested.Open());
  EXPECT_EQ(errno, EINVAL);
}

// A link planted at a rotated name is replaced by the rotation, never
// written through: its target stays as it was.
TEST(RotatingLogTest, ALinkAtARotatedFileIsReplacedNotFollowed) {
  ShortTempDir temp;
  const std::string dir = temp.Join("logs");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const std::string target = temp.Join("target");
  ASSERT_EQ(symlink(target.c_str(), (dir + "/stdout.log.1").c_str()), 0);
  ASSERT_EQ(symlink(target.c_str(), (dir + "/stdout.log.2").c_str()), 0);
  RotatingLog log(dir, "stdout", 2, 2);
  ASSERT_TRUE(log.Write("abcdef", 6));
  EXPECT_FALSE(PathExists(target));
  struct stat st;
  ASSERT_EQ(lstat((dir + "/stdout.log.1").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log.2"), "ab");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log.1"), "cd");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log"), "ef");
}

// A FIFO planted at NAME.log with no reader: Open fails at once instead of
// blocking the init that copies the task's output.
TEST(RotatingLogTest, AFifoAtTheLogDoesNotBlock) {
  ShortTempDir temp;
  ASSERT_EQ(mkfifo(temp.Join("stdout.log").c_str(), 0600), 0);
  RotatingLog log(temp.path(), "stdout", 4, 1);
  EXPECT_FALSE(log.Open());
  EXPECT_EQ(errno, ENXIO);
}

TEST(RotatingLogTest, OpenFailsInAMissingDirectory) {
  ShortTempDir temp;
  RotatingLog log(temp.Join("missing"), "stdout", 4, 0);
  EXPECT_FALSE(log.Open());
}

}  // namespace
}  // namespace berth::plugin
