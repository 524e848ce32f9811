#include "plugins/conformance/report.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace berth::conformance {
namespace {

TEST(FormatResultTest, Pass) {
  EXPECT_EQ(FormatResult({"health", Outcome::kPass, ""}), "PASS health");
  // A pass has no reason, even if one was left.
  EXPECT_EQ(FormatResult({"health", Outcome::kPass, "ignored"}), "PASS health");
}

TEST(FormatResultTest, FailAndSkipCarryTheReason) {
  EXPECT_EQ(FormatResult({"exit_code", Outcome::kFail, "got 4; want 3"}),
            "FAIL exit_code: got 4; want 3");
  EXPECT_EQ(FormatResult({"exec_streaming_tty", Outcome::kSkip,
                          "driver does not report exec_tty"}),
            "SKIP exec_streaming_tty: driver does not report exec_tty");
}

TEST(FormatResultTest, ReasonOnOneLine) {
  EXPECT_EQ(FormatResult({"x", Outcome::kFail, "first line\n  second\r\n\n"}),
            "FAIL x: first line; second");
}

TEST(FormatResultTest, MissingReason) {
  EXPECT_EQ(FormatResult({"x", Outcome::kFail, ""}),
            "FAIL x: (no reason given)");
  EXPECT_EQ(FormatResult({"x", Outcome::kSkip, " \n"}),
            "SKIP x: (no reason given)");
}

TEST(FormatSummaryTest, Counts) {
  EXPECT_EQ(FormatSummary(24, 1, 2), "24 passed, 1 failed, 2 skipped");
  EXPECT_EQ(FormatSummary(0, 0, 0), "0 passed, 0 failed, 0 skipped");
}

TEST(ReportTest, LinesThenSummaryLast) {
  std::ostringstream out;
  Report report(&out);
  report.Add({"a", Outcome::kPass, ""});
  report.Add({"b", Outcome::kFail, "broken"});
  report.Add({"c", Outcome::kSkip, "absent"});
  report.Add({"d", Outcome::kPass, ""});
  report.Finish();
  EXPECT_EQ(out.str(),
            "PASS a\n"
            "FAIL b: broken\n"
            "SKIP c: absent\n"
            "PASS d\n"
            "2 passed, 1 failed, 1 skipped\n");
  EXPECT_EQ(report.passed(), 2);
  EXPECT_EQ(report.failed(), 1);
  EXPECT_EQ(report.skipped(), 1);
  EXPECT_EQ(report.results().size(), 4u);
  EXPECT_EQ(report.ExitCode(), 1);
}

TEST(ReportTest, ExitZeroWithoutFailures) {
  std::ostringstream out;
  Report report(&out);
  report.Add({"a", Outcome::kPass, ""});
  report.Add({"c", Outcome::kSkip, "absent"});
  report.Finish();
  EXPECT_EQ(report.ExitCode(), 0);
  EXPECT_EQ(out.str(),
            "PASS a\nSKIP c: absent\n1 passed, 0 failed, 1 skipped\n");
}

}  // namespace
}  // namespace berth::conformance
