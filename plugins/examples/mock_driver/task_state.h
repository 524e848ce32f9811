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
  // Where the exit file (<task id>.exit) and output files are.
  std::string state_dir;
  absl::Time started_at;
};

std::string EncodeTaskState(const HandleState& state);

// INVALID_ARGUMENT naming the key at fault.
absl::StatusOr<HandleState> DecodeTaskState(absl::string_view encoded);

}  // namespace berth::mock

#endif  // PLUGINS_EXAMPLES_MOCK_DRIVER_TASK_STATE_H_
