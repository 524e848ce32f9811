#include "plugins/benchmarks/bench_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::plugin::benchmarks {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using BenchRun = benchmark::BenchmarkReporter::Run;

// A run of `name` taking `micros` per iteration.
BenchRun MakeRun(const std::string& name, double micros, int64_t repetitions,
                 bool median) {
  BenchRun run;
  run.run_name.function_name = name;
  run.run_type = median ? BenchRun::RT_Aggregate : BenchRun::RT_Iteration;
  run.aggregate_name = median ? "median" : "";
  run.repetitions = repetitions;
  run.iterations = 10;
  run.time_unit = benchmark::kMicrosecond;
  run.real_accumulated_time = micros * 10 / 1e6;  // seconds, 10 iterations
  return run;
}

class RatioReporterTest : public ::testing::Test {
 protected:
  std::unique_ptr<RatioReporter> Reporter(std::vector<RatioSpec> ratios) {
    auto reporter = std::make_unique<RatioReporter>(
        std::move(ratios), benchmark::ConsoleReporter::OO_None);
    reporter->SetOutputStream(&out_);
    reporter->SetErrorStream(&out_);
    return reporter;
  }

  std::ostringstream out_;
};

TEST_F(RatioReporterTest, RatioOfMediansAgainstAMaximum) {
  auto reporter = Reporter({{"a", "b", RatioSpec::Metric::kRealTime, 1.2},
                            {"c", "b", RatioSpec::Metric::kRealTime, 1.2}});
  reporter->ReportRuns({MakeRun("a", 110, 5, false), MakeRun("a", 110, 5, true),
                        MakeRun("b", 100, 5, true),
                        MakeRun("c", 130, 5, true)});
  EXPECT_FALSE(reporter->any_error());
  const std::vector<std::string> lines = reporter->RatioLines();
  ASSERT_EQ(lines.size(), 2);
  EXPECT_THAT(lines[0], HasSubstr("medians of 5 and 5 repetitions"));
  EXPECT_THAT(lines[0], HasSubstr("110.000 / 100.000 us = 1.100"));
  EXPECT_THAT(lines[0], HasSubstr("(target <= 1.20: met)"));
  EXPECT_THAT(lines[1], HasSubstr("= 1.300 (target <= 1.20: MISSED)"));
}

TEST_F(RatioReporterTest, BytesPerSecondAgainstAMinimum) {
  BenchRun a = MakeRun("a", 100, 1, false);
  a.counters["bytes_per_second"] = 700e6;
  BenchRun b = MakeRun("b", 100, 1, false);
  b.counters["bytes_per_second"] = 1000e6;
  auto reporter = Reporter(
      {{"a", "b", RatioSpec::Metric::kBytesPerSecond, std::nullopt, 0.8}});
  reporter->ReportRuns({a});
  reporter->ReportRuns({b});
  EXPECT_THAT(reporter->RatioLines(),
              ElementsAre(AllOf(HasSubstr("single runs"),
                                HasSubstr("700.0 / 1000.0 MB/s = 0.700"),
                                HasSubstr("(target >= 0.80: MISSED)"))));
}

TEST_F(RatioReporterTest, AFailedRunIsAnErrorAndItsRatioNotMeasured) {
  BenchRun failed = MakeRun("a", 0, 1, false);
  failed.error_occurred = true;
  failed.error_message = "boom";
  auto reporter = Reporter({{"a", "b", RatioSpec::Metric::kRealTime}});
  reporter->ReportRuns({failed});
  reporter->ReportRuns({MakeRun("b", 100, 1, false)});
  EXPECT_TRUE(reporter->any_error());
  EXPECT_THAT(reporter->RatioLines(),
              ElementsAre(HasSubstr("not measured (a did not run or failed)")));
}

TEST_F(RatioReporterTest, NothingForARatioOfWhichNeitherRan) {
  auto reporter = Reporter({{"a", "b", RatioSpec::Metric::kRealTime},
                            {"c", "d", RatioSpec::Metric::kRealTime}});
  reporter->ReportRuns({MakeRun("a", 100, 1, false)});
  reporter->ReportRuns({MakeRun("b", 100, 1, false)});
  EXPECT_THAT(reporter->RatioLines(),
              ElementsAre(HasSubstr("100.000 / 100.000 us = 1.000")));
}

TEST(RegisteredNameTest, AppendsArgs) {
  BenchRun run;
  run.run_name.function_name = "exec/x";
  EXPECT_EQ(RegisteredName(run), "exec/x");
  run.run_name.args = "64";
  EXPECT_EQ(RegisteredName(run), "exec/x/64");
}

TEST(SpawnAndWaitTest, ReturnsTheWaitStatus) {
  absl::StatusOr<int> status = SpawnAndWait({"/bin/sh", "-c", "exit 3"});
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 3);
}

TEST(SpawnAndWaitTest, NamesAMissingBinary) {
  absl::StatusOr<int> status = SpawnAndWait({"/nonexistent/binary"});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.status().message(), HasSubstr("/nonexistent/binary"));
}

TEST(ChildTest, ReadsLinesAndEndsWithItsStdin) {
  // The child prints a line, then waits for the end of its stdin.
  absl::StatusOr<std::unique_ptr<Child>> child =
      Child::Start({"/bin/sh", "-c", "echo ready; echo two; cat >/dev/null"});
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<std::string> line = (*child)->ReadLine(absl::Seconds(30));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "ready");
  line = (*child)->ReadLine(absl::Seconds(30));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "two");
  const pid_t pid = (*child)->pid();
  child->reset();  // closes its stdin, reaps it
  EXPECT_NE(kill(pid, 0), 0);
}

TEST(ChildTest, EndOfStdoutIsOutOfRange) {
  absl::StatusOr<std::unique_ptr<Child>> child =
      Child::Start({"/bin/sh", "-c", "exec >&-; cat >/dev/null"});
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<std::string> line = (*child)->ReadLine(absl::Seconds(30));
  EXPECT_EQ(line.status().code(), absl::StatusCode::kOutOfRange);
}

TEST(RunfilePathTest, UsesRunfilesDir) {
  const char* before = std::getenv("RUNFILES_DIR");
  const std::string saved = before != nullptr ? before : "";
  setenv("RUNFILES_DIR", "/some/runfiles", 1);
  EXPECT_EQ(RunfilePath("plugins/x"), "/some/runfiles/berth/plugins/x");
  if (before != nullptr) {
    setenv("RUNFILES_DIR", saved.c_str(), 1);
  } else {
    unsetenv("RUNFILES_DIR");
  }
}

TEST(TempDirTest, ShortAndRemoved) {
  std::string path;
  {
    TempDir dir;
    path = dir.path();
    EXPECT_LT(dir.Join("plugins/mock.sock").size(), 60);
    EXPECT_EQ(system(("touch " + dir.Join("file")).c_str()), 0);
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST(TempDirTest, InAParent) {
  TempDir parent;
  std::string path;
  {
    TempDir dir(parent.path());
    path = dir.path();
    EXPECT_EQ(path.rfind(parent.path() + "/berth-bench-", 0), 0) << path;
    EXPECT_EQ(access(path.c_str(), F_OK), 0);
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace berth::plugin::benchmarks
