// `berth attach TASK`: joins a running task's stdin and output over
// AttachTask (attach_session.h) until it ends (its exit code) or the detach
// keys are typed (0, the task left running) (cli.h).

#include <unistd.h>

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "berth/node/v1/node.pb.h"
#include "grpcpp/support/status.h"
#include "services/node/cli/attach_session.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/detach_keys.h"
#include "services/node/cli/table.h"

namespace berth::cli {

namespace nodepb = ::berth::node::v1;

int Cli::AttachCommand(const ParsedArgs& args) {
  if (args.positional.size() != 1) {
    return UsageError("attach", args.positional.empty()
                                    ? "a TASK is required"
                                    : absl::StrCat("unexpected argument \"",
                                                   args.positional[1], "\""));
  }
  const std::string& name = args.positional[0];
  std::string detach_keys = *ParseDetachKeys(kDefaultDetachKeys);
  if (args.Has("detach-keys")) {
    absl::StatusOr<std::string> keys =
        ParseDetachKeys(args.Value("detach-keys"));
    if (!keys.ok()) {
      return UsageError(
          "attach", absl::StrCat("--detach-keys \"", args.Value("detach-keys"),
                                 "\": ", keys.status().message()));
    }
    detach_keys = *std::move(keys);
  }
  if (!Connect()) return Unreachable();
  nodepb::Task task;
  if (grpc::Status status = Inspect(name, &task); !status.ok()) {
    return NodeError(status);
  }
  AttachOptions options;
  options.task = task.id();
  // Without -i the task has no stdin to pass: attach to its output only
  // (docker attaches stdin only to an OpenStdin container too).
  options.stdin = !args.Has("no-stdin") && task.spec().stdin_open();
  options.tty = task.spec().tty();
  options.detach_keys = detach_keys;
  absl::StatusOr<AttachOutcome> outcome =
      RunAttachSession(*stub_, env_, options);
  if (!outcome.ok()) {
    return Fail(absl::StrCat("attach: ", outcome.status().message()));
  }
  const std::string shown =
      task.spec().name().empty() ? ShortId(task.id()) : task.spec().name();
  if (outcome->detached) {
    // On a terminal the line may hold the task's prompt: a line of its own.
    Err(absl::StrCat(isatty(env_.stderr_fd) ? "\n" : "",
                     "berth: detached from ", shown, "; berth attach ", shown,
                     " to come back\n"));
    return kExitOk;
  }
  if (outcome->exit.has_value()) return ExitCodeOf(*outcome->exit);
  if (!outcome->status.ok()) return NodeError(outcome->status);
  // The output ended without the exit (the task had ended already, or the
  // node left it out): the task's own record.
  for (int tries = 0; tries < 50; ++tries) {
    if (grpc::Status status = Inspect(task.id(), &task); !status.ok()) {
      return NodeError(status);
    }
    if (task.has_exit_result()) return ExitCodeOf(task.exit_result());
    if (task.state() == nodepb::TASK_STATE_FAILED) {
      return Fail(absl::StrCat("task ", shown, " failed to start",
                               task.error().empty() ? "" : ": ", task.error()));
    }
    absl::SleepFor(env_.log_refollow_delay);
  }
  return Fail(absl::StrCat("the output of ", shown,
                           " ended, but the task did not (attach again?)"));
}

}  // namespace berth::cli
