// What `berth ps` prints: its table (the STATE column with the task's
// health, as docker's STATUS shows it), and --format's Go-template-like
// templates, "table TEMPLATE" and "json".

#ifndef SERVICES_NODE_CLI_PS_FORMAT_H_
#define SERVICES_NODE_CLI_PS_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"

namespace berth::cli {

// The task's state with its health when it has a check: "running",
// "running (healthy)", "running (unhealthy)", "running (health: starting)".
std::string StateWithHealth(const node::v1::Task& task);

// docker's wording of a task's status: "Up 5 minutes (healthy)",
// "Exited (2) 3 minutes ago", "Restarting (1) 2 seconds ago", "Created",
// "Starting", "Failed".
std::string DockerStatus(const node::v1::Task& task, absl::Time now);

// `berth ps`'s default table:
//   ID  NAME  IMAGE  DRIVER  STATE  CREATED  EXIT  COMMAND
std::string PsTable(const std::vector<node::v1::Task>& tasks, absl::Time now);

// A parsed --format. The template is text with actions in "{{ }}":
//
//   {{.ID}}  {{.Names}} (or {{.Name}})  {{.Image}}  {{.Command}}
//   {{.Status}}  {{.State}}  {{.Health}}  {{.Labels}}  {{.Label "KEY"}}
//   {{.CreatedAt}}  {{.RunningFor}}  {{.Ports}}  {{.Driver}}  {{.Exit}}
//   {{json .}}  (the task as one JSON object, as "json" prints it)
//
// "\t" and "\n" in it are a tab and a newline (as docker's). "table
// TEMPLATE" prints a header of the fields' names and aligns the cells
// between tabs; "table" alone is the default table; "json" prints one JSON
// object per task and line, every value a string (docker's keys:
// Command, CreatedAt, ID, Image, Labels, Names, Ports, RunningFor, State,
// Status; and berth's Driver, Exit, Health).
class PsFormat {
 public:
  // INVALID_ARGUMENT naming the flag and what is wrong: an unknown field or
  // function, an unclosed "{{", a bad {{.Label}}.
  static absl::StatusOr<PsFormat> Parse(absl::string_view format);

  // What `ps` prints for `tasks`; CreatedAt in `zone`, RunningFor and
  // Status relative to `now`.
  std::string Render(const std::vector<node::v1::Task>& tasks, absl::Time now,
                     absl::TimeZone zone) const;

 private:
  enum class Kind { kDefaultTable, kTemplate, kTable, kJson };

  // Literal text, or an action.
  struct Piece {
    std::string literal;
    // The field ("ID", "Label", ...); "json" for {{json .}}; empty for a
    // literal.
    std::string field;
    // {{.Label "KEY"}}'s KEY.
    std::string label_key;
  };

  std::string RenderPieces(const node::v1::Task* task, absl::Time now,
                           absl::TimeZone zone) const;

  Kind kind_ = Kind::kDefaultTable;
  std::vector<Piece> pieces_;
};

// A task as `ps --format json` prints it: one line of JSON, no newline.
std::string PsJsonLine(const node::v1::Task& task, absl::Time now,
                       absl::TimeZone zone);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_PS_FORMAT_H_
