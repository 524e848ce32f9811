#include "plugins/examples/mock_driver/task_state.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace berth::mock {

std::string NormalizePath(absl::string_view path) {
  if (path.empty() || path[0] != '/') return "";
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (parts.empty()) return "";
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

bool IsInside(absl::string_view path, absl::string_view dir) {
  return path == dir || (absl::StartsWith(path, dir) &&
                         path.size() > dir.size() && path[dir.size()] == '/');
}

std::string EncodeTaskState(const HandleState& state) {
  return absl::StrCat(
      "monitor_pid=", state.monitor_pid, "\n",
      "monitor_start_ticks=", state.monitor_start_ticks, "\n",
      "task_pid=", state.task_pid, "\n",
      "task_start_ticks=", state.task_start_ticks, "\n",
      "state_dir=", state.state_dir, "\n",
      "started_at_unix_ns=", absl::ToUnixNanos(state.started_at), "\n",
      "task_dir=", state.task_dir, "\n", "work_dir=", state.work_dir, "\n",
      "made_task_dir=", state.made_task_dir ? 1 : 0, "\n",
      "made_work_dir=", state.made_work_dir, "\n");
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
  int made_task_dir = 0;
  for (absl::Status status :
       {number("monitor_pid", &state.monitor_pid),
        number("monitor_start_ticks", &state.monitor_start_ticks),
        number("task_pid", &state.task_pid),
        number("task_start_ticks", &state.task_start_ticks),
        number("started_at_unix_ns", &started_ns),
        number("made_task_dir", &made_task_dir)}) {
    if (!status.ok()) return status;
  }
  // DestroyTask removes what these name: only normalized absolute paths,
  // the work directories inside the task directory.
  for (auto [key, out] :
       {std::pair<const char*, std::string*>{"state_dir", &state.state_dir},
        {"task_dir", &state.task_dir},
        {"work_dir", &state.work_dir},
        {"made_work_dir", &state.made_work_dir}}) {
    absl::StatusOr<std::string> dir = get(key);
    if (!dir.ok()) return dir.status();
    if (out == &state.made_work_dir && dir->empty()) continue;
    if (dir->empty() || *dir == "/" || NormalizePath(*dir) != *dir) {
      return absl::InvalidArgumentError(absl::StrCat(
          key, "=", *dir, " is not a normalized absolute path below /"));
    }
    *out = *std::move(dir);
  }
  for (const std::string* dir : {&state.work_dir, &state.made_work_dir}) {
    if (!dir->empty() && !IsInside(*dir, state.task_dir)) {
      return absl::InvalidArgumentError(
          absl::StrCat(*dir, " is not inside task_dir=", state.task_dir));
    }
  }
  if (state.monitor_pid <= 0 || state.task_pid <= 0) {
    return absl::InvalidArgumentError("monitor_pid and task_pid must be > 0");
  }
  state.made_task_dir = made_task_dir != 0;
  state.started_at = absl::FromUnixNanos(started_ns);
  return state;
}

}  // namespace berth::mock
