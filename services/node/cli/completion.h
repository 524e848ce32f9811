// `berth completion bash|zsh`: shell completion scripts made from the command
// table (Commands()), so that they list every command, alias and flag the
// CLI parses. The scripts complete, besides commands and flags:
//
//   task names   where a command takes a TASK, from
//                `berth ps -a --format '{{.Names}}'`
//   image names  where it takes an IMAGE, REFERENCE or SOURCE, from
//                `berth __complete images` (hidden: one name a line)
//   files        for FILE and PATH values and a command run on the host
//   words        of flags with a fixed set of values (--pull, --restart,
//                ps --filter's keys, ...) and of `completion` itself
//
// The node is asked quietly: when it is down nothing is offered. A --socket
// given before the command is passed on.

#ifndef SERVICES_NODE_CLI_COMPLETION_H_
#define SERVICES_NODE_CLI_COMPLETION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/node/cli/command_table.h"

namespace berth::cli {

// What a positional argument of a command is, from its synopsis.
enum class ArgKind {
  kNone,
  kTask,
  kImage,
  kFile,
  // One of the words of a synopsis such as "bash|zsh".
  kWord,
};

// The positional arguments of `command` as its synopsis's first line names
// them: "[FLAGS] TASK [--] COMMAND [ARGS...]" is {kTask, kFile, kFile} with
// the last repeating. `words` gets the words of a kWord argument.
struct Positionals {
  std::vector<ArgKind> kinds;
  // The last kind stands for every later argument too ("TASK...").
  bool last_repeats = false;
  std::vector<std::string> words;
  // `berth run -- COMMAND`: with no argument before "--", what follows it
  // is a host command (files), not the first kind.
  bool dash_dash_command = false;
};
Positionals PositionalsOf(const CommandInfo& command);

// The values offered for a flag (by long name) with a fixed set of them;
// empty for any other.
std::vector<std::string> FlagValueWords(absl::string_view flag);

// The script for `shell` ("bash" or "zsh"); INVALID_ARGUMENT for another.
absl::StatusOr<std::string> CompletionScript(absl::string_view shell);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_COMPLETION_H_
