#include "services/driver/common/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::driver_common {
namespace {

using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string TestInit() {
  return RunfilePath("services/driver/common/launcher_test_init");
}

// The started init, killed and reaped at the end of the test.
class InitGuard {
 public:
  explicit InitGuard(StartedInit init) : init_(std::move(init)) {}
  ~InitGuard() {
    syscall(SYS_pidfd_send_signal, init_.pidfd.get(), SIGKILL, nullptr, 0);
    siginfo_t info;
    waitid(static_cast<idtype_t>(P_PIDFD), init_.pidfd.get(), &info, WEXITED);
  }
  pid_t pid() const { return init_.pid; }
  std::string Proc(const std::string& file) const {
    return absl::StrCat("/proc/", init_.pid, "/", file);
  }

 private:
  StartedInit init_;
};

// ino of a /proc/PID/ns/NAME link, or 0.
ino_t NamespaceOf(const std::string& link) {
  struct stat st;
  return stat(link.c_str(), &st) == 0 ? st.st_ino : 0;
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (new namespaces)";
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
    stderr_read_ = fds[0];
    stderr_write_ = fds[1];
  }
  void TearDown() override {
    if (stderr_read_ >= 0) close(stderr_read_);
    if (stderr_write_ >= 0) close(stderr_write_);
  }

  absl::StatusOr<StartedInit> Start(const InitSpec& spec,
                                    const UserNamespaceMaps* userns) {
    return StartInit(TestInit(), spec, stderr_write_, absl::Seconds(30),
                     userns);
  }
  // The line the test init wrote on its stderr.
  std::string InitSaid() {
    std::string said;
    char c;
    while (read(stderr_read_, &c, 1) == 1 && c != '\n') said.push_back(c);
    return said;
  }

  int stderr_read_ = -1;
  int stderr_write_ = -1;
};

UserNamespaceMaps Maps(uint32_t host_id, uint32_t size) {
  UserNamespaceMaps maps;
  maps.uid.push_back({0, host_id, size});
  maps.gid.push_back({0, host_id + 1000000, size});
  return maps;
}

TEST(FormatIdMapTest, OneLinePerMapping) {
  EXPECT_EQ(FormatIdMap({{0, 100000, 65536}, {65536, 300000, 1}}),
            "0 100000 65536\n65536 300000 1\n");
}

TEST_F(LauncherTest, WithoutUserNamespaceTheInitIsHostRoot) {
  absl::StatusOr<StartedInit> started = Start(InitSpec(), nullptr);
  ASSERT_TRUE(started.ok()) << started.status();
  InitGuard init(*std::move(started));
  EXPECT_EQ(InitSaid(), "uid 0 gid 0 groups 0");
  EXPECT_EQ(NamespaceOf(init.Proc("ns/user")),
            NamespaceOf("/proc/self/ns/user"));
  EXPECT_NE(NamespaceOf(init.Proc("ns/pid")), NamespaceOf("/proc/self/ns/pid"));
}

TEST_F(LauncherTest, TheInitIsRootOfAUserNamespaceWithTheMaps) {
  const UserNamespaceMaps maps = Maps(3100000, 65536);
  absl::StatusOr<StartedInit> started = Start(InitSpec(), &maps);
  ASSERT_TRUE(started.ok()) << started.status();
  InitGuard init(*std::move(started));
  // Inside: root, without the host's groups.
  EXPECT_EQ(InitSaid(), "uid 0 gid 0 groups 0");
  EXPECT_THAT(ReadFileOrEmpty(init.Proc("uid_map")),
              MatchesRegex(" *0 +3100000 +65536\n"));
  EXPECT_THAT(ReadFileOrEmpty(init.Proc("gid_map")),
              MatchesRegex(" *0 +4100000 +65536\n"));
  // Outside: the mapped ids.
  const std::string status = ReadFileOrEmpty(init.Proc("status"));
  EXPECT_THAT(status, HasSubstr("Uid:\t3100000\t3100000\t3100000\t3100000"));
  EXPECT_THAT(status, HasSubstr("Gid:\t4100000\t4100000\t4100000\t4100000"));
  const ino_t userns = NamespaceOf(init.Proc("ns/user"));
  EXPECT_NE(userns, NamespaceOf("/proc/self/ns/user"));
  // Its other namespaces are new too (and so owned by the new user one).
  for (const char* ns : {"pid", "mnt", "ipc", "uts"}) {
    EXPECT_NE(NamespaceOf(init.Proc(absl::StrCat("ns/", ns))),
              NamespaceOf(absl::StrCat("/proc/self/ns/", ns)))
        << ns;
  }
}

TEST_F(LauncherTest, InAUserNamespaceTheLauncherJoinsNetnsAndCgroup) {
  // A network namespace of its own: a child that unshared one.
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(1);
    while (true) pause();
  }
  const std::string holder_net = absl::StrCat("/proc/", holder, "/ns/net");
  ASSERT_TRUE(WaitFor([&] {
    return NamespaceOf(holder_net) != NamespaceOf("/proc/self/ns/net");
  }));
  InitSpec spec;
  spec.netns = holder_net;
  // A cgroup v2 group, when this host has a writable one.
  std::string cgroup;
  for (const char* root : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    if (access(absl::StrCat(root, "/cgroup.procs").c_str(), W_OK) != 0 ||
        access(absl::StrCat(root, "/cgroup.controllers").c_str(), F_OK) != 0) {
      continue;
    }
    const std::string dir =
        absl::StrCat(root, "/berth-launcher-test-", getpid());
    if (mkdir(dir.c_str(), 0755) == 0) {
      cgroup = dir;
      break;
    }
  }
  if (!cgroup.empty()) {
    spec.cgroup_procs.push_back(absl::StrCat(cgroup, "/cgroup.procs"));
  } else {
    std::printf("no writable cgroup v2 hierarchy: the cgroup is not checked\n");
  }
  const UserNamespaceMaps maps = Maps(3200000, 65536);
  {
    absl::StatusOr<StartedInit> started = Start(spec, &maps);
    ASSERT_TRUE(started.ok()) << started.status();
    InitGuard init(*std::move(started));
    EXPECT_EQ(InitSaid(), "uid 0 gid 0 groups 0");
    EXPECT_EQ(NamespaceOf(init.Proc("ns/net")), NamespaceOf(holder_net));
    if (!cgroup.empty()) {
      EXPECT_THAT(
          ReadFileOrEmpty(init.Proc("cgroup")),
          HasSubstr(absl::StrCat("0::/berth-launcher-test-", getpid(), "\n")));
    }
    // This process stays where it was.
    EXPECT_NE(NamespaceOf("/proc/self/ns/net"), NamespaceOf(holder_net));
  }
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  if (!cgroup.empty()) {
    ASSERT_TRUE(WaitFor([&] { return rmdir(cgroup.c_str()) == 0; }))
        << cgroup << ": " << std::strerror(errno);
  }
}

TEST_F(LauncherTest, AMissingNetnsOrABadMapFailsNamingIt) {
  const UserNamespaceMaps maps = Maps(3300000, 65536);
  InitSpec spec;
  spec.netns = "/nonexistent/netns";
  absl::StatusOr<StartedInit> started = Start(spec, &maps);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(started.status().message(),
              HasSubstr("opening network namespace /nonexistent/netns"));

  UserNamespaceMaps overflowing;
  overflowing.uid.push_back({0, 4294967000u, 65536});
  overflowing.gid.push_back({0, 3300000, 65536});
  started = Start(InitSpec(), &overflowing);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(started.status().message(), HasSubstr("uid_map"));

  const UserNamespaceMaps empty;
  started = Start(InitSpec(), &empty);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
}

// `spawned` hears the init's pid before StartInit waits for it (in a user
// namespace before the init has done anything), and its error fails the
// start with the init killed and reaped.
TEST_F(LauncherTest, SpawnedHearsThePidFirstAndItsErrorStopsTheStart) {
  const UserNamespaceMaps maps = Maps(3400000, 65536);
  const UserNamespaceMaps* const cases[] = {&maps, nullptr};
  for (const UserNamespaceMaps* userns : cases) {
    SCOPED_TRACE(userns != nullptr ? "user namespace" : "host's");
    pid_t heard = -1;
    bool init_had_spoken = false;
    absl::StatusOr<StartedInit> started =
        StartInit(TestInit(), InitSpec(), stderr_write_, absl::Seconds(30),
                  userns, {}, [&](pid_t pid) {
                    heard = pid;
                    struct pollfd said = {stderr_read_, POLLIN, 0};
                    init_had_spoken = poll(&said, 1, 0) > 0;
                    return absl::OkStatus();
                  });
    ASSERT_TRUE(started.ok()) << started.status();
    InitGuard init(*std::move(started));
    EXPECT_EQ(heard, init.pid());
    if (userns != nullptr) {
      EXPECT_FALSE(init_had_spoken);
    }
    EXPECT_EQ(InitSaid(), "uid 0 gid 0 groups 0");

    heard = -1;
    started = StartInit(TestInit(), InitSpec(), stderr_write_,
                        absl::Seconds(30), userns, {}, [&](pid_t pid) {
                          heard = pid;
                          return absl::DataLossError("cannot record pid");
                        });
    ASSERT_FALSE(started.ok());
    EXPECT_TRUE(absl::IsDataLoss(started.status())) << started.status();
    ASSERT_GT(heard, 0);
    // Killed and reaped: no longer a child of this process.
    siginfo_t info;
    EXPECT_EQ(waitid(P_PID, heard, &info, WEXITED | WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
    // Whatever the killed init wrote before it died.
    struct pollfd said = {stderr_read_, POLLIN, 0};
    while (poll(&said, 1, 0) > 0) InitSaid();
  }
}

}  // namespace
}  // namespace berth::driver_common
