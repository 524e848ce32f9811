// A small command-line parser for berth's subcommands: long flags
// ("--name=VALUE", "--name VALUE"), short flags ("-n VALUE", "-nVALUE") and
// clusters of short booleans ("-it"), "--" ending the flags.

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

  bool Has(absl::string_view name) const;
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

// The flags as help lines: "  -m, --memory=BYTES   Memory limit ...".
std::string FormatFlagHelp(const std::vector<FlagSpec>& specs);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_CLI_ARGS_H_
