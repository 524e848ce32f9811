// A task's directory as berth's drivers lay it out: the task directory (the
// default working directory), .berth/ (0700: the driver's own files) and
// logs/ (stdout.log, stderr.log and their rotations).

#ifndef SERVICES_DRIVER_COMMON_TASK_DIR_H_
#define SERVICES_DRIVER_COMMON_TASK_DIR_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "services/driver/common/init_spec.h"
#include "services/driver/common/task_spec.h"

namespace berth::driver_common {

// Makes `path` and its missing parents (0755); true if `path` itself was
// made (with `mode`), false if it was there already.
absl::StatusOr<bool> MakeDirs(const std::string& path, mode_t mode);

// Makes spec's task directory (owned by the task's user when made here), its
// .berth and logs directories and the working directory. Pushes onto `undo`
// what removes them again: the whole task directory if it was made here,
// else only .berth and logs. Errors start with `prefix` and name the field:
// FAILED_PRECONDITION for task_dir, INVALID_ARGUMENT for
// driver_config.work_dir.
// Where a task's init (or the sandbox driver) records how the task ended:
// <task_dir>/.berth/exit.
std::string ExitRecordPath(const std::string& task_dir);

// Reads and decodes the task's exit record; false when there is none (or it
// does not decode). Read below `task_dir` without following any link (a
// task may own its directory) and at most kMaxExitRecordBytes.
bool ReadExitRecord(const std::string& task_dir, ExitRecord* record);

// Writes the task's exit record (WriteExitRecordAt in .berth, reached
// without following links).
absl::Status WriteExitRecord(const std::string& task_dir,
                             const ExitRecord& record);

// INVALID_ARGUMENT naming task_dir unless `task_dir` is an absolute path
// without ".." below `state_dir` (SetConfig's NodeContext.state_dir, where
// the node makes <state_dir>/node/tasks/<id>), compared after dropping "."
// and repeated slashes: a driver running as root makes, chowns and removes
// what is there. INVALID_ARGUMENT too when `state_dir` is empty or relative.
absl::Status CheckTaskDirInside(const std::string& task_dir,
                                const std::string& state_dir);

// What a built-in driver checks before making anything for `task`, whose
// spec resolved: a given task_dir lies inside berth's state directory (the
// parent of `driver_state_dir`), and a task that needs the default seccomp
// filter is refused (FAILED_PRECONDITION naming isolation.seccomp) when the
// driver could not compile it (`default_filter`'s status). Errors start with
// "task <id>: ".
absl::Status CheckStartAllowed(const driver::v1::TaskConfig& task,
                               const std::string& driver_state_dir,
                               const absl::Status& default_filter);

// A driver's own state directory under the node's (SetConfig's
// NodeContext.state_dir): <state_dir>/<driver_name>, made 0711 if missing;
// empty when the node gives none. INVALID_ARGUMENT for a relative
// state_dir, FAILED_PRECONDITION when it cannot be made.
absl::StatusOr<std::string> DriverStateDir(const plugin::v1::NodeContext& node,
                                           absl::string_view driver_name);

absl::Status PrepareTaskDirectories(const TaskSpec& spec,
                                    const std::string& prefix,
                                    std::vector<std::function<void()>>* undo);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_TASK_DIR_H_
