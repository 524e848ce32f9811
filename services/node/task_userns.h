// Which user namespace a task's run gets: the host's, or (userns "auto",
// from the spec or berth-node's --default_userns) one mapping its root to
// a host id range of its own from the IdRangeAllocator, kept in its
// TaskRecord.

#ifndef SERVICES_NODE_TASK_USERNS_H_
#define SERVICES_NODE_TASK_USERNS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "berth/driver/v1/driver.pb.h"
#include "services/node/id_ranges.h"
#include "services/node/node_state.pb.h"

namespace berth::node {

// --default_userns: "host" or "auto"; INVALID_ARGUMENT otherwise.
absl::Status CheckDefaultUserns(const std::string& mode);

// For StartRun: nullopt for the host's user namespace; for "auto", the
// mappings of the task's range (allocated now and stored in
// `record->userns_range()` at its first start; the same one afterwards).
// FAILED_PRECONDITION when `ids` is null or has no pool (naming the subid
// files and user), and when only the node's default asks for "auto" and
// `caps` says the driver has no user namespaces (the node's policy is not
// silently dropped). `caps` not ok is only looked at in that case.
absl::StatusOr<std::optional<driver::v1::UserNamespace>> ChooseUserNamespace(
    const std::string& default_userns, IdRangeAllocator* ids,
    const absl::StatusOr<driver::v1::DriverCapabilities>& caps,
    internal::TaskRecord* record);

// For Recover: the stored task's range, if it has one, taken again in `ids`.
absl::Status RestoreUserNamespace(const internal::TaskRecord& record,
                                  IdRangeAllocator* ids);

}  // namespace berth::node

#endif  // SERVICES_NODE_TASK_USERNS_H_
