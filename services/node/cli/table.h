// Text formatting of berth's output: aligned tables, "5 seconds ago",
// "1.5MiB", short task ids, a task's command, state and exit.

#ifndef SERVICES_NODE_CLI_TABLE_H_
#define SERVICES_NODE_CLI_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"
#include "google/protobuf/message.h"

namespace berth::cli {

// Columns aligned with at least three spaces between them, like docker's
// tables; the last column is not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> row);
  // The header and the rows, each line ending in "\n".
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// How long before `now` `then` was, the way docker says it: "Less than a
// second ago", "1 second ago", "5 seconds ago", "About a minute ago",
// "3 minutes ago", "About an hour ago", "2 hours ago", "3 days ago",
// "2 weeks ago", "4 months ago", "2 years ago".
std::string HumanAgo(absl::Time then, absl::Time now);

// Bytes in binary units with four significant digits: "512B", "1.5KiB",
// "64MiB", "1.023GiB".
std::string HumanBytes(uint64_t bytes);

// The first 12 characters of a task id.
std::string ShortId(const std::string& task_id);

// The task's command as the user typed it, from driver_config's "command" and
// "args", after --entrypoint when it replaced the image's; cut to
// `max_width` characters with "…" when longer (0: never cut).
std::string CommandText(const node::v1::TaskSpec& spec, size_t max_width);

// "running", "exited", "failed", ... for a TaskState.
std::string StateText(node::v1::TaskState state);

// How the task's last run ended: "0", "3", "SIGKILL", "SIGKILL (OOM)"; "-"
// when it has not ended.
std::string ExitText(const node::v1::Task& task);

// The exit code berth returns for a run that ended with `result`: the exit
// code, or 128 + the signal's number.
int ExitCodeOf(const driver::v1::ExitResult& result);

// A message in protobuf's JSON mapping; `pretty` indents it. Ends in "\n".
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message,
                                   bool pretty);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_TABLE_H_
