// spawn_bench: the time a command takes from its start to its exit, the way
// the reference commands of exec_driver.sh (`crun run`, `crun exec`) are
// timed:
//
//   spawn_bench --name=NAME [--repetitions=20] [--warmup=2] -- PATH ARGS...
//
// Each run is a posix_spawn of PATH (not looked up on PATH) with stdin,
// stdout and stderr /dev/null, in a process group of its own, until it has
// exited and been reaped (plugins/benchmarks' SpawnAndWait, as the plugin
// launch benchmark times a process). Every run must exit 0.
//
// Prints "sample NAME VALUE ms" per timed run and a "median" line
// (tools/bench/figures.h). A run that fails: a line on stderr naming the
// command and how it ended, exit code 1 (its output went to /dev/null: run it
// by hand to see why).

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/process.h"
#include "glog/logging.h"
#include "plugins/benchmarks/bench_util.h"
#include "tools/bench/figures.h"

ABSL_FLAG(std::string, name, "", "The figure's name (required).");
ABSL_FLAG(int, repetitions, 20, "Timed runs.");
ABSL_FLAG(int, warmup, 2, "Untimed runs before the timed ones.");

namespace berth::bench {
namespace {

using Clock = std::chrono::steady_clock;

int Run(const std::vector<std::string>& argv) {
  const std::string name = absl::GetFlag(FLAGS_name);
  const int repetitions = absl::GetFlag(FLAGS_repetitions);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  if (name.empty() || argv.empty() || repetitions < 1 || warmup < 0) {
    std::fprintf(stderr,
                 "spawn_bench: usage: spawn_bench --name=NAME "
                 "[--repetitions=N>=1] [--warmup=N>=0] -- PATH ARGS...\n");
    return 2;
  }
  const std::string command = absl::StrJoin(argv, " ");
  Figure figure(name, "ms");
  for (int i = 0; i < warmup + repetitions; ++i) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<int> status = plugin::benchmarks::SpawnAndWait(argv);
    const Clock::time_point end = Clock::now();
    if (!status.ok()) {
      std::fprintf(stderr, "spawn_bench: FAILED: %s: %s\n", name.c_str(),
                   std::string(status.status().message()).c_str());
      return 1;
    }
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      std::fprintf(stderr,
                   "spawn_bench: FAILED: %s: `%s` %s (run %d; its output "
                   "went to /dev/null: run it by hand to see why)\n",
                   name.c_str(), command.c_str(),
                   base::DescribeWaitStatus(*status).c_str(), i + 1);
      return 1;
    }
    if (i >= warmup) {
      figure.Add(
          std::chrono::duration<double, std::milli>(end - start).count());
    }
  }
  std::printf("%s\n", figure.MedianLine().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace berth::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times a command from its start to its exit.\n"
      "usage: spawn_bench --name=NAME [flags] -- PATH ARGS...");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  // positional[0] is the program; the command follows "--".
  return berth::bench::Run(
      std::vector<std::string>(positional.begin() + 1, positional.end()));
}
