// Cost per task per sample of the cgroup v1 collector, next to raw reads of
// the same eight files in the same run:
//   BM_CollectorV1           Collector::Sample (kept fds + pread + parse +
//                            percent + the berth.stats.v1 message);
//   BM_RawOpenReadParse      open + read + close each file, parse the numbers
//                            the collector takes (the reference: <= 1.5x);
//   BM_RawPreadParse         the same on descriptors kept open (the floor).
// Each over /1: one cgroup sampled in a hot loop, and /1000: a fleet of 1000
// cgroups each sampled once per iteration (items_per_second = task samples
// per second). And as a 1 Hz sampler meets them, with caches cold again
// after each untimed second:
//   BM_CollectorV1TickAt1Hz  every collector once, each into a fresh message;
//   BM_RawPreadTickAt1Hz     its floor, raw preads of the same files.
// On real cgroups (/sys/fs/cgroup/{cpu,cpuacct,memory}/berth-bench-PID-N/tI;
// the one of /1 holds a sleeping child) when it can make them (root, outside
// Bazel's sandbox); else, or with BERTH_BENCH_FIXTURE set, on a fixture tree
// in /tmp of the same shape. The label of each result says which.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "benchmark/benchmark.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/stats/collector.h"
#include "services/common/stats/test_util.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;

// The files the v1 collector reads, by controller.
constexpr struct {
  const char* controller;
  const char* name;
} kFiles[] = {
    {"cpuacct", "cpuacct.usage"},
    {"cpuacct", "cpuacct.stat"},
    {"cpu", "cpu.stat"},
    {"memory", "memory.stat"},
    {"memory", "memory.usage_in_bytes"},
    {"memory", "memory.max_usage_in_bytes"},
    {"memory", "memory.kmem.usage_in_bytes"},
    {"memory", "memory.kmem.max_usage_in_bytes"},
};
constexpr int kFileCount = sizeof(kFiles) / sizeof(kFiles[0]);

// A memory.stat as this machine's kernel writes it (42 lines).
constexpr char kMemoryStat[] =
    "cache 10194944\nrss 8286208\nrss_huge 0\nshmem 9084928\n"
    "mapped_file 7626752\ndirty 28672\nwriteback 0\nworkingset_refault_anon 0\n"
    "workingset_refault_file 306\nswap 0\nswapcached 0\npgpgin 39231\n"
    "pgpgout 34757\npgfault 46984\npgmajfault 0\ninactive_anon 0\n"
    "active_anon 1531904\ninactive_file 270336\nactive_file 839680\n"
    "unevictable 15839232\nhierarchical_memory_limit 9223372036854771712\n"
    "hierarchical_memsw_limit 9223372036854771712\ntotal_cache 237993984\n"
    "total_rss 296644608\ntotal_rss_huge 0\ntotal_shmem 9084928\n"
    "total_mapped_file 32387072\ntotal_dirty 2088960\ntotal_writeback 0\n"
    "total_workingset_refault_anon 0\ntotal_workingset_refault_file 428457\n"
    "total_swap 0\ntotal_swapcached 0\ntotal_pgpgin 27912734\n"
    "total_pgpgout 27791325\ntotal_pgfault 30827121\ntotal_pgmajfault 3343\n"
    "total_inactive_anon 288174080\ntotal_active_anon 1585152\n"
    "total_inactive_file 108216320\ntotal_active_file 120692736\n"
    "total_unevictable 15839232\n";

// Cgroups under test, made once per size for the whole run: N task cgroups
// (real ones under berth-bench-PID, or a fixture tree).
struct Fleet {
  CgroupMounts mounts;
  std::vector<std::string> paths;  // relative to each controller's mount
  std::string label;
  std::vector<std::string> made;  // real cgroup directories, parents first
  pid_t child = -1;
  std::unique_ptr<testing::ShortTempDir> fixture;

  std::string File(int task, int i) const {
    return absl::StrCat(mounts.V1Mount(kFiles[i].controller), paths[task], "/",
                        kFiles[i].name);
  }
};

// The untimed pause between ticks of the *TickAt1Hz benchmarks: 1 s, or
// BERTH_BENCH_TICK_PAUSE_MS (the smoke test's is short).
absl::Duration TickPause() {
  static const absl::Duration pause = [] {
    const char* ms = std::getenv("BERTH_BENCH_TICK_PAUSE_MS");
    return ms == nullptr ? absl::Seconds(1) : absl::Milliseconds(atoi(ms));
  }();
  return pause;
}

bool ForceFixture() {
  static const bool force = std::getenv("BERTH_BENCH_FIXTURE") != nullptr;
  return force;
}

bool MakeRealCgroups(int n, Fleet* fleet) {
  if (ForceFixture() || geteuid() != 0) return false;
  absl::StatusOr<CgroupMounts> mounts = DetectCgroupLayout("/sys/fs/cgroup");
  if (!mounts.ok() || (mounts->layout != pb::CGROUP_LAYOUT_V1 &&
                       mounts->layout != pb::CGROUP_LAYOUT_HYBRID)) {
    return false;
  }
  fleet->mounts = *mounts;
  const std::string parent = absl::StrCat("/berth-bench-", getpid(), "-", n);
  for (int t = 0; t < n; ++t) {
    fleet->paths.push_back(absl::StrCat(parent, "/t", t));
  }
  for (const char* controller : {"cpu", "cpuacct", "memory"}) {
    const std::string mount = mounts->V1Mount(controller);
    if (mount.empty()) return false;
    for (const std::string& dir : {mount + parent}) {
      if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
      fleet->made.push_back(dir);
    }
    for (const std::string& path : fleet->paths) {
      const std::string dir = mount + path;
      if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
      fleet->made.push_back(dir);
    }
  }
  if (n == 1) {
    // One sleeping process in it, as a task would have.
    fleet->child = fork();
    if (fleet->child == 0) {
      while (true) pause();
    }
    for (const char* controller : {"cpu", "cpuacct", "memory"}) {
      const std::string procs =
          mounts->V1Mount(controller) + fleet->paths[0] + "/cgroup.procs";
      FILE* f = fopen(procs.c_str(), "w");
      if (f == nullptr) return false;
      fprintf(f, "%d", fleet->child);
      fclose(f);
    }
  }
  fleet->label = "real cgroup v1";
  return true;
}

void MakeFixture(int n, Fleet* fleet) {
  fleet->fixture = std::make_unique<testing::ShortTempDir>();
  const std::string root = fleet->fixture->path();
  fleet->mounts = CgroupMountsForLayout(pb::CGROUP_LAYOUT_V1, root);
  fleet->paths.clear();
  for (int t = 0; t < n; ++t) {
    const std::string path = absl::StrCat("/t", t);
    fleet->paths.push_back(path);
    const std::string cpuacct = root + "/cpuacct" + path + "/";
    const std::string cpu = root + "/cpu" + path + "/";
    const std::string memory = root + "/memory" + path + "/";
    testing::WriteFile(cpuacct + "cpuacct.usage", "123456789012\n");
    testing::WriteFile(cpuacct + "cpuacct.stat", "user 88920\nsystem 15714\n");
    testing::WriteFile(cpu + "cpu.stat",
                       "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"
                       "nr_bursts 0\nburst_time 0\n");
    testing::WriteFile(memory + "memory.stat", kMemoryStat);
    testing::WriteFile(memory + "memory.usage_in_bytes", "534638592\n");
    testing::WriteFile(memory + "memory.max_usage_in_bytes", "634638592\n");
    testing::WriteFile(memory + "memory.kmem.usage_in_bytes", "12345678\n");
    testing::WriteFile(memory + "memory.kmem.max_usage_in_bytes", "22345678\n");
  }
  fleet->label = "fixture (/tmp)";
}

std::map<int, Fleet*>& Fleets() {
  static auto* fleets = new std::map<int, Fleet*>;
  return *fleets;
}

void RemoveReal(Fleet* fleet) {
  if (fleet->child > 0) {
    kill(fleet->child, SIGKILL);
    waitpid(fleet->child, nullptr, 0);
    fleet->child = -1;
  }
  for (auto it = fleet->made.rbegin(); it != fleet->made.rend(); ++it) {
    for (int i = 0; i < 100 && rmdir(it->c_str()) != 0 && errno == EBUSY; ++i) {
      usleep(10000);
    }
  }
  fleet->made.clear();
}

Fleet& TheFleet(int n) {
  Fleet*& fleet = Fleets()[n];
  if (fleet == nullptr) {
    fleet = new Fleet;
    if (!MakeRealCgroups(n, fleet)) {
      RemoveReal(fleet);
      fleet->paths.clear();
      MakeFixture(n, fleet);
    }
  }
  return *fleet;
}

void CleanUp() {
  for (auto& [n, fleet] : Fleets()) {
    RemoveReal(fleet);
    fleet->fixture.reset();
  }
}

// What a raw read of the eight files yields.
struct RawSample {
  uint64_t usage_ns, user, system, nr_throttled, throttled_time;
  uint64_t rss, cache, swap, mapped_file, total_rss, total_cache, total_swap,
      total_mapped_file;
  uint64_t usage, max_usage, kmem, kmem_max;
};

uint64_t ParseNumber(const char* text) { return strtoull(text, nullptr, 10); }

// Plain C parsing of "key value" lines: the keys looked up by strncmp.
void ParseKeyed(const char* text, size_t n, const char* const* keys,
                uint64_t* const* values, int count) {
  const char* end = text + n;
  for (const char* line = text; line < end;) {
    const char* newline =
        static_cast<const char*>(memchr(line, '\n', end - line));
    if (newline == nullptr) newline = end;
    const char* blank =
        static_cast<const char*>(memchr(line, ' ', newline - line));
    if (blank != nullptr) {
      const size_t key_length = blank - line;
      for (int i = 0; i < count; ++i) {
        if (strlen(keys[i]) == key_length &&
            strncmp(line, keys[i], key_length) == 0) {
          *values[i] = ParseNumber(blank + 1);
          break;
        }
      }
    }
    line = newline + 1;
  }
}

void ParseFile(int i, const char* text, size_t n, RawSample* s) {
  switch (i) {
    case 0:
      s->usage_ns = ParseNumber(text);
      break;
    case 1: {
      const char* keys[] = {"user", "system"};
      uint64_t* values[] = {&s->user, &s->system};
      ParseKeyed(text, n, keys, values, 2);
      break;
    }
    case 2: {
      const char* keys[] = {"nr_throttled", "throttled_time"};
      uint64_t* values[] = {&s->nr_throttled, &s->throttled_time};
      ParseKeyed(text, n, keys, values, 2);
      break;
    }
    case 3: {
      const char* keys[] = {
          "rss",       "cache",       "swap",       "mapped_file",
          "total_rss", "total_cache", "total_swap", "total_mapped_file"};
      uint64_t* values[] = {&s->rss,        &s->cache,
                            &s->swap,       &s->mapped_file,
                            &s->total_rss,  &s->total_cache,
                            &s->total_swap, &s->total_mapped_file};
      ParseKeyed(text, n, keys, values, 8);
      break;
    }
    case 4:
      s->usage = ParseNumber(text);
      break;
    case 5:
      s->max_usage = ParseNumber(text);
      break;
    case 6:
      s->kmem = ParseNumber(text);
      break;
    case 7:
      s->kmem_max = ParseNumber(text);
      break;
  }
}

// Samples each of the fleet's `state.range(0)` cgroups once per iteration
// with the collector: 1 is the hot loop on one cgroup; 1000 is what a sampler
// tick over 1000 tasks does (each cgroup's kernel data cold again).
void BM_CollectorV1(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Fleet& fleet = TheFleet(n);
  CollectorOptions options;
  options.cpu_mhz = 2600;
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const std::string& path : fleet.paths) {
    absl::StatusOr<std::unique_ptr<Collector>> collector =
        NewCgroupV1Collector(fleet.mounts, path, options);
    if (!collector.ok()) {
      state.SkipWithError(std::string(collector.status().message()).c_str());
      return;
    }
    collectors.push_back(*std::move(collector));
  }
  pb::TaskResourceUsage usage;
  for (auto _ : state) {
    for (std::unique_ptr<Collector>& collector : collectors) {
      absl::Status status = collector->Sample(&usage);
      if (!status.ok()) {
        state.SkipWithError(std::string(status.message()).c_str());
        return;
      }
      benchmark::DoNotOptimize(usage);
    }
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(fleet.label);
}
BENCHMARK(BM_CollectorV1)->Arg(1)->Arg(1000);

// A sampler tick once a second, as berth-stats runs it: every collector of
// the fleet once, each into a fresh message kept until the tick ends (the
// subscribers' queues hold them). The second between ticks is not timed;
// the caches are cold again at each tick.
void BM_CollectorV1TickAt1Hz(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Fleet& fleet = TheFleet(n);
  CollectorOptions options;
  options.cpu_mhz = 2600;
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const std::string& path : fleet.paths) {
    absl::StatusOr<std::unique_ptr<Collector>> collector =
        NewCgroupV1Collector(fleet.mounts, path, options);
    if (!collector.ok()) {
      state.SkipWithError(std::string(collector.status().message()).c_str());
      return;
    }
    collectors.push_back(*std::move(collector));
  }
  for (auto _ : state) {
    state.PauseTiming();
    absl::SleepFor(TickPause());
    state.ResumeTiming();
    std::vector<std::shared_ptr<pb::TaskResourceUsage>> samples;
    samples.reserve(collectors.size());
    for (std::unique_ptr<Collector>& collector : collectors) {
      auto usage = std::make_shared<pb::TaskResourceUsage>();
      if (!collector->Sample(usage.get()).ok()) {
        state.SkipWithError("sample failed");
        return;
      }
      samples.push_back(std::move(usage));
    }
    benchmark::DoNotOptimize(samples);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(fleet.label);
}
BENCHMARK(BM_CollectorV1TickAt1Hz)->Arg(1000)->Iterations(5);

// The raw reference: open + read + close each of the eight files, parse.
void BM_RawOpenReadParse(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Fleet& fleet = TheFleet(n);
  std::vector<std::string> paths;
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < kFileCount; ++i) paths.push_back(fleet.File(t, i));
  }
  char buffer[8192];
  RawSample sample;
  for (auto _ : state) {
    for (size_t f = 0; f < paths.size(); ++f) {
      base::UniqueFd fd(open(paths[f].c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) {
        state.SkipWithError(("cannot open " + paths[f]).c_str());
        return;
      }
      const ssize_t r = read(fd.get(), buffer, sizeof(buffer) - 1);
      fd.reset();  // open, read and close are what this measures
      if (r < 0) {
        state.SkipWithError(("cannot read " + paths[f]).c_str());
        return;
      }
      buffer[r] = '\0';
      ParseFile(static_cast<int>(f % kFileCount), buffer, r, &sample);
    }
    benchmark::DoNotOptimize(sample);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(fleet.label);
}
BENCHMARK(BM_RawOpenReadParse)->Arg(1)->Arg(1000);

// The floor: the same reads on descriptors kept open (pread), parse.
void BM_RawPreadParse(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Fleet& fleet = TheFleet(n);
  std::vector<base::UniqueFd> fds;
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < kFileCount; ++i) {
      base::UniqueFd fd(open(fleet.File(t, i).c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) {
        state.SkipWithError(("cannot open " + fleet.File(t, i)).c_str());
        return;
      }
      fds.push_back(std::move(fd));
    }
  }
  char buffer[8192];
  RawSample sample;
  for (auto _ : state) {
    for (size_t f = 0; f < fds.size(); ++f) {
      const ssize_t r = pread(fds[f].get(), buffer, sizeof(buffer) - 1, 0);
      if (r < 0) break;
      buffer[r] = '\0';
      ParseFile(static_cast<int>(f % kFileCount), buffer, r, &sample);
    }
    benchmark::DoNotOptimize(sample);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(fleet.label);
}
BENCHMARK(BM_RawPreadParse)->Arg(1)->Arg(1000);

// The floor of BM_CollectorV1TickAt1Hz: raw preads of the fleet once a second.
void BM_RawPreadTickAt1Hz(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Fleet& fleet = TheFleet(n);
  std::vector<base::UniqueFd> fds;
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < kFileCount; ++i) {
      base::UniqueFd fd(open(fleet.File(t, i).c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) {
        state.SkipWithError(("cannot open " + fleet.File(t, i)).c_str());
        return;
      }
      fds.push_back(std::move(fd));
    }
  }
  char buffer[8192];
  RawSample sample;
  for (auto _ : state) {
    state.PauseTiming();
    absl::SleepFor(TickPause());
    state.ResumeTiming();
    for (size_t f = 0; f < fds.size(); ++f) {
      const ssize_t r = pread(fds[f].get(), buffer, sizeof(buffer) - 1, 0);
      if (r < 0) break;
      buffer[r] = '\0';
      ParseFile(static_cast<int>(f % kFileCount), buffer, r, &sample);
    }
    benchmark::DoNotOptimize(sample);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(fleet.label);
}
BENCHMARK(BM_RawPreadTickAt1Hz)->Arg(1000)->Iterations(5);

}  // namespace
}  // namespace stats
}  // namespace berth

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  berth::stats::CleanUp();
  benchmark::Shutdown();
  return 0;
}
