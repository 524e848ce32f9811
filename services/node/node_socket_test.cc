// Who may call node.sock: berth-node (the binary) with --socket_group gives
// the socket and the runtime directory it makes to the group; its members
// may call (file permissions alone let them in), others are refused by the
// server naming their uid; a group that does not exist leaves root only.

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/peer_test_util.h"
#include "services/common/test_util.h"

extern char** environ;

namespace berth::node {
namespace {

using ::berth::testing::Caller;
using ::berth::testing::CallHealthAs;
using ::berth::testing::ConnectAs;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::testing::HasSubstr;

// berth-node without plugins or neighbours, its output in a file.
class Node {
 public:
  Node(const ShortTempDir& dir, const std::string& socket_group)
      : log_(dir.Join("node.log")) {
    std::ofstream(dir.Join("plugins.json")) << R"({"plugins": []})";
    const std::string binary = RunfilePath("services/node/berth-node");
    std::vector<std::string> args = {
        binary,
        "--runtime_dir=" + dir.Join("run"),
        "--state_dir=" + dir.Join("state"),
        "--plugin_config=" + dir.Join("plugins.json"),
        "--netns_socket=none",
        "--stats_socket=none",
        "--proxy_socket=none",
        "--images_socket=none",
        "--socket_group=" + socket_group};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(),
                    environ) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Node() { Stop(); }

  // SIGTERM; its exit status.
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  std::string log() const { return ReadFileOrEmpty(log_); }

 private:
  const std::string log_;
  pid_t pid_ = -1;
};

// A group of this system other than root's, and its gid.
std::optional<std::pair<std::string, gid_t>> SomeGroup() {
  for (const char* name : {"daemon", "bin", "sys", "adm"}) {
    if (struct group* g = getgrnam(name); g != nullptr && g->gr_gid != 0) {
      return std::make_pair(std::string(name), g->gr_gid);
    }
  }
  return std::nullopt;
}

TEST(NodeSocketTest, MembersOfTheSocketGroupMayCallOthersMayNot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (callers of other uids)";
  std::optional<std::pair<std::string, gid_t>> group = SomeGroup();
  if (!group.has_value()) GTEST_SKIP() << "no group daemon, bin, sys or adm";
  const gid_t gid = group->second;
  ShortTempDir dir;
  // Its callers must reach the runtime directory: the test's own directory
  // lets anyone through (the runtime directory then decides).
  ASSERT_EQ(chmod(dir.path().c_str(), 0711), 0);
  Node node(dir, group->first);
  const std::string socket = dir.Join("run/node.sock");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(socket, absl::Seconds(30));
  ASSERT_TRUE(channel.ok()) << channel.status() << "\n" << node.log();
  channel->reset();

  struct stat st = {};
  ASSERT_EQ(lstat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660);
  EXPECT_EQ(st.st_gid, gid);
  ASSERT_EQ(stat(dir.Join("run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750);
  EXPECT_EQ(st.st_gid, gid) << "the runtime directory it made";

  // A member, by its supplementary groups, with no privilege at all: the
  // directory's and the socket's group permissions let it in.
  Caller member;
  member.groups = {gid};
  member.bypass_file_permissions = false;
  grpc::Status status = CallHealthAs(socket, member);
  EXPECT_TRUE(status.ok()) << status.error_message();

  // Not a member: the file permissions stop it ...
  Caller stranger;
  stranger.bypass_file_permissions = false;
  absl::StatusOr<base::UniqueFd> fd = ConnectAs(socket, stranger);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied);
  // ... and past them (CAP_DAC_OVERRIDE), the server.
  status = CallHealthAs(socket, Caller{});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("uid 65534 may not call " + socket));
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("group ", group->first)));

  const int exit = node.Stop();
  EXPECT_TRUE(WIFEXITED(exit) && WEXITSTATUS(exit) == 0) << node.log();
}

TEST(NodeSocketTest, AGroupThatDoesNotExistLeavesRootOnly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (callers of other uids)";
  ShortTempDir dir;
  Node node(dir, "berth-no-such-group");
  const std::string socket = dir.Join("run/node.sock");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(socket, absl::Seconds(30));
  ASSERT_TRUE(channel.ok()) << channel.status() << "\n" << node.log();
  channel->reset();
  struct stat st = {};
  ASSERT_EQ(lstat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600);
  EXPECT_THAT(node.log(),
              HasSubstr("group berth-no-such-group does not exist: only root "
                        "may call"));
  grpc::Status status = CallHealthAs(socket, Caller{});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("uid 65534"));
  const int exit = node.Stop();
  EXPECT_TRUE(WIFEXITED(exit) && WEXITSTATUS(exit) == 0) << node.log();
}

}  // namespace
}  // namespace berth::node
