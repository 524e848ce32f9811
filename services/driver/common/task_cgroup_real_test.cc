// TaskCgroup on this host's real cgroups (as root, outside Bazel's sandbox):
// the kernel reads back the limits, a forking process tree that joined
// through ProcsFiles() is killed to the last process, an 8 MiB task touching
// 64 MiB is OOM-killed and counted, a write the kernel refuses rolls back
// with real rmdir, and on a hybrid host the same on its cgroup2 mount. Skips,
// saying why, without root or writable cgroups. Every cgroup and process it
// makes is removed, its parent "/berth-test-<pid>-<n>" included.

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/test_util.h"
#include "services/driver/common/task_cgroup.h"

namespace berth {
namespace driver_common {
namespace {

namespace pb = ::berth::stats::v1;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kTouchBytes = 64ull << 20;

std::string Read(const std::string& path) {
  return std::string(absl::StripSuffix(ReadFileOrEmpty(path), "\n"));
}

// A child's body after it joined the cgroup; may report one pid through
// `report`.
using Body = void (*)(int report);

// Forks a grandchild that pauses; reports the grandchild's pid.
void TreeOfTwo(int report) {
  const pid_t grandchild = fork();
  if (grandchild == 0) {
    while (true) pause();
  }
  if (write(report, &grandchild, sizeof(grandchild)) != sizeof(grandchild)) {
    _exit(3);
  }
  while (true) pause();
}

// Forks a grandchild that keeps forking (bounded by the task's pids limit,
// and by 200 forks in any case), so that KillAll meets forks in flight;
// reports the grandchild's pid.
void ForkingTree(int report) {
  const pid_t grandchild = fork();
  if (grandchild == 0) {
    for (int i = 0; i < 200; ++i) {
      if (fork() == 0) {
        while (true) pause();
      }
      usleep(2000);
    }
    while (true) pause();
  }
  if (write(report, &grandchild, sizeof(grandchild)) != sizeof(grandchild)) {
    _exit(3);
  }
  while (true) pause();
}

// Makes a block device node (8:0, a disk's) and /dev/null's twin in a fresh
// directory and opens each: reports the two errnos (0 for opened), then
// removes them. Reads and writes nothing.
void OpenDeviceNodes(int report) {
  char dir[] = "/tmp/berth-devices-XXXXXX";
  if (mkdtemp(dir) == nullptr) _exit(2);
  const std::string block = std::string(dir) + "/disk";
  const std::string null = std::string(dir) + "/null";
  int errors[2] = {-1, -1};
  if (mknod(block.c_str(), S_IFBLK | 0600, makedev(8, 0)) == 0) {
    const int fd = open(block.c_str(), O_RDONLY | O_CLOEXEC);
    errors[0] = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
  }
  if (mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    const int fd = open(null.c_str(), O_WRONLY | O_CLOEXEC);
    errors[1] = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
  }
  unlink(block.c_str());
  unlink(null.c_str());
  rmdir(dir);
  if (write(report, errors, sizeof(errors)) != sizeof(errors)) _exit(3);
  _exit(0);
}

// Touches kTouchBytes of fresh memory; exits 0 if it survives that.
void TouchMemory(int report) {
  close(report);
  void* memory = mmap(nullptr, kTouchBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) _exit(2);
  volatile char* bytes = static_cast<volatile char*>(memory);
  for (uint64_t i = 0; i < kTouchBytes; i += 4096) bytes[i] = 1;
  _exit(0);
}

class RealTaskCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups";
    absl::StatusOr<stats::CgroupMounts> mounts =
        stats::DetectCgroupLayout("/sys/fs/cgroup");
    ASSERT_TRUE(mounts.ok()) << mounts.status();
    if (mounts->layout == pb::CGROUP_LAYOUT_NONE) {
      GTEST_SKIP() << "no cgroup file system is mounted at /sys/fs/cgroup";
    }
    mounts_ = *mounts;
    parent_ = absl::StrCat("/berth-test-", getpid(), "-",
                           absl::ToUnixMicros(absl::Now()) % 1000000000);
    // The parent's directories in the hierarchies a task uses, made here so
    // that an unwritable cgroup file system is a skip rather than a failure.
    absl::StatusOr<TaskCgroup> probe = TaskCgroup::Open(mounts_, parent_, "x");
    ASSERT_TRUE(probe.ok()) << probe.status();
    for (const std::string& dir : probe->directories()) {
      ASSERT_NO_FATAL_FAILURE(
          MakeParent(std::string(absl::StripSuffix(dir, parent_ + "/x"))));
      if (IsSkipped()) return;
    }
    // Orphaned grandchildren come back to the test, which reaps them.
    ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << std::strerror(errno);
  }

  void TearDown() override {
    for (pid_t pid : children_) kill(pid, SIGKILL);
    for (const TaskCgroup& cgroup : cgroups_) {
      EXPECT_TRUE(cgroup.KillAll(absl::Seconds(10)).ok());
    }
    ReapAll();
    for (const TaskCgroup& cgroup : cgroups_) {
      const absl::Status removed = cgroup.Remove(absl::Seconds(10));
      EXPECT_TRUE(removed.ok()) << removed;
    }
    for (auto it = parents_.rbegin(); it != parents_.rend(); ++it) {
      const std::string& dir = *it;
      // Whatever a failing test left in the parent goes too (and is a
      // failure): the host keeps no cgroup of this test.
      for (const std::string& child : Subdirectories(dir)) {
        ADD_FAILURE() << "left behind: " << child;
        WaitFor([&] { return rmdir(child.c_str()) == 0 || errno == ENOENT; },
                absl::Seconds(10));
      }
      EXPECT_TRUE(
          WaitFor([&] { return rmdir(dir.c_str()) == 0 || errno == ENOENT; },
                  absl::Seconds(10)))
          << "cannot remove " << dir << ": " << std::strerror(errno);
    }
  }

  static std::vector<std::string> Subdirectories(const std::string& path) {
    std::vector<std::string> subdirectories;
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return subdirectories;
    while (struct dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (entry->d_type == DT_DIR && name != "." && name != "..") {
        subdirectories.push_back(absl::StrCat(path, "/", name));
      }
    }
    closedir(dir);
    return subdirectories;
  }

  // mkdir <root><parent_>; skips the test if cgroups are not writable.
  void MakeParent(const std::string& root) {
    const std::string dir = root + parent_;
    if (mkdir(dir.c_str(), 0755) != 0) {
      const int error = errno;
      if (error == EROFS || error == EACCES || error == EPERM) {
        GTEST_SKIP() << "cannot create " << dir << ": " << std::strerror(error)
                     << " (run outside Bazel's sandbox, as root)";
      }
      FAIL() << "mkdir " << dir << ": " << std::strerror(error);
    }
    parents_.push_back(dir);
  }

  // Creates `<parent_>/<task_id>`, remembered for TearDown.
  absl::StatusOr<TaskCgroup> Create(const stats::CgroupMounts& mounts,
                                    const std::string& task_id,
                                    const CgroupLimits& limits) {
    absl::StatusOr<TaskCgroup> cgroup =
        TaskCgroup::Create(mounts, parent_, task_id, limits);
    if (cgroup.ok()) cgroups_.push_back(*cgroup);
    return cgroup;
  }

  // Forks a child that writes "0" to each of the cgroup's cgroup.procs
  // files, then runs `body`. *report reads what the body reports.
  pid_t Spawn(const TaskCgroup& cgroup, Body body, int* report) {
    const std::vector<std::string> procs = cgroup.ProcsFiles();
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      for (const std::string& file : procs) {
        const int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1) _exit(100);
        close(fd);
      }
      body(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    EXPECT_GT(pid, 0);
    children_.push_back(pid);
    *report = fds[0];
    return pid;
  }

  // Waits for the child `pid`; its wait status.
  int Wait(pid_t pid) {
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid) << std::strerror(errno);
    children_.erase(std::find(children_.begin(), children_.end(), pid));
    return status;
  }

  // Reaps every child and orphan that has exited or exits within 10 s of
  // being killed.
  void ReapAll() {
    WaitFor(
        [] {
          while (waitpid(-1, nullptr, WNOHANG) > 0) {
          }
          return errno == ECHILD;
        },
        absl::Seconds(10));
  }

  bool V2() const { return mounts_.layout == pb::CGROUP_LAYOUT_V2; }

  stats::CgroupMounts mounts_;
  std::string parent_;
  std::vector<std::string> parents_;
  std::vector<TaskCgroup> cgroups_;
  std::vector<pid_t> children_;
};

TEST_F(RealTaskCgroupTest, KernelReadsBackTheLimits) {
  CgroupLimits limits;
  limits.cpu_shares = 512;
  limits.cpu_millicores = 1500;
  limits.memory_bytes = 64 << 20;
  limits.pids_limit = 64;
  absl::StatusOr<TaskCgroup> cgroup = Create(mounts_, "limits", limits);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  std::cout << pb::CgroupLayout_Name(mounts_.layout) << " task cgroup "
            << cgroup->path() << " in "
            << absl::StrJoin(cgroup->directories(), " ") << "\n";
  EXPECT_EQ(cgroup->path(), parent_ + "/limits");
  for (const std::string& dir : cgroup->directories()) {
    EXPECT_TRUE(PathExists(dir + "/cgroup.procs")) << dir;
  }
  if (V2()) {
    const std::string dir = mounts_.v2 + cgroup->path();
    EXPECT_EQ(Read(dir + "/cpu.weight"), "20");
    EXPECT_EQ(Read(dir + "/cpu.max"), "150000 100000");
    EXPECT_EQ(Read(dir + "/memory.max"), "67108864");
    if (PathExists(dir + "/memory.swap.max")) {
      EXPECT_EQ(Read(dir + "/memory.swap.max"), "0");
    }
    EXPECT_EQ(Read(dir + "/pids.max"), "64");
  } else {
    const std::string cpu = mounts_.V1Mount("cpu") + cgroup->path();
    const std::string memory = mounts_.V1Mount("memory") + cgroup->path();
    EXPECT_EQ(Read(cpu + "/cpu.shares"), "512");
    EXPECT_EQ(Read(cpu + "/cpu.cfs_period_us"), "100000");
    EXPECT_EQ(Read(cpu + "/cpu.cfs_quota_us"), "150000");
    EXPECT_EQ(Read(memory + "/memory.limit_in_bytes"), "67108864");
    if (PathExists(memory + "/memory.memsw.limit_in_bytes")) {
      EXPECT_EQ(Read(memory + "/memory.memsw.limit_in_bytes"), "67108864");
    } else {
      std::cout << "no memory.memsw.limit_in_bytes: no swap accounting\n";
    }
    EXPECT_EQ(Read(mounts_.V1Mount("pids") + cgroup->path() + "/pids.max"),
              "64");
  }

  ASSERT_TRUE(cgroup->Remove(absl::Seconds(10)).ok());
  for (const std::string& dir : cgroup->directories()) {
    EXPECT_FALSE(PathExists(dir)) << dir;
  }
}

// Issue 15: a task opens only the devices of its /dev. On v1 the devices
// controller enforces it; on v2 nothing does (no BPF device program), and
// the test says so.
TEST_F(RealTaskCgroupTest, RestrictedDevicesOpenOnlyTheTasksOwn) {
  CgroupLimits limits;
  limits.restrict_devices = true;
  absl::StatusOr<TaskCgroup> cgroup = Create(mounts_, "devices", limits);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  if (!cgroup->DeviceRulesApplied()) {
    EXPECT_TRUE(V2() || mounts_.V1Mount("devices").empty());
    std::cout << "LIMITATION: no cgroup v1 devices hierarchy (layout "
              << pb::CgroupLayout_Name(mounts_.layout)
              << "): device rules are not enforced by the cgroup; a task "
                 "relies on its own /dev and nodev mounts\n";
    ASSERT_TRUE(cgroup->Remove(absl::Seconds(10)).ok());
    return;
  }
  const std::string dir = mounts_.V1Mount("devices") + cgroup->path();
  std::string expected;
  for (const char* rule : kAllowedDeviceRules) {
    absl::StrAppend(&expected, rule, "\n");
  }
  EXPECT_EQ(Read(dir + "/devices.list") + "\n", expected);
  int report = -1;
  const pid_t child = Spawn(*cgroup, OpenDeviceNodes, &report);
  int errors[2] = {-1, -1};
  ASSERT_EQ(read(report, errors, sizeof(errors)), sizeof(errors));
  close(report);
  EXPECT_EQ(Wait(child), 0);
  EXPECT_EQ(errors[0], EPERM) << "a block device opened in the task's cgroup";
  EXPECT_EQ(errors[1], 0) << "its /dev/null twin did not open";
  ASSERT_TRUE(cgroup->Remove(absl::Seconds(10)).ok());
}

TEST_F(RealTaskCgroupTest, KillAllEmptiesAForkingTree) {
  CgroupLimits limits;
  limits.pids_limit = 16;  // bounds ForkingTree
  absl::StatusOr<TaskCgroup> cgroup = Create(mounts_, "tree", limits);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  int report = -1;
  const pid_t child = Spawn(*cgroup, ForkingTree, &report);
  pid_t grandchild = 0;
  ASSERT_EQ(read(report, &grandchild, sizeof(grandchild)), sizeof(grandchild))
      << "the child could not join " << cgroup->path();
  close(report);
  absl::StatusOr<std::vector<pid_t>> pids;
  ASSERT_TRUE(WaitFor([&] {
    pids = cgroup->Pids();
    return pids.ok() && pids->size() >= 5;
  })) << pids.status();
  EXPECT_THAT(*pids, ::testing::IsSupersetOf({child, grandchild}));
  std::cout << pids->size() << " processes in " << cgroup->path()
            << " before KillAll\n";

  const absl::Status killed = cgroup->KillAll(absl::Seconds(10));
  ASSERT_TRUE(killed.ok()) << killed;
  pids = cgroup->Pids();
  ASSERT_TRUE(pids.ok()) << pids.status();
  EXPECT_THAT(*pids, IsEmpty());
  const int status = Wait(child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ReapAll();

  const absl::Status removed = cgroup->Remove(absl::Seconds(10));
  ASSERT_TRUE(removed.ok()) << removed;
  for (const std::string& dir : cgroup->directories()) {
    EXPECT_FALSE(PathExists(dir)) << dir;
  }
}

TEST_F(RealTaskCgroupTest, TaskAboveItsMemoryLimitIsOomKilledAndCounted) {
  CgroupLimits limits;
  limits.memory_bytes = 8 << 20;
  absl::StatusOr<TaskCgroup> cgroup = Create(mounts_, "oom", limits);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  absl::StatusOr<uint64_t> count = cgroup->OomKillCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 0u);

  int report = -1;
  const pid_t child = Spawn(*cgroup, TouchMemory, &report);
  close(report);
  const int status = Wait(child);
  ASSERT_TRUE(WIFSIGNALED(status))
      << "the child touched " << kTouchBytes << " bytes under an 8 MiB limit ("
      << (WIFEXITED(status) ? absl::StrCat("exit ", WEXITSTATUS(status))
                            : std::string("?"))
      << ")";
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  count = cgroup->OomKillCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_GE(*count, 1u);
  std::cout << "oom_kill " << *count << " after touching " << kTouchBytes
            << " bytes under " << limits.memory_bytes << "\n";
  ASSERT_TRUE(cgroup->Remove(absl::Seconds(10)).ok());
}

TEST_F(RealTaskCgroupTest, LimitTheKernelRefusesRollsBack) {
  // A quota of 100 us is below the kernel's 1 ms minimum: EINVAL.
  CgroupLimits limits;
  limits.memory_bytes = 64 << 20;
  limits.cpu_millicores = 1;
  absl::StatusOr<TaskCgroup> cgroup = Create(mounts_, "refused", limits);
  ASSERT_FALSE(cgroup.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(cgroup.status())) << cgroup.status();
  EXPECT_THAT(cgroup.status().message(),
              HasSubstr(absl::StrCat("resources.cpu_millicores: writing 100",
                                     V2() ? " 100000" : "", " to ")));
  EXPECT_THAT(cgroup.status().message(),
              HasSubstr(V2() ? "/cpu.max" : "/cpu.cfs_quota_us"));
  std::cout << "refused: " << cgroup.status() << "\n";
  absl::StatusOr<TaskCgroup> opened =
      TaskCgroup::Open(mounts_, parent_, "refused");
  ASSERT_TRUE(opened.ok()) << opened.status();
  for (const std::string& dir : opened->directories()) {
    EXPECT_FALSE(PathExists(dir)) << dir;
  }
  for (const std::string& dir : parents_) EXPECT_TRUE(PathExists(dir)) << dir;
}

TEST_F(RealTaskCgroupTest, ExistingCgroupIsRefused) {
  absl::StatusOr<TaskCgroup> first = Create(mounts_, "twice", CgroupLimits());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<TaskCgroup> second = Create(mounts_, "twice", CgroupLimits());
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr(first->directories()[0]));
  for (const std::string& dir : first->directories()) {
    EXPECT_TRUE(PathExists(dir)) << dir;
  }
}

// The hybrid layout's cgroup2 mount taken as a V2 layout: the v2 code path
// (cgroup.kill, one directory) on a kernel that keeps cpu, memory and pids
// on v1, so those limits cannot be had there.
TEST_F(RealTaskCgroupTest, HybridCgroup2MountAsV2) {
  if (mounts_.layout != pb::CGROUP_LAYOUT_HYBRID) {
    GTEST_SKIP() << "not a hybrid host (layout "
                 << pb::CgroupLayout_Name(mounts_.layout) << ")";
  }
  stats::CgroupMounts v2;
  v2.layout = pb::CGROUP_LAYOUT_V2;
  v2.v2 = mounts_.v2;
  std::cout << "cgroup2 at " << v2.v2 << " has controllers \""
            << Read(v2.v2 + "/cgroup.controllers") << "\"\n";
  ASSERT_NO_FATAL_FAILURE(MakeParent(v2.v2));
  if (IsSkipped()) return;

  CgroupLimits limits;
  limits.memory_bytes = 8 << 20;
  absl::StatusOr<TaskCgroup> cgroup = Create(v2, "limited", limits);
  if (!cgroup.ok()) {
    EXPECT_TRUE(absl::IsFailedPrecondition(cgroup.status())) << cgroup.status();
    EXPECT_THAT(cgroup.status().message(), HasSubstr("resources.memory_bytes"));
    EXPECT_FALSE(PathExists(v2.v2 + parent_ + "/limited"));
    std::cout << "memory limit on cgroup2: " << cgroup.status() << "\n";
  }

  cgroup = Create(v2, "plain", CgroupLimits());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_THAT(cgroup->directories(), ElementsAre(v2.v2 + parent_ + "/plain"));
  int report = -1;
  const pid_t child = Spawn(*cgroup, TreeOfTwo, &report);
  pid_t grandchild = 0;
  ASSERT_EQ(read(report, &grandchild, sizeof(grandchild)), sizeof(grandchild))
      << "the child could not join " << cgroup->path();
  close(report);
  absl::StatusOr<std::vector<pid_t>> pids = cgroup->Pids();
  ASSERT_TRUE(pids.ok()) << pids.status();
  std::vector<pid_t> expected = {child, grandchild};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(*pids, expected);
  std::cout << "cgroup.kill "
            << (PathExists(cgroup->directories()[0] + "/cgroup.kill")
                    ? "present"
                    : "absent")
            << "\n";

  const absl::Status killed = cgroup->KillAll(absl::Seconds(10));
  ASSERT_TRUE(killed.ok()) << killed;
  const int status = Wait(child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ReapAll();
  const absl::Status removed = cgroup->Remove(absl::Seconds(10));
  ASSERT_TRUE(removed.ok()) << removed;
  EXPECT_FALSE(PathExists(cgroup->directories()[0]));
  absl::StatusOr<uint64_t> count = cgroup->OomKillCount();
  EXPECT_TRUE(absl::IsNotFound(count.status())) << count.status();
}

}  // namespace
}  // namespace driver_common
}  // namespace berth
