#include "services/node/orphans.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::node {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::ShortTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A socket listening on `path` in this process; -1 on failure.
int Listen(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 8) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A child that listens on `path` (ignoring SIGTERM if told) until killed.
// Waits until it listens.
pid_t ListeningChild(const std::string& path, bool ignore_term) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (ignore_term) signal(SIGTERM, SIG_IGN);
    if (Listen(path) < 0) _exit(3);
    while (true) pause();
  }
  berth::testing::WaitFor(
      [&] {
        absl::StatusOr<pid_t> peer = SocketPeerPid(path);
        return peer.ok() && *peer == pid;
      },
      absl::Seconds(10));
  return pid;
}

TEST(CgroupParentsOfTest, TakesEveryFormAndRefusesEscapes) {
  EXPECT_THAT(CgroupParentsOf({"--state_dir=/x", "--cgroup_parent=/berth",
                               "--cgroup_parent", "berth-sandbox/",
                               "--cgroup_parent=/", "--cgroup_parent=",
                               "--cgroup_parent=/a/../../etc", "--other"}),
              ElementsAre("berth", "berth-sandbox"));
  EXPECT_THAT(CgroupParentsOf({"--cgroup_parent"}), IsEmpty());
}

TEST(CgroupMountPointsTest, ListsV1AndV2HierarchiesOnly) {
  const std::string mountinfo =
      "25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n"
      "33 25 0:28 / /sys/fs/cgroup/pids rw,nosuid shared:15 - cgroup cgroup "
      "rw,pids\n"
      "34 25 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
      "35 25 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "garbage\n";
  EXPECT_THAT(CgroupMountPoints(mountinfo),
              ElementsAre("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified",
                          "/sys/fs/cgroup/memory"));
}

TEST(SocketPeerPidTest, NamesTheListenerOrSaysNobodyListens) {
  ShortTempDir dir;
  const std::string path = dir.Join("p.sock");
  EXPECT_TRUE(absl::IsNotFound(SocketPeerPid(path).status()));
  const int fd = Listen(path);
  ASSERT_GE(fd, 0);
  absl::StatusOr<pid_t> pid = SocketPeerPid(path);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(*pid, getpid());
  close(fd);
  // Stale: the file stays, nobody listens.
  absl::StatusOr<pid_t> stale = SocketPeerPid(path);
  EXPECT_TRUE(absl::IsNotFound(stale.status())) << stale.status();
  EXPECT_THAT(stale.status().message(), HasSubstr(path));
}

TEST(StopSocketOwnerTest, StopsTheListenerWithSigterm) {
  ShortTempDir dir;
  const std::string path = dir.Join("exec.sock");
  const pid_t child = ListeningChild(path, /*ignore_term=*/false);
  ASSERT_GT(child, 0);
  ASSERT_TRUE(StopSocketOwner(path, absl::Seconds(5)).ok());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(PathExists(path)) << "the stale socket stayed";
}

TEST(StopSocketOwnerTest, KillsAListenerThatIgnoresSigterm) {
  ShortTempDir dir;
  const std::string path = dir.Join("exec.sock");
  const pid_t child = ListeningChild(path, /*ignore_term=*/true);
  ASSERT_GT(child, 0);
  ASSERT_TRUE(StopSocketOwner(path, absl::Milliseconds(200)).ok());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(StopSocketOwnerTest, NobodyListeningIsFine) {
  ShortTempDir dir;
  EXPECT_TRUE(StopSocketOwner(dir.Join("none.sock"), absl::Seconds(1)).ok());
}

TEST(StopSocketOwnerTest, RefusesToStopItsOwnProcess) {
  ShortTempDir dir;
  const std::string path = dir.Join("self.sock");
  const int fd = Listen(path);
  ASSERT_GE(fd, 0);
  absl::Status s = StopSocketOwner(path, absl::Seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  close(fd);
}

// A writable cgroup hierarchy (v1 pids, or the v2 root), or "" with the
// reason in *why.
std::string WritableHierarchy(std::string* why) {
  if (geteuid() != 0) {
    *why = "not root";
    return "";
  }
  for (const char* dir : {"/sys/fs/cgroup/pids", "/sys/fs/cgroup"}) {
    const std::string probe =
        absl::StrCat(dir, "/berth-orphans-probe-", getpid());
    if (mkdir(probe.c_str(), 0755) == 0 &&
        PathExists(absl::StrCat(probe, "/cgroup.procs"))) {
      rmdir(probe.c_str());
      return dir;
    }
    rmdir(probe.c_str());
  }
  *why = "no writable cgroup hierarchy (pids v1 or v2)";
  return "";
}

TEST(RemoveOrphanTaskCgroupsTest, KillsAndRemovesOnlyUnknownTasks) {
  std::string why;
  const std::string mount = WritableHierarchy(&why);
  if (mount.empty()) GTEST_SKIP() << why;
  const std::string parent = absl::StrCat("berth-orphtest-", getpid());
  const std::string parent_dir = absl::StrCat(mount, "/", parent);
  ASSERT_EQ(mkdir(parent_dir.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((parent_dir + "/known1").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((parent_dir + "/orphan1").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((parent_dir + "/orphan1/sub").c_str(), 0755), 0);
  // A process in the orphan's sub-cgroup.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    std::ofstream(parent_dir + "/orphan1/sub/cgroup.procs") << getpid();
    (void)!write(ready[1], "x", 1);
    while (true) pause();
  }
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  close(ready[1]);

  absl::StatusOr<OrphanTasksRemoved> removed =
      RemoveOrphanTaskCgroups({mount}, {parent}, {"known1"});
  int status = 0;
  const pid_t reaped = waitpid(child, &status, 0);
  EXPECT_TRUE(PathExists(parent_dir + "/known1"));
  const bool orphan_left = PathExists(parent_dir + "/orphan1");
  rmdir((parent_dir + "/orphan1/sub").c_str());
  rmdir((parent_dir + "/orphan1").c_str());
  rmdir((parent_dir + "/known1").c_str());
  rmdir(parent_dir.c_str());
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(removed->tasks, ElementsAre("orphan1"));
  EXPECT_EQ(removed->processes_killed, 1);
  EXPECT_FALSE(orphan_left);
  ASSERT_EQ(reaped, child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(KillOrphanShimsTest, KillsTheShimsOfUnknownTasksOnly) {
  ShortTempDir dir;
  // A stand-in shim: a copy of bash named berth-shim (its executable's name
  // and its command line are what count).
  const std::string shim = dir.Join("berth-shim");
  {
    std::ifstream in("/bin/bash", std::ios::binary);
    std::ofstream out(shim, std::ios::binary);
    out << in.rdbuf();
  }
  ASSERT_EQ(chmod(shim.c_str(), 0755), 0);
  const std::string tasks = dir.Join("node/tasks");
  // The stand-in waits in a builtin (no child of its own to leave behind).
  const std::string fifo = dir.Join("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string script = absl::StrCat("read -t 600 <> ", fifo);
  auto start = [&](const std::string& id) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string flag =
          absl::StrCat("--task_log_dir=", tasks, "/", id, "/logs");
      execl(shim.c_str(), shim.c_str(), "-c", script.c_str(), "shim",
            flag.c_str(), nullptr);
      _exit(127);
    }
    return pid;
  };
  const pid_t known = start("known1");
  const pid_t orphan = start("orphan1");
  // Until both run the copied executable.
  ASSERT_TRUE(berth::testing::WaitFor(
      [&] {
        for (pid_t pid : {known, orphan}) {
          char exe[4096];
          const ssize_t n =
              readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), exe,
                       sizeof(exe) - 1);
          if (n <= 0 || std::string(exe, n) != shim) return false;
        }
        return true;
      },
      absl::Seconds(10)));
  const std::vector<pid_t> killed = KillOrphanShims(tasks, {"known1"});
  EXPECT_THAT(killed, ElementsAre(orphan));
  int status = 0;
  ASSERT_EQ(waitpid(orphan, &status, 0), orphan);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(waitpid(known, &status, WNOHANG), 0)
      << "the known task's shim died";
  kill(known, SIGKILL);
  waitpid(known, &status, 0);
}

}  // namespace
}  // namespace berth::node
