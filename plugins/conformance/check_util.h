// What the suite's checks have in common: early returns on errors, quoting
// for messages, and expectations on exits, errors and task states that fail
// with a message naming what was wrong.

#ifndef PLUGINS_CONFORMANCE_CHECK_UTIL_H_
#define PLUGINS_CONFORMANCE_CHECK_UTIL_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "plugins/conformance/context.h"

#define CONFORMANCE_CONCAT_INNER(a, b) a##b
#define CONFORMANCE_CONCAT(a, b) CONFORMANCE_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function if it is an
// error.
#define CONFORMANCE_RETURN_IF_ERROR(expr) \
  do {                                    \
    const absl::Status status_ = (expr);  \
    if (!status_.ok()) return status_;    \
  } while (false)

// `lhs = *expr` for an absl::StatusOr `expr`, or returns its error.
#define CONFORMANCE_ASSIGN_OR_RETURN(lhs, expr)                               \
  CONFORMANCE_ASSIGN_OR_RETURN_IMPL(CONFORMANCE_CONCAT(status_or_, __LINE__), \
                                    lhs, expr)
#define CONFORMANCE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                      \
  if (!tmp.ok()) return tmp.status();                     \
  lhs = std::move(*tmp)

namespace berth::conformance {

// `text` C-escaped in double quotes, cut after `max` bytes.
std::string Quote(absl::string_view text, size_t max = 200);
// "exit_code N, signal N".
std::string DescribeExit(const driver::v1::ExitResult& exit);
// "CODE: message".
std::string DescribeError(const absl::Status& status);

// A Mismatch unless `exit` has that exit code and signal.
absl::Status ExpectExit(const driver::v1::ExitResult& exit, int exit_code,
                        int signal, absl::string_view what);

// The part of an error's message the driver wrote: after the host's
// "plugin NAME: RPC (task ID): " prefix.
absl::string_view DriverMessage(const absl::Status& status,
                                absl::string_view task_id);

// A Mismatch unless `status` is the error `want` and the driver's message
// names `name` (unless empty).
absl::Status ExpectError(const absl::Status& status, absl::StatusCode want,
                         absl::string_view task_id, absl::string_view name,
                         absl::string_view what);

// A Mismatch unless the task is in state `want`.
absl::Status ExpectState(const driver::v1::TaskStatus& status,
                         driver::v1::TaskState want, absl::string_view when);

// grpc.health.v1 Check("plugin") on the plugin's channel within `deadline`:
// a Mismatch unless it answers SERVING.
absl::Status ExpectServing(Context& context, absl::Duration deadline);

// How long output may take to reach the log files once WaitTask returned.
inline constexpr absl::Duration kLogSettle = absl::Seconds(5);

// The file's content, or nullopt when it cannot be read.
std::optional<std::string> ReadHostFile(const std::string& path);

// <task_dir>/logs/STREAM.log, where berth-node reads a task's output.
std::string LogPath(const driver::v1::TaskConfig& task,
                    absl::string_view stream);

// StartTask, then WaitTask: the task's exit.
absl::StatusOr<driver::v1::ExitResult> RunToEnd(
    Context& context, const driver::v1::TaskConfig& task);

// Starts a task that runs until it is stopped (`exec sleep 300`).
absl::StatusOr<driver::v1::TaskConfig> StartSleeper(Context& context,
                                                    absl::string_view hint);

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_CHECK_UTIL_H_
