#include "services/common/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"

namespace berth {
namespace {

using ::berth::testing::CapturingLogSink;
using ::berth::testing::FileMode;
using ::berth::testing::PathExists;
using ::berth::testing::ShortTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A socket bound at `path`; listening if `listen`. Closed (not unlinked)
// when the object goes, which leaves a stale socket behind.
class RawSocket {
 public:
  RawSocket(const std::string& path, bool listen) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0) << std::strerror(errno);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
        << path << ": " << std::strerror(errno);
    if (listen) {
      EXPECT_EQ(::listen(fd_, 8), 0) << std::strerror(errno);
    }
  }
  ~RawSocket() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

ino_t Inode(const std::string& path) {
  struct stat st = {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

TEST(UnixSocketTest, MissingPathIsFine) {
  ShortTempDir dir;
  EXPECT_EQ(ProbeSocketPath(dir.Join("s.sock")).value(),
            SocketPathState::kAbsent);
  EXPECT_TRUE(PrepareSocketPath(dir.Join("s.sock")).ok());
}

TEST(UnixSocketTest, StaleSocketIsRemovedAndServerStarts) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  RawSocket(path, /*listen=*/true).Close();  // a server that died
  ASSERT_TRUE(PathExists(path));
  EXPECT_EQ(ProbeSocketPath(path).value(), SocketPathState::kStale);

  {
    CapturingLogSink log(google::GLOG_INFO);
    ASSERT_TRUE(PrepareSocketPath(path).ok());
    ASSERT_EQ(log.entries().size(), 1);
    EXPECT_EQ(log.entries()[0].severity, google::GLOG_INFO);
    EXPECT_THAT(log.entries()[0].message,
                AllOf(HasSubstr("stale socket"), HasSubstr(path)));
  }
  EXPECT_FALSE(PathExists(path));

  RawSocket(path, /*listen=*/false).Close();  // bound, never listened
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(ProbeSocketPath(path).value(), SocketPathState::kLive);
}

TEST(UnixSocketTest, LiveSocketIsRefusedAndLeftInPlace) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  RawSocket live(path, /*listen=*/true);
  const ino_t inode = Inode(path);
  EXPECT_EQ(ProbeSocketPath(path).value(), SocketPathState::kLive);

  absl::Status status = PrepareSocketPath(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            absl::StrCat("socket ", path, " is in use by another process"));
  ASSERT_TRUE(PathExists(path));
  EXPECT_EQ(Inode(path), inode);
  EXPECT_EQ(ProbeSocketPath(path).value(), SocketPathState::kLive);
}

TEST(UnixSocketTest, LiveGrpcServerIsNotTakenOver) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> first =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_TRUE(first.ok()) << first.status();
  const ino_t inode = Inode(path);

  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> second =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(),
              AllOf(HasSubstr(path), HasSubstr("in use by another process")));
  EXPECT_EQ(Inode(path), inode);
  EXPECT_EQ(ProbeSocketPath(path).value(), SocketPathState::kLive);
}

TEST(UnixSocketTest, NonSocketFileIsRefusedAndLeftInPlace) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  std::ofstream(path) << "not a socket";
  EXPECT_EQ(ProbeSocketPath(path).value(), SocketPathState::kNotSocket);

  absl::Status status = PrepareSocketPath(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(path), HasSubstr("not a socket")));
  std::string content;
  std::getline(std::ifstream(path), content);
  EXPECT_EQ(content, "not a socket");
}

TEST(UnixSocketTest, DirectoryAndSymlinkAreNotSockets) {
  ShortTempDir dir;
  RawSocket live(dir.Join("live.sock"), /*listen=*/true);
  ASSERT_EQ(symlink(dir.Join("live.sock").c_str(), dir.Join("link").c_str()),
            0);
  ASSERT_EQ(mkdir(dir.Join("d").c_str(), 0700), 0);
  for (const char* name : {"link", "d"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(ProbeSocketPath(dir.Join(name)).value(),
              SocketPathState::kNotSocket);
    EXPECT_EQ(PrepareSocketPath(dir.Join(name)).code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(PathExists(dir.Join(name)));
  }
}

TEST(UnixSocketTest, TooLongPathIsRefusedNamingIt) {
  ShortTempDir dir;
  const std::string prefix = dir.Join("sub/");
  const std::string longest =
      prefix + std::string(kMaxSocketPathLength - prefix.size(), 'a');
  ASSERT_EQ(longest.size(), 107);
  EXPECT_TRUE(CheckSocketPathLength(longest).ok());

  const std::string too_long = longest + "a";
  absl::Status status = PrepareSocketPath(too_long);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(too_long), HasSubstr("108 bytes")));
  EXPECT_FALSE(PathExists(dir.Join("sub"))) << "nothing is made for it";

  EXPECT_EQ(PrepareSocketPath("").code(), absl::StatusCode::kInvalidArgument);
}

TEST(UnixSocketTest, CreatedDirectoriesAre0750WhateverTheUmask) {
  ShortTempDir dir;
  ASSERT_EQ(mkdir(dir.Join("existing").c_str(), 0755), 0);
  const mode_t old_umask = umask(0);
  absl::Status status =
      PrepareSocketPath(dir.Join("existing/run/berth/s.sock"));
  umask(old_umask);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(FileMode(dir.Join("existing/run")), 0750);
  EXPECT_EQ(FileMode(dir.Join("existing/run/berth")), 0750);
  EXPECT_EQ(FileMode(dir.Join("existing")), 0755) << "not ours to change";
  EXPECT_FALSE(PathExists(dir.Join("existing/run/berth/s.sock")));
}

TEST(UnixSocketTest, CheckSocketDirectoryChecksOnlyTheSocketsOwnDirectory) {
  ShortTempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);  // an ancestor may be open
  const std::string run = dir.Join("run");
  ASSERT_EQ(mkdir(run.c_str(), 0700), 0);
  for (mode_t mode : {0750, 0700, 0710}) {
    ASSERT_EQ(chmod(run.c_str(), mode), 0);
    EXPECT_TRUE(CheckSocketDirectory(run, geteuid()).ok()) << std::oct << mode;
  }
  for (mode_t mode : {0755, 0770, 0701, 0757}) {
    ASSERT_EQ(chmod(run.c_str(), mode), 0);
    absl::Status status = CheckSocketDirectory(run, geteuid());
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition)
        << std::oct << mode;
    EXPECT_THAT(
        status.message(),
        AllOf(HasSubstr(run), HasSubstr(absl::StrCat("uid ", geteuid())),
              HasSubstr(mode == 0770 ? "writable by its group"
                                     : "open to others"),
              HasSubstr("chmod 0750 " + run)))
        << std::oct << mode;
  }
  ASSERT_EQ(chmod(run.c_str(), 0750), 0);
  EXPECT_EQ(CheckSocketDirectory(run, geteuid() + 1).code(),
            absl::StatusCode::kFailedPrecondition)
      << "another owner";
  EXPECT_EQ(CheckSocketDirectory(dir.Join("missing"), geteuid()).code(),
            absl::StatusCode::kNotFound);
}

TEST(UnixSocketTest, MakeSocketDirectoryMakesOnlyTheDirectory) {
  ShortTempDir dir;
  ASSERT_TRUE(MakeSocketDirectory(dir.Join("a/b/s.sock")).ok());
  EXPECT_EQ(FileMode(dir.Join("a")), 0750);
  EXPECT_EQ(FileMode(dir.Join("a/b")), 0750);
  EXPECT_FALSE(PathExists(dir.Join("a/b/s.sock")));
  EXPECT_TRUE(MakeSocketDirectory(dir.Join("a/b/s.sock")).ok()) << "again";
  EXPECT_TRUE(MakeSocketDirectory("relative.sock").ok()) << "no directory";
}

TEST(UnixSocketTest, ParentThatIsAFileIsAnError) {
  ShortTempDir dir;
  std::ofstream(dir.Join("file")) << "x";
  absl::Status status = PrepareSocketPath(dir.Join("file/s.sock"));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(dir.Join("file/s.sock")),
                                      HasSubstr("not a directory")));
}

TEST(ConnectUnixSocketTest, ConnectsToTheListener) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  RawSocket live(path, /*listen=*/true);
  absl::StatusOr<base::UniqueFd> fd = ConnectUnixSocket(path);
  ASSERT_TRUE(fd.ok()) << fd.status();
  ucred cred = {};
  socklen_t len = sizeof(cred);
  ASSERT_EQ(getsockopt(fd->get(), SOL_SOCKET, SO_PEERCRED, &cred, &len), 0)
      << std::strerror(errno);
  EXPECT_EQ(cred.pid, getpid());
  EXPECT_NE(fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_NE(fcntl(fd->get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(ConnectUnixSocketTest, CodesSayWhatIsThereAndMessagesNameThePath) {
  ShortTempDir dir;
  const std::string absent = dir.Join("absent.sock");
  absl::StatusOr<base::UniqueFd> fd = ConnectUnixSocket(absent);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kNotFound) << fd.status();
  EXPECT_THAT(fd.status().message(), HasSubstr(absent));

  const std::string stale = dir.Join("stale.sock");
  RawSocket(stale, /*listen=*/true).Close();
  fd = ConnectUnixSocket(stale);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnavailable) << fd.status();
  EXPECT_THAT(fd.status().message(),
              AllOf(HasSubstr(stale), HasSubstr("nobody listens")));

  const std::string file = dir.Join("file");
  std::ofstream(file) << "x";
  const std::string under_file = file + "/s.sock";
  fd = ConnectUnixSocket(under_file);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition)
      << fd.status() << " (ENOTDIR)";
  EXPECT_THAT(fd.status().message(), HasSubstr(under_file));

  const std::string too_long = dir.Join(std::string(120, 's'));
  fd = ConnectUnixSocket(too_long);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fd.status().message(), HasSubstr(too_long));
  EXPECT_EQ(ConnectUnixSocket("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConnectUnixSocketTest, AFullBacklogIsNotWaitedForAndCountsAsLive) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  base::UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.valid()) << std::strerror(errno);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(
      bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  ASSERT_EQ(listen(listener.get(), 0), 0) << std::strerror(errno);
  // Nobody accepts: the connections queue until the backlog is full.
  std::vector<base::UniqueFd> queued;
  absl::StatusOr<base::UniqueFd> fd;
  for (int i = 0; i < 16; ++i) {
    fd = ConnectUnixSocket(path);
    if (!fd.ok()) break;
    queued.push_back(*std::move(fd));
  }
  ASSERT_FALSE(fd.ok()) << "16 connections queued on a backlog of 0";
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kResourceExhausted)
      << fd.status();
  EXPECT_THAT(fd.status().message(),
              AllOf(HasSubstr(path), HasSubstr("backlog is full")));
  EXPECT_EQ(ProbeSocketPath(path).value(), SocketPathState::kLive);
}

}  // namespace
}  // namespace berth
