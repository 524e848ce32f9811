#include "base/beneath.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace berth::base {
namespace {

class BeneathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr ? tmp : "/tmp") + "/beneath-XXXXXX";
    ASSERT_NE(mkdtemp(&pattern[0]), nullptr);
    root_ = pattern;
    dir_ = root_ + "/dir";
    outside_ = root_ + "/outside";
    ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir_ + "/sub").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(outside_.c_str(), 0755), 0);
    Write(dir_ + "/sub/file", "inside");
    Write(outside_ + "/secret", "outside");
  }
  void TearDown() override {
    (void)!std::system(("rm -rf '" + root_ + "'").c_str());
  }
  static void Write(const std::string& path, const std::string& data) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(write(fd, data.data(), data.size()),
              static_cast<ssize_t>(data.size()));
    close(fd);
  }

  std::string root_, dir_, outside_;
};

TEST_F(BeneathTest, ReadsAFileBelowTheDirectory) {
  absl::StatusOr<std::string> content = ReadFileBeneath(dir_, "sub/file", 100);
  ASSERT_TRUE(content.ok()) << content.status();
  EXPECT_EQ(*content, "inside");
  EXPECT_EQ(ReadFileBeneath(dir_, "./sub//file", 6).value_or(""), "inside");
}

TEST_F(BeneathTest, RefusesAFileLongerThanTheBound) {
  absl::StatusOr<std::string> content = ReadFileBeneath(dir_, "sub/file", 5);
  EXPECT_EQ(content.status().code(), absl::StatusCode::kOutOfRange)
      << content.status();
}

TEST_F(BeneathTest, MissingIsNotFound) {
  EXPECT_EQ(ReadFileBeneath(dir_, "sub/none", 5).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(BeneathTest, RefusesEscapingPaths) {
  for (const char* path :
       {"../outside/secret", "/etc/passwd", "sub/../..", "", "."}) {
    EXPECT_EQ(ReadFileBeneath(dir_, path, 100).status().code(),
              absl::StatusCode::kInvalidArgument)
        << path;
  }
}

TEST_F(BeneathTest, FollowsNoLinkInAnyComponent) {
  // A link to a file outside, a link to a directory outside, a link to a
  // file inside: none is followed.
  ASSERT_EQ(
      symlink((outside_ + "/secret").c_str(), (dir_ + "/file-link").c_str()),
      0);
  ASSERT_EQ(symlink(outside_.c_str(), (dir_ + "/dir-link").c_str()), 0);
  ASSERT_EQ(symlink("sub/file", (dir_ + "/inner-link").c_str()), 0);
  for (const char* path : {"file-link", "dir-link/secret", "inner-link"}) {
    absl::StatusOr<std::string> content = ReadFileBeneath(dir_, path, 100);
    EXPECT_FALSE(content.ok()) << path << ": " << *content;
    const UniqueFd dir_fd(open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    absl::StatusOr<UniqueFd> fd =
        beneath_internal::OpenByComponents(dir_fd.get(), path, O_RDONLY, 0);
    EXPECT_FALSE(fd.ok()) << path;
  }
  // Nor does creating a file through a link to a directory outside.
  EXPECT_FALSE(
      OpenBeneath(dir_, "dir-link/planted", O_WRONLY | O_CREAT | O_EXCL, 0600)
          .ok());
  EXPECT_NE(access((outside_ + "/planted").c_str(), F_OK), 0);
}

TEST_F(BeneathTest, TheDirectoryItselfMustNotBeALink) {
  const std::string link = root_ + "/link";
  ASSERT_EQ(symlink(outside_.c_str(), link.c_str()), 0);
  EXPECT_FALSE(ReadFileBeneath(link, "secret", 100).ok());
}

TEST_F(BeneathTest, AFifoDoesNotBlockTheReader) {
  ASSERT_EQ(mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadFileBeneath(dir_, "fifo", 100).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(BeneathTest, TheFallbackOpensAndCreates) {
  const UniqueFd dir_fd(open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir_fd.valid());
  absl::StatusOr<UniqueFd> made = beneath_internal::OpenByComponents(
      dir_fd.get(), "sub/new", O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(made.ok()) << made.status();
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/sub/new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<UniqueFd> read =
      beneath_internal::OpenByComponents(dir_fd.get(), "sub/file", O_RDONLY, 0);
  EXPECT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(beneath_internal::OpenByComponents(dir_fd.get(), "../outside",
                                               O_RDONLY, 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace berth::base
