#include "services/driver/exec/user_namespace.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace berth::exec_driver {

namespace dv1 = ::berth::driver::v1;
using ::berth::driver_common::IdMapLine;
using ::berth::driver_common::UserNamespaceMaps;

namespace {

constexpr uint64_t kIdLimit = uint64_t{1} << 32;

bool Overlap(uint64_t a, uint64_t a_size, uint64_t b, uint64_t b_size) {
  return a < b + b_size && b < a + a_size;
}

absl::StatusOr<std::vector<IdMapLine>> ResolveMap(
    const google::protobuf::RepeatedPtrField<dv1::IdMapping>& mappings,
    const std::string& field) {
  if (mappings.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field,
                     ": empty (a user namespace needs uid and gid "
                     "mappings)"));
  }
  if (mappings.size() > kMaxIdMapLines) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", mappings.size(),
                     " ranges, the kernel takes at most ", kMaxIdMapLines));
  }
  std::vector<IdMapLine> lines;
  bool has_root = false;
  for (int i = 0; i < mappings.size(); ++i) {
    const dv1::IdMapping& m = mappings[i];
    const std::string at = absl::StrCat(field, "[", i, "]");
    if (m.size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".size: is 0"));
    }
    if (uint64_t{m.container_id()} + m.size() > kIdLimit ||
        uint64_t{m.host_id()} + m.size() > kIdLimit) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": ", m.container_id(), " ", m.host_id(), " ",
                       m.size(), " runs past id 4294967295"));
    }
    if (m.host_id() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(at,
                       ".host_id: a range starting at host id 0 would "
                       "make the host's root the task's"));
    }
    for (int j = 0; j < i; ++j) {
      const dv1::IdMapping& o = mappings[j];
      if (Overlap(m.container_id(), m.size(), o.container_id(), o.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".container_id: overlaps ", field, "[", j, "] inside"));
      }
      if (Overlap(m.host_id(), m.size(), o.host_id(), o.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".host_id: overlaps ", field, "[", j, "] on the host"));
      }
    }
    has_root = has_root || m.container_id() == 0;
    lines.push_back({m.container_id(), m.host_id(), m.size()});
  }
  if (!has_root) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": no range maps container id 0 (the task's root)"));
  }
  return lines;
}

}  // namespace

bool WantsUserNamespace(const dv1::UserNamespace& user_namespace) {
  return !user_namespace.uid_mappings().empty() ||
         !user_namespace.gid_mappings().empty();
}

absl::StatusOr<UserNamespaceMaps> ResolveUserNamespace(
    const dv1::UserNamespace& user_namespace) {
  UserNamespaceMaps maps;
  absl::StatusOr<std::vector<IdMapLine>> uid = ResolveMap(
      user_namespace.uid_mappings(), "isolation.user_namespace.uid_mappings");
  if (!uid.ok()) return uid.status();
  absl::StatusOr<std::vector<IdMapLine>> gid = ResolveMap(
      user_namespace.gid_mappings(), "isolation.user_namespace.gid_mappings");
  if (!gid.ok()) return gid.status();
  maps.uid = *std::move(uid);
  maps.gid = *std::move(gid);
  return maps;
}

std::optional<uint32_t> MapToHost(const std::vector<IdMapLine>& map,
                                  uint32_t id) {
  for (const IdMapLine& line : map) {
    if (id >= line.container_id && id - line.container_id < line.size) {
      return line.host_id + (id - line.container_id);
    }
  }
  return std::nullopt;
}

absl::Status CheckIdentityMapped(const UserNamespaceMaps& maps, uid_t uid,
                                 gid_t gid, const std::vector<gid_t>& groups) {
  if (!MapToHost(maps.uid, uid)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "user: uid ", uid,
        " is not mapped by isolation.user_namespace.uid_mappings"));
  }
  if (!MapToHost(maps.gid, gid)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "user: gid ", gid,
        " is not mapped by isolation.user_namespace.gid_mappings"));
  }
  for (gid_t group : groups) {
    if (!MapToHost(maps.gid, group)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "user: supplementary group ", group,
          " is not mapped by isolation.user_namespace.gid_mappings"));
    }
  }
  return absl::OkStatus();
}

}  // namespace berth::exec_driver
