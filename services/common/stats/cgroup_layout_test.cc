#include "services/common/stats/cgroup_layout.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/stats/test_util.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;
using ::berth::stats::testing::ShortTempDir;
using ::berth::stats::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr char kRootAndProc[] =
    "22 1 0:21 / / rw,relatime - ext4 /dev/vda rw\n"
    "23 22 0:5 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "24 22 0:6 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw\n";

// This machine's layout: v1 controllers, name=systemd, and a cgroup2 mount.
constexpr char kHybrid[] =
    "31 24 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup "
    "rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup "
    "rw,memory\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup "
    "rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// Classic v1 with co-mounted cpu,cpuacct (and optional fields before "-").
constexpr char kV1[] =
    "31 24 0:28 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
    "33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 - cgroup "
    "cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,nosuid shared:17 master:3 - "
    "cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw shared:9 - cgroup cgroup "
    "rw,xattr,name=systemd\n";

constexpr char kV2[] =
    "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - "
    "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";

TEST(CgroupLayoutTest, NoCgroupMountIsNone) {
  const CgroupMounts mounts = ParseCgroupMounts(kRootAndProc, "/sys/fs/cgroup");
  EXPECT_EQ(mounts.layout, pb::CGROUP_LAYOUT_NONE);
  EXPECT_TRUE(mounts.v1.empty());
  EXPECT_EQ(mounts.v2, "");
}

TEST(CgroupLayoutTest, V1ControllersOnlyIsV1) {
  const CgroupMounts mounts =
      ParseCgroupMounts(absl::StrCat(kRootAndProc, kV1), "/sys/fs/cgroup");
  EXPECT_EQ(mounts.layout, pb::CGROUP_LAYOUT_V1);
  EXPECT_THAT(mounts.v1,
              ElementsAre(Pair("cpu", "/sys/fs/cgroup/cpu,cpuacct"),
                          Pair("cpuacct", "/sys/fs/cgroup/cpu,cpuacct"),
                          Pair("memory", "/sys/fs/cgroup/memory")));
  EXPECT_EQ(mounts.V1Mount("cpuacct"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(mounts.V1Mount("pids"), "");
  EXPECT_EQ(mounts.v2, "");
}

TEST(CgroupLayoutTest, UnifiedOnlyIsV2) {
  const CgroupMounts mounts =
      ParseCgroupMounts(absl::StrCat(kRootAndProc, kV2), "/sys/fs/cgroup");
  EXPECT_EQ(mounts.layout, pb::CGROUP_LAYOUT_V2);
  EXPECT_TRUE(mounts.v1.empty());
  EXPECT_EQ(mounts.v2, "/sys/fs/cgroup");
}

TEST(CgroupLayoutTest, V1ControllersAndCgroup2IsHybrid) {
  const CgroupMounts mounts =
      ParseCgroupMounts(absl::StrCat(kRootAndProc, kHybrid), "/sys/fs/cgroup/");
  EXPECT_EQ(mounts.layout, pb::CGROUP_LAYOUT_HYBRID);
  EXPECT_THAT(mounts.v1, ElementsAre(Pair("cpu", "/sys/fs/cgroup/cpu"),
                                     Pair("cpuacct", "/sys/fs/cgroup/cpuacct"),
                                     Pair("memory", "/sys/fs/cgroup/memory"),
                                     Pair("pids", "/sys/fs/cgroup/pids")));
  EXPECT_EQ(mounts.v2, "/sys/fs/cgroup/unified");
}

TEST(CgroupLayoutTest, NamedV1HierarchyAloneBesideCgroup2IsV2) {
  // name=systemd has no controller: the resource controllers are on v2.
  const CgroupMounts mounts = ParseCgroupMounts(
      absl::StrCat(
          kRootAndProc,
          "30 24 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
          "40 24 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup "
          "rw,name=systemd\n"),
      "/sys/fs/cgroup");
  EXPECT_EQ(mounts.layout, pb::CGROUP_LAYOUT_V2);
  EXPECT_EQ(mounts.v2, "/sys/fs/cgroup/unified");
}

TEST(CgroupLayoutTest, OnlyMountsAtOrBelowTheRootCount) {
  const std::string mountinfo = absl::StrCat(kRootAndProc, kHybrid);
  EXPECT_EQ(ParseCgroupMounts(mountinfo, "/elsewhere").layout,
            pb::CGROUP_LAYOUT_NONE);
  // A prefix that is not a path component does not count.
  EXPECT_EQ(ParseCgroupMounts(mountinfo, "/sys/fs/cgr").layout,
            pb::CGROUP_LAYOUT_NONE);
  EXPECT_EQ(ParseCgroupMounts(mountinfo, "/sys/fs/cgroup/unified").layout,
            pb::CGROUP_LAYOUT_V2);
}

TEST(CgroupLayoutTest, UnescapesMountPoints) {
  const CgroupMounts mounts = ParseCgroupMounts(
      "50 1 0:40 / /tmp/my\\040cgroups/memory rw - cgroup cgroup rw,memory\n",
      "/tmp/my cgroups");
  EXPECT_EQ(mounts.layout, pb::CGROUP_LAYOUT_V1);
  EXPECT_EQ(mounts.V1Mount("memory"), "/tmp/my cgroups/memory");
}

TEST(CgroupLayoutTest, DetectsFromAMountinfoFile) {
  ShortTempDir dir;
  const std::string path = dir.Join("mountinfo");
  WriteFile(path, absl::StrCat(kRootAndProc, kHybrid));
  absl::StatusOr<CgroupMounts> mounts =
      DetectCgroupLayout("/sys/fs/cgroup", path);
  ASSERT_TRUE(mounts.ok()) << mounts.status();
  EXPECT_EQ(mounts->layout, pb::CGROUP_LAYOUT_HYBRID);
}

TEST(CgroupLayoutTest, MissingMountinfoNamesIt) {
  ShortTempDir dir;
  const std::string path = dir.Join("absent");
  absl::StatusOr<CgroupMounts> mounts =
      DetectCgroupLayout("/sys/fs/cgroup", path);
  EXPECT_TRUE(absl::IsNotFound(mounts.status()));
  EXPECT_THAT(mounts.status().message(), HasSubstr(path));
}

TEST(CgroupLayoutTest, DetectsThisHostWithoutError) {
  absl::StatusOr<CgroupMounts> mounts = DetectCgroupLayout("/sys/fs/cgroup");
  ASSERT_TRUE(mounts.ok()) << mounts.status();
  EXPECT_NE(mounts->layout, pb::CGROUP_LAYOUT_UNSPECIFIED);
}

TEST(CgroupLayoutTest, LayoutsGivenExplicitlyUseTheConventionalDirectories) {
  const CgroupMounts v1 = CgroupMountsForLayout(pb::CGROUP_LAYOUT_V1, "/r/");
  EXPECT_THAT(
      v1.v1, ElementsAre(Pair("cpu", "/r/cpu"), Pair("cpuacct", "/r/cpuacct"),
                         Pair("memory", "/r/memory"), Pair("pids", "/r/pids")));
  EXPECT_EQ(v1.v2, "");
  const CgroupMounts v2 = CgroupMountsForLayout(pb::CGROUP_LAYOUT_V2, "/r");
  EXPECT_TRUE(v2.v1.empty());
  EXPECT_EQ(v2.v2, "/r");
  const CgroupMounts hybrid =
      CgroupMountsForLayout(pb::CGROUP_LAYOUT_HYBRID, "/r");
  EXPECT_EQ(hybrid.V1Mount("memory"), "/r/memory");
  EXPECT_EQ(hybrid.v2, "/r/unified");
  EXPECT_EQ(CgroupMountsForLayout(pb::CGROUP_LAYOUT_NONE, "/r").layout,
            pb::CGROUP_LAYOUT_NONE);
}

}  // namespace
}  // namespace stats
}  // namespace berth
