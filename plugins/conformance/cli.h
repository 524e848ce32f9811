// The command line of berth-driver-conformance: checking it before the suite
// runs, so that a usage error exits 2 (a failed check exits 1).

#ifndef PLUGINS_CONFORMANCE_CLI_H_
#define PLUGINS_CONFORMANCE_CLI_H_

#include <string>

#include "absl/status/status.h"
#include "plugins/conformance/context.h"

namespace berth::conformance {

// Exit codes of berth-driver-conformance.
inline constexpr int kExitPassed = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// INVALID_ARGUMENT naming the first flag in argv (before "--") that no
// absl flag of this binary defines, spelled as InitService accepts it
// ("--foo-bar", "-foo_bar=x", "--nofoo" for a bool, "-h").
absl::Status CheckFlagNames(int argc, char** argv);

// INVALID_ARGUMENT naming the flag at fault: --plugin missing or not an
// executable file, --task-config not a JSON object, --start_timeout not
// positive, --filter matching no check (the error lists them).
absl::Status ValidateOptions(const SuiteOptions& options);

// The --help text: what the suite does and every check.
std::string UsageText();

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_CLI_H_
