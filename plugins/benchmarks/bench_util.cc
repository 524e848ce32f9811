#include "plugins/benchmarks/bench_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "glog/logging.h"

extern char** environ;

namespace berth::plugin::benchmarks {
namespace {

std::vector<char*> CArgv(const std::vector<std::string>& argv) {
  std::vector<char*> c_argv;
  c_argv.reserve(argv.size() + 1);
  for (const std::string& arg : argv) {
    c_argv.push_back(const_cast<char*>(arg.c_str()));
  }
  c_argv.push_back(nullptr);
  return c_argv;
}

// posix_spawn attributes as the plugin host's: no blocked signal, every
// signal default, a process group of its own.
class SpawnAttributes {
 public:
  SpawnAttributes() {
    posix_spawnattr_init(&attr_);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr_, &none);
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigdefault(&attr_, &all);
    posix_spawnattr_setpgroup(&attr_, 0);
    posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETPGROUP |
                                         POSIX_SPAWN_SETSIGMASK |
                                         POSIX_SPAWN_SETSIGDEF);
  }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attr_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;

  const posix_spawnattr_t* get() const { return &attr_; }

 private:
  posix_spawnattr_t attr_;
};

class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&actions_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;

  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

absl::StatusOr<int> WaitPid(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::ErrnoToStatus(errno, absl::StrCat("waitpid(", pid, ")"));
    }
  }
  return status;
}

}  // namespace

std::string RunfilePath(absl::string_view workspace_path) {
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    const char* dir = std::getenv(env);
    if (dir != nullptr && dir[0] != '\0') {
      return absl::StrCat(dir, "/berth/", workspace_path);
    }
  }
  std::error_code error;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  return absl::StrCat(error ? "." : self.string(), ".runfiles/berth/",
                      workspace_path);
}

TempDir::TempDir(absl::string_view parent) {
  std::string name = absl::StrCat(parent, "/berth-bench-XXXXXX");
  PCHECK(mkdtemp(name.data()) != nullptr) << "cannot make a directory " << name;
  path_ = std::move(name);
}

TempDir::~TempDir() {
  std::error_code error;
  std::filesystem::remove_all(path_, error);
  LOG_IF(WARNING, error) << "cannot remove " << path_ << ": "
                         << error.message();
}

std::string TempDir::Join(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

absl::StatusOr<int> SpawnAndWait(const std::vector<std::string>& argv) {
  FileActions actions;
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    posix_spawn_file_actions_addopen(actions.get(), fd, "/dev/null",
                                     fd == STDIN_FILENO ? O_RDONLY : O_WRONLY,
                                     0);
  }
  posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1);
  SpawnAttributes attr;
  std::vector<char*> c_argv = CArgv(argv);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, argv[0].c_str(), actions.get(), attr.get(),
                              c_argv.data(), environ);
  if (err != 0)
    return absl::ErrnoToStatus(err, absl::StrCat("cannot run ", argv[0]));
  return WaitPid(pid);
}

absl::StatusOr<std::unique_ptr<Child>> Child::Start(
    const std::vector<std::string>& argv) {
  int in[2];
  int out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  base::UniqueFd in_read(in[0]);
  base::UniqueFd in_write(in[1]);
  if (pipe2(out, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  base::UniqueFd out_read(out[0]);
  base::UniqueFd out_write(out[1]);
  FileActions actions;
  posix_spawn_file_actions_adddup2(actions.get(), in_read.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(actions.get(), out_write.get(),
                                   STDOUT_FILENO);
  posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1);
  SpawnAttributes attr;
  std::vector<char*> c_argv = CArgv(argv);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, argv[0].c_str(), actions.get(), attr.get(),
                              c_argv.data(), environ);
  in_read.reset();
  out_write.reset();  // or reading its stdout never ends
  if (err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot run ", argv[0]));
  }
  return std::unique_ptr<Child>(
      new Child(pid, std::move(in_write), std::move(out_read)));
}

Child::~Child() {
  stdin_fd_.reset();  // it ends when its stdin does
  stdout_fd_.reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_ || (done < 0 && errno != EINTR)) return;
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  LOG(WARNING) << "helper pid " << pid_
               << " did not exit within 10 s of the end of its stdin; "
                  "killing it";
  kill(pid_, SIGKILL);
  (void)WaitPid(pid_);
}

absl::StatusOr<std::string> Child::ReadLine(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no line from pid ", pid_, " within ",
                       absl::FormatDuration(timeout)));
    }
    pollfd fd = {stdout_fd_.get(), POLLIN, 0};
    const int ready =
        poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno != EINTR) return absl::ErrnoToStatus(errno, "poll");
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(stdout_fd_.get(), chunk, sizeof(chunk));
    if (n < 0 && errno != EINTR) return absl::ErrnoToStatus(errno, "read");
    if (n == 0) {
      return absl::OutOfRangeError(
          absl::StrCat("pid ", pid_, " closed its stdout"));
    }
    if (n > 0) buffer_.append(chunk, n);
  }
}

std::string RegisteredName(const benchmark::BenchmarkReporter::Run& run) {
  if (run.run_name.args.empty()) return run.run_name.function_name;
  return absl::StrCat(run.run_name.function_name, "/", run.run_name.args);
}

RatioReporter::RatioReporter(std::vector<RatioSpec> ratios,
                             OutputOptions options)
    : ConsoleReporter(options), ratios_(std::move(ratios)) {}

void RatioReporter::ReportRuns(const std::vector<Run>& reports) {
  ConsoleReporter::ReportRuns(reports);
  for (const Run& run : reports) {
    if (run.error_occurred) {
      any_error_ = true;
      continue;
    }
    const bool median =
        run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
    const bool single =
        run.run_type == Run::RT_Iteration && run.repetitions <= 1;
    if (!median && !single) continue;
    BenchValue value;
    value.real_time = run.GetAdjustedRealTime();
    value.time_unit = benchmark::GetTimeUnitString(run.time_unit);
    auto bytes = run.counters.find("bytes_per_second");
    if (bytes != run.counters.end()) value.bytes_per_second = bytes->second;
    value.from_median = median;
    const std::string name = RegisteredName(run);
    values_[name] = value;
    repetitions_[name] = run.repetitions;
  }
}

std::vector<std::string> RatioReporter::RatioLines() const {
  std::vector<std::string> lines;
  for (const RatioSpec& spec : ratios_) {
    const bool bytes = spec.metric == RatioSpec::Metric::kBytesPerSecond;
    std::string line =
        absl::StrCat("ratio ", spec.numerator, " / ", spec.denominator, " (",
                     bytes ? "bytes/s" : "real time");
    auto numerator = values_.find(spec.numerator);
    auto denominator = values_.find(spec.denominator);
    // Neither ran: filtered out (--benchmark_filter), or both failed (an
    // error already).
    if (numerator == values_.end() && denominator == values_.end()) continue;
    if (numerator == values_.end() || denominator == values_.end()) {
      absl::StrAppend(
          &line, "): not measured (",
          numerator == values_.end() ? spec.numerator : spec.denominator,
          " did not run or failed)");
      lines.push_back(std::move(line));
      continue;
    }
    const BenchValue& a = numerator->second;
    const BenchValue& b = denominator->second;
    if (a.from_median && b.from_median) {
      absl::StrAppend(&line, ", medians of ", repetitions_.at(spec.numerator),
                      " and ", repetitions_.at(spec.denominator),
                      " repetitions");
    } else {
      absl::StrAppend(&line, ", single runs");
    }
    double ratio = 0;
    if (bytes) {
      if (!a.bytes_per_second.has_value() || !b.bytes_per_second.has_value() ||
          *b.bytes_per_second <= 0) {
        absl::StrAppend(&line, "): not measured (no bytes_per_second)");
        lines.push_back(std::move(line));
        continue;
      }
      ratio = *a.bytes_per_second / *b.bytes_per_second;
      absl::StrAppend(&line, absl::StrFormat("): %.1f / %.1f MB/s = %.3f",
                                             *a.bytes_per_second / 1e6,
                                             *b.bytes_per_second / 1e6, ratio));
    } else {
      if (a.time_unit != b.time_unit || b.real_time <= 0) {
        absl::StrAppend(&line, "): not measured (time units differ)");
        lines.push_back(std::move(line));
        continue;
      }
      ratio = a.real_time / b.real_time;
      absl::StrAppend(&line,
                      absl::StrFormat("): %.3f / %.3f %s = %.3f", a.real_time,
                                      b.real_time, a.time_unit, ratio));
    }
    std::vector<std::string> targets;
    bool met = true;
    if (spec.max_ratio.has_value()) {
      targets.push_back(absl::StrFormat("<= %.2f", *spec.max_ratio));
      met = met && ratio <= *spec.max_ratio;
    }
    if (spec.min_ratio.has_value()) {
      targets.push_back(absl::StrFormat(">= %.2f", *spec.min_ratio));
      met = met && ratio >= *spec.min_ratio;
    }
    if (!targets.empty()) {
      absl::StrAppend(&line, " (target ", absl::StrJoin(targets, " and "), ": ",
                      met ? "met" : "MISSED", ")");
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

void RatioReporter::Finalize() {
  ConsoleReporter::Finalize();
  std::ostream& out = GetOutputStream();
  if (ratios_.empty()) return;
  out << "\n";
  for (const std::string& line : RatioLines()) out << line << "\n";
  out.flush();
}

void InitBenchmarkMain(int* argc, char** argv) {
  FLAGS_logtostderr = true;
  if (std::getenv("GLOG_minloglevel") == nullptr) {
    FLAGS_minloglevel = google::GLOG_WARNING;
  }
  google::InitGoogleLogging(argv[0]);
  benchmark::Initialize(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(*argc, argv)) std::exit(1);
}

int RunBenchmarksAndReportRatios(const std::vector<RatioSpec>& ratios) {
  RatioReporter reporter(ratios, isatty(STDOUT_FILENO)
                                     ? benchmark::ConsoleReporter::OO_Color
                                     : benchmark::ConsoleReporter::OO_None);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.any_error() ? 1 : 0;
}

}  // namespace berth::plugin::benchmarks
