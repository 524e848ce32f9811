// TaskCgroup on fixture trees: ordinary directories laid out like V1, V2,
// HYBRID and NONE cgroup roots (stats::CgroupMountsForLayout), whose
// interface files the test puts in as the kernel would (see Fixture).

#include "services/driver/common/task_cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/test_util.h"

namespace berth {
namespace driver_common {
namespace {

namespace pb = ::berth::stats::v1;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::ShortTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kUnlimitedV1[] = "9223372036854771712\n";

void Put(const std::string& path, absl::string_view content) {
  std::ofstream(path, std::ios::trunc) << content;
  ASSERT_TRUE(PathExists(path)) << path;
}

// What a fixture file holds, without the trailing newline the kernel adds.
std::string Read(const std::string& path) {
  return std::string(absl::StripSuffix(ReadFileOrEmpty(path), "\n"));
}

// A fixture cgroup root. Hooks() fills each directory TaskCgroup makes with
// the files the kernel would give it (v1: those of the hierarchy's
// controllers; v2: those of the controllers its parent enabled, with the
// default values) and lets Remove empty it before its rmdir.
class Fixture {
 public:
  explicit Fixture(pb::CgroupLayout layout)
      : mounts_(stats::CgroupMountsForLayout(layout, temp_.path())) {
    // CgroupMountsForLayout gives cpu, cpuacct and memory; a task also uses
    // pids and freezer, which this machine mounts.
    if (layout == pb::CGROUP_LAYOUT_V1 || layout == pb::CGROUP_LAYOUT_HYBRID) {
      mounts_.v1["pids"] = temp_.Join("pids");
      mounts_.v1["freezer"] = temp_.Join("freezer");
    }
    MakeRoots();
  }

  // Replaces the v1 mounts (call before Create).
  void SetV1Mounts(std::map<std::string, std::string> v1) {
    mounts_.v1 = std::move(v1);
    MakeRoots();
  }

  const stats::CgroupMounts& mounts() const { return mounts_; }
  std::string Join(absl::string_view name) const { return temp_.Join(name); }

  // Files a new directory should not get (a kernel without swap accounting).
  void Omit(const std::string& name) { omitted_.insert(name); }
  // Files a new directory gets as a directory, so that writing them fails.
  void Break(const std::string& name) { broken_.insert(name); }

  CgroupFixtureHooks Hooks() {
    CgroupFixtureHooks hooks;
    hooks.after_mkdir = [this](const std::string& dir) { Populate(dir); };
    hooks.empty_before_rmdir = true;
    return hooks;
  }

 private:
  void MakeRoots() {
    for (const auto& [controller, mount] : mounts_.v1) {
      mkdir(mount.c_str(), 0755);
    }
    if (!mounts_.v2.empty()) {
      mkdir(mounts_.v2.c_str(), 0755);
      Put(mounts_.v2 + "/cgroup.controllers",
          mounts_.layout == pb::CGROUP_LAYOUT_HYBRID
              ? "hugetlb\n"
              : "cpuset cpu io memory hugetlb pids rdma misc\n");
      Put(mounts_.v2 + "/cgroup.subtree_control", "");
      Put(mounts_.v2 + "/cgroup.procs", "1\n");
    }
  }

  void File(const std::string& dir, const std::string& name,
            absl::string_view content) {
    if (omitted_.count(name) > 0) return;
    const std::string path = absl::StrCat(dir, "/", name);
    if (broken_.count(name) > 0) {
      ASSERT_EQ(mkdir(path.c_str(), 0755), 0) << path;
      return;
    }
    Put(path, content);
  }

  void Populate(const std::string& dir) {
    std::set<std::string> controllers;
    if (mounts_.layout == pb::CGROUP_LAYOUT_V2) {
      // The controllers the parent enabled for its children.
      const std::string parent = dir.substr(0, dir.rfind('/'));
      const std::string enabled = absl::StrReplaceAll(
          Read(parent + "/cgroup.subtree_control"), {{"+", ""}});
      for (absl::string_view c :
           absl::StrSplit(enabled, ' ', absl::SkipEmpty())) {
        controllers.emplace(c);
      }
      File(dir, "cgroup.controllers", absl::StrJoin(controllers, " "));
      File(dir, "cgroup.subtree_control", "");
      File(dir, "cgroup.kill", "");
      File(dir, "cgroup.procs", "");
      if (controllers.count("cpu")) {
        File(dir, "cpu.weight", "100\n");
        File(dir, "cpu.max", "max 100000\n");
      }
      if (controllers.count("memory")) {
        File(dir, "memory.max", "max\n");
        File(dir, "memory.swap.max", "max\n");
        File(dir, "memory.events",
             "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
      }
      if (controllers.count("pids")) File(dir, "pids.max", "max\n");
      return;
    }
    for (const auto& [controller, mount] : mounts_.v1) {
      if (absl::StartsWith(dir, mount + "/")) controllers.insert(controller);
    }
    File(dir, "cgroup.procs", "");
    File(dir, "tasks", "");
    if (controllers.count("cpu")) {
      File(dir, "cpu.shares", "1024\n");
      File(dir, "cpu.cfs_period_us", "100000\n");
      File(dir, "cpu.cfs_quota_us", "-1\n");
    }
    if (controllers.count("cpuacct")) File(dir, "cpuacct.usage", "0\n");
    if (controllers.count("memory")) {
      File(dir, "memory.limit_in_bytes", kUnlimitedV1);
      File(dir, "memory.memsw.limit_in_bytes", kUnlimitedV1);
      File(dir, "memory.oom_control",
           "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
    }
    if (controllers.count("pids")) File(dir, "pids.max", "max\n");
    if (controllers.count("freezer")) File(dir, "freezer.state", "THAWED\n");
  }

  ShortTempDir temp_;
  stats::CgroupMounts mounts_;
  std::set<std::string> omitted_;
  std::set<std::string> broken_;
};

CgroupLimits AllLimits() {
  CgroupLimits limits;
  limits.cpu_shares = 512;
  limits.cpu_millicores = 1500;
  limits.memory_bytes = 1 << 30;
  limits.pids_limit = 100;
  return limits;
}

// --- V1 and HYBRID ---------------------------------------------------------

TEST(TaskCgroupV1Test, CreateMakesOneDirectoryPerHierarchyAndWritesLimits) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", AllLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(cgroup->path(), "/berth/t1");
  EXPECT_THAT(cgroup->directories(),
              ElementsAre(fixture.Join("cpu/berth/t1"),
                          fixture.Join("cpuacct/berth/t1"),
                          fixture.Join("memory/berth/t1"),
                          fixture.Join("pids/berth/t1"),
                          fixture.Join("freezer/berth/t1")));
  EXPECT_THAT(cgroup->ProcsFiles(),
              ElementsAre(fixture.Join("cpu/berth/t1/cgroup.procs"),
                          fixture.Join("cpuacct/berth/t1/cgroup.procs"),
                          fixture.Join("memory/berth/t1/cgroup.procs"),
                          fixture.Join("pids/berth/t1/cgroup.procs"),
                          fixture.Join("freezer/berth/t1/cgroup.procs")));
  for (const std::string& dir : cgroup->directories()) {
    EXPECT_TRUE(PathExists(dir)) << dir;
  }
  EXPECT_EQ(Read(fixture.Join("cpu/berth/t1/cpu.shares")), "512");
  EXPECT_EQ(Read(fixture.Join("cpu/berth/t1/cpu.cfs_period_us")), "100000");
  EXPECT_EQ(Read(fixture.Join("cpu/berth/t1/cpu.cfs_quota_us")), "150000");
  EXPECT_EQ(Read(fixture.Join("memory/berth/t1/memory.limit_in_bytes")),
            "1073741824");
  EXPECT_EQ(Read(fixture.Join("memory/berth/t1/memory.memsw.limit_in_bytes")),
            "1073741824");
  EXPECT_EQ(Read(fixture.Join("pids/berth/t1/pids.max")), "100");

  ASSERT_TRUE(cgroup->Remove(absl::Seconds(1)).ok());
  for (const std::string& dir : cgroup->directories()) {
    EXPECT_FALSE(PathExists(dir)) << dir;
  }
  // The parent stays: other tasks live in it.
  EXPECT_TRUE(PathExists(fixture.Join("memory/berth")));
}

TEST(TaskCgroupV1Test, ZeroLimitsLeaveTheDefaults) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(Read(fixture.Join("cpu/berth/t1/cpu.shares")), "1024");
  EXPECT_EQ(Read(fixture.Join("cpu/berth/t1/cpu.cfs_quota_us")), "-1");
  EXPECT_EQ(Read(fixture.Join("memory/berth/t1/memory.limit_in_bytes")) + "\n",
            kUnlimitedV1);
  EXPECT_EQ(
      Read(fixture.Join("memory/berth/t1/memory.memsw.limit_in_bytes")) + "\n",
      kUnlimitedV1);
  EXPECT_EQ(Read(fixture.Join("pids/berth/t1/pids.max")), "max");
}

TEST(TaskCgroupV1Test, WithoutSwapAccountingOnlyTheMemoryLimitIsWritten) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  fixture.Omit("memory.memsw.limit_in_bytes");
  CgroupLimits limits;
  limits.memory_bytes = 8 << 20;
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", limits, fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(Read(fixture.Join("memory/berth/t1/memory.limit_in_bytes")),
            "8388608");
  EXPECT_FALSE(
      PathExists(fixture.Join("memory/berth/t1/memory.memsw.limit_in_bytes")));
}

TEST(TaskCgroupV1Test, CoMountedControllersShareOneDirectory) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  fixture.SetV1Mounts({{"cpu", fixture.Join("cpu,cpuacct")},
                       {"cpuacct", fixture.Join("cpu,cpuacct")},
                       {"memory", fixture.Join("memory")}});
  CgroupLimits limits;
  limits.cpu_shares = 2048;
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "berth/", "t1", limits, fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(cgroup->path(), "/berth/t1");
  EXPECT_THAT(cgroup->directories(),
              ElementsAre(fixture.Join("cpu,cpuacct/berth/t1"),
                          fixture.Join("memory/berth/t1")));
  EXPECT_EQ(Read(fixture.Join("cpu,cpuacct/berth/t1/cpu.shares")), "2048");
}

TEST(TaskCgroupV1Test, LimitWithoutItsHierarchyFailsNamingTheField) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  fixture.SetV1Mounts(
      {{"cpu", fixture.Join("cpu")}, {"memory", fixture.Join("memory")}});
  CgroupLimits limits;
  limits.pids_limit = 10;
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", limits, fixture.Hooks());
  ASSERT_TRUE(absl::IsFailedPrecondition(cgroup.status())) << cgroup.status();
  EXPECT_THAT(cgroup.status().message(), HasSubstr("resources.pids_limit"));
  EXPECT_THAT(cgroup.status().message(), HasSubstr("pids"));
  EXPECT_FALSE(PathExists(fixture.Join("cpu/berth/t1")));
  EXPECT_FALSE(PathExists(fixture.Join("memory/berth/t1")));

  // Without that limit the task is fine with the hierarchies there are.
  cgroup = TaskCgroup::Create(fixture.mounts(), "/berth", "t1", CgroupLimits(),
                              fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(cgroup->directories().size(), 2u);
}

TEST(TaskCgroupV1Test, HybridUsesTheV1HierarchiesOnly) {
  Fixture fixture(pb::CGROUP_LAYOUT_HYBRID);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", AllLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(cgroup->layout(), pb::CGROUP_LAYOUT_HYBRID);
  EXPECT_EQ(cgroup->directories().size(), 5u);
  EXPECT_EQ(Read(fixture.Join("cpu/berth/t1/cpu.shares")), "512");
  EXPECT_EQ(Read(fixture.Join("cpu/berth/t1/cpu.cfs_quota_us")), "150000");
  EXPECT_EQ(Read(fixture.Join("memory/berth/t1/memory.limit_in_bytes")),
            "1073741824");
  EXPECT_EQ(Read(fixture.Join("pids/berth/t1/pids.max")), "100");
  EXPECT_FALSE(PathExists(fixture.Join("unified/berth")));
  EXPECT_EQ(Read(fixture.Join("unified/cgroup.subtree_control")), "");
}

// --- V2 --------------------------------------------------------------------

TEST(TaskCgroupV2Test, CreateEnablesControllersAndWritesLimits) {
  Fixture fixture(pb::CGROUP_LAYOUT_V2);
  CgroupLimits limits = AllLimits();
  limits.cpu_shares = 1024;
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", limits, fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(cgroup->path(), "/berth/t1");
  EXPECT_THAT(cgroup->directories(), ElementsAre(fixture.Join("berth/t1")));
  EXPECT_THAT(cgroup->ProcsFiles(),
              ElementsAre(fixture.Join("berth/t1/cgroup.procs")));
  // The root and the parent hand cpu, memory and pids down.
  EXPECT_EQ(Read(fixture.Join("cgroup.subtree_control")), "+cpu +memory +pids");
  EXPECT_EQ(Read(fixture.Join("berth/cgroup.subtree_control")),
            "+cpu +memory +pids");
  EXPECT_EQ(Read(fixture.Join("berth/t1/cpu.weight")), "39");
  EXPECT_EQ(Read(fixture.Join("berth/t1/cpu.max")), "150000 100000");
  EXPECT_EQ(Read(fixture.Join("berth/t1/memory.max")), "1073741824");
  EXPECT_EQ(Read(fixture.Join("berth/t1/memory.swap.max")), "0");
  EXPECT_EQ(Read(fixture.Join("berth/t1/pids.max")), "100");
  // Nothing enabled below the task.
  EXPECT_EQ(Read(fixture.Join("berth/t1/cgroup.subtree_control")), "");

  ASSERT_TRUE(cgroup->Remove(absl::Seconds(1)).ok());
  EXPECT_FALSE(PathExists(fixture.Join("berth/t1")));
  EXPECT_TRUE(PathExists(fixture.Join("berth")));
}

TEST(TaskCgroupV2Test, ZeroLimitsLeaveTheDefaults) {
  Fixture fixture(pb::CGROUP_LAYOUT_V2);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(Read(fixture.Join("berth/t1/cpu.weight")), "100");
  EXPECT_EQ(Read(fixture.Join("berth/t1/cpu.max")), "max 100000");
  EXPECT_EQ(Read(fixture.Join("berth/t1/memory.max")), "max");
  EXPECT_EQ(Read(fixture.Join("berth/t1/memory.swap.max")), "max");
  EXPECT_EQ(Read(fixture.Join("berth/t1/pids.max")), "max");
}

TEST(TaskCgroupV2Test, SharesMapToWeightClamped) {
  struct Case {
    uint64_t shares;
    const char* weight;
  };
  const Case cases[] = {
      {1, "1"},          {2, "1"},
      {100, "4"},        {1024, "39"},
      {10000, "382"},    {262144, "10000"},
      {262145, "10000"}, {1ull << 40, "10000"},
  };
  Fixture fixture(pb::CGROUP_LAYOUT_V2);
  for (const Case& c : cases) {
    CgroupLimits limits;
    limits.cpu_shares = c.shares;
    const std::string id = absl::StrCat("shares-", c.shares);
    absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
        fixture.mounts(), "/berth", id, limits, fixture.Hooks());
    ASSERT_TRUE(cgroup.ok()) << cgroup.status();
    EXPECT_EQ(Read(fixture.Join(absl::StrCat("berth/", id, "/cpu.weight"))),
              c.weight)
        << "shares " << c.shares;
  }
}

TEST(TaskCgroupV2Test, EnablesOnlyListedControllersOnEveryLevel) {
  Fixture fixture(pb::CGROUP_LAYOUT_V2);
  Put(fixture.Join("cgroup.controllers"), "cpuset cpu io memory\n");
  CgroupLimits limits;
  limits.memory_bytes = 1 << 20;
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/a/b", "t1", limits, fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(cgroup->path(), "/a/b/t1");
  EXPECT_EQ(Read(fixture.Join("cgroup.subtree_control")), "+cpu +memory");
  EXPECT_EQ(Read(fixture.Join("a/cgroup.subtree_control")), "+cpu +memory");
  EXPECT_EQ(Read(fixture.Join("a/b/cgroup.subtree_control")), "+cpu +memory");
  EXPECT_EQ(Read(fixture.Join("a/b/t1/memory.max")), "1048576");
  EXPECT_FALSE(PathExists(fixture.Join("a/b/t1/pids.max")));

  // A pids limit cannot be had here: the error names the field, and the
  // task's directory does not stay.
  limits.pids_limit = 5;
  cgroup = TaskCgroup::Create(fixture.mounts(), "/a/b", "t2", limits,
                              fixture.Hooks());
  ASSERT_TRUE(absl::IsFailedPrecondition(cgroup.status())) << cgroup.status();
  EXPECT_THAT(cgroup.status().message(), HasSubstr("resources.pids_limit"));
  EXPECT_THAT(cgroup.status().message(), HasSubstr("pids.max"));
  EXPECT_FALSE(PathExists(fixture.Join("a/b/t2")));
}

TEST(TaskCgroupV2Test, EnabledControllersAreNotWrittenAgain) {
  Fixture fixture(pb::CGROUP_LAYOUT_V2);
  // Enabled already, in the kernel's format (no "+"): left as it is.
  Put(fixture.Join("cgroup.subtree_control"), "cpu memory pids\n");
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(Read(fixture.Join("cgroup.subtree_control")), "cpu memory pids");
  EXPECT_EQ(Read(fixture.Join("berth/cgroup.subtree_control")),
            "+cpu +memory +pids");
}

TEST(TaskCgroupV2Test, WithoutSwapMaxOnlyMemoryMaxIsWritten) {
  Fixture fixture(pb::CGROUP_LAYOUT_V2);
  fixture.Omit("memory.swap.max");
  CgroupLimits limits;
  limits.memory_bytes = 4096;
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", limits, fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_EQ(Read(fixture.Join("berth/t1/memory.max")), "4096");
  EXPECT_FALSE(PathExists(fixture.Join("berth/t1/memory.swap.max")));
}

TEST(TaskCgroupV2Test, KillAllWritesCgroupKill) {
  Fixture fixture(pb::CGROUP_LAYOUT_V2);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  ASSERT_TRUE(cgroup->KillAll(absl::Seconds(1)).ok());
  EXPECT_EQ(Read(fixture.Join("berth/t1/cgroup.kill")), "1");
}

// --- Every layout ----------------------------------------------------------

TEST(TaskCgroupTest, NoneLayoutIsFailedPrecondition) {
  Fixture fixture(pb::CGROUP_LAYOUT_NONE);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), fixture.Hooks());
  EXPECT_TRUE(absl::IsFailedPrecondition(cgroup.status())) << cgroup.status();
  EXPECT_THAT(cgroup.status().message(), HasSubstr("t1"));
  EXPECT_THAT(cgroup.status().message(), HasSubstr("CGROUP_LAYOUT_NONE"));
  cgroup = TaskCgroup::Open(fixture.mounts(), "/berth", "t1");
  EXPECT_TRUE(absl::IsFailedPrecondition(cgroup.status())) << cgroup.status();
  EXPECT_FALSE(PathExists(fixture.Join("berth")));
}

TEST(TaskCgroupTest, ExistingCgroupIsRefusedAndLeftAlone) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  ASSERT_TRUE(TaskCgroup::Create(fixture.mounts(), "/berth", "other",
                                 CgroupLimits(), fixture.Hooks())
                  .ok());
  // Only the memory hierarchy has it: cpu and cpuacct come first and are
  // made, then taken back.
  const std::string existing = fixture.Join("memory/berth/t1");
  ASSERT_EQ(mkdir(existing.c_str(), 0755), 0);
  Put(existing + "/memory.limit_in_bytes", "4096\n");
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", AllLimits(), fixture.Hooks());
  ASSERT_TRUE(absl::IsAlreadyExists(cgroup.status())) << cgroup.status();
  EXPECT_THAT(cgroup.status().message(), HasSubstr(existing));
  EXPECT_FALSE(PathExists(fixture.Join("cpu/berth/t1")));
  EXPECT_FALSE(PathExists(fixture.Join("cpuacct/berth/t1")));
  EXPECT_FALSE(PathExists(fixture.Join("pids/berth/t1")));
  EXPECT_EQ(Read(existing + "/memory.limit_in_bytes"), "4096");
  EXPECT_TRUE(PathExists(fixture.Join("cpu/berth/other")));

  // On v2 too.
  Fixture v2(pb::CGROUP_LAYOUT_V2);
  ASSERT_TRUE(TaskCgroup::Create(v2.mounts(), "/berth", "t1", CgroupLimits(),
                                 v2.Hooks())
                  .ok());
  cgroup = TaskCgroup::Create(v2.mounts(), "/berth", "t1", CgroupLimits(),
                              v2.Hooks());
  ASSERT_TRUE(absl::IsAlreadyExists(cgroup.status())) << cgroup.status();
  EXPECT_THAT(cgroup.status().message(), HasSubstr(v2.Join("berth/t1")));
  EXPECT_TRUE(PathExists(v2.Join("berth/t1/cpu.max")));
}

TEST(TaskCgroupTest, FailingLimitWriteRemovesTheTaskDirectories) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  fixture.Break("memory.limit_in_bytes");
  CgroupLimits limits;
  limits.cpu_shares = 512;
  limits.memory_bytes = 1048576;
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", limits, fixture.Hooks());
  ASSERT_FALSE(cgroup.ok());
  EXPECT_EQ(cgroup.status().message(),
            absl::StrCat("resources.memory_bytes: writing 1048576 to ",
                         fixture.Join("memory/berth/t1/memory.limit_in_bytes"),
                         ": Is a directory"));
  for (const char* controller :
       {"cpu", "cpuacct", "memory", "pids", "freezer"}) {
    EXPECT_FALSE(
        PathExists(fixture.Join(absl::StrCat(controller, "/berth/t1"))))
        << controller;
    EXPECT_TRUE(PathExists(fixture.Join(absl::StrCat(controller, "/berth"))))
        << controller;
  }

  Fixture v2(pb::CGROUP_LAYOUT_V2);
  v2.Break("cpu.max");
  limits = CgroupLimits();
  limits.cpu_millicores = 250;
  cgroup = TaskCgroup::Create(v2.mounts(), "/berth", "t1", limits, v2.Hooks());
  ASSERT_FALSE(cgroup.ok());
  EXPECT_EQ(cgroup.status().message(),
            absl::StrCat("resources.cpu_millicores: writing 25000 100000 to ",
                         v2.Join("berth/t1/cpu.max"), ": Is a directory"));
  EXPECT_FALSE(PathExists(v2.Join("berth/t1")));
  EXPECT_TRUE(PathExists(v2.Join("berth")));
}

TEST(TaskCgroupTest, FailingRollbackIsReportedToo) {
  Fixture fixture(pb::CGROUP_LAYOUT_V2);
  fixture.Break("pids.max");
  CgroupFixtureHooks hooks = fixture.Hooks();
  hooks.empty_before_rmdir = false;  // rmdir then finds files: ENOTEMPTY
  CgroupLimits limits;
  limits.pids_limit = 3;
  absl::StatusOr<TaskCgroup> cgroup =
      TaskCgroup::Create(fixture.mounts(), "/berth", "t1", limits, hooks);
  ASSERT_FALSE(cgroup.ok());
  EXPECT_THAT(cgroup.status().message(),
              HasSubstr("resources.pids_limit: writing 3 to"));
  EXPECT_THAT(cgroup.status().message(),
              HasSubstr(absl::StrCat("then removing what was made: removing "
                                     "the cgroup directory ",
                                     fixture.Join("berth/t1"))));
}

TEST(TaskCgroupTest, InvalidNamesAreRefusedBeforeAnythingIsMade) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  for (const char* id : {"", ".", "..", "a/b", "/t1"}) {
    absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
        fixture.mounts(), "/berth", id, CgroupLimits(), fixture.Hooks());
    EXPECT_TRUE(absl::IsInvalidArgument(cgroup.status()))
        << "\"" << id << "\": " << cgroup.status();
    EXPECT_THAT(cgroup.status().message(), HasSubstr("task_id"));
    cgroup = TaskCgroup::Open(fixture.mounts(), "/berth", id);
    EXPECT_TRUE(absl::IsInvalidArgument(cgroup.status())) << id;
  }
  for (const char* parent : {"/berth/..", "../etc", "/a/./b"}) {
    absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
        fixture.mounts(), parent, "t1", CgroupLimits(), fixture.Hooks());
    EXPECT_TRUE(absl::IsInvalidArgument(cgroup.status()))
        << parent << ": " << cgroup.status();
    EXPECT_THAT(cgroup.status().message(), HasSubstr("parent"));
  }
  EXPECT_FALSE(PathExists(fixture.Join("cpu/berth")));
}

TEST(TaskCgroupTest, RootParentAndOpenMakeNothing) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  absl::StatusOr<TaskCgroup> opened =
      TaskCgroup::Open(fixture.mounts(), "/", "t1", fixture.Hooks());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->path(), "/t1");
  EXPECT_FALSE(PathExists(fixture.Join("cpu/t1")));
  absl::StatusOr<std::vector<pid_t>> pids = opened->Pids();
  ASSERT_TRUE(pids.ok()) << pids.status();
  EXPECT_THAT(*pids, IsEmpty());

  absl::StatusOr<TaskCgroup> created = TaskCgroup::Create(
      fixture.mounts(), "/", "t1", CgroupLimits(), fixture.Hooks());
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->directories(), opened->directories());
  EXPECT_TRUE(PathExists(fixture.Join("cpu/t1")));
  // The opened one removes what the created one made; twice is fine.
  ASSERT_TRUE(opened->Remove(absl::Seconds(1)).ok());
  EXPECT_FALSE(PathExists(fixture.Join("cpu/t1")));
  EXPECT_TRUE(opened->Remove(absl::Seconds(1)).ok());
}

TEST(TaskCgroupTest, PidsAreTheUnionOverHierarchies) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  Put(fixture.Join("cpu/berth/t1/cgroup.procs"), "50\n3\n");
  Put(fixture.Join("memory/berth/t1/cgroup.procs"), "3\n7\n50\n");
  absl::StatusOr<std::vector<pid_t>> pids = cgroup->Pids();
  ASSERT_TRUE(pids.ok()) << pids.status();
  EXPECT_THAT(*pids, ElementsAre(3, 7, 50));

  Put(fixture.Join("pids/berth/t1/cgroup.procs"), "7\nseven\n");
  pids = cgroup->Pids();
  EXPECT_FALSE(pids.ok());
  EXPECT_THAT(pids.status().message(),
              HasSubstr(fixture.Join("pids/berth/t1/cgroup.procs")));
}

TEST(TaskCgroupTest, OomKillCountReadsBothFormats) {
  Fixture v1(pb::CGROUP_LAYOUT_V1);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      v1.mounts(), "/berth", "t1", CgroupLimits(), v1.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  absl::StatusOr<uint64_t> count = cgroup->OomKillCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 0u);
  Put(v1.Join("memory/berth/t1/memory.oom_control"),
      "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
  count = cgroup->OomKillCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 3u);
  // Before Linux 4.13 there is no count.
  Put(v1.Join("memory/berth/t1/memory.oom_control"),
      "oom_kill_disable 0\nunder_oom 0\n");
  count = cgroup->OomKillCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 0u);
  ASSERT_TRUE(cgroup->Remove(absl::Seconds(1)).ok());
  count = cgroup->OomKillCount();
  EXPECT_TRUE(absl::IsNotFound(count.status())) << count.status();
  EXPECT_THAT(count.status().message(), HasSubstr(v1.Join("memory/berth/t1")));

  Fixture v2(pb::CGROUP_LAYOUT_V2);
  cgroup = TaskCgroup::Create(v2.mounts(), "/berth", "t1", CgroupLimits(),
                              v2.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  Put(v2.Join("berth/t1/memory.events"),
      "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n");
  count = cgroup->OomKillCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 2u);

  // No memory hierarchy at all: nothing was ever counted.
  Fixture cpu_only(pb::CGROUP_LAYOUT_V1);
  cpu_only.SetV1Mounts({{"cpu", cpu_only.Join("cpu")}});
  cgroup = TaskCgroup::Create(cpu_only.mounts(), "/berth", "t1", CgroupLimits(),
                              cpu_only.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  count = cgroup->OomKillCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 0u);
}

TEST(TaskCgroupTest, KillAllOfAnEmptyCgroupReturnsAtOnce) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  EXPECT_TRUE(cgroup->KillAll(absl::ZeroDuration()).ok());
  // An absent cgroup is empty too.
  ASSERT_TRUE(cgroup->Remove(absl::Seconds(1)).ok());
  EXPECT_TRUE(cgroup->KillAll(absl::ZeroDuration()).ok());
}

// A fixture's cgroup.procs never empties: KillAll signals the process it
// lists (a child of the test) and gives up at the timeout, naming the cgroup
// and the pid.
TEST(TaskCgroupTest, KillAllSignalsMembersAndReportsWhatStays) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), fixture.Hooks());
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  const pid_t child = fork();
  if (child == 0) {
    while (true) pause();
  }
  ASSERT_GT(child, 0);
  Put(fixture.Join("memory/berth/t1/cgroup.procs"), absl::StrCat(child, "\n"));
  const absl::Status status = cgroup->KillAll(absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("/berth/t1"));
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("pids ", child)));
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wstatus));
  EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);
}

TEST(TaskCgroupTest, RemoveReportsADirectoryThatWillNotGo) {
  Fixture fixture(pb::CGROUP_LAYOUT_V1);
  CgroupFixtureHooks hooks = fixture.Hooks();
  absl::StatusOr<TaskCgroup> cgroup = TaskCgroup::Create(
      fixture.mounts(), "/berth", "t1", CgroupLimits(), hooks);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  // Without the fixture's emptying, rmdir finds files (ENOTEMPTY): every
  // directory is tried, the first failure returned.
  absl::StatusOr<TaskCgroup> opened =
      TaskCgroup::Open(fixture.mounts(), "/berth", "t1");
  ASSERT_TRUE(opened.ok());
  const absl::Status status = opened->Remove(absl::Seconds(1));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("removing the cgroup directory ",
                                     fixture.Join("cpu/berth/t1"))));
}

}  // namespace
}  // namespace driver_common
}  // namespace berth
