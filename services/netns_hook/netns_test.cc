#include "services/netns_hook/netns.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::netns_hook {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Inode {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const Inode& other) const {
    return dev == other.dev && ino == other.ino;
  }
  bool operator!=(const Inode& other) const { return !(*this == other); }
};

Inode InodeOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Inode{};
  return Inode{st.st_dev, st.st_ino};
}

// Every task (every thread of every process) whose network namespace is
// `ns`, as "pid/tid".
std::vector<std::string> TasksIn(const Inode& ns) {
  std::vector<std::string> tasks;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return tasks;
  while (const struct dirent* process = readdir(proc)) {
    int pid;
    if (!absl::SimpleAtoi(process->d_name, &pid)) continue;
    const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
    DIR* threads = opendir(task_dir.c_str());
    if (threads == nullptr) continue;  // gone meanwhile
    while (const struct dirent* thread = readdir(threads)) {
      int tid;
      if (!absl::SimpleAtoi(thread->d_name, &tid)) continue;
      if (InodeOf(absl::StrCat(task_dir, "/", tid, "/ns/net")) == ns) {
        tasks.push_back(absl::StrCat(pid, "/", tid));
      }
    }
    closedir(threads);
  }
  closedir(proc);
  return tasks;
}

struct MountEntry {
  std::string mount_point;
  std::string optional_fields;  // e.g. "shared:7 master:1"
};

// The mounts of our mount namespace at `mount_point`.
std::vector<MountEntry> MountsAt(const std::string& mount_point) {
  std::vector<MountEntry> found;
  const std::string table =
      berth::testing::ReadFileOrEmpty("/proc/self/mountinfo");
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    // id parent major:minor root mount-point options [optional...] - ...
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 7 || fields[4] != mount_point) continue;
    MountEntry entry;
    entry.mount_point = std::string(fields[4]);
    for (size_t i = 6; i < fields.size() && fields[i] != "-"; ++i) {
      absl::StrAppend(&entry.optional_fields,
                      entry.optional_fields.empty() ? "" : " ", fields[i]);
    }
    found.push_back(entry);
  }
  return found;
}

bool IsNsfs(const std::string& path) {
  struct statfs fs;
  return statfs(path.c_str(), &fs) == 0 &&
         fs.f_type == static_cast<decltype(fs.f_type)>(NSFS_MAGIC);
}

// Whether this process may make network namespaces, tried in a child.
absl::Status ProbeNamespaces() {
  const pid_t pid = fork();
  if (pid == 0) _exit(unshare(CLONE_NEWNET) == 0 ? 0 : errno);
  if (pid < 0) return absl::ErrnoToStatus(errno, "fork");
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return absl::InternalError("probe child died");
  if (WEXITSTATUS(status) != 0) {
    return absl::ErrnoToStatus(WEXITSTATUS(status), "unshare(CLONE_NEWNET)");
  }
  return absl::OkStatus();
}

// A TCP listener on 127.0.0.1 (an ephemeral port) that accepts a connection
// made from the same namespace; 0 when it all works, else which step failed.
// Only loopback: never any other address.
int LoopbackRoundTrip() {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return 10;
  struct sockaddr_in address;
  std::memset(&address, 0, sizeof(address));
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (bind(listener, reinterpret_cast<struct sockaddr*>(&address),
           sizeof(address)) != 0) {
    return 11;
  }
  if (listen(listener, 1) != 0) return 12;
  socklen_t length = sizeof(address);
  if (getsockname(listener, reinterpret_cast<struct sockaddr*>(&address),
                  &length) != 0) {
    return 13;
  }
  const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (client < 0) return 14;
  if (connect(client, reinterpret_cast<struct sockaddr*>(&address),
              sizeof(address)) != 0) {
    return 15;  // ENETUNREACH while lo is down
  }
  const int accepted = accept(listener, nullptr, nullptr);
  if (accepted < 0) return 16;
  if (write(client, "x", 1) != 1) return 17;
  char byte = 0;
  if (read(accepted, &byte, 1) != 1 || byte != 'x') return 18;
  close(accepted);
  close(client);
  close(listener);
  return 0;
}

// 0 when "lo" is up here, 1 when it is down, 2 when it cannot be read.
int CheckLoopbackUp() {
  const int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq request;
  std::memset(&request, 0, sizeof(request));
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ);
  if (sock < 0 || ioctl(sock, SIOCGIFFLAGS, &request) != 0) return 2;
  close(sock);
  return (request.ifr_flags & IFF_UP) != 0 ? 0 : 1;
}

// The first path of `ip` that exists, or empty.
std::string FindIp() {
  for (const char* path :
       {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// What `command` prints on stdout.
std::string Output(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  pclose(pipe);
  return out;
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root to make network namespaces and mounts";
    }
    if (absl::Status probe = ProbeNamespaces(); !probe.ok()) {
      GTEST_SKIP() << "cannot make network namespaces here: " << probe;
    }
    if (absl::Status prepared = dir_.Prepare(); !prepared.ok()) {
      GTEST_SKIP() << "cannot prepare " << dir_.dir()
                   << " (mounts not allowed here?): " << prepared;
    }
    prepared_ = true;
  }

  void TearDown() override {
    if (!prepared_) return;
    absl::StatusOr<std::vector<std::string>> names = dir_.List("");
    if (names.ok()) {
      for (const std::string& name : *names) {
        EXPECT_TRUE(dir_.Remove(name).ok()) << name;
      }
    }
    // Prepare made the directory a mount point: unmount it, so that the
    // temporary directory can be removed.
    while (umount2(dir_.dir().c_str(), MNT_DETACH) == 0) {
    }
  }

  // A name unique to this test process.
  std::string Name(absl::string_view suffix) const {
    return absl::StrCat("berth-", getpid(), "-", suffix);
  }

  berth::testing::ShortTempDir tmp_;
  NamespaceDir dir_{tmp_.Join("netns")};
  bool prepared_ = false;
};

TEST_F(NetnsTest, CreateMakesANewNamespaceWithNoProcessInIt) {
  const std::string name = Name("a");
  const std::string path = dir_.PathOf(name);
  ASSERT_TRUE(dir_.Create(name).ok());

  EXPECT_TRUE(dir_.Exists(name));
  EXPECT_TRUE(IsNsfs(path));
  const Inode ours = InodeOf("/proc/self/ns/net");
  const Inode made = InodeOf(path);
  ASSERT_NE(made, Inode{});
  EXPECT_EQ(made.dev, ours.dev) << "not on nsfs";
  EXPECT_NE(made.ino, ours.ino) << "the namespace is ours";
  EXPECT_THAT(TasksIn(made), IsEmpty());
  EXPECT_THAT(TasksIn(ours), ::testing::Not(IsEmpty()));  // the scan works
  // And no child is left, not even a zombie.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG | __WALL), -1);
  EXPECT_EQ(errno, ECHILD);
  // One mount at the path, no more.
  EXPECT_EQ(MountsAt(path).size(), 1u);
}

TEST_F(NetnsTest, LoopbackIsUpInside) {
  const std::string name = Name("lo");
  const std::string path = dir_.PathOf(name);
  ASSERT_TRUE(dir_.Create(name).ok());

  const Inode made = InodeOf(path);
  absl::StatusOr<int> joined = RunInNamespace(
      path, [&made] { return InodeOf("/proc/self/ns/net") == made ? 0 : 1; });
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(*joined, 0) << "RunInNamespace's child is not in " << path;

  absl::StatusOr<int> down = RunInNamespace(path, CheckLoopbackUp);
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_EQ(*down, 0) << "lo is down (1) or unreadable (2) in " << path;

  absl::StatusOr<int> round_trip = RunInNamespace(path, LoopbackRoundTrip);
  ASSERT_TRUE(round_trip.ok()) << round_trip.status();
  EXPECT_EQ(*round_trip, 0) << "failed step (see LoopbackRoundTrip)";
  // Our own namespace did not change.
  EXPECT_NE(InodeOf("/proc/self/ns/net"), made);
}

TEST_F(NetnsTest, RunInNamespaceReturnsTheExitCodeAndNamesBadPaths) {
  const std::string name = Name("run");
  ASSERT_TRUE(dir_.Create(name).ok());
  absl::StatusOr<int> code =
      RunInNamespace(dir_.PathOf(name), [] { return 7; });
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 7);

  absl::StatusOr<int> missing =
      RunInNamespace(dir_.PathOf(Name("missing")), [] { return 0; });
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(Name("missing")));

  const std::string plain = tmp_.Join("plain");
  close(open(plain.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  absl::StatusOr<int> not_ns = RunInNamespace(plain, [] { return 0; });
  EXPECT_EQ(not_ns.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_ns.status().message(), HasSubstr(plain));

  absl::StatusOr<int> killed = RunInNamespace(dir_.PathOf(name), [] {
    raise(SIGKILL);
    return 0;
  });
  EXPECT_EQ(killed.status().code(), absl::StatusCode::kInternal);
}

TEST_F(NetnsTest, SecondCreateIsAlreadyExistsAndKeepsTheFirst) {
  const std::string name = Name("twice");
  const std::string path = dir_.PathOf(name);
  ASSERT_TRUE(dir_.Create(name).ok());
  const Inode first = InodeOf(path);

  absl::Status again = dir_.Create(name);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr(path));
  EXPECT_EQ(InodeOf(path), first);
  EXPECT_EQ(MountsAt(path).size(), 1u);
  EXPECT_TRUE(dir_.Exists(name));
}

TEST_F(NetnsTest, RemoveRemovesItAndIsIdempotent) {
  const std::string name = Name("rm");
  const std::string path = dir_.PathOf(name);
  ASSERT_TRUE(dir_.Create(name).ok());
  const Inode made = InodeOf(path);

  ASSERT_TRUE(dir_.Remove(name).ok());
  EXPECT_FALSE(berth::testing::PathExists(path));
  EXPECT_FALSE(dir_.Exists(name));
  EXPECT_THAT(MountsAt(path), IsEmpty());
  EXPECT_THAT(TasksIn(made), IsEmpty());
  EXPECT_THAT(tmp_.Entries(), ElementsAre("netns"));

  EXPECT_TRUE(dir_.Remove(name).ok());
  EXPECT_TRUE(dir_.Remove(Name("never-made")).ok());
  // And it can be made again.
  ASSERT_TRUE(dir_.Create(name).ok());
  EXPECT_TRUE(dir_.Exists(name));
}

TEST_F(NetnsTest, StalePlainFileIsRemovedOrReused) {
  // What a crash between making the file and mounting over it leaves.
  const std::string stale = Name("stale");
  const std::string path = dir_.PathOf(stale);
  close(open(path.c_str(), O_CREAT | O_RDONLY | O_CLOEXEC, 0444));
  ASSERT_TRUE(berth::testing::PathExists(path));
  EXPECT_FALSE(dir_.Exists(stale));
  absl::StatusOr<std::vector<std::string>> names = dir_.List("");
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ElementsAre(stale));

  ASSERT_TRUE(dir_.Remove(stale).ok());
  EXPECT_FALSE(berth::testing::PathExists(path));

  // Create over such a file makes the namespace there.
  close(open(path.c_str(), O_CREAT | O_RDONLY | O_CLOEXEC, 0444));
  ASSERT_TRUE(dir_.Create(stale).ok());
  EXPECT_TRUE(dir_.Exists(stale));
  EXPECT_EQ(MountsAt(path).size(), 1u);
}

TEST_F(NetnsTest, ListIsSortedAndFiltered) {
  ASSERT_TRUE(dir_.Create(Name("c")).ok());
  ASSERT_TRUE(dir_.Create(Name("a")).ok());
  ASSERT_TRUE(dir_.Create(Name("b")).ok());
  const std::string other = absl::StrCat("other-", getpid());
  ASSERT_TRUE(dir_.Create(other).ok());

  absl::StatusOr<std::vector<std::string>> mine = dir_.List(Name(""));
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_THAT(*mine, ElementsAre(Name("a"), Name("b"), Name("c")));
  absl::StatusOr<std::vector<std::string>> all = dir_.List("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 4u);
  absl::StatusOr<std::vector<std::string>> none = dir_.List("nothing-");
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, IsEmpty());

  NamespaceDir missing(tmp_.Join("missing"));
  absl::StatusOr<std::vector<std::string>> empty = missing.List("");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(*empty, IsEmpty());
}

TEST_F(NetnsTest, BadNamesAreInvalidArgumentsAndMakeNothing) {
  for (const std::string& bad :
       {std::string(""), std::string("."), std::string(".."),
        std::string("a/b"), std::string("../escape"), std::string(256, 'n')}) {
    absl::Status created = dir_.Create(bad);
    EXPECT_EQ(created.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(dir_.Remove(bad).code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_FALSE(dir_.Exists(bad)) << bad;
  }
  EXPECT_THAT(dir_.Create("a/b").message(), HasSubstr("\"a/b\""));
  absl::StatusOr<std::vector<std::string>> names = dir_.List("");
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, IsEmpty());
  EXPECT_THAT(tmp_.Entries(), ElementsAre("netns"));
}

TEST_F(NetnsTest, CreateInAMissingDirectoryIsFailedPrecondition) {
  NamespaceDir missing(tmp_.Join("missing"));
  absl::Status created = missing.Create(Name("x"));
  EXPECT_EQ(created.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(created.message(), HasSubstr(missing.dir()));
  EXPECT_FALSE(berth::testing::PathExists(missing.dir()));
}

// Drops CAP_SYS_ADMIN from this (child) process's effective set, keeping
// the rest (it may still make files as root).
bool DropSysAdmin() {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
  return syscall(SYS_capset, &header, data) == 0;
}

TEST_F(NetnsTest, FailedCreateLeavesNothing) {
  // Without CAP_SYS_ADMIN the file is made, and then the clone into a new
  // network namespace fails: Create must remove the file again.
  const std::string name = Name("denied");
  const std::string path = dir_.PathOf(name);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!DropSysAdmin()) _exit(10);
    const absl::Status created = dir_.Create(name);
    if (created.code() != absl::StatusCode::kPermissionDenied) _exit(11);
    if (!absl::StrContains(created.message(), path)) _exit(12);
    if (access(path.c_str(), F_OK) == 0) _exit(13);
    if (waitpid(-1, nullptr, WNOHANG | __WALL) != -1) _exit(14);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: capset failed, 11: not PERMISSION_DENIED, 12: path not named, "
         "13: file left, 14: a child left";
  EXPECT_FALSE(berth::testing::PathExists(path));
  EXPECT_THAT(MountsAt(path), IsEmpty());
}

TEST_F(NetnsTest, PrepareIsIdempotentAndMakesTheDirectoryShared) {
  ASSERT_TRUE(dir_.Prepare().ok());
  ASSERT_TRUE(dir_.Prepare().ok());
  EXPECT_EQ(berth::testing::FileMode(dir_.dir()), 0755);
  std::vector<MountEntry> mounts = MountsAt(dir_.dir());
  ASSERT_EQ(mounts.size(), 1u) << "bound to itself more than once";
  EXPECT_THAT(mounts[0].optional_fields, HasSubstr("shared:"));
}

TEST_F(NetnsTest, NamespacesPropagateToASlaveMountNamespace) {
  // A child in its own mount namespace, slave of ours (as a task's mounts
  // are), sees a namespace made after it was started.
  int ready[2], go[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
  const std::string name = Name("propagated");
  const std::string path = dir_.PathOf(name);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char byte = 0;
    if (unshare(CLONE_NEWNS) != 0) _exit(10);
    if (mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) _exit(11);
    if (write(ready[1], "r", 1) != 1) _exit(12);
    if (read(go[0], &byte, 1) != 1) _exit(13);
    _exit(IsNsfs(path) ? 0 : 1);
  }
  close(ready[1]);
  close(go[0]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  ASSERT_TRUE(dir_.Create(name).ok());
  ASSERT_EQ(write(go[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  close(ready[0]);
  close(go[1]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: not propagated; 10-13: the child's set-up failed";
}

TEST_F(NetnsTest, IpNetnsSeesANamespaceInTheRealDirectory) {
  const std::string ip = FindIp();
  if (ip.empty()) GTEST_SKIP() << "no ip (iproute2) installed";
  NamespaceDir real;  // /var/run/netns, ip netns's
  ASSERT_TRUE(real.Prepare().ok());
  const std::string name = absl::StrCat("berth-nstest-", getpid());
  ASSERT_TRUE(real.Create(name).ok());
  absl::Cleanup remove = [&real, &name] { real.Remove(name).IgnoreError(); };

  EXPECT_THAT(Output(ip + " netns list"), HasSubstr(name));
  // "1: lo: <LOOPBACK,UP,LOWER_UP> ...", seen from inside by ip itself.
  EXPECT_THAT(Output(absl::StrCat(ip, " netns exec ", name, " ", ip,
                                  " -o link show lo")),
              HasSubstr(",UP"));

  ASSERT_TRUE(real.Remove(name).ok());
  EXPECT_THAT(Output(ip + " netns list"), ::testing::Not(HasSubstr(name)));
}

}  // namespace
}  // namespace berth::netns_hook
