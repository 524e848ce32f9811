#include "services/node/task_userns.h"

#include "absl/strings/str_cat.h"

namespace berth::node {

absl::Status CheckDefaultUserns(const std::string& mode) {
  if (mode == "host" || mode == "auto") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--default_userns: \"", mode, "\" is neither \"host\" nor \"auto\""));
}

absl::StatusOr<std::optional<driver::v1::UserNamespace>> ChooseUserNamespace(
    const std::string& default_userns, IdRangeAllocator* ids,
    const absl::StatusOr<driver::v1::DriverCapabilities>& caps,
    internal::TaskRecord* record) {
  const v1::Task& task = record->task();
  const std::string& asked = task.spec().userns();
  const std::string& mode = asked.empty() ? default_userns : asked;
  if (mode != "auto") return std::nullopt;
  if (asked.empty()) {
    // An explicit "auto" is checked against the driver's claims with the
    // rest of the spec (CheckIsolationSupported); the default is here.
    if (!caps.ok()) return caps.status();
    if (!caps->isolation().user_namespaces()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", task.id(),
          ": berth-node runs tasks in user namespaces "
          "(--default_userns auto) and driver ",
          task.spec().driver(),
          " has none (DriverCapabilities.isolation.user_namespaces); run the "
          "task with userns \"host\""));
    }
  }
  if (ids == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", task.id(), ": this node allocates no user namespace ids"));
  }
  absl::StatusOr<IdRange> range = ids->Allocate(task.id());
  if (!range.ok()) return range.status();
  internal::UserNamespaceRange& stored = *record->mutable_userns_range();
  stored.set_uid_start(range->uid_start);
  stored.set_gid_start(range->gid_start);
  stored.set_size(range->size);
  driver::v1::UserNamespace userns;
  driver::v1::IdMapping& uid = *userns.add_uid_mappings();
  uid.set_container_id(0);
  uid.set_host_id(range->uid_start);
  uid.set_size(range->size);
  driver::v1::IdMapping& gid = *userns.add_gid_mappings();
  gid.set_container_id(0);
  gid.set_host_id(range->gid_start);
  gid.set_size(range->size);
  return userns;
}

absl::Status RestoreUserNamespace(const internal::TaskRecord& record,
                                  IdRangeAllocator* ids) {
  if (ids == nullptr || !record.has_userns_range()) return absl::OkStatus();
  const internal::UserNamespaceRange& range = record.userns_range();
  return ids->Restore(record.task().id(),
                      {range.uid_start(), range.gid_start(), range.size()});
}

}  // namespace berth::node
