// A task's directory as berth's drivers lay it out: the task directory (the
// default working directory), .berth/ (0700: the driver's own files) and
// logs/ (stdout.log, stderr.log and their rotations).

#ifndef SERVICES_DRIVER_EXEC_TASK_DIR_H_
#define SERVICES_DRIVER_EXEC_TASK_DIR_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/driver/exec/task_spec.h"

namespace berth::exec_driver {

// Makes `path` and its missing parents (0755); true if `path` itself was
// made (with `mode`), false if it was there already.
absl::StatusOr<bool> MakeDirs(const std::string& path, mode_t mode);

// rm -rf without following symbolic links or crossing mounts; OK when absent.
absl::Status RemoveTree(const std::string& path);

// Makes spec's task directory (owned by the task's user when made here), its
// .berth and logs directories and the working directory. Pushes onto `undo`
// what removes them again: the whole task directory if it was made here,
// else only .berth and logs. Errors start with `prefix` and name the field:
// FAILED_PRECONDITION for task_dir, INVALID_ARGUMENT for
// driver_config.work_dir.
absl::Status PrepareTaskDirectories(const TaskSpec& spec,
                                    const std::string& prefix,
                                    std::vector<std::function<void()>>* undo);

}  // namespace berth::exec_driver

#endif  // SERVICES_DRIVER_EXEC_TASK_DIR_H_
