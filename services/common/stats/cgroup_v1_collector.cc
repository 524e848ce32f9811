// The cgroup v1 backend of NewCgroupV1Collector (collector.h).

#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/stats/collector.h"
#include "services/common/stats/kept_file.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;

class CgroupV1Collector : public Collector {
 public:
  static absl::StatusOr<std::unique_ptr<Collector>> Create(
      const CgroupMounts& mounts, absl::string_view cgroup_path,
      const CollectorOptions& options) {
    absl::StatusOr<std::string> path = CleanCgroupPath(cgroup_path);
    if (!path.ok()) return path.status();
    auto collector = absl::WrapUnique(new CgroupV1Collector(*path, options));
    std::vector<std::string> looked;
    for (const char* controller : {"cpu", "cpuacct", "memory", "pids"}) {
      const std::string mount = mounts.V1Mount(controller);
      if (mount.empty()) continue;
      const std::string dir = absl::StrCat(mount, *path == "/" ? "" : *path);
      looked.push_back(dir);
      absl::StatusOr<DirWatch> watch = DirWatch::Open(dir);
      if (absl::IsNotFound(watch.status())) continue;
      if (!watch.ok()) return watch.status();
      collector->watches_.push_back(*std::move(watch));
      absl::Status status = collector->OpenFiles(controller, dir);
      if (!status.ok()) return status;
    }
    if (looked.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot measure cgroup ", *path,
          ": none of the cgroup v1 controllers cpu, cpuacct, memory, pids is "
          "mounted"));
    }
    if (collector->watches_.empty()) {
      return absl::NotFoundError(
          absl::StrCat("cgroup ", *path, " not found: none of ",
                       absl::StrJoin(looked, ", "), " exists"));
    }
    return collector;
  }

  pb::Backend backend() const override { return pb::BACKEND_CGROUP_V1; }
  const std::string& target() const override { return target_; }

  absl::Status Sample(pb::TaskResourceUsage* usage) override {
    const int64_t now_ns = options_.monotonic_ns();
    const absl::Time timestamp = options_.now();
    Counters c;
    absl::Status status = Read(&c);
    if (absl::IsNotFound(status) || Gone()) {
      return absl::NotFoundError(absl::StrCat(
          target_, " is gone",
          status.ok() ? "" : absl::StrCat(" (", status.message(), ")")));
    }
    if (!status.ok()) return status;
    const CpuRate::Percent percent =
        rate_.Update(now_ns, c.cpu_usage_ns, c.cpu_user_ns, c.cpu_system_ns);
    usage->clear_processes();
    usage->set_backend(pb::BACKEND_CGROUP_V1);
    SetTimestamp(timestamp, usage->mutable_timestamp());
    FillResourceUsage(c, percent, options_.cpu_mhz, usage->mutable_usage());
    return absl::OkStatus();
  }

 private:
  CgroupV1Collector(std::string path, const CollectorOptions& options)
      : path_(std::move(path)),
        target_(absl::StrCat("cgroup ", path_)),
        options_(options) {
    const int64_t hz = options.clock_ticks_per_second > 0
                           ? options.clock_ticks_per_second
                           : sysconf(_SC_CLK_TCK);
    ns_per_tick_ = hz > 0 ? 1000000000 / hz : 10000000;
  }

  absl::Status OpenFiles(absl::string_view controller, const std::string& dir) {
    struct {
      const char* controller;
      const char* name;
      KeptFile* file;
    } const kFiles[] = {
        {"cpuacct", "cpuacct.usage", &cpuacct_usage_},
        {"cpuacct", "cpuacct.stat", &cpuacct_stat_},
        {"cpu", "cpu.stat", &cpu_stat_},
        {"memory", "memory.stat", &memory_stat_},
        {"memory", "memory.usage_in_bytes", &memory_usage_},
        {"memory", "memory.max_usage_in_bytes", &memory_max_usage_},
        {"memory", "memory.kmem.usage_in_bytes", &kmem_usage_},
        {"memory", "memory.kmem.max_usage_in_bytes", &kmem_max_usage_},
        {"pids", "pids.current", &pids_current_},
        {"pids", "pids.max", &pids_max_},
    };
    for (const auto& f : kFiles) {
      // Co-mounted controllers (cpu,cpuacct) share a directory: open once.
      if (controller != f.controller || f.file->is_open()) continue;
      absl::StatusOr<KeptFile> file =
          OpenIfPresent(absl::StrCat(dir, "/", f.name));
      if (!file.ok()) return file.status();
      *f.file = *std::move(file);
    }
    return absl::OkStatus();
  }

  absl::Status Read(Counters* c) {
    absl::Status status = ReadSingleNumber(cpuacct_usage_, &c->cpu_usage_ns);
    if (!status.ok()) return status;
    if (cpuacct_stat_.is_open()) {
      absl::StatusOr<absl::string_view> content = cpuacct_stat_.Read();
      if (!content.ok()) return content.status();
      std::optional<uint64_t> user;
      std::optional<uint64_t> system;
      const KeyedField fields[] = {{"user", &user}, {"system", &system}};
      ParseFlatKeyed(*content, fields);
      if (user) c->cpu_user_ns = *user * ns_per_tick_;
      if (system) c->cpu_system_ns = *system * ns_per_tick_;
    }
    if (cpu_stat_.is_open()) {
      absl::StatusOr<absl::string_view> content = cpu_stat_.Read();
      if (!content.ok()) return content.status();
      const KeyedField fields[] = {{"nr_throttled", &c->throttled_periods},
                                   {"throttled_time", &c->throttled_ns}};
      ParseFlatKeyed(*content, fields);
    }
    if (memory_stat_.is_open()) {
      absl::StatusOr<absl::string_view> content = memory_stat_.Read();
      if (!content.ok()) return content.status();
      std::optional<uint64_t> rss, cache, swap, mapped_file;
      std::optional<uint64_t> total_rss, total_cache, total_swap,
          total_mapped_file;
      const KeyedField fields[] = {
          {"rss", &rss},
          {"cache", &cache},
          {"swap", &swap},
          {"mapped_file", &mapped_file},
          {"total_rss", &total_rss},
          {"total_cache", &total_cache},
          {"total_swap", &total_swap},
          {"total_mapped_file", &total_mapped_file},
      };
      ParseFlatKeyed(*content, fields);
      c->rss = total_rss ? total_rss : rss;
      c->cache = total_cache ? total_cache : cache;
      c->swap = total_swap ? total_swap : swap;
      c->mapped_file = total_mapped_file ? total_mapped_file : mapped_file;
    }
    for (auto [file, value] :
         {std::pair{&memory_usage_, &c->usage},
          std::pair{&memory_max_usage_, &c->max_usage},
          std::pair{&kmem_usage_, &c->kernel_usage},
          std::pair{&kmem_max_usage_, &c->kernel_max_usage}}) {
      status = ReadSingleNumber(*file, value);
      if (!status.ok()) return status;
    }
    status = ReadSingleNumber(pids_current_, &c->pids_current);
    if (!status.ok()) return status;
    return ReadLimit(pids_max_, &c->pids_limit);
  }

  bool Gone() const {
    for (const DirWatch& watch : watches_) {
      if (watch.Gone()) return true;
    }
    return false;
  }

  const std::string path_;
  const std::string target_;
  const CollectorOptions options_;
  uint64_t ns_per_tick_ = 0;
  std::vector<DirWatch> watches_;
  KeptFile cpuacct_usage_;
  KeptFile cpuacct_stat_;
  KeptFile cpu_stat_;
  KeptFile memory_stat_;
  KeptFile memory_usage_;
  KeptFile memory_max_usage_;
  KeptFile kmem_usage_;
  KeptFile kmem_max_usage_;
  KeptFile pids_current_;
  KeptFile pids_max_;
  CpuRate rate_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collector>> NewCgroupV1Collector(
    const CgroupMounts& mounts, absl::string_view cgroup_path,
    const CollectorOptions& options) {
  return CgroupV1Collector::Create(mounts, cgroup_path, options);
}

}  // namespace stats
}  // namespace berth
