#include "services/common/peer_credentials.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(PeerCredentialsTest, FdOfPeerString) {
  EXPECT_EQ(internal::FdOfPeerString("fd:12"), std::optional<int>(12));
  EXPECT_EQ(internal::FdOfPeerString("fd:0"), std::optional<int>(0));
  EXPECT_EQ(internal::FdOfPeerString("fd:-1"), std::nullopt);
  EXPECT_EQ(internal::FdOfPeerString("fd:"), std::nullopt);
  EXPECT_EQ(internal::FdOfPeerString("fd:1x"), std::nullopt);
  EXPECT_EQ(internal::FdOfPeerString("unix:/run/berth/node.sock"),
            std::nullopt);
  EXPECT_EQ(internal::FdOfPeerString("ipv4:127.0.0.1:80"), std::nullopt);
}

TEST(PeerCredentialsTest, ReadsThePeerOfASocketPair) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  absl::StatusOr<PeerCredentials> peer = ReadPeerCredentials(pair[0]);
  close(pair[0]);
  close(pair[1]);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->pid, getpid());
  EXPECT_EQ(peer->uid, geteuid());
  EXPECT_EQ(peer->gid, getegid());
  EXPECT_TRUE(peer->InGroup(getegid()));
  std::vector<gid_t> groups(getgroups(0, nullptr));
  ASSERT_EQ(getgroups(groups.size(), groups.data()),
            static_cast<int>(groups.size()));
  for (gid_t g : groups) EXPECT_TRUE(peer->InGroup(g)) << g;
  EXPECT_THAT(peer->ToString(), HasSubstr(absl::StrCat("uid ", geteuid())));
}

TEST(PeerCredentialsTest, ANonSocketIsAnErrorNamingTheDescriptor) {
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  absl::StatusOr<PeerCredentials> peer = ReadPeerCredentials(fd);
  close(fd);
  ASSERT_FALSE(peer.ok());
  EXPECT_THAT(peer.status().message(), HasSubstr(absl::StrCat("fd ", fd)));
}

}  // namespace
}  // namespace berth
