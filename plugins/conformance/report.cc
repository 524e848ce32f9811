#include "plugins/conformance/report.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace berth::conformance {
namespace {

// The reason on one line: its lines (trimmed, empty ones dropped) joined by
// "; ".
std::string OneLine(absl::string_view reason) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line :
       absl::StrSplit(reason, absl::ByAnyChar("\r\n"))) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) lines.push_back(line);
  }
  return absl::StrJoin(lines, "; ");
}

}  // namespace

std::string FormatResult(const CheckResult& result) {
  switch (result.outcome) {
    case Outcome::kPass:
      return absl::StrCat("PASS ", result.name);
    case Outcome::kFail:
    case Outcome::kSkip: {
      std::string reason = OneLine(result.reason);
      if (reason.empty()) reason = "(no reason given)";
      return absl::StrCat(result.outcome == Outcome::kFail ? "FAIL " : "SKIP ",
                          result.name, ": ", reason);
    }
  }
  return absl::StrCat("FAIL ", result.name, ": unknown outcome");
}

std::string FormatSummary(int passed, int failed, int skipped) {
  return absl::StrCat(passed, " passed, ", failed, " failed, ", skipped,
                      " skipped");
}

void Report::Add(CheckResult result) {
  switch (result.outcome) {
    case Outcome::kPass:
      ++passed_;
      break;
    case Outcome::kFail:
      ++failed_;
      break;
    case Outcome::kSkip:
      ++skipped_;
      break;
  }
  *out_ << FormatResult(result) << std::endl;
  results_.push_back(std::move(result));
}

void Report::Finish() {
  *out_ << FormatSummary(passed_, failed_, skipped_) << std::endl;
}

}  // namespace berth::conformance
