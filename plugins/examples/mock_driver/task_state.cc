#include "plugins/examples/mock_driver/task_state.h"

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace berth::mock {

std::string EncodeTaskState(const HandleState& state) {
  return absl::StrCat(
      "monitor_pid=", state.monitor_pid, "\n",
      "monitor_start_ticks=", state.monitor_start_ticks, "\n",
      "task_pid=", state.task_pid, "\n",
      "task_start_ticks=", state.task_start_ticks, "\n",
      "state_dir=", state.state_dir, "\n",
      "started_at_unix_ns=", absl::ToUnixNanos(state.started_at), "\n");
}

absl::StatusOr<HandleState> DecodeTaskState(absl::string_view encoded) {
  std::map<std::string, std::string> values;
  for (absl::string_view line :
       absl::StrSplit(encoded, '\n', absl::SkipEmpty())) {
    const size_t equals = line.find('=');
    if (equals == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("line \"", line, "\" is not key=value"));
    }
    values[std::string(line.substr(0, equals))] =
        std::string(line.substr(equals + 1));
  }
  auto get = [&](const char* key) -> absl::StatusOr<std::string> {
    auto it = values.find(key);
    if (it == values.end()) {
      return absl::InvalidArgumentError(absl::StrCat(key, " is missing"));
    }
    return it->second;
  };
  auto number = [&](const char* key, auto* out) -> absl::Status {
    absl::StatusOr<std::string> value = get(key);
    if (!value.ok()) return value.status();
    if (!absl::SimpleAtoi(*value, out) || *out < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, "=", *value, " is not a number"));
    }
    return absl::OkStatus();
  };
  HandleState state;
  int64_t started_ns = 0;
  for (absl::Status status :
       {number("monitor_pid", &state.monitor_pid),
        number("monitor_start_ticks", &state.monitor_start_ticks),
        number("task_pid", &state.task_pid),
        number("task_start_ticks", &state.task_start_ticks),
        number("started_at_unix_ns", &started_ns)}) {
    if (!status.ok()) return status;
  }
  absl::StatusOr<std::string> dir = get("state_dir");
  if (!dir.ok()) return dir.status();
  if (dir->empty() || (*dir)[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("state_dir=", *dir, " is not an absolute path"));
  }
  if (state.monitor_pid <= 0 || state.task_pid <= 0) {
    return absl::InvalidArgumentError("monitor_pid and task_pid must be > 0");
  }
  state.state_dir = *dir;
  state.started_at = absl::FromUnixNanos(started_ns);
  return state;
}

}  // namespace berth::mock
