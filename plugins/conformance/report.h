// The suite's report: one line per check ("PASS name", "FAIL name: reason",
// "SKIP name: reason") and the summary "N passed, N failed, N skipped" last.
// This is the suite's output (stdout), not a log.

#ifndef PLUGINS_CONFORMANCE_REPORT_H_
#define PLUGINS_CONFORMANCE_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace berth::conformance {

enum class Outcome { kPass, kFail, kSkip };

// What one check found.
struct CheckResult {
  std::string name;
  Outcome outcome = Outcome::kPass;
  // Why it failed or was skipped; empty for a pass.
  std::string reason;
};

// "PASS name", "FAIL name: reason" or "SKIP name: reason", one line without
// its newline: line breaks in the reason become "; ", and a FAIL or SKIP
// without a reason says "(no reason given)".
std::string FormatResult(const CheckResult& result);

// "3 passed, 1 failed, 2 skipped".
std::string FormatSummary(int passed, int failed, int skipped);

// Collects results and writes each line as it comes (flushed, so that a
// reader follows the suite's progress).
class Report {
 public:
  explicit Report(std::ostream* out) : out_(out) {}

  void Add(CheckResult result);

  // Writes the summary line.
  void Finish();

  int passed() const { return passed_; }
  int failed() const { return failed_; }
  int skipped() const { return skipped_; }
  const std::vector<CheckResult>& results() const { return results_; }

  // 0 when nothing failed, else 1.
  int ExitCode() const { return failed_ == 0 ? 0 : 1; }

 private:
  std::ostream* const out_;
  std::vector<CheckResult> results_;
  int passed_ = 0;
  int failed_ = 0;
  int skipped_ = 0;
};

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_REPORT_H_
