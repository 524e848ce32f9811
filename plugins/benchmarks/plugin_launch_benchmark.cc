// Launch-to-healthy time of a driver plugin, next to the cost of merely
// starting the same binary, measured in the same run:
//
//   launch/plugin_to_healthy    PluginProcess::Launch of the mock driver:
//                               posix_spawn, the plugin's start-up (dynamic
//                               linking, gRPC, its server on the socket), its
//                               handshake line, then the host's dial, health
//                               check and GetCapabilities. Stop (Shutdown and
//                               exit) is outside the timed region.
//   launch/mock_driver_version  the reference: posix_spawn of the same binary
//                               with --version until it has exited and been
//                               reaped (process start, exec, dynamic linking
//                               of the same libraries, flag parsing).
//   launch/bin_true             the floor: posix_spawn of /bin/true.
//
// Every process is started the way the host starts a plugin (posix_spawn,
// own process group, no inherited descriptors). Manual time: each iteration
// times its own region with a steady clock.

#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "plugins/benchmarks/bench_util.h"
#include "plugins/host/plugin_process.h"

namespace berth::plugin::benchmarks {
namespace {

constexpr char kMockDriver[] = "plugins/examples/mock_driver/mock_driver";

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Times a run of `argv` to its exit; it must exit 0.
void SpawnToExit(benchmark::State& state,
                 const std::vector<std::string>& argv) {
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<int> status = SpawnAndWait(argv);
    const Clock::time_point end = Clock::now();
    if (!status.ok()) {
      state.SkipWithError(std::string(status.status().message()).c_str());
      break;
    }
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      state.SkipWithError(
          absl::StrCat(argv[0], " did not exit 0 (wait status ", *status, ")")
              .c_str());
      break;
    }
    state.SetIterationTime(Seconds(start, end));
  }
}

void BM_BinTrue(benchmark::State& state) { SpawnToExit(state, {"/bin/true"}); }

void BM_MockDriverVersion(benchmark::State& state) {
  SpawnToExit(state, {RunfilePath(kMockDriver), "--version"});
}

void BM_PluginToHealthy(benchmark::State& state) {
  TempDir dir;
  host::LaunchOptions options;
  options.name = "mock";
  options.binary = RunfilePath(kMockDriver);
  options.socket_dir = dir.Join("plugins");
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::unique_ptr<host::PluginProcess>> plugin =
        host::PluginProcess::Launch(options);
    const Clock::time_point end = Clock::now();
    if (!plugin.ok()) {
      state.SkipWithError(std::string(plugin.status().message()).c_str());
      break;
    }
    state.SetIterationTime(Seconds(start, end));
    // Not timed (manual time): the next launch starts from a clean slate.
    const host::PluginExit exit = (*plugin)->Stop();
    if (!exit.status_known || exit.exit_code != 0 || exit.signal != 0) {
      state.SkipWithError(
          absl::StrCat("the mock driver's stop: it ", exit.ToString()).c_str());
      break;
    }
  }
}

}  // namespace
}  // namespace berth::plugin::benchmarks

int main(int argc, char** argv) {
  namespace bench = ::berth::plugin::benchmarks;
  bench::InitBenchmarkMain(&argc, argv);
  benchmark::RegisterBenchmark("launch/bin_true", bench::BM_BinTrue)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("launch/mock_driver_version",
                               bench::BM_MockDriverVersion)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("launch/plugin_to_healthy",
                               bench::BM_PluginToHealthy)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  return bench::RunBenchmarksAndReportRatios({
      {"launch/plugin_to_healthy", "launch/mock_driver_version",
       bench::RatioSpec::Metric::kRealTime},
      {"launch/mock_driver_version", "launch/bin_true",
       bench::RatioSpec::Metric::kRealTime},
  });
}
