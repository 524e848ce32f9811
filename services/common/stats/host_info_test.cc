#include "services/common/stats/host_info.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/stats/test_util.h"

namespace berth {
namespace stats {
namespace {

using ::berth::stats::testing::ShortTempDir;
using ::berth::stats::testing::WriteFile;
using ::testing::HasSubstr;

TEST(HostCpuMhzTest, TakesTheFirstCpuMhzLine) {
  ShortTempDir dir;
  WriteFile(dir.Join("proc/cpuinfo"),
            "processor\t: 0\nmodel name\t: Xeon\ncpu MHz\t\t: 2596.132\n\n"
            "processor\t: 1\ncpu MHz\t\t: 1200.000\n");
  absl::StatusOr<double> mhz = HostCpuMhz(dir.Join("proc"), dir.Join("sys"));
  ASSERT_TRUE(mhz.ok()) << mhz.status();
  EXPECT_DOUBLE_EQ(*mhz, 2596.132);
}

TEST(HostCpuMhzTest, FallsBackToCpufreq) {
  ShortTempDir dir;
  WriteFile(dir.Join("proc/cpuinfo"), "processor\t: 0\nBogoMIPS\t: 50.00\n");
  WriteFile(dir.Join("sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
            "1800000\n");
  absl::StatusOr<double> mhz = HostCpuMhz(dir.Join("proc"), dir.Join("sys"));
  ASSERT_TRUE(mhz.ok()) << mhz.status();
  EXPECT_DOUBLE_EQ(*mhz, 1800);
}

TEST(HostCpuMhzTest, NeitherIsNotFoundNamingBoth) {
  ShortTempDir dir;
  absl::StatusOr<double> mhz = HostCpuMhz(dir.Join("proc"), dir.Join("sys"));
  EXPECT_TRUE(absl::IsNotFound(mhz.status()));
  EXPECT_THAT(mhz.status().message(), HasSubstr(dir.Join("proc/cpuinfo")));
  EXPECT_THAT(mhz.status().message(), HasSubstr("cpuinfo_max_freq"));
}

TEST(HostCpuTimesTest, ReadsTheCpuLineAndCountsCores) {
  ShortTempDir dir;
  // user nice system idle iowait irq softirq steal guest guest_nice
  WriteFile(dir.Join("stat"),
            "cpu  100 10 50 800 20 5 5 10 30 0\n"
            "cpu0 50 5 25 400 10 3 2 5 15 0\n"
            "cpu1 50 5 25 400 10 2 3 5 15 0\n"
            "intr 12345\nctxt 999\n");
  absl::StatusOr<HostCpuTimes> times = ReadHostCpuTimes(dir.path());
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->total, 1000u);  // guest is already within user
  EXPECT_EQ(times->busy, 180u);    // total - idle - iowait
  EXPECT_EQ(times->cores, 2u);
}

TEST(HostCpuTimesTest, PercentIsOfOneCore) {
  // Two cores, both busy for the whole interval: 200.
  const HostCpuTimes before{.busy = 100, .total = 1000, .cores = 2};
  const HostCpuTimes after{.busy = 300, .total = 1200, .cores = 2};
  EXPECT_DOUBLE_EQ(HostCpuPercent(before, after), 200);
  const HostCpuTimes half{.busy = 150, .total = 1100, .cores = 2};
  EXPECT_DOUBLE_EQ(HostCpuPercent(before, half), 100);
  EXPECT_DOUBLE_EQ(HostCpuPercent(before, before), 0);
}

TEST(HostCpuTimesTest, MissingFileNamesIt) {
  ShortTempDir dir;
  absl::StatusOr<HostCpuTimes> times = ReadHostCpuTimes(dir.path());
  EXPECT_FALSE(times.ok());
  EXPECT_THAT(times.status().message(), HasSubstr(dir.Join("stat")));
}

TEST(HostMemoryTest, ReadsTotalAndAvailable) {
  ShortTempDir dir;
  WriteFile(dir.Join("meminfo"),
            "MemTotal:       24576000 kB\nMemFree:         1000 kB\n"
            "MemAvailable:   12288000 kB\nBuffers:  1 kB\n");
  absl::StatusOr<HostMemory> memory = ReadHostMemory(dir.path());
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes, 24576000ull * 1024);
  EXPECT_EQ(memory->available_bytes, 12288000ull * 1024);
}

TEST(HostMemoryTest, MissingLinesAreAnErrorNamingTheFile) {
  ShortTempDir dir;
  WriteFile(dir.Join("meminfo"), "MemTotal: 1 kB\n");
  absl::StatusOr<HostMemory> memory = ReadHostMemory(dir.path());
  EXPECT_FALSE(memory.ok());
  EXPECT_THAT(memory.status().message(), HasSubstr(dir.Join("meminfo")));
}

TEST(HostInfoTest, ReadsThisHost) {
  EXPECT_TRUE(ReadHostCpuTimes("/proc").ok());
  EXPECT_TRUE(ReadHostMemory("/proc").ok());
}

}  // namespace
}  // namespace stats
}  // namespace berth
