// The mock driver's part of a task handle (TaskHandle.driver_state): what it
// needs to find a task again after a restart. Encoded as "key=value" lines,
// so that a human can read it in the node's database.

#ifndef PLUGINS_EXAMPLES_MOCK_DRIVER_TASK_STATE_H_
#define PLUGINS_EXAMPLES_MOCK_DRIVER_TASK_STATE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace berth::mock {

// TaskHandle.version of the handles this encoding goes in.
inline constexpr uint32_t kHandleVersion = 1;

struct HandleState {
  pid_t monitor_pid = 0;
  uint64_t monitor_start_ticks = 0;  // field 22 of /proc/<pid>/stat
  pid_t task_pid = 0;
  uint64_t task_start_ticks = 0;
  // Where the exit file (<task id>.exit) is.
  std::string state_dir;
  absl::Time started_at;
  // The task's directory (TaskConfig.task_dir, or <state_dir>/tasks/<id>
  // when that was empty); its output is in <task_dir>/logs.
  std::string task_dir;
  // Where the task and its exec'd commands run (driver_config.work_dir).
  std::string work_dir;
  // What the driver made, for DestroyTask to remove: the task directory
  // itself, and the topmost directory it made for work_dir ("" for none).
  bool made_task_dir = false;
  std::string made_work_dir;
};

std::string EncodeTaskState(const HandleState& state);

// `path` with ".", ".." and repeated slashes resolved (lexically); "" if it
// is not absolute or climbs above "/".
std::string NormalizePath(absl::string_view path);

// Whether the normalized `path` is `dir` or below it.
bool IsInside(absl::string_view path, absl::string_view dir);

// INVALID_ARGUMENT naming the key at fault (a handle of a mock driver from
// before task directories lacks task_dir and work_dir: it is refused).
absl::StatusOr<HandleState> DecodeTaskState(absl::string_view encoded);

}  // namespace berth::mock

#endif  // PLUGINS_EXAMPLES_MOCK_DRIVER_TASK_STATE_H_
