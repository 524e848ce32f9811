// The commands of `berth`: each one's name, synopsis, description and flags,
// and the usage texts made of them (`berth --help`, `berth COMMAND --help`).

#ifndef SERVICES_NODE_CLI_COMMAND_TABLE_H_
#define SERVICES_NODE_CLI_COMMAND_TABLE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "services/node/cli/cli_args.h"

namespace berth::cli {

// One subcommand: its name ("node status", "image pull" for the nested
// ones), synopsis, description and flags.
struct CommandInfo {
  std::string name;
  std::string synopsis;
  std::string description;
  std::vector<FlagSpec> flags;
  PositionalMode mode = PositionalMode::kInterspersed;
  // Other names it answers to: docker's spellings ("images", "pull", "rmi",
  // "image list").
  std::vector<std::string> aliases = {};
};

// Every subcommand, in the order `berth --help` lists them.
const std::vector<CommandInfo>& Commands();

// The subcommand called `name` ("node status", "image pull" for the nested
// ones) or with `name` among its aliases; nullptr when there is none.
const CommandInfo* FindCommand(absl::string_view name);

// Whether `word` starts nested commands of several subcommands ("image"):
// `berth image` alone, `berth image --help` and `berth help image` print
// GroupUsage. ("node" has only "node status", which its help shows.)
bool IsCommandGroup(absl::string_view word);

// `berth image --help`: the group's commands, each with one line.
std::string GroupUsage(absl::string_view group);

// `berth COMMAND --help`: the synopsis, the description and the flags.
std::string CommandUsage(const CommandInfo& command);

// `berth --help`: the commands, each with one line, and the global flags.
std::string TopUsage();

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_COMMAND_TABLE_H_
