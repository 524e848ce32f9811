#include "plugins/conformance/cli.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "plugins/conformance/suite.h"
#include "plugins/conformance/task_config.h"

namespace berth::conformance {

absl::Status CheckFlagNames(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i] == nullptr ? "" : argv[i];
    if (arg == "--") break;  // the rest is positional
    if (arg.size() < 2 || arg[0] != '-') continue;
    absl::string_view name = arg.substr(arg[1] == '-' ? 2 : 1);
    name = name.substr(0, name.find('='));
    std::string normalized(name);
    for (char& c : normalized) {
      if (c == '-') c = '_';
    }
    if (normalized == "h") continue;  // InitService: --help
    // The usage flags absl handles itself (not in its flag registry).
    if (normalized == "help" || normalized == "helpfull" ||
        normalized == "helpshort" || normalized == "helppackage" ||
        normalized == "helpon" || normalized == "helpmatch" ||
        normalized == "version" || normalized == "only_check_args") {
      continue;
    }
    if (absl::FindCommandLineFlag(normalized) != nullptr) continue;
    if (absl::StartsWith(normalized, "no") &&
        arg.find('=') == absl::string_view::npos) {
      const absl::CommandLineFlag* flag =
          absl::FindCommandLineFlag(normalized.substr(2));
      if (flag != nullptr && flag->IsOfType<bool>()) continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const SuiteOptions& options) {
  if (options.plugin.empty()) {
    return absl::InvalidArgumentError(
        "--plugin is required: the path of the driver plugin's executable");
  }
  struct stat info;
  if (stat(options.plugin.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--plugin=", options.plugin, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--plugin=", options.plugin, ": not a regular file"));
  }
  if (access(options.plugin.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--plugin=", options.plugin,
                                                   ": not executable (",
                                                   std::strerror(errno), ")"));
  }
  const absl::Status config =
      ParseTaskConfig(options.task_config_json).status();
  if (!config.ok()) return config;
  if (options.start_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--start_timeout must be positive, e.g. 10s");
  }
  if (SelectChecks(options.filter).empty()) {
    std::vector<std::string> names;
    for (const Check& check : AllChecks()) names.push_back(check.name);
    return absl::InvalidArgumentError(absl::StrCat(
        "--filter=", options.filter, " matches no check; the checks are ",
        absl::StrJoin(names, ", ")));
  }
  return absl::OkStatus();
}

std::string UsageText() {
  std::string usage =
      "the berth driver conformance suite: launches a task driver plugin "
      "through the plugin handshake and checks it over berth.plugin.v1 and "
      "berth.driver.v1 (plugins/conformance/CONVENTIONS.md)\n"
      "usage: berth-driver-conformance --plugin=PATH [--task-config=JSON] "
      "[--socket_dir=DIR] [--start_timeout=10s] [--filter=SUBSTRING] "
      "[--userns_base=3400000] [--plugin_logs]\n"
      "prints one line per check (PASS name, FAIL name: reason, SKIP name: "
      "reason), then \"N passed, N failed, N skipped\"; exits 0 when no "
      "check failed, 1 when one did, 2 on a usage error.\n"
      "checks:\n";
  for (const Check& check : AllChecks()) {
    absl::StrAppend(
        &usage, "  ", check.name, ": ", check.description,
        check.capability.has_value()
            ? absl::StrCat(" [needs ", CapabilityName(*check.capability), "]")
            : "",
        "\n");
  }
  return usage;
}

}  // namespace berth::conformance
