// The cgroup v2 backend of NewCgroupV2Collector (collector.h).

#include <memory>
#include <string>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "services/common/stats/collector.h"
#include "services/common/stats/kept_file.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;

constexpr uint64_t kNanosPerMicro = 1000;

std::optional<uint64_t> MicrosToNanos(std::optional<uint64_t> micros) {
  if (!micros) return std::nullopt;
  return *micros * kNanosPerMicro;
}

class CgroupV2Collector : public Collector {
 public:
  static absl::StatusOr<std::unique_ptr<Collector>> Create(
      const std::string& v2_mount, absl::string_view cgroup_path,
      const CollectorOptions& options) {
    absl::StatusOr<std::string> path = CleanCgroupPath(cgroup_path);
    if (!path.ok()) return path.status();
    if (v2_mount.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot measure cgroup ", *path,
                       ": no cgroup2 hierarchy is mounted"));
    }
    const std::string dir = absl::StrCat(v2_mount, *path == "/" ? "" : *path);
    absl::StatusOr<DirWatch> watch = DirWatch::Open(dir);
    if (absl::IsNotFound(watch.status())) {
      return absl::NotFoundError(absl::StrCat(
          "cgroup ", *path, " not found: ", dir, " does not exist"));
    }
    if (!watch.ok()) return watch.status();
    auto collector = absl::WrapUnique(new CgroupV2Collector(*path, options));
    collector->watch_ = *std::move(watch);
    for (auto [name, file] : {
             std::pair{"cpu.stat", &collector->cpu_stat_},
             std::pair{"memory.current", &collector->memory_current_},
             std::pair{"memory.peak", &collector->memory_peak_},
             std::pair{"memory.stat", &collector->memory_stat_},
             std::pair{"memory.swap.current", &collector->swap_current_},
             std::pair{"pids.current", &collector->pids_current_},
             std::pair{"pids.max", &collector->pids_max_},
         }) {
      absl::StatusOr<KeptFile> opened =
          OpenIfPresent(absl::StrCat(dir, "/", name));
      if (!opened.ok()) return opened.status();
      *file = *std::move(opened);
    }
    return collector;
  }

  pb::Backend backend() const override { return pb::BACKEND_CGROUP_V2; }
  const std::string& target() const override { return target_; }

  absl::Status Sample(pb::TaskResourceUsage* usage) override {
    const int64_t now_ns = options_.monotonic_ns();
    const absl::Time timestamp = options_.now();
    Counters c;
    absl::Status status = Read(&c);
    if (absl::IsNotFound(status) || watch_.Gone()) {
      return absl::NotFoundError(absl::StrCat(
          target_, " is gone",
          status.ok() ? "" : absl::StrCat(" (", status.message(), ")")));
    }
    if (!status.ok()) return status;
    const CpuRate::Percent percent =
        rate_.Update(now_ns, c.cpu_usage_ns, c.cpu_user_ns, c.cpu_system_ns);
    usage->clear_processes();
    usage->set_backend(pb::BACKEND_CGROUP_V2);
    SetTimestamp(timestamp, usage->mutable_timestamp());
    FillResourceUsage(c, percent, options_.cpu_mhz, usage->mutable_usage());
    return absl::OkStatus();
  }

 private:
  CgroupV2Collector(std::string path, const CollectorOptions& options)
      : target_(absl::StrCat("cgroup ", path)), options_(options) {}

  absl::Status Read(Counters* c) {
    if (cpu_stat_.is_open()) {
      absl::StatusOr<absl::string_view> content = cpu_stat_.Read();
      if (!content.ok()) return content.status();
      std::optional<uint64_t> usage_usec, user_usec, system_usec,
          throttled_usec;
      const KeyedField fields[] = {
          {"usage_usec", &usage_usec},
          {"user_usec", &user_usec},
          {"system_usec", &system_usec},
          {"nr_throttled", &c->throttled_periods},
          {"throttled_usec", &throttled_usec},
      };
      ParseFlatKeyed(*content, fields);
      c->cpu_usage_ns = MicrosToNanos(usage_usec);
      c->cpu_user_ns = MicrosToNanos(user_usec);
      c->cpu_system_ns = MicrosToNanos(system_usec);
      c->throttled_ns = MicrosToNanos(throttled_usec);
    }
    absl::Status status = ReadSingleNumber(memory_current_, &c->usage);
    if (!status.ok()) return status;
    status = ReadSingleNumber(memory_peak_, &c->max_usage);
    if (!status.ok()) return status;
    if (memory_stat_.is_open()) {
      absl::StatusOr<absl::string_view> content = memory_stat_.Read();
      if (!content.ok()) return content.status();
      const KeyedField fields[] = {
          {"anon", &c->rss},
          {"file", &c->cache},
          {"file_mapped", &c->mapped_file},
          {"kernel", &c->kernel_usage},
      };
      ParseFlatKeyed(*content, fields);
    }
    status = ReadSingleNumber(swap_current_, &c->swap);
    if (!status.ok()) return status;
    status = ReadSingleNumber(pids_current_, &c->pids_current);
    if (!status.ok()) return status;
    return ReadLimit(pids_max_, &c->pids_limit);
  }

  const std::string target_;
  const CollectorOptions options_;
  DirWatch watch_;
  KeptFile cpu_stat_;
  KeptFile memory_current_;
  KeptFile memory_peak_;
  KeptFile memory_stat_;
  KeptFile swap_current_;
  KeptFile pids_current_;
  KeptFile pids_max_;
  CpuRate rate_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collector>> NewCgroupV2Collector(
    const std::string& v2_mount, absl::string_view cgroup_path,
    const CollectorOptions& options) {
  return CgroupV2Collector::Create(v2_mount, cgroup_path, options);
}

}  // namespace stats
}  // namespace berth
