// Collectors: read the resource usage of one task, from cgroup v1, cgroup v2
// or procfs, as berth.stats.v1 samples.
//
//   absl::StatusOr<std::unique_ptr<Collector>> collector =
//       NewCgroupCollector(mounts, "/berth/task-1", CollectorOptions());
//   berth::stats::v1::TaskResourceUsage usage;
//   absl::Status status = (*collector)->Sample(&usage);
//
// Every sample lists in `measured` exactly the fields its backend read: a
// file or key the kernel does not have (memory.peak before Linux 5.19,
// memory.swap.current without swap accounting, ...) leaves its field out.
//
// CPU percent is the delta of monotonic CPU counters between two consecutive
// samples of one collector divided by the wall-clock (monotonic) time between
// them, in percent of one core: a task using two full cores reads 200. The
// first sample has counters and no percent (the percent fields are then not
// in `measured`). total_ticks = percent / 100 x one core's MHz: derived, so
// never in `measured`, but always set (0 while there is no percent).
//
// A collector keeps its files open and re-reads them with pread.

#ifndef SERVICES_COMMON_STATS_COLLECTOR_H_
#define SERVICES_COMMON_STATS_COLLECTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "services/common/stats/cgroup_layout.h"

namespace berth {
namespace stats {

// CLOCK_MONOTONIC in nanoseconds.
int64_t MonotonicNanos();

// What every collector is given; the defaults are the real host.
struct CollectorOptions {
  // The timestamp of a sample.
  std::function<absl::Time()> now = [] { return absl::Now(); };
  // The clock percent is computed against; must not go backwards.
  std::function<int64_t()> monotonic_ns = MonotonicNanos;
  // MHz of one of the host's cores, for total_ticks (see HostCpuMhz).
  double cpu_mhz = 0;
  // Clock ticks per second (USER_HZ): the unit of cpuacct.stat and of the
  // times in /proc/PID/stat. 0 means sysconf(_SC_CLK_TCK).
  int64_t clock_ticks_per_second = 0;
};

// Measures one target (a cgroup or a process tree). Not thread-safe: one
// caller at a time (the service holds a lock per task).
class Collector {
 public:
  virtual ~Collector() = default;

  // Where the samples come from.
  virtual berth::stats::v1::Backend backend() const = 0;

  // The target, for messages: "cgroup /berth/t1", "process tree of pid 42".
  virtual const std::string& target() const = 0;

  // Reads the target now. Sets `usage`'s timestamp, usage, processes (procfs:
  // one entry per process of the tree) and backend; leaves task_id alone.
  // Percent is over the time since this collector's previous Sample.
  // NOT_FOUND naming the target when it is gone (cgroup removed, root process
  // exited); other errors name the file.
  virtual absl::Status Sample(berth::stats::v1::TaskResourceUsage* usage) = 0;
};

// A cgroup v1 task: cpuacct.usage and cpuacct.stat (user, system), cpu.stat
// (nr_throttled, throttled_time), memory.stat (rss, cache, swap, mapped_file;
// the hierarchical total_* lines where the kernel has them, so that the
// task's own sub-cgroups count as memory.usage_in_bytes does),
// memory.usage_in_bytes, memory.max_usage_in_bytes and
// memory.kmem.usage_in_bytes and max_usage_in_bytes, pids.current and
// pids.max. `cgroup_path` is relative to each controller's mount point (cpu,
// cpuacct, memory, pids in `mounts.v1`); controllers not mounted, or where
// the path is missing, are not measured. NOT_FOUND naming the path when it is
// under none of them.
absl::StatusOr<std::unique_ptr<Collector>> NewCgroupV1Collector(
    const CgroupMounts& mounts, absl::string_view cgroup_path,
    const CollectorOptions& options);

// A cgroup v2 task below `v2_mount`: cpu.stat (usage_usec, user_usec,
// system_usec, nr_throttled, throttled_usec), memory.current → usage,
// memory.peak → max_usage (where the kernel has it), memory.stat (anon → rss,
// file → cache, file_mapped → mapped_file, kernel → kernel_usage),
// memory.swap.current → swap, pids.current and pids.max. NOT_FOUND naming the
// path if it is not there.
absl::StatusOr<std::unique_ptr<Collector>> NewCgroupV2Collector(
    const std::string& v2_mount, absl::string_view cgroup_path,
    const CollectorOptions& options);

// The cgroup backend the host's layout calls for: v1 for V1 and HYBRID (the
// cgroup2 mount of a hybrid host has no cpu or memory controller), v2 for V2.
// FAILED_PRECONDITION for NONE (measure a process tree instead).
absl::StatusOr<std::unique_ptr<Collector>> NewCgroupCollector(
    const CgroupMounts& mounts, absl::string_view cgroup_path,
    const CollectorOptions& options);

// A process tree rooted at `root_pid`, read from `proc_root` (/proc): the sum
// over the tree of utime and stime (/proc/PID/stat, clock ticks → ns) as
// user_mode, system_mode and usage (their sum), and of VmRSS → rss and
// VmSwap → swap (/proc/PID/status, kB → bytes) and of Threads → pids
// current; and each process on its own
// in `processes`. Children are found through /proc/PID/task/TID/children
// where the kernel has it, else by scanning every /proc/PID/stat for its
// parent. Percent sums each process's own delta, so a child that exits
// between samples never makes it negative. NOT_FOUND naming the pid when it
// is not there; the tree is gone when its root process exits (or is a
// zombie).
absl::StatusOr<std::unique_ptr<Collector>> NewProcfsCollector(
    const std::string& proc_root, int root_pid,
    const CollectorOptions& options);

// A cgroup path as the collectors take it: "/a/b" for "a/b", "/a/b/",
// "//a//b". INVALID_ARGUMENT naming the field "cgroup_path" if it is empty or
// has a "." or ".." component.
absl::StatusOr<std::string> CleanCgroupPath(absl::string_view cgroup_path);

// The raw counters of one read; a field not read stays unset. CPU times in
// nanoseconds, memory in bytes.
struct Counters {
  std::optional<uint64_t> cpu_usage_ns;
  std::optional<uint64_t> cpu_user_ns;
  std::optional<uint64_t> cpu_system_ns;
  std::optional<uint64_t> throttled_periods;
  std::optional<uint64_t> throttled_ns;

  std::optional<uint64_t> rss;
  std::optional<uint64_t> cache;
  std::optional<uint64_t> swap;
  std::optional<uint64_t> mapped_file;
  std::optional<uint64_t> usage;
  std::optional<uint64_t> max_usage;
  std::optional<uint64_t> kernel_usage;
  std::optional<uint64_t> kernel_max_usage;

  std::optional<uint64_t> pids_current;
  std::optional<uint64_t> pids_limit;
};

// CPU percent (of one core) from deltas of monotonic CPU counters between
// consecutive Updates. Shared by the backends.
class CpuRate {
 public:
  struct Percent {
    std::optional<double> total;
    std::optional<double> user;
    std::optional<double> system;
  };

  // Feeds the counters read at `now_ns`; returns the percent since the
  // previous Update: nothing on the first, nor when no time has passed.
  // A counter that went backwards counts as 0.
  Percent Update(int64_t now_ns, std::optional<uint64_t> total_ns,
                 std::optional<uint64_t> user_ns,
                 std::optional<uint64_t> system_ns);

 private:
  bool has_previous_ = false;
  int64_t previous_ns_ = 0;
  std::optional<uint64_t> previous_total_;
  std::optional<uint64_t> previous_user_;
  std::optional<uint64_t> previous_system_;
};

// Sets `out` to `time`.
void SetTimestamp(absl::Time time, google::protobuf::Timestamp* out);

// Writes `counters` and `percent` into `out` (cleared first), with the
// measured lists in enum order, and total_ticks = percent/100 x cpu_mhz.
void FillResourceUsage(const Counters& counters,
                       const CpuRate::Percent& percent, double cpu_mhz,
                       berth::stats::v1::ResourceUsage* out);

}  // namespace stats
}  // namespace berth

#endif  // SERVICES_COMMON_STATS_COLLECTOR_H_
