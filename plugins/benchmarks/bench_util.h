// What the plugin benchmarks share: runfiles, a short temporary directory,
// starting processes, and a main() that reports, next to Google Benchmark's
// table, the ratio of each measured variant to the reference measured in the
// same run.

#ifndef PLUGINS_BENCHMARKS_BENCH_UTIL_H_
#define PLUGINS_BENCHMARKS_BENCH_UTIL_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "benchmark/benchmark.h"

namespace berth::plugin::benchmarks {

// A file of this binary's runfiles by its path in the workspace
// ("plugins/examples/mock_driver/mock_driver"): under $RUNFILES_DIR or
// $TEST_SRCDIR when set (bazel test, bazel run), else next to the executable
// (<binary>.runfiles, for a binary started from bazel-bin).
std::string RunfilePath(absl::string_view workspace_path);

// A directory with a short path ("/tmp/berth-bench-XXXXXX": a Unix socket
// path has at most 107 bytes), removed with its content when the object goes.
// `parent` replaces /tmp (tools/bench's programs make theirs in the directory
// of the script that runs them, which removes it even after a SIGKILL).
class TempDir {
 public:
  explicit TempDir(absl::string_view parent = "/tmp");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(absl::string_view name) const;

 private:
  std::string path_;
};

// Starts argv[0] (a path) with posix_spawn, as the plugin host starts a
// plugin: stdin, stdout and stderr /dev/null, no other file descriptor, its
// own process group; waits for it and returns its wait status.
absl::StatusOr<int> SpawnAndWait(const std::vector<std::string>& argv);

// A helper process with its stdin and stdout on pipes and its stderr this
// process's. It should end when its stdin ends: the destructor closes stdin,
// waits up to 10 s, then kills it (SIGKILL) and reaps it.
class Child {
 public:
  static absl::StatusOr<std::unique_ptr<Child>> Start(
      const std::vector<std::string>& argv);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // The next line on its stdout, without the newline. DEADLINE_EXCEEDED after
  // `timeout`, OUT_OF_RANGE at the end of its stdout.
  absl::StatusOr<std::string> ReadLine(absl::Duration timeout);

  pid_t pid() const { return pid_; }

 private:
  Child(pid_t pid, base::UniqueFd stdin_fd, base::UniqueFd stdout_fd)
      : pid_(pid),
        stdin_fd_(std::move(stdin_fd)),
        stdout_fd_(std::move(stdout_fd)) {}

  const pid_t pid_;
  base::UniqueFd stdin_fd_;
  base::UniqueFd stdout_fd_;
  std::string buffer_;
};

// A ratio of two benchmarks of one run, compared with a target.
struct RatioSpec {
  enum class Metric {
    kRealTime,        // time per iteration (lower is better)
    kBytesPerSecond,  // the bytes_per_second counter (higher is better)
  };
  // The benchmark names as registered (without the "/repeats:N",
  // "/manual_time" ... suffixes Google Benchmark adds).
  std::string numerator;
  std::string denominator;
  Metric metric = Metric::kRealTime;
  // Met when ratio <= max_ratio (if set) and ratio >= min_ratio (if set).
  std::optional<double> max_ratio;
  std::optional<double> min_ratio;
};

// The value of one benchmark used in ratios: the median aggregate when the
// benchmark ran repetitions, else its single run.
struct BenchValue {
  double real_time = 0;  // per iteration, in the benchmark's time unit
  std::string time_unit;
  std::optional<double> bytes_per_second;
  bool from_median = false;
};

// Collects what Google Benchmark reports (aggregates or single runs) and
// whether any run failed (State::SkipWithError); prints the table through
// the console reporter it wraps, then the ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  explicit RatioReporter(std::vector<RatioSpec> ratios,
                         OutputOptions options = OO_Defaults);

  void ReportRuns(const std::vector<Run>& reports) override;
  void Finalize() override;

  bool any_error() const { return any_error_; }
  const std::map<std::string, BenchValue>& values() const { return values_; }

  // The lines Finalize prints: one per RatioSpec, e.g.
  // "ratio rpc/x / rpc/y (real time, median of 5): 1.03 (target <= 1.20: met)"
  // or "... : not measured (rpc/y did not run or failed)"; nothing for a
  // ratio of which neither benchmark ran (--benchmark_filter).
  std::vector<std::string> RatioLines() const;

 private:
  const std::vector<RatioSpec> ratios_;
  std::map<std::string, BenchValue> values_;
  std::map<std::string, int64_t> repetitions_;
  bool any_error_ = false;
};

// The registered name of a run: run_name.function_name plus "/args" if any.
std::string RegisteredName(const benchmark::BenchmarkReporter::Run& run);

// For main(): starts glog (stderr, WARNING and above unless GLOG_minloglevel
// says otherwise) and parses Google Benchmark's flags; an unknown flag prints
// the usage and exits 1.
void InitBenchmarkMain(int* argc, char** argv);

// Runs the registered benchmarks (--benchmark_filter etc. apply; the display
// is the console table, --benchmark_out writes a file in any format) and
// prints the ratios. Returns main()'s exit code: 1 if a benchmark reported an
// error, else 0. Whether targets are met does not change it.
int RunBenchmarksAndReportRatios(const std::vector<RatioSpec>& ratios);

}  // namespace berth::plugin::benchmarks

#endif  // PLUGINS_BENCHMARKS_BENCH_UTIL_H_
