// The driver conformance suite: its checks and the runner that reports them.
//
//   Interruption interruption;
//   Suite suite(options, &std::cout, &interruption);
//   return suite.Run();  // 0: nothing failed; 1: something failed
//
// Every check is independent: it starts its own tasks (destroyed after it,
// whatever happened) and gives every call a deadline, so that a hung driver
// fails a check rather than hanging the suite. A check needing a capability
// the driver does not report is skipped, with the reason.

#ifndef PLUGINS_CONFORMANCE_SUITE_H_
#define PLUGINS_CONFORMANCE_SUITE_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "plugins/conformance/context.h"
#include "plugins/conformance/report.h"

namespace berth::conformance {

// One check of the suite.
struct Check {
  // Its name in the report, e.g. "exec_streaming_tty".
  const char* name;
  // What it checks, for --help and CONVENTIONS.md.
  const char* description;
  // Skipped when the driver does not report this capability.
  std::optional<Capability> capability;
  // False for a check that starts the binary itself (not through the host).
  bool needs_plugin;
  // OK: passed; IsSkip: skipped; any other error: failed, for its message.
  absl::Status (*run)(Context& context);
};

// Every check, in the order they run.
const std::vector<Check>& AllChecks();

// The checks whose name contains `filter` (all for an empty filter).
std::vector<const Check*> SelectChecks(absl::string_view filter);

// The result of a check that returned `status`, with `cleanup` the outcome
// of destroying its tasks afterwards (a pass whose clean-up failed is a
// failure).
CheckResult ResultOf(absl::string_view name, const absl::Status& status,
                     const absl::Status& cleanup);

class Suite {
 public:
  // `out` gets the report; `interruption` (not owned) stops the suite.
  Suite(SuiteOptions options, std::ostream* out, Interruption* interruption);

  // Runs the selected checks, writes one line each and the summary line
  // last; cleans up (tasks, plugin, temporary directory). Returns 0 when no
  // check failed, 1 otherwise (also when interrupted).
  int Run();

  const Report& report() const { return report_; }

 private:
  CheckResult RunCheck(Context& context, const Check& check);

  const SuiteOptions options_;
  Interruption* const interruption_;
  Report report_;
};

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_SUITE_H_
