// Fuzzes the collectors over files the input makes: a cgroup v1 task
// (cpuacct.usage, cpuacct.stat, cpu.stat, memory.stat, memory.*usage*,
// pids.*), a cgroup v2 task (cpu.stat, memory.current, memory.peak,
// memory.stat, memory.swap.current, pids.*), a process tree under a fake
// /proc (PID/stat, PID/status, PID/task/TID/children) or the host's
// /proc/cpuinfo, /proc/stat, /proc/meminfo and cpufreq. The first byte
// chooses the backend (modulo 4, in that order); the rest is the files'
// contents in the order listed in kFiles, separated by NUL bytes (a file
// past the last part is absent), in a temporary directory removed at exit.
// Each collector samples twice, one (fake) second apart.

#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.pb.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/stats/collector.h"
#include "services/common/stats/host_info.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

namespace pb = ::berth::stats::v1;

void Check(bool condition) {
  if (!condition) std::abort();
}

// The files of each backend, relative to the temporary directory.
const std::vector<std::string>& Files(int backend) {
  static const auto* const kFiles = new std::vector<std::vector<std::string>>{
      // cgroup v1: controllers at v1/<controller>, the task at /t.
      {"v1/cpuacct/t/cpuacct.usage", "v1/cpuacct/t/cpuacct.stat",
       "v1/cpu/t/cpu.stat", "v1/memory/t/memory.stat",
       "v1/memory/t/memory.usage_in_bytes",
       "v1/memory/t/memory.max_usage_in_bytes",
       "v1/memory/t/memory.kmem.usage_in_bytes",
       "v1/memory/t/memory.kmem.max_usage_in_bytes", "v1/pids/t/pids.current",
       "v1/pids/t/pids.max"},
      // cgroup v2: the task at /t.
      {"v2/t/cpu.stat", "v2/t/memory.current", "v2/t/memory.peak",
       "v2/t/memory.stat", "v2/t/memory.swap.current", "v2/t/pids.current",
       "v2/t/pids.max"},
      // procfs: the tree of pid 1 (children from its children file when
      // there is one, else by each process's parent).
      {"proc/1/stat", "proc/1/status", "proc/2/stat", "proc/2/status",
       "proc/3/stat", "proc/1/task/1/children"},
      // the host
      {"proc/cpuinfo", "proc/stat", "proc/meminfo",
       "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"},
  };
  return (*kFiles)[backend];
}

void WriteFile(const std::string& path, absl::string_view content) {
  std::ofstream out(path, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  Check(out.good());
}

void CheckUsage(const pb::ResourceUsage& usage) {
  // Each measured field once.
  for (int i = 1; i < usage.cpu().measured_size(); ++i) {
    Check(usage.cpu().measured(i - 1) < usage.cpu().measured(i));
  }
  for (int i = 1; i < usage.memory().measured_size(); ++i) {
    Check(usage.memory().measured(i - 1) < usage.memory().measured(i));
  }
  Check(usage.cpu().total_ticks() >= 0);
}

void Sample(absl::StatusOr<std::unique_ptr<berth::stats::Collector>> made) {
  if (!made.ok()) return;
  berth::stats::Collector& collector = **made;
  for (int i = 0; i < 2; ++i) {
    pb::TaskResourceUsage usage;
    const absl::Status status = collector.Sample(&usage);
    if (!status.ok()) {
      Check(!status.message().empty());
      return;
    }
    CheckUsage(usage.usage());
    for (const auto& [pid, process] : usage.processes()) CheckUsage(process);
  }
}

void Run(int backend, const std::string& dir) {
  int64_t monotonic = 1000000000;
  berth::stats::CollectorOptions options;
  options.now = [] { return absl::FromUnixSeconds(1700000000); };
  options.monotonic_ns = [&monotonic] {
    monotonic += 1000000000;
    return monotonic;
  };
  options.cpu_mhz = 2000;
  options.clock_ticks_per_second = 100;
  switch (backend) {
    case 0: {
      const berth::stats::CgroupMounts mounts =
          berth::stats::CgroupMountsForLayout(pb::CGROUP_LAYOUT_V1,
                                              dir + "/v1");
      Sample(berth::stats::NewCgroupCollector(mounts, "/t", options));
      break;
    }
    case 1:
      Sample(berth::stats::NewCgroupV2Collector(dir + "/v2", "t", options));
      break;
    case 2:
      Sample(berth::stats::NewProcfsCollector(dir + "/proc", 1, options));
      break;
    default: {
      const std::string proc = dir + "/proc";
      absl::StatusOr<double> mhz = berth::stats::HostCpuMhz(proc, dir + "/sys");
      if (mhz.ok()) Check(*mhz > 0);
      absl::StatusOr<berth::stats::HostCpuTimes> times =
          berth::stats::ReadHostCpuTimes(proc);
      if (times.ok()) {
        Check(berth::stats::HostCpuPercent(*times, *times) == 0);
        berth::stats::HostCpuTimes later = *times;
        later.total += 100;
        later.busy += 50;
        Check(berth::stats::HostCpuPercent(*times, later) >= 0);
      }
      (void)berth::stats::ReadHostMemory(proc);
      break;
    }
  }
}

// The temporary directory of this process, made on first use (in
// TEST_TMPDIR, else /dev/shm where there is one: the files are rewritten for
// every input) and removed at exit.
const std::string& TempDir() {
  static const std::string* const kDir = [] {
    const char* base = getenv("TEST_TMPDIR");
    if (base == nullptr)
      base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    auto* dir = new std::string(absl::StrCat(base, "/collector_fuzzer.XXXXXX"));
    Check(mkdtemp(dir->data()) != nullptr);
    // The directories a backend looks at exist even without files.
    for (const char* made : {"v1/cpu/t", "v1/cpuacct/t", "v1/memory/t",
                             "v1/pids/t", "v2/t", "proc/1/task/1", "proc/2",
                             "proc/3", "sys/devices/system/cpu/cpu0/cpufreq"}) {
      std::filesystem::create_directories(absl::StrCat(*dir, "/", made));
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(TempDir(), ignored);
    });
    return dir;
  }();
  return *kDir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int backend = data[0] % 4;
  const std::vector<std::string>& files = Files(backend);
  const std::vector<absl::string_view> parts =
      absl::StrSplit(berth::fuzz::AsText(data, size).substr(1),
                     absl::MaxSplits('\0', static_cast<int>(files.size()) - 1));
  const std::string& dir = TempDir();
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = absl::StrCat(dir, "/", files[i]);
    if (i < parts.size()) {
      WriteFile(path, parts[i]);
    } else {
      unlink(path.c_str());  // absent on this "kernel"
    }
  }
  Run(backend, dir);
  return 0;
}
