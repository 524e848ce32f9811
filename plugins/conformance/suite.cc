#include "plugins/conformance/suite.h"

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace berth::conformance {
namespace {

std::string Describe(const absl::Status& status) {
  // Mismatch: the message says it all; other errors keep their code.
  if (status.code() == absl::StatusCode::kUnknown) {
    return std::string(status.message());
  }
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                      status.message());
}

}  // namespace

std::vector<const Check*> SelectChecks(absl::string_view filter) {
  std::vector<const Check*> selected;
  for (const Check& check : AllChecks()) {
    if (filter.empty() || absl::StrContains(check.name, filter)) {
      selected.push_back(&check);
    }
  }
  return selected;
}

CheckResult ResultOf(absl::string_view name, const absl::Status& status,
                     const absl::Status& cleanup) {
  CheckResult result;
  result.name = std::string(name);
  if (status.ok() || IsSkip(status)) {
    if (cleanup.ok()) {
      result.outcome = status.ok() ? Outcome::kPass : Outcome::kSkip;
      result.reason = std::string(status.message());
      return result;
    }
    result.outcome = Outcome::kFail;
    result.reason =
        absl::StrCat(status.ok() ? "passed" : "skipped",
                     ", but cleaning up its tasks failed: ", Describe(cleanup));
    return result;
  }
  result.outcome = Outcome::kFail;
  result.reason = Describe(status);
  if (!cleanup.ok()) {
    absl::StrAppend(&result.reason,
                    "; cleaning up its tasks failed too: ", Describe(cleanup));
  }
  return result;
}

Suite::Suite(SuiteOptions options, std::ostream* out,
             Interruption* interruption)
    : options_(std::move(options)), interruption_(interruption), report_(out) {}

CheckResult Suite::RunCheck(Context& context, const Check& check) {
  if (check.needs_plugin) {
    const absl::Status running = context.EnsurePlugin();
    if (!running.ok()) {
      return ResultOf(check.name,
                      absl::Status(running.code(),
                                   absl::StrCat("cannot launch the plugin: ",
                                                running.message())),
                      absl::OkStatus());
    }
    if (check.capability.has_value() &&
        !HasCapability(*context.capabilities(), *check.capability)) {
      return ResultOf(
          check.name,
          SkipCheck(absl::StrCat("driver does not report ",
                                 CapabilityName(*check.capability))),
          absl::OkStatus());
    }
  }
  LOG(INFO) << "check " << check.name << ": " << check.description;
  absl::Status status = check.run(context);
  if (!status.ok() && interruption_->interrupted()) {
    status = absl::CancelledError(
        absl::StrCat("interrupted (", status.message(), ")"));
  }
  const absl::Status cleanup = context.CleanUpTasks();
  return ResultOf(check.name, status, cleanup);
}

int Suite::Run() {
  const std::vector<const Check*> checks = SelectChecks(options_.filter);
  absl::StatusOr<std::unique_ptr<Context>> context =
      Context::Create(options_, interruption_);
  if (!context.ok()) {
    for (const Check* check : checks) {
      report_.Add(ResultOf(
          check->name,
          absl::Status(
              context.status().code(),
              absl::StrCat("cannot set up: ", context.status().message())),
          absl::OkStatus()));
    }
    report_.Finish();
    return 1;
  }
  size_t run = 0;
  size_t not_run = 0;
  for (const Check* check : checks) {
    if (interruption_->interrupted()) break;
    if (check->needs_plugin && (*context)->launch_failed()) {
      ++not_run;  // said once, below
      continue;
    }
    if (check->needs_plugin) {
      const absl::Status launched = (*context)->EnsurePlugin();
      if (!launched.ok() && (*context)->launch_failed()) {
        ++not_run;
        continue;
      }
    }
    report_.Add(RunCheck(**context, *check));
    ++run;
  }
  if (not_run > 0) {
    // One failure with the reason, not one per check.
    report_.Add(ResultOf(
        "plugin_launch",
        absl::Status((*context)->launch_error().code(),
                     absl::StrCat("cannot launch the plugin (", not_run,
                                  " checks that need it were not run): ",
                                  (*context)->launch_error().message())),
        absl::OkStatus()));
    run += not_run;
  }
  const absl::Status closed = (*context)->Close();
  LOG_IF(WARNING, !closed.ok())
      << "cleaning up after the suite: " << closed.message();
  if (interruption_->interrupted()) {
    LOG(WARNING) << "interrupted: " << checks.size() - run
                 << " checks were not run";
  }
  report_.Finish();
  return interruption_->interrupted() ? 1 : report_.ExitCode();
}

}  // namespace berth::conformance
