// How the host's cgroups are mounted: no cgroups, cgroup v1 hierarchies only,
// the cgroup v2 unified hierarchy only, or both (systemd's hybrid layout:
// v1 controllers plus a cgroup2 mount, as on the development machines).

#ifndef SERVICES_COMMON_STATS_CGROUP_LAYOUT_H_
#define SERVICES_COMMON_STATS_CGROUP_LAYOUT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/stats/v1/stats.pb.h"

namespace berth {
namespace stats {

// The cgroup file systems mounted at or below a root directory.
struct CgroupMounts {
  // What is mounted. HYBRID means v1 resource controllers and a cgroup2 mount:
  // berth then reads CPU, memory and pids from v1.
  berth::stats::v1::CgroupLayout layout = berth::stats::v1::CGROUP_LAYOUT_NONE;
  // Mount point of each cgroup v1 resource controller ("cpu", "cpuacct",
  // "memory", ...); co-mounted controllers share one. Named hierarchies
  // without a controller (name=systemd) are not listed.
  std::map<std::string, std::string> v1;
  // Mount point of the cgroup2 hierarchy; empty if there is none.
  std::string v2;

  // The mount point of v1 `controller`, or "" if it is not mounted.
  std::string V1Mount(absl::string_view controller) const;
};

// Reads the cgroup mounts at `cgroup_root` or below it from `mountinfo`
// (/proc/self/mountinfo, or a file of that format in tests). Errors name the
// mountinfo path.
absl::StatusOr<CgroupMounts> DetectCgroupLayout(
    absl::string_view cgroup_root,
    const std::string& mountinfo = "/proc/self/mountinfo");

// The same, from the content of a mountinfo file.
CgroupMounts ParseCgroupMounts(absl::string_view mountinfo_content,
                               absl::string_view cgroup_root);

// The cgroup mounts a directory laid out like a cgroup root would have,
// without looking at any mount table (test fixtures, or a root given
// explicitly): V1 takes <root>/<controller> for cpu, cpuacct, memory and pids;
// V2 takes <root> itself; HYBRID both, with v2 at <root>/unified; NONE none.
CgroupMounts CgroupMountsForLayout(berth::stats::v1::CgroupLayout layout,
                                   absl::string_view cgroup_root);

}  // namespace stats
}  // namespace berth

#endif  // SERVICES_COMMON_STATS_CGROUP_LAYOUT_H_
