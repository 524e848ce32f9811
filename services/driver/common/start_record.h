// A driver's record of a task it starts: the TaskHandle, kept in
// <state_dir>/starts/<task id> from just before the task's program may run
// until DestroyTask. A driver killed before its StartTask returned finds the
// run from it when it is asked next (InspectTask), so berth-node never takes
// a run that happened for one that did not (ARCHITECTURE.md, "Restarts").
// The state directory is the driver's own: a task cannot write there.

#ifndef SERVICES_DRIVER_COMMON_START_RECORD_H_
#define SERVICES_DRIVER_COMMON_START_RECORD_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "berth/driver/v1/driver.pb.h"

namespace berth::driver_common {

// <state_dir>/starts/<task_id>.
std::string StartRecordPath(const std::string& state_dir,
                            const std::string& task_id);

// Writes `handle` as the record of task handle.config.id, replacing any
// (a temporary file renamed over it: a reader sees the old or the new one
// whole). Makes <state_dir>/starts (0700) when missing.
absl::Status WriteStartRecord(const std::string& state_dir,
                              const driver::v1::TaskHandle& handle);

// The record of `task_id`: NOT_FOUND when there is none, DATA_LOSS naming
// the file when it does not parse or names another task.
absl::StatusOr<driver::v1::TaskHandle> ReadStartRecord(
    const std::string& state_dir, const std::string& task_id);

// Removes the record of `task_id` (none is not an error).
absl::Status RemoveStartRecord(const std::string& state_dir,
                               const std::string& task_id);

// Removes the temporary files a driver killed between writing a record and
// renaming it left in <state_dir>/starts.
void RemoveStartRecordLeftovers(const std::string& state_dir);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_START_RECORD_H_
