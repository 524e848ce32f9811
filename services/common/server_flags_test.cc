#include "services/common/server_flags.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"

namespace berth {
namespace {

using ::berth::testing::ShortTempDir;
using ::testing::HasSubstr;

TEST(ServerFlagsTest, MaxMessageBytesIsFourMebibytesByDefaultAndChecked) {
  absl::FlagSaver saver;
  UnixGrpcServer::Options options;
  options.max_message_bytes = 1;
  ASSERT_TRUE(ApplyServerFlags(&options).ok());
  EXPECT_EQ(options.max_message_bytes, 4 << 20);
  absl::SetFlag(&FLAGS_max_message_bytes, 100);
  absl::Status status = ApplyServerFlags(&options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--max_message_bytes=100"));
  absl::SetFlag(&FLAGS_max_message_bytes, int64_t{1} << 31);
  EXPECT_FALSE(MaxMessageBytesFlag().ok());
  absl::SetFlag(&FLAGS_max_message_bytes, 65536);
  EXPECT_EQ(MaxMessageBytesFlag().value(), 65536);
}

TEST(ServerFlagsTest, GroupSocketAccess) {
  std::string warning;
  SocketAccess none = GroupSocketAccess("", &warning);
  EXPECT_FALSE(none.group.has_value());
  EXPECT_EQ(none.mode, 0600);
  EXPECT_EQ(warning, "");

  SocketAccess missing = GroupSocketAccess("berth-no-such-group", &warning);
  EXPECT_FALSE(missing.group.has_value());
  EXPECT_EQ(missing.mode, 0600);
  EXPECT_THAT(warning, HasSubstr("group berth-no-such-group does not exist: "
                                 "only root may call"));

  struct group* root = getgrgid(0);
  if (root == nullptr) GTEST_SKIP() << "no group of gid 0 here";
  warning.clear();
  SocketAccess access = GroupSocketAccess(root->gr_name, &warning);
  ASSERT_TRUE(access.group.has_value());
  EXPECT_EQ(*access.group, 0u);
  EXPECT_EQ(access.mode, 0660);
  EXPECT_EQ(warning, "");
}

TEST(ServerFlagsTest, RuntimeDirectoryIsMadeForTheGroupOrWarnedAbout) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (chown to another group)";
  ShortTempDir dir;
  SocketAccess access;
  access.group = 4321;
  access.mode = 0660;
  std::string warning;
  const std::string run = dir.Join("run");
  ASSERT_TRUE(PrepareRuntimeDirectory(run, access, &warning).ok());
  EXPECT_EQ(warning, "");
  struct stat st = {};
  ASSERT_EQ(stat(run.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750);
  EXPECT_EQ(st.st_gid, 4321u);

  // An existing directory is left as it is, with a warning if the group
  // cannot search it.
  const std::string other = dir.Join("other");
  ASSERT_EQ(mkdir(other.c_str(), 0700), 0);
  ASSERT_TRUE(PrepareRuntimeDirectory(other, access, &warning).ok());
  EXPECT_THAT(warning, HasSubstr(other));
  EXPECT_THAT(warning, HasSubstr("gid 4321"));
  ASSERT_EQ(stat(other.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700);
}

}  // namespace
}  // namespace berth
