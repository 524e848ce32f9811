#include "services/common/stats/cgroup_layout.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth {
namespace stats {
namespace {

using ::berth::stats::v1::CgroupLayout;

// The cgroup v1 resource controllers a mount option can name.
bool IsV1Controller(absl::string_view option) {
  static const auto* const kControllers = new absl::flat_hash_set<std::string>{
      "blkio",      "cpu",     "cpuacct", "cpuset",  "devices",
      "freezer",    "hugetlb", "memory",  "net_cls", "net_prio",
      "perf_event", "pids",    "rdma",    "misc"};
  return kControllers->contains(option);
}

// mountinfo escapes blanks, tabs, newlines and backslashes as \ooo.
std::string UnescapeMountField(absl::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        absl::ascii_isdigit(field[i + 1]) &&
        absl::ascii_isdigit(field[i + 2]) &&
        absl::ascii_isdigit(field[i + 3])) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 +
                                      (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

std::string NormalizeRoot(absl::string_view root) {
  std::string out(root);
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

bool AtOrBelow(absl::string_view path, absl::string_view root) {
  if (root == "/") return true;
  return path == root ||
         (absl::StartsWith(path, root) && path.size() > root.size() &&
          path[root.size()] == '/');
}

}  // namespace

std::string CgroupMounts::V1Mount(absl::string_view controller) const {
  auto it = v1.find(std::string(controller));
  return it == v1.end() ? std::string() : it->second;
}

CgroupMounts ParseCgroupMounts(absl::string_view mountinfo_content,
                               absl::string_view cgroup_root) {
  const std::string root = NormalizeRoot(cgroup_root);
  CgroupMounts mounts;
  for (absl::string_view line :
       absl::StrSplit(mountinfo_content, '\n', absl::SkipEmpty())) {
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
    // SUPER_OPTIONS
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 7) continue;
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 1 >= fields.size()) continue;
    const absl::string_view fstype = fields[dash + 1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    const std::string mount_point = UnescapeMountField(fields[4]);
    if (!AtOrBelow(mount_point, root)) continue;
    if (fstype == "cgroup2") {
      if (mounts.v2.empty()) mounts.v2 = mount_point;
      continue;
    }
    // The controllers of a v1 hierarchy are among its super options (and,
    // on old kernels, its per-mount options).
    std::vector<absl::string_view> options;
    if (dash + 3 < fields.size()) {
      for (absl::string_view option : absl::StrSplit(fields[dash + 3], ',')) {
        options.push_back(option);
      }
    }
    for (absl::string_view option : absl::StrSplit(fields[5], ',')) {
      options.push_back(option);
    }
    for (absl::string_view option : options) {
      if (IsV1Controller(option)) {
        mounts.v1.emplace(std::string(option), mount_point);
      }
    }
  }
  const bool has_v1 = !mounts.v1.empty();
  const bool has_v2 = !mounts.v2.empty();
  if (has_v1 && has_v2) {
    mounts.layout = v1::CGROUP_LAYOUT_HYBRID;
  } else if (has_v1) {
    mounts.layout = v1::CGROUP_LAYOUT_V1;
  } else if (has_v2) {
    mounts.layout = v1::CGROUP_LAYOUT_V2;
  } else {
    mounts.layout = v1::CGROUP_LAYOUT_NONE;
  }
  return mounts;
}

absl::StatusOr<CgroupMounts> DetectCgroupLayout(absl::string_view cgroup_root,
                                                const std::string& mountinfo) {
  std::ifstream in(mountinfo);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the mount table ", mountinfo));
  }
  std::stringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    return absl::InternalError(
        absl::StrCat("cannot read the mount table ", mountinfo));
  }
  return ParseCgroupMounts(content.str(), cgroup_root);
}

CgroupMounts CgroupMountsForLayout(CgroupLayout layout,
                                   absl::string_view cgroup_root) {
  const std::string root = NormalizeRoot(cgroup_root);
  CgroupMounts mounts;
  mounts.layout = layout;
  if (layout == v1::CGROUP_LAYOUT_V1 || layout == v1::CGROUP_LAYOUT_HYBRID) {
    for (const char* controller : {"cpu", "cpuacct", "memory", "pids"}) {
      mounts.v1[controller] = absl::StrCat(root, "/", controller);
    }
  }
  if (layout == v1::CGROUP_LAYOUT_V2) mounts.v2 = root;
  if (layout == v1::CGROUP_LAYOUT_HYBRID) {
    mounts.v2 = absl::StrCat(root, "/unified");
  }
  if (layout == v1::CGROUP_LAYOUT_UNSPECIFIED) {
    mounts.layout = v1::CGROUP_LAYOUT_NONE;
  }
  return mounts;
}

}  // namespace stats
}  // namespace berth
