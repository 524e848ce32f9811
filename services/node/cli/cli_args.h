// A small command-line parser for berth's subcommands: long flags
// ("--name=VALUE", "--name VALUE") and their aliases, short flags
// ("-n VALUE", "-nVALUE") and clusters of short booleans ("-it"), "--"
// ending the flags.

#ifndef SERVICES_NODE_CLI_CLI_ARGS_H_
#define SERVICES_NODE_CLI_CLI_ARGS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::cli {

// One flag a subcommand takes.
struct FlagSpec {
  // Long name without the dashes, e.g. "memory".
  std::string name;
  // One-letter name, e.g. 'm'; 0 for none.
  char short_name = 0;
  // What the value is called in the help, e.g. "BYTES"; empty for a boolean
  // flag, which takes no value.
  std::string value_name;
  // One line of help.
  std::string help;
  // May be given several times, every value kept (e.g. -e K=V -e K2=V2).
  bool repeated = false;
  // Other long names it answers to (docker's spellings where berth's
  // differ, e.g. "cpu" for "cpus"): parsed as `name`, listed in its help
  // line as "(alias --cpu)".
  std::vector<std::string> aliases = {};
  // The heading it is listed under in the help ("Resources"); empty for
  // none. The flags of a command are grouped when any has a group.
  std::string group = {};
};

// The flags found and the positional arguments, in order.
struct ParsedArgs {
  // Values by long flag name; a boolean flag has one empty value per use.
  std::map<std::string, std::vector<std::string>, std::less<>> flags;
  std::vector<std::string> positional;
  // How many of `positional` came before a "--" ending the flags; nullopt
  // when there was none. `berth run -- CMD` (0: the command follows "--")
  // runs no image, `berth run IMAGE CMD` does.
  std::optional<size_t> positional_before_dash_dash;
  // The long names typed through an alias, by the flag's name (the last
  // use): "cpu" for `--cpu 2` of the flag "cpus".
  std::map<std::string, std::string, std::less<>> aliases_used;

  bool Has(absl::string_view name) const;
  // The flag as the user spelled it, for messages: "--cpu" when the last
  // use was through that alias, "--cpus" otherwise.
  std::string FlagName(absl::string_view name) const;
  // The last value of the flag; empty if it is not given.
  std::string Value(absl::string_view name) const;
  // Every value of the flag, in order.
  std::vector<std::string> Values(absl::string_view name) const;
};

// Where positional arguments may be.
enum class PositionalMode {
  // Anywhere between the flags ("berth stop web --timeout 3").
  kInterspersed,
  // The first positional argument ends the flags: it and everything after it
  // are positional as they are ("berth run -d /bin/sh -c 'echo hi'").
  kStopAtFirst,
};

// Parses `args` (without the subcommand itself) against `specs`. "--" ends
// the flags (it is dropped); "-" alone is positional. INVALID_ARGUMENT naming
// the argument: "unknown flag --foo", "flag --memory needs a value",
// "flag --rm takes no value".
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args,
                                     PositionalMode mode);

// The flags as help lines: "  -m, --memory=BYTES   Memory limit ...",
// aliases after the help ("(alias --cpu)"). Grouped flags (any with a
// group) come under their groups' headings ("Resources:"), the groups in
// the order of their first flag, those without a group under "Flags:"; the
// help aligned across groups.
std::string FormatFlagHelp(const std::vector<FlagSpec>& specs);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_CLI_ARGS_H_
