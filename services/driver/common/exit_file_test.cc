#include "services/driver/common/exit_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::driver_common {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::ShortTempDir;

class ExitFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.Join("private");
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
    dir_fd_ = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dir_fd_, 0);
    record_.exit_code = 3;
    record_.signal = 0;
    record_.exited_at_unix_nanos = 1234567890;
  }
  void TearDown() override { close(dir_fd_); }

  ShortTempDir temp_;
  std::string dir_;
  int dir_fd_ = -1;
  ExitRecord record_;
};

TEST_F(ExitFileTest, WritesARecordThatDecodes) {
  ASSERT_TRUE(WriteExitRecordAt(dir_fd_, kExitRecordName, record_))
      << std::strerror(errno);
  ExitRecord read;
  ASSERT_TRUE(DecodeExitRecord(ReadFileOrEmpty(dir_ + "/exit"), &read));
  EXPECT_EQ(read.exit_code, 3);
  EXPECT_EQ(read.exited_at_unix_nanos, 1234567890);
  EXPECT_FALSE(PathExists(dir_ + "/exit.tmp"));
  // Written again over the first.
  record_.exit_code = 4;
  ASSERT_TRUE(WriteExitRecordAt(dir_fd_, kExitRecordName, record_));
  ASSERT_TRUE(DecodeExitRecord(ReadFileOrEmpty(dir_ + "/exit"), &read));
  EXPECT_EQ(read.exit_code, 4);
}

// Links planted at NAME.tmp and NAME (say, to a file under /etc/cron.d):
// both are replaced, their target is never created or written.
TEST_F(ExitFileTest, PlantedLinksAreReplacedNotFollowed) {
  const std::string target = temp_.Join("target");
  ASSERT_EQ(symlink(target.c_str(), (dir_ + "/exit.tmp").c_str()), 0);
  ASSERT_EQ(symlink(target.c_str(), (dir_ + "/exit").c_str()), 0);
  ASSERT_TRUE(WriteExitRecordAt(dir_fd_, kExitRecordName, record_))
      << std::strerror(errno);
  EXPECT_FALSE(PathExists(target));
  struct stat st;
  ASSERT_EQ(lstat((dir_ + "/exit").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

// Written through the descriptor: the directory renamed away and a link
// put at its path change nothing.
TEST_F(ExitFileTest, WritesIntoTheDirectoryOfTheDescriptor) {
  const std::string outside = temp_.Join("outside");
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  ASSERT_EQ(rename(dir_.c_str(), temp_.Join("moved").c_str()), 0);
  ASSERT_EQ(symlink(outside.c_str(), dir_.c_str()), 0);
  ASSERT_TRUE(WriteExitRecordAt(dir_fd_, kExitRecordName, record_));
  EXPECT_FALSE(PathExists(outside + "/exit"));
  EXPECT_TRUE(PathExists(temp_.Join("moved/exit")));
}

TEST_F(ExitFileTest, RefusesANameWithASlash) {
  EXPECT_FALSE(WriteExitRecordAt(dir_fd_, "../exit", record_));
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(WriteExitRecordAt(-1, "exit", record_));
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace berth::driver_common
