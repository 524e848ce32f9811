#include "services/node/cli/cli_args.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace berth::cli {
namespace {

// The flag called `name` or with `name` among its aliases; `*alias` tells
// which.
const FlagSpec* FindLong(const std::vector<FlagSpec>& specs,
                         absl::string_view name, bool* alias) {
  *alias = false;
  for (const FlagSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  for (const FlagSpec& spec : specs) {
    for (const std::string& other : spec.aliases) {
      if (other == name) {
        *alias = true;
        return &spec;
      }
    }
  }
  return nullptr;
}

const FlagSpec* FindShort(const std::vector<FlagSpec>& specs, char name) {
  for (const FlagSpec& spec : specs) {
    if (spec.short_name != 0 && spec.short_name == name) return &spec;
  }
  return nullptr;
}

void Record(const FlagSpec& spec, std::string value, ParsedArgs* parsed) {
  std::vector<std::string>& values = parsed->flags[spec.name];
  if (!spec.repeated) values.clear();
  values.push_back(std::move(value));
}

}  // namespace

bool ParsedArgs::Has(absl::string_view name) const {
  return flags.find(name) != flags.end();
}

std::string ParsedArgs::FlagName(absl::string_view name) const {
  auto it = aliases_used.find(name);
  return absl::StrCat("--", it == aliases_used.end() ? name : it->second);
}

std::string ParsedArgs::Value(absl::string_view name) const {
  auto it = flags.find(name);
  if (it == flags.end() || it->second.empty()) return "";
  return it->second.back();
}

std::vector<std::string> ParsedArgs::Values(absl::string_view name) const {
  auto it = flags.find(name);
  if (it == flags.end()) return {};
  return it->second;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<FlagSpec>& specs,
                                     const std::vector<std::string>& args,
                                     PositionalMode mode) {
  ParsedArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      parsed.positional_before_dash_dash = parsed.positional.size();
      parsed.positional.insert(parsed.positional.end(), args.begin() + i + 1,
                               args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (mode == PositionalMode::kStopAtFirst) {
        parsed.positional.insert(parsed.positional.end(), args.begin() + i,
                                 args.end());
        break;
      }
      parsed.positional.push_back(arg);
      continue;
    }
    if (absl::StartsWith(arg, "--")) {
      const size_t equals = arg.find('=');
      const std::string name = arg.substr(
          2, equals == std::string::npos ? std::string::npos : equals - 2);
      bool alias = false;
      const FlagSpec* spec = FindLong(specs, name, &alias);
      if (spec == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag --", name));
      }
      if (alias) {
        parsed.aliases_used[spec->name] = name;
      } else {
        parsed.aliases_used.erase(spec->name);
      }
      if (spec->value_name.empty()) {
        if (equals != std::string::npos) {
          return absl::InvalidArgumentError(
              absl::StrCat("flag --", name, " takes no value"));
        }
        Record(*spec, "", &parsed);
      } else if (equals != std::string::npos) {
        Record(*spec, arg.substr(equals + 1), &parsed);
      } else if (i + 1 < args.size()) {
        Record(*spec, args[++i], &parsed);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --", name, " needs a value (", spec->value_name, ")"));
      }
      continue;
    }
    // One short flag or a cluster of them: "-d", "-it", "-p8080:80".
    for (size_t j = 1; j < arg.size(); ++j) {
      const FlagSpec* spec = FindShort(specs, arg[j]);
      if (spec == nullptr) {
        return absl::InvalidArgumentError(
            j == 1 && arg.size() == 2
                ? absl::StrCat("unknown flag ", arg)
                : absl::StrCat("unknown flag -", std::string(1, arg[j]), " in ",
                               arg));
      }
      if (spec->value_name.empty()) {
        Record(*spec, "", &parsed);
        continue;
      }
      if (j + 1 < arg.size()) {
        Record(*spec, arg.substr(j + 1), &parsed);
      } else if (i + 1 < args.size()) {
        Record(*spec, args[++i], &parsed);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag -", std::string(1, arg[j]), " needs a value (",
                         spec->value_name, ")"));
      }
      break;
    }
  }
  return parsed;
}

std::string FormatFlagHelp(const std::vector<FlagSpec>& specs) {
  std::vector<std::string> names;
  size_t width = 0;
  for (const FlagSpec& spec : specs) {
    std::string name = spec.short_name != 0
                           ? absl::StrCat("-", std::string(1, spec.short_name),
                                          ", --", spec.name)
                           : absl::StrCat("    --", spec.name);
    if (!spec.value_name.empty()) absl::StrAppend(&name, "=", spec.value_name);
    width = std::max(width, name.size());
    names.push_back(std::move(name));
  }
  auto line = [&](size_t i) {
    const FlagSpec& spec = specs[i];
    std::string text =
        absl::StrCat("  ", names[i],
                     std::string(width - names[i].size() + 3, ' '), spec.help);
    for (size_t a = 0; a < spec.aliases.size(); ++a) {
      absl::StrAppend(&text, a == 0 ? " (alias " : ", ", "--", spec.aliases[a]);
    }
    if (!spec.aliases.empty()) absl::StrAppend(&text, ")");
    return absl::StrCat(text, "\n");
  };
  const bool grouped =
      std::any_of(specs.begin(), specs.end(),
                  [](const FlagSpec& spec) { return !spec.group.empty(); });
  std::string help;
  if (!grouped) {
    for (size_t i = 0; i < specs.size(); ++i) absl::StrAppend(&help, line(i));
    return help;
  }
  std::vector<std::string> groups;
  for (const FlagSpec& spec : specs) {
    const std::string group = spec.group.empty() ? "Flags" : spec.group;
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) {
      groups.push_back(group);
    }
  }
  for (const std::string& group : groups) {
    absl::StrAppend(&help, help.empty() ? "" : "\n", group, ":\n");
    for (size_t i = 0; i < specs.size(); ++i) {
      if ((specs[i].group.empty() ? "Flags" : specs[i].group) == group) {
        absl::StrAppend(&help, line(i));
      }
    }
  }
  return help;
}

}  // namespace berth::cli
