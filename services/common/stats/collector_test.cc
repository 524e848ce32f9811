// The three backends against fixture trees the tests write, with known
// counters and an injected clock: exact values, exact measured lists, exact
// percent.

#include "services/common/stats/collector.h"

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/stats/test_util.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;
using ::berth::stats::testing::MakeDirs;
using ::berth::stats::testing::RemoveTree;
using ::berth::stats::testing::ShortTempDir;
using ::berth::stats::testing::WriteFile;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// Expects `actual` to equal the message written as `text`.
template <typename T>
void ExpectProto(const T& actual, const std::string& text) {
  T expected;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &expected))
      << text;
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(expected, actual)) << diff << "\nactual:\n"
                                                     << actual.DebugString();
}

// A clock the test moves: wall time for timestamps, monotonic for percent.
struct FakeClock {
  int64_t monotonic_ns = 5000000000;
  absl::Time wall = absl::FromUnixSeconds(1700000000);

  void Advance(absl::Duration d) {
    monotonic_ns += absl::ToInt64Nanoseconds(d);
    wall += d;
  }
  CollectorOptions Options(double mhz = 2000) {
    CollectorOptions options;
    options.now = [this] { return wall; };
    options.monotonic_ns = [this] { return monotonic_ns; };
    options.cpu_mhz = mhz;
    options.clock_ticks_per_second = 100;
    return options;
  }
};

// ---------------------------------------------------------------- cgroup v1

struct V1Counters {
  uint64_t usage_ns = 123456789;
  uint64_t user_ticks = 7;
  uint64_t system_ticks = 3;
};

class CgroupV1Test : public ::testing::Test {
 protected:
  void SetUp() override {
    mounts_ = CgroupMountsForLayout(pb::CGROUP_LAYOUT_V1, dir_.path());
  }

  std::string Dir(const std::string& controller) const {
    return absl::StrCat(dir_.path(), "/", controller, "/berth/t1");
  }

  void WriteCpu(const V1Counters& c) {
    WriteFile(Dir("cpuacct") + "/cpuacct.usage",
              absl::StrCat(c.usage_ns, "\n"));
    WriteFile(
        Dir("cpuacct") + "/cpuacct.stat",
        absl::StrCat("user ", c.user_ticks, "\nsystem ", c.system_ticks, "\n"));
    WriteFile(Dir("cpu") + "/cpu.stat",
              "nr_periods 50\nnr_throttled 4\nthrottled_time 5000000\n"
              "nr_bursts 0\nburst_time 0\n");
  }

  void WriteMemory(bool totals = true, bool kmem = true, bool swap = true) {
    std::string stat =
        "cache 2000\nrss 1000\nrss_huge 0\nshmem 0\nmapped_file 400\n"
        "dirty 0\nwriteback 0\n";
    if (swap) absl::StrAppend(&stat, "swap 300\n");
    absl::StrAppend(&stat,
                    "pgpgin 5\npgpgout 6\ninactive_anon 0\nactive_anon 1000\n"
                    "hierarchical_memory_limit 9223372036854771712\n");
    if (totals) {
      absl::StrAppend(&stat,
                      "total_cache 12000\ntotal_rss 11000\ntotal_rss_huge 0\n"
                      "total_mapped_file 1400\n");
      if (swap) absl::StrAppend(&stat, "total_swap 1300\n");
    }
    WriteFile(Dir("memory") + "/memory.stat", stat);
    WriteFile(Dir("memory") + "/memory.usage_in_bytes", "50000\n");
    WriteFile(Dir("memory") + "/memory.max_usage_in_bytes", "60000\n");
    if (kmem) {
      WriteFile(Dir("memory") + "/memory.kmem.usage_in_bytes", "7000\n");
      WriteFile(Dir("memory") + "/memory.kmem.max_usage_in_bytes", "8000\n");
    }
  }

  // pids.max "max": no limit.
  void WritePids(const std::string& max = "max") {
    WriteFile(Dir("pids") + "/pids.current", "3\n");
    WriteFile(Dir("pids") + "/pids.max", max + "\n");
  }

  std::unique_ptr<Collector> Open() {
    absl::StatusOr<std::unique_ptr<Collector>> collector =
        NewCgroupV1Collector(mounts_, "/berth/t1", clock_.Options());
    EXPECT_TRUE(collector.ok()) << collector.status();
    return collector.ok() ? *std::move(collector) : nullptr;
  }

  ShortTempDir dir_;
  CgroupMounts mounts_;
  FakeClock clock_;
};

TEST_F(CgroupV1Test, FirstSampleHasEveryCounterAndNoPercent) {
  WriteCpu({});
  WriteMemory();
  WritePids();
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(collector->backend(), pb::BACKEND_CGROUP_V1);
  EXPECT_EQ(collector->target(), "cgroup /berth/t1");
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  ExpectProto(usage, R"pb(
    timestamp { seconds: 1700000000 }
    backend: BACKEND_CGROUP_V1
    usage {
      cpu {
        system_mode { nanos: 30000000 }
        user_mode { nanos: 70000000 }
        usage { nanos: 123456789 }
        throttled_periods: 4
        throttled_time { nanos: 5000000 }
        total_ticks: 0
        measured: [
          CPU_FIELD_SYSTEM_MODE,
          CPU_FIELD_USER_MODE,
          CPU_FIELD_USAGE,
          CPU_FIELD_THROTTLED_PERIODS,
          CPU_FIELD_THROTTLED_TIME
        ]
      }
      memory {
        rss: 11000
        cache: 12000
        swap: 1300
        mapped_file: 1400
        usage: 50000
        max_usage: 60000
        kernel_usage: 7000
        kernel_max_usage: 8000
        measured: [
          MEMORY_FIELD_RSS,
          MEMORY_FIELD_CACHE,
          MEMORY_FIELD_SWAP,
          MEMORY_FIELD_MAPPED_FILE,
          MEMORY_FIELD_USAGE,
          MEMORY_FIELD_MAX_USAGE,
          MEMORY_FIELD_KERNEL_USAGE,
          MEMORY_FIELD_KERNEL_MAX_USAGE
        ]
      }
      pids {
        current: 3
        measured: [ PIDS_FIELD_CURRENT ]
      }
    }
  )pb");
}

TEST_F(CgroupV1Test, APidsLimitIsMeasured) {
  WriteMemory();
  WritePids("64");
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  ExpectProto(usage.usage().pids(), R"pb(
    current: 3
    limit: 64
    measured: [ PIDS_FIELD_CURRENT, PIDS_FIELD_LIMIT ]
  )pb");
}

TEST_F(CgroupV1Test, WithoutThePidsCgroupNoPidsAreMeasured) {
  WriteMemory();
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_FALSE(usage.usage().has_pids());
}

TEST_F(CgroupV1Test, PercentComesFromDeltasOverTheWallClockDelta) {
  WriteCpu({});
  WriteMemory();
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage first;
  ASSERT_TRUE(collector->Sample(&first).ok());

  // 2 s later: 1.5 s of CPU (1 s user, 0.5 s system) → 75 % of one core.
  clock_.Advance(absl::Seconds(2));
  WriteCpu({.usage_ns = 123456789 + 1500000000,
            .user_ticks = 7 + 100,
            .system_ticks = 3 + 50});
  pb::TaskResourceUsage second;
  ASSERT_TRUE(collector->Sample(&second).ok());
  ExpectProto(second.usage().cpu(), R"pb(
    system_mode { nanos: 530000000 }
    user_mode { seconds: 1 nanos: 70000000 }
    usage { seconds: 1 nanos: 623456789 }
    throttled_periods: 4
    throttled_time { nanos: 5000000 }
    percent: 75
    system_mode_percent: 25
    user_mode_percent: 50
    total_ticks: 1500
    measured: [
      CPU_FIELD_SYSTEM_MODE,
      CPU_FIELD_USER_MODE,
      CPU_FIELD_USAGE,
      CPU_FIELD_THROTTLED_PERIODS,
      CPU_FIELD_THROTTLED_TIME,
      CPU_FIELD_PERCENT,
      CPU_FIELD_SYSTEM_MODE_PERCENT,
      CPU_FIELD_USER_MODE_PERCENT
    ]
  )pb");
  EXPECT_EQ(second.timestamp().seconds(), 1700000002);
}

TEST_F(CgroupV1Test, PercentIsPerCoreAndMayExceedOneHundred) {
  WriteCpu({});
  WriteMemory();
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  // Three cores' worth over half a second.
  clock_.Advance(absl::Milliseconds(500));
  WriteCpu({.usage_ns = 123456789 + 1500000000,
            .user_ticks = 7 + 150,
            .system_ticks = 3});
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_EQ(usage.usage().cpu().percent(), 300);
  EXPECT_EQ(usage.usage().cpu().user_mode_percent(), 300);
  EXPECT_EQ(usage.usage().cpu().system_mode_percent(), 0);
  EXPECT_EQ(usage.usage().cpu().total_ticks(), 6000);
}

TEST_F(CgroupV1Test, EachPercentIsOverTheTimeSinceThePreviousSample) {
  WriteCpu({});
  WriteMemory();
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  clock_.Advance(absl::Seconds(1));
  WriteCpu({.usage_ns = 123456789 + 1000000000});
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_EQ(usage.usage().cpu().percent(), 100);
  clock_.Advance(absl::Seconds(1));
  WriteCpu({.usage_ns = 123456789 + 1250000000});
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_EQ(usage.usage().cpu().percent(), 25);
}

TEST_F(CgroupV1Test, LocalMemoryLinesWhereThereAreNoTotals) {
  WriteCpu({});
  WriteMemory(/*totals=*/false);
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_EQ(usage.usage().memory().rss(), 1000u);
  EXPECT_EQ(usage.usage().memory().cache(), 2000u);
  EXPECT_EQ(usage.usage().memory().swap(), 300u);
  EXPECT_EQ(usage.usage().memory().mapped_file(), 400u);
}

TEST_F(CgroupV1Test, WhatTheKernelLacksIsNotMeasured) {
  // No kmem files (kernel memory accounting off) and no swap lines (no swap
  // accounting): those fields are left out, not reported as 0.
  WriteCpu({});
  WriteMemory(/*totals=*/true, /*kmem=*/false, /*swap=*/false);
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  ExpectProto(usage.usage().memory(), R"pb(
    rss: 11000
    cache: 12000
    mapped_file: 1400
    usage: 50000
    max_usage: 60000
    measured: [
      MEMORY_FIELD_RSS,
      MEMORY_FIELD_CACHE,
      MEMORY_FIELD_MAPPED_FILE,
      MEMORY_FIELD_USAGE,
      MEMORY_FIELD_MAX_USAGE
    ]
  )pb");
}

TEST_F(CgroupV1Test, ControllersWithoutTheCgroupAreNotMeasured) {
  WriteMemory();
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_EQ(usage.usage().cpu().measured_size(), 0);
  EXPECT_EQ(usage.usage().memory().measured_size(), 8);
}

TEST_F(CgroupV1Test, SharesADirectoryBetweenCoMountedControllers) {
  mounts_.v1["cpu"] = absl::StrCat(dir_.path(), "/cpu,cpuacct");
  mounts_.v1["cpuacct"] = absl::StrCat(dir_.path(), "/cpu,cpuacct");
  const std::string dir = absl::StrCat(dir_.path(), "/cpu,cpuacct/berth/t1");
  WriteFile(dir + "/cpuacct.usage", "1000\n");
  WriteFile(dir + "/cpuacct.stat", "user 1\nsystem 2\n");
  WriteFile(dir + "/cpu.stat",
            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n");
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_EQ(usage.usage().cpu().measured_size(), 5);
  EXPECT_EQ(usage.usage().cpu().usage().nanos(), 1000);
}

TEST_F(CgroupV1Test, MissingCgroupIsNotFoundNamingThePath) {
  absl::StatusOr<std::unique_ptr<Collector>> collector =
      NewCgroupV1Collector(mounts_, "/berth/absent", clock_.Options());
  EXPECT_TRUE(absl::IsNotFound(collector.status())) << collector.status();
  EXPECT_THAT(collector.status().message(), HasSubstr("/berth/absent"));
}

TEST_F(CgroupV1Test, RemovedCgroupIsNotFoundNamingIt) {
  WriteCpu({});
  WriteMemory();
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  RemoveTree(Dir("memory"));
  absl::Status status = collector->Sample(&usage);
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("cgroup /berth/t1 is gone"));
}

TEST_F(CgroupV1Test, BadPathsAreInvalidArguments) {
  for (const char* path : {"", "/berth/../etc", "./x"}) {
    absl::StatusOr<std::unique_ptr<Collector>> collector =
        NewCgroupV1Collector(mounts_, path, clock_.Options());
    EXPECT_TRUE(absl::IsInvalidArgument(collector.status())) << path;
    EXPECT_THAT(collector.status().message(), HasSubstr("cgroup_path"));
  }
}

TEST_F(CgroupV1Test, GarbageInAFileIsAnErrorNamingIt) {
  WriteCpu({});
  WriteMemory();
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  WriteFile(Dir("memory") + "/memory.usage_in_bytes", "lots\n");
  pb::TaskResourceUsage usage;
  absl::Status status = collector->Sample(&usage);
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(absl::IsNotFound(status));
  EXPECT_THAT(status.message(), HasSubstr("memory.usage_in_bytes"));
}

TEST(NewCgroupCollectorTest, PicksTheBackendOfTheLayout) {
  ShortTempDir dir;
  WriteFile(dir.Join("memory/t/memory.usage_in_bytes"), "1\n");
  WriteFile(dir.Join("t/memory.current"), "1\n");
  WriteFile(dir.Join("unified/t/memory.current"), "1\n");
  const CollectorOptions options;
  absl::StatusOr<std::unique_ptr<Collector>> v1 = NewCgroupCollector(
      CgroupMountsForLayout(pb::CGROUP_LAYOUT_V1, dir.path()), "t", options);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ((*v1)->backend(), pb::BACKEND_CGROUP_V1);
  absl::StatusOr<std::unique_ptr<Collector>> hybrid = NewCgroupCollector(
      CgroupMountsForLayout(pb::CGROUP_LAYOUT_HYBRID, dir.path()), "t",
      options);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  EXPECT_EQ((*hybrid)->backend(), pb::BACKEND_CGROUP_V1);
  absl::StatusOr<std::unique_ptr<Collector>> v2 = NewCgroupCollector(
      CgroupMountsForLayout(pb::CGROUP_LAYOUT_V2, dir.path()), "t", options);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ((*v2)->backend(), pb::BACKEND_CGROUP_V2);
  absl::StatusOr<std::unique_ptr<Collector>> none = NewCgroupCollector(
      CgroupMountsForLayout(pb::CGROUP_LAYOUT_NONE, dir.path()), "t", options);
  EXPECT_TRUE(absl::IsFailedPrecondition(none.status())) << none.status();
  EXPECT_THAT(none.status().message(), HasSubstr("root_pid"));
}

// ---------------------------------------------------------------- cgroup v2

class CgroupV2Test : public ::testing::Test {
 protected:
  std::string Dir() const { return dir_.Join("berth/t1"); }

  void WriteCpu(uint64_t usage_usec, uint64_t user_usec, uint64_t system_usec,
                bool cpu_controller = true) {
    std::string stat =
        absl::StrCat("usage_usec ", usage_usec, "\nuser_usec ", user_usec,
                     "\nsystem_usec ", system_usec, "\n");
    if (cpu_controller) {
      absl::StrAppend(&stat,
                      "nr_periods 10\nnr_throttled 2\nthrottled_usec 3000\n"
                      "nr_bursts 0\nburst_usec 0\n");
    }
    WriteFile(Dir() + "/cpu.stat", stat);
  }

  void WriteMemory(bool peak) {
    WriteFile(Dir() + "/memory.current", "40960\n");
    if (peak) WriteFile(Dir() + "/memory.peak", "81920\n");
    WriteFile(Dir() + "/memory.swap.current", "500\n");
    WriteFile(Dir() + "/memory.stat",
              "anon 1000\nfile 2000\nkernel 300\nkernel_stack 16384\n"
              "pagetables 0\nsock 0\nshmem 0\nfile_mapped 400\nfile_dirty 7\n"
              "file_writeback 0\nanon_thp 0\ninactive_anon 1000\n"
              "active_file 2000\n");
  }

  void WritePids(const std::string& max) {
    WriteFile(Dir() + "/pids.current", "5\n");
    WriteFile(Dir() + "/pids.max", max + "\n");
  }

  std::unique_ptr<Collector> Open() {
    absl::StatusOr<std::unique_ptr<Collector>> collector =
        NewCgroupV2Collector(dir_.path(), "/berth/t1", clock_.Options());
    EXPECT_TRUE(collector.ok()) << collector.status();
    return collector.ok() ? *std::move(collector) : nullptr;
  }

  ShortTempDir dir_;
  FakeClock clock_;
};

TEST_F(CgroupV2Test, MapsEveryFileAndKeyWithMemoryPeak) {
  WriteCpu(2000000, 1500000, 500000);
  WriteMemory(/*peak=*/true);
  WritePids("100");
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(collector->backend(), pb::BACKEND_CGROUP_V2);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  ExpectProto(usage, R"pb(
    timestamp { seconds: 1700000000 }
    backend: BACKEND_CGROUP_V2
    usage {
      cpu {
        system_mode { nanos: 500000000 }
        user_mode { seconds: 1 nanos: 500000000 }
        usage { seconds: 2 }
        throttled_periods: 2
        throttled_time { nanos: 3000000 }
        total_ticks: 0
        measured: [
          CPU_FIELD_SYSTEM_MODE,
          CPU_FIELD_USER_MODE,
          CPU_FIELD_USAGE,
          CPU_FIELD_THROTTLED_PERIODS,
          CPU_FIELD_THROTTLED_TIME
        ]
      }
      memory {
        rss: 1000
        cache: 2000
        swap: 500
        mapped_file: 400
        usage: 40960
        max_usage: 81920
        kernel_usage: 300
        measured: [
          MEMORY_FIELD_RSS,
          MEMORY_FIELD_CACHE,
          MEMORY_FIELD_SWAP,
          MEMORY_FIELD_MAPPED_FILE,
          MEMORY_FIELD_USAGE,
          MEMORY_FIELD_MAX_USAGE,
          MEMORY_FIELD_KERNEL_USAGE
        ]
      }
      pids {
        current: 5
        limit: 100
        measured: [ PIDS_FIELD_CURRENT, PIDS_FIELD_LIMIT ]
      }
    }
  )pb");
}

TEST_F(CgroupV2Test, WithoutMemoryPeakMaxUsageIsNotMeasured) {
  WriteCpu(2000000, 1500000, 500000);
  WriteMemory(/*peak=*/false);
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  ExpectProto(usage.usage().memory(), R"pb(
    rss: 1000
    cache: 2000
    swap: 500
    mapped_file: 400
    usage: 40960
    kernel_usage: 300
    measured: [
      MEMORY_FIELD_RSS,
      MEMORY_FIELD_CACHE,
      MEMORY_FIELD_SWAP,
      MEMORY_FIELD_MAPPED_FILE,
      MEMORY_FIELD_USAGE,
      MEMORY_FIELD_KERNEL_USAGE
    ]
  )pb");
}

TEST_F(CgroupV2Test, UnlimitedPidsHaveNoLimit) {
  WriteCpu(2000000, 1500000, 500000);
  WritePids("max");
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  ExpectProto(usage.usage().pids(), R"pb(
    current: 5
    measured: [ PIDS_FIELD_CURRENT ]
  )pb");
}

TEST_F(CgroupV2Test, WithoutTheCpuControllerThrottlingIsNotMeasured) {
  WriteCpu(2000000, 1500000, 500000, /*cpu_controller=*/false);
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_THAT(
      usage.usage().cpu().measured(),
      UnorderedElementsAre(pb::CPU_FIELD_SYSTEM_MODE, pb::CPU_FIELD_USER_MODE,
                           pb::CPU_FIELD_USAGE));
  // No memory controller either: no memory field at all.
  EXPECT_EQ(usage.usage().memory().measured_size(), 0);
}

TEST_F(CgroupV2Test, PercentFromTwoSamples) {
  WriteCpu(2000000, 1500000, 500000);
  WriteMemory(/*peak=*/true);
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  pb::TaskResourceUsage usage;
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_EQ(usage.usage().cpu().total_ticks(), 0);
  clock_.Advance(absl::Milliseconds(250));
  // 0.25 s of CPU in 0.25 s: one core; 0.2 s user, 0.05 s system.
  WriteCpu(2250000, 1700000, 550000);
  ASSERT_TRUE(collector->Sample(&usage).ok());
  EXPECT_EQ(usage.usage().cpu().percent(), 100);
  EXPECT_EQ(usage.usage().cpu().user_mode_percent(), 80);
  EXPECT_EQ(usage.usage().cpu().system_mode_percent(), 20);
  EXPECT_EQ(usage.usage().cpu().total_ticks(), 2000);
  EXPECT_THAT(usage.usage().cpu().measured(),
              ::testing::Contains(pb::CPU_FIELD_PERCENT));
}

TEST_F(CgroupV2Test, MissingAndRemovedCgroupsAreNotFound) {
  absl::StatusOr<std::unique_ptr<Collector>> absent =
      NewCgroupV2Collector(dir_.path(), "/berth/absent", clock_.Options());
  EXPECT_TRUE(absl::IsNotFound(absent.status()));
  EXPECT_THAT(absent.status().message(), HasSubstr("/berth/absent"));

  WriteCpu(1, 1, 0);
  std::unique_ptr<Collector> collector = Open();
  ASSERT_NE(collector, nullptr);
  RemoveTree(Dir());
  pb::TaskResourceUsage usage;
  absl::Status status = collector->Sample(&usage);
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("cgroup /berth/t1"));
}

// ------------------------------------------------------------------- procfs

std::string StatLine(int pid, absl::string_view comm, char state, int ppid,
                     uint64_t utime, uint64_t stime, uint64_t start_time) {
  // Fields 1..22 of proc(5), then a few more.
  return absl::StrCat(pid, " (", comm, ") ", std::string(1, state), " ", ppid,
                      " ", pid, " ", pid, " 0 -1 4194304 100 0 0 0 ", utime,
                      " ", stime, " 0 0 20 0 1 0 ", start_time,
                      " 10000000 250 18446744073709551615 1 1 0 0 0 0\n");
}

struct FakeProcess {
  int pid;
  int ppid;
  uint64_t utime;
  uint64_t stime;
  uint64_t rss_kb;
  uint64_t swap_kb;
  uint64_t start_time = 1000;
  std::string comm = "worker";
  char state = 'S';
  int threads = 1;
};

class ProcfsTest : public ::testing::Test {
 protected:
  // Writes <proc>/PID/{stat,status}; with `children_files`, also
  // <proc>/PID/task/TID/children as the kernel would.
  void Write(const FakeProcess& p) {
    const std::string dir = dir_.Join(absl::StrCat(p.pid));
    WriteFile(dir + "/stat", StatLine(p.pid, p.comm, p.state, p.ppid, p.utime,
                                      p.stime, p.start_time));
    WriteFile(dir + "/status",
              absl::StrCat("Name:\t", p.comm, "\nState:\tS (sleeping)\n",
                           "VmPeak:\t  99999 kB\nVmRSS:\t  ", p.rss_kb,
                           " kB\nRssAnon:\t  1 kB\nVmSwap:\t  ", p.swap_kb,
                           " kB\nThreads:\t", p.threads, "\n"));
  }
  void Children(int pid, int tid, const std::string& children) {
    WriteFile(dir_.Join(absl::StrCat(pid, "/task/", tid, "/children")),
              children);
  }

  // root 100 (threads 100 and 103) → 101 (forked by thread 100) and 102
  // (forked by thread 103); 200 is another tree.
  void WriteTree(bool children_files) {
    Write({.pid = 100,
           .ppid = 1,
           .utime = 50,
           .stime = 20,
           .rss_kb = 1000,
           .swap_kb = 10,
           .comm = "my (odd) proc",
           .threads = 2});
    Write({.pid = 101,
           .ppid = 100,
           .utime = 30,
           .stime = 10,
           .rss_kb = 2000,
           .swap_kb = 0});
    Write({.pid = 102,
           .ppid = 100,
           .utime = 20,
           .stime = 0,
           .rss_kb = 500,
           .swap_kb = 5});
    Write({.pid = 200,
           .ppid = 1,
           .utime = 999,
           .stime = 999,
           .rss_kb = 9999,
           .swap_kb = 99});
    if (children_files) {
      Children(100, 100, "101 ");
      Children(100, 103, "102 ");
      Children(101, 101, "");
      Children(102, 102, "");
      Children(200, 200, "");
    }
  }

  absl::StatusOr<std::unique_ptr<Collector>> Open(int pid = 100) {
    return NewProcfsCollector(dir_.path(), pid, clock_.Options());
  }

  ShortTempDir dir_;
  FakeClock clock_;
};

constexpr char kTreeOfThree[] = R"pb(
  timestamp { seconds: 1700000000 }
  backend: BACKEND_PROCFS
  usage {
    cpu {
      system_mode { nanos: 300000000 }
      user_mode { seconds: 1 }
      usage { seconds: 1 nanos: 300000000 }
      total_ticks: 0
      measured: [ CPU_FIELD_SYSTEM_MODE, CPU_FIELD_USER_MODE, CPU_FIELD_USAGE ]
    }
    memory {
      rss: 3584000
      swap: 15360
      measured: [ MEMORY_FIELD_RSS, MEMORY_FIELD_SWAP ]
    }
    pids {
      current: 4
      measured: [ PIDS_FIELD_CURRENT ]
    }
  }
  processes {
    key: 100
    value {
      cpu {
        system_mode { nanos: 200000000 }
        user_mode { nanos: 500000000 }
        usage { nanos: 700000000 }
        total_ticks: 0
        measured: [
          CPU_FIELD_SYSTEM_MODE,
          CPU_FIELD_USER_MODE,
          CPU_FIELD_USAGE
        ]
      }
      memory {
        rss: 1024000
        swap: 10240
        measured: [ MEMORY_FIELD_RSS, MEMORY_FIELD_SWAP ]
      }
      pids {
        current: 2
        measured: [ PIDS_FIELD_CURRENT ]
      }
    }
  }
  processes {
    key: 101
    value {
      cpu {
        system_mode { nanos: 100000000 }
        user_mode { nanos: 300000000 }
        usage { nanos: 400000000 }
        total_ticks: 0
        measured: [
          CPU_FIELD_SYSTEM_MODE,
          CPU_FIELD_USER_MODE,
          CPU_FIELD_USAGE
        ]
      }
      memory {
        rss: 2048000
        swap: 0
        measured: [ MEMORY_FIELD_RSS, MEMORY_FIELD_SWAP ]
      }
      pids {
        current: 1
        measured: [ PIDS_FIELD_CURRENT ]
      }
    }
  }
  processes {
    key: 102
    value {
      cpu {
        system_mode {}
        user_mode { nanos: 200000000 }
        usage { nanos: 200000000 }
        total_ticks: 0
        measured: [
          CPU_FIELD_SYSTEM_MODE,
          CPU_FIELD_USER_MODE,
          CPU_FIELD_USAGE
        ]
      }
      memory {
        rss: 512000
        swap: 5120
        measured: [ MEMORY_FIELD_RSS, MEMORY_FIELD_SWAP ]
      }
      pids {
        current: 1
        measured: [ PIDS_FIELD_CURRENT ]
      }
    }
  }
)pb";

TEST_F(ProcfsTest, SumsTheTreeFoundThroughChildrenFiles) {
  WriteTree(/*children_files=*/true);
  absl::StatusOr<std::unique_ptr<Collector>> collector = Open();
  ASSERT_TRUE(collector.ok()) << collector.status();
  EXPECT_EQ((*collector)->backend(), pb::BACKEND_PROCFS);
  EXPECT_EQ((*collector)->target(), "process tree of pid 100");
  pb::TaskResourceUsage usage;
  ASSERT_TRUE((*collector)->Sample(&usage).ok());
  ExpectProto(usage, kTreeOfThree);
}

TEST_F(ProcfsTest, SumsTheTreeFoundThroughParentPids) {
  // A kernel without /proc/PID/task/TID/children: parents come from stat.
  WriteTree(/*children_files=*/false);
  absl::StatusOr<std::unique_ptr<Collector>> collector = Open();
  ASSERT_TRUE(collector.ok()) << collector.status();
  pb::TaskResourceUsage usage;
  ASSERT_TRUE((*collector)->Sample(&usage).ok());
  ExpectProto(usage, kTreeOfThree);
}

TEST_F(ProcfsTest, PercentSumsEachProcessDeltaSoAnExitedChildDoesNotCount) {
  WriteTree(/*children_files=*/true);
  absl::StatusOr<std::unique_ptr<Collector>> collector = Open();
  ASSERT_TRUE(collector.ok()) << collector.status();
  pb::TaskResourceUsage usage;
  ASSERT_TRUE((*collector)->Sample(&usage).ok());

  // One second later: 100 used 0.4 s user; 101 exited; 102 used 0.1 s
  // system; 104 was forked by 100 and used 0.05 s user + 0.05 s system.
  clock_.Advance(absl::Seconds(1));
  Write({.pid = 100,
         .ppid = 1,
         .utime = 90,
         .stime = 20,
         .rss_kb = 1000,
         .swap_kb = 10,
         .comm = "my (odd) proc"});
  RemoveTree(dir_.Join("101"));
  Write({.pid = 102,
         .ppid = 100,
         .utime = 20,
         .stime = 10,
         .rss_kb = 500,
         .swap_kb = 5});
  Write({.pid = 104,
         .ppid = 100,
         .utime = 5,
         .stime = 5,
         .rss_kb = 100,
         .swap_kb = 0,
         .start_time = 1500});
  Children(100, 100, "104 ");
  Children(104, 104, "");
  ASSERT_TRUE((*collector)->Sample(&usage).ok());

  const pb::CpuStats& cpu = usage.usage().cpu();
  // Counters are what the tree holds now: 1.15 s user, 0.35 s system.
  EXPECT_EQ(cpu.user_mode().seconds(), 1);
  EXPECT_EQ(cpu.user_mode().nanos(), 150000000);
  EXPECT_EQ(cpu.system_mode().nanos(), 350000000);
  // Percent: 0.4 + 0.1 + 0.1 s over 1 s. (The tree's sum fell from 1.3 s to
  // 1.5 s only, which would read 20.)
  EXPECT_DOUBLE_EQ(cpu.percent(), 60);
  EXPECT_DOUBLE_EQ(cpu.user_mode_percent(), 45);
  EXPECT_DOUBLE_EQ(cpu.system_mode_percent(), 15);
  EXPECT_DOUBLE_EQ(cpu.total_ticks(), 1200);
  EXPECT_THAT(
      cpu.measured(),
      UnorderedElementsAre(pb::CPU_FIELD_SYSTEM_MODE, pb::CPU_FIELD_USER_MODE,
                           pb::CPU_FIELD_USAGE, pb::CPU_FIELD_PERCENT,
                           pb::CPU_FIELD_SYSTEM_MODE_PERCENT,
                           pb::CPU_FIELD_USER_MODE_PERCENT));
  EXPECT_EQ(usage.usage().memory().rss(), 1600u * 1024);

  ASSERT_EQ(usage.processes().size(), 3u);
  EXPECT_DOUBLE_EQ(usage.processes().at(100).cpu().percent(), 40);
  EXPECT_DOUBLE_EQ(usage.processes().at(102).cpu().percent(), 10);
  // 104 is new: its first sample has no percent.
  EXPECT_THAT(
      usage.processes().at(104).cpu().measured(),
      UnorderedElementsAre(pb::CPU_FIELD_SYSTEM_MODE, pb::CPU_FIELD_USER_MODE,
                           pb::CPU_FIELD_USAGE));
}

TEST_F(ProcfsTest, MissingRootIsNotFoundNamingThePid) {
  WriteTree(/*children_files=*/true);
  absl::StatusOr<std::unique_ptr<Collector>> collector = Open(4242);
  EXPECT_TRUE(absl::IsNotFound(collector.status())) << collector.status();
  EXPECT_THAT(collector.status().message(), HasSubstr("4242"));
  EXPECT_TRUE(absl::IsInvalidArgument(Open(0).status()));
}

TEST_F(ProcfsTest, TreeIsGoneWhenItsRootIsRemoved) {
  WriteTree(/*children_files=*/true);
  absl::StatusOr<std::unique_ptr<Collector>> collector = Open();
  ASSERT_TRUE(collector.ok()) << collector.status();
  pb::TaskResourceUsage usage;
  ASSERT_TRUE((*collector)->Sample(&usage).ok());
  RemoveTree(dir_.Join("100"));
  absl::Status status = (*collector)->Sample(&usage);
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("pid 100"));
}

TEST_F(ProcfsTest, TreeIsGoneWhenItsRootIsAZombieOrAnotherProcess) {
  WriteTree(/*children_files=*/true);
  absl::StatusOr<std::unique_ptr<Collector>> collector = Open();
  ASSERT_TRUE(collector.ok()) << collector.status();
  pb::TaskResourceUsage usage;
  Write({.pid = 100,
         .ppid = 1,
         .utime = 50,
         .stime = 20,
         .rss_kb = 0,
         .swap_kb = 0,
         .state = 'Z'});
  EXPECT_TRUE(absl::IsNotFound((*collector)->Sample(&usage)));

  absl::StatusOr<std::unique_ptr<Collector>> again = Open();
  ASSERT_TRUE(again.ok()) << again.status();
  // The pid now belongs to a process that started later.
  Write({.pid = 100,
         .ppid = 1,
         .utime = 0,
         .stime = 0,
         .rss_kb = 1,
         .swap_kb = 0,
         .start_time = 99999});
  EXPECT_TRUE(absl::IsNotFound((*again)->Sample(&usage)));
}

// ------------------------------------------------------------------ helpers

TEST(CpuRateTest, NothingFirstThenDeltasOverTime) {
  CpuRate rate;
  CpuRate::Percent p = rate.Update(1000, 0, 0, 0);
  EXPECT_FALSE(p.total.has_value());
  EXPECT_FALSE(p.user.has_value());
  p = rate.Update(1000 + 1000000000, 500000000, 250000000, std::nullopt);
  EXPECT_EQ(p.total, 50);
  EXPECT_EQ(p.user, 25);
  EXPECT_FALSE(p.system.has_value());
}

TEST(CpuRateTest, NoTimePassedGivesNoPercentAndKeepsTheBaseline) {
  CpuRate rate;
  rate.Update(1000, 0, std::nullopt, std::nullopt);
  EXPECT_FALSE(rate.Update(1000, 5, std::nullopt, std::nullopt).total);
  EXPECT_EQ(rate.Update(1000 + 100, 10, std::nullopt, std::nullopt).total,
            10.0 * 100 / 100);
}

TEST(CpuRateTest, ACounterGoingBackwardsReadsZero) {
  CpuRate rate;
  rate.Update(0, 1000, 1000, 1000);
  const CpuRate::Percent p = rate.Update(1000, 10, 10, 10);
  EXPECT_EQ(p.total, 0);
  EXPECT_EQ(p.user, 0);
}

TEST(FillResourceUsageTest, TotalTicksIsAlwaysSetAndNeverMeasured) {
  pb::ResourceUsage usage;
  FillResourceUsage(Counters(), CpuRate::Percent{.total = 50}, 3000, &usage);
  EXPECT_EQ(usage.cpu().total_ticks(), 1500);
  EXPECT_THAT(usage.cpu().measured(),
              UnorderedElementsAre(pb::CPU_FIELD_PERCENT));
  EXPECT_EQ(usage.memory().measured_size(), 0);
}

TEST(CleanCgroupPathTest, Normalizes) {
  EXPECT_EQ(*CleanCgroupPath("a/b"), "/a/b");
  EXPECT_EQ(*CleanCgroupPath("//a//b/"), "/a/b");
  EXPECT_EQ(*CleanCgroupPath("/"), "/");
  EXPECT_TRUE(absl::IsInvalidArgument(CleanCgroupPath("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CleanCgroupPath("/a/../b").status()));
}

}  // namespace
}  // namespace stats
}  // namespace berth
