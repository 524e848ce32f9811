#include "services/common/stats/collector.h"

#include <time.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/duration.pb.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;

constexpr int64_t kNanosPerSecond = 1000000000;

void SetDuration(uint64_t ns, google::protobuf::Duration* out) {
  out->set_seconds(static_cast<int64_t>(ns / kNanosPerSecond));
  out->set_nanos(static_cast<int32_t>(ns % kNanosPerSecond));
}

std::optional<double> PercentOf(std::optional<uint64_t> now,
                                std::optional<uint64_t> before,
                                int64_t elapsed_ns) {
  if (!now.has_value() || !before.has_value()) return std::nullopt;
  const uint64_t delta = *now >= *before ? *now - *before : 0;
  return static_cast<double>(delta) * 100.0 / static_cast<double>(elapsed_ns);
}

}  // namespace

int64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

CpuRate::Percent CpuRate::Update(int64_t now_ns,
                                 std::optional<uint64_t> total_ns,
                                 std::optional<uint64_t> user_ns,
                                 std::optional<uint64_t> system_ns) {
  Percent percent;
  if (has_previous_ && now_ns <= previous_ns_) {
    // No time has passed: keep the older baseline for the next sample.
    return percent;
  }
  if (has_previous_) {
    const int64_t elapsed = now_ns - previous_ns_;
    percent.total = PercentOf(total_ns, previous_total_, elapsed);
    percent.user = PercentOf(user_ns, previous_user_, elapsed);
    percent.system = PercentOf(system_ns, previous_system_, elapsed);
  }
  has_previous_ = true;
  previous_ns_ = now_ns;
  previous_total_ = total_ns;
  previous_user_ = user_ns;
  previous_system_ = system_ns;
  return percent;
}

void SetTimestamp(absl::Time time, google::protobuf::Timestamp* out) {
  const int64_t ns = absl::ToUnixNanos(time);
  int64_t seconds = ns / kNanosPerSecond;
  int64_t nanos = ns % kNanosPerSecond;
  if (nanos < 0) {
    nanos += kNanosPerSecond;
    --seconds;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(nanos));
}

void FillResourceUsage(const Counters& c, const CpuRate::Percent& percent,
                       double cpu_mhz, pb::ResourceUsage* out) {
  out->Clear();
  pb::CpuStats* cpu = out->mutable_cpu();
  if (c.cpu_system_ns) {
    SetDuration(*c.cpu_system_ns, cpu->mutable_system_mode());
    cpu->add_measured(pb::CPU_FIELD_SYSTEM_MODE);
  }
  if (c.cpu_user_ns) {
    SetDuration(*c.cpu_user_ns, cpu->mutable_user_mode());
    cpu->add_measured(pb::CPU_FIELD_USER_MODE);
  }
  if (c.cpu_usage_ns) {
    SetDuration(*c.cpu_usage_ns, cpu->mutable_usage());
    cpu->add_measured(pb::CPU_FIELD_USAGE);
  }
  if (c.throttled_periods) {
    cpu->set_throttled_periods(*c.throttled_periods);
    cpu->add_measured(pb::CPU_FIELD_THROTTLED_PERIODS);
  }
  if (c.throttled_ns) {
    SetDuration(*c.throttled_ns, cpu->mutable_throttled_time());
    cpu->add_measured(pb::CPU_FIELD_THROTTLED_TIME);
  }
  if (percent.total) {
    cpu->set_percent(*percent.total);
    cpu->add_measured(pb::CPU_FIELD_PERCENT);
  }
  if (percent.system) {
    cpu->set_system_mode_percent(*percent.system);
    cpu->add_measured(pb::CPU_FIELD_SYSTEM_MODE_PERCENT);
  }
  if (percent.user) {
    cpu->set_user_mode_percent(*percent.user);
    cpu->add_measured(pb::CPU_FIELD_USER_MODE_PERCENT);
  }
  // Derived: always carried, never listed as measured.
  cpu->set_total_ticks(percent.total ? *percent.total / 100.0 * cpu_mhz : 0.0);

  pb::MemoryStats* memory = out->mutable_memory();
  const struct {
    const std::optional<uint64_t>& value;
    void (pb::MemoryStats::*set)(uint64_t);
    pb::MemoryField field;
  } kMemory[] = {
      {c.rss, &pb::MemoryStats::set_rss, pb::MEMORY_FIELD_RSS},
      {c.cache, &pb::MemoryStats::set_cache, pb::MEMORY_FIELD_CACHE},
      {c.swap, &pb::MemoryStats::set_swap, pb::MEMORY_FIELD_SWAP},
      {c.mapped_file, &pb::MemoryStats::set_mapped_file,
       pb::MEMORY_FIELD_MAPPED_FILE},
      {c.usage, &pb::MemoryStats::set_usage, pb::MEMORY_FIELD_USAGE},
      {c.max_usage, &pb::MemoryStats::set_max_usage,
       pb::MEMORY_FIELD_MAX_USAGE},
      {c.kernel_usage, &pb::MemoryStats::set_kernel_usage,
       pb::MEMORY_FIELD_KERNEL_USAGE},
      {c.kernel_max_usage, &pb::MemoryStats::set_kernel_max_usage,
       pb::MEMORY_FIELD_KERNEL_MAX_USAGE},
  };
  for (const auto& m : kMemory) {
    if (!m.value) continue;
    (memory->*m.set)(*m.value);
    memory->add_measured(m.field);
  }

  // Only where measured: most samples' readers predate the field.
  if (c.pids_current || c.pids_limit) {
    pb::PidsStats* pids = out->mutable_pids();
    if (c.pids_current) {
      pids->set_current(*c.pids_current);
      pids->add_measured(pb::PIDS_FIELD_CURRENT);
    }
    if (c.pids_limit) {
      pids->set_limit(*c.pids_limit);
      pids->add_measured(pb::PIDS_FIELD_LIMIT);
    }
  }
}

absl::StatusOr<std::string> CleanCgroupPath(absl::string_view cgroup_path) {
  if (cgroup_path.empty()) {
    return absl::InvalidArgumentError("cgroup_path is empty");
  }
  std::vector<absl::string_view> parts =
      absl::StrSplit(cgroup_path, '/', absl::SkipEmpty());
  for (absl::string_view part : parts) {
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("cgroup_path \"", cgroup_path,
                       "\" must not have a \".\" or \"..\" component"));
    }
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

absl::StatusOr<std::unique_ptr<Collector>> NewCgroupCollector(
    const CgroupMounts& mounts, absl::string_view cgroup_path,
    const CollectorOptions& options) {
  switch (mounts.layout) {
    case pb::CGROUP_LAYOUT_V1:
    case pb::CGROUP_LAYOUT_HYBRID:
      return NewCgroupV1Collector(mounts, cgroup_path, options);
    case pb::CGROUP_LAYOUT_V2:
      return NewCgroupV2Collector(mounts.v2, cgroup_path, options);
    default:
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot measure cgroup ", cgroup_path,
          ": this host has no cgroup hierarchy; register the task by "
          "root_pid instead"));
  }
}

}  // namespace stats
}  // namespace berth
