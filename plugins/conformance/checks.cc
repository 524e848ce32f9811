// The checks of the suite (see suite.h and CONVENTIONS.md).

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sha256.h"
#include "base/subprocess.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "berth/stats/v1/stats.pb.h"
#include "glog/logging.h"
#include "plugins/conformance/check_util.h"
#include "plugins/conformance/context.h"
#include "plugins/conformance/isolation_checks.h"
#include "plugins/conformance/node_contract_checks.h"
#include "plugins/conformance/suite.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/errors.h"
#include "plugins/sdk/handshake.h"

namespace berth::conformance {
namespace {

namespace driver = ::berth::driver::v1;
namespace host = ::berth::plugin::host;
namespace stats = ::berth::stats::v1;

// Frames of ExecTaskStreaming carry at most this many bytes.
constexpr size_t kMaxFrame = 32 * 1024;
// What the 100 MB check sends through `cat`.
constexpr uint64_t kBigExecBytes = uint64_t{100} << 20;

// --- ExecTaskStreaming.

// What an ExecTaskStreaming call gave.
struct ExecOutput {
  std::string stdout_data;  // unless hashed
  std::string stderr_data;
  uint64_t stdout_bytes = 0;
  std::optional<driver::ExitResult> exit;
  size_t largest_frame = 0;
  // What came after the exit frame, for a message; empty when nothing did.
  std::string after_exit;
};

// Sends `request`; when the call has ended, returns why (from Read).
absl::Status Send(host::ExecStream& stream,
                  const driver::ExecTaskStreamingRequest& request,
                  absl::Time deadline) {
  const absl::Status written = stream.Write(request);
  if (written.ok() || !absl::IsFailedPrecondition(written)) return written;
  // The call ended: Read tells how (dropping what was not read).
  while (true) {
    absl::StatusOr<std::optional<driver::ExecTaskStreamingResponse>> read =
        stream.Read(deadline);
    if (!read.ok()) return read.status();
    if (!read->has_value()) {
      return Mismatch(
          "the driver ended the call (OK) before the client was done "
          "writing");
    }
  }
}

absl::StatusOr<std::unique_ptr<host::ExecStream>> OpenExec(
    Context& context, const std::string& task_id,
    const std::vector<std::string>& command, bool tty, absl::Time deadline) {
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::ExecStream> stream,
      context.driver().ExecTaskStreaming(context.RpcUntil(deadline)));
  driver::ExecTaskStreamingRequest request;
  driver::ExecSetup* setup = request.mutable_setup();
  setup->set_task_id(task_id);
  for (const std::string& arg : command) setup->add_command(arg);
  setup->set_tty(tty);
  if (tty) {
    setup->mutable_terminal_size()->set_rows(24);
    setup->mutable_terminal_size()->set_columns(80);
  }
  CONFORMANCE_RETURN_IF_ERROR(Send(*stream, request, deadline));
  return stream;
}

// Reads every response until the call ends. Once the exit frame came, the
// stream is half-closed (unless `half_closed` says it already is), as a
// client that has nothing more to send does, and the call must then end
// OK. With `stdout_hash`, stdout is hashed and counted rather than kept.
absl::StatusOr<ExecOutput> ReadExec(host::ExecStream& stream,
                                    absl::Time deadline,
                                    bool half_closed = false,
                                    Sha256* stdout_hash = nullptr) {
  ExecOutput output;
  while (true) {
    absl::StatusOr<std::optional<driver::ExecTaskStreamingResponse>> read =
        stream.Read(deadline);
    if (!read.ok()) {
      return absl::Status(
          read.status().code(),
          absl::StrCat(read.status().message(), " (after ", output.stdout_bytes,
                       " bytes of stdout, ", output.stderr_data.size(),
                       " of stderr", output.exit ? ", and the exit frame" : "",
                       ")"));
    }
    if (!read->has_value()) return output;
    const driver::ExecTaskStreamingResponse& response = **read;
    if (output.exit.has_value() && output.after_exit.empty()) {
      switch (response.frame_case()) {
        case driver::ExecTaskStreamingResponse::kStdout:
          output.after_exit = "a stdout frame";
          break;
        case driver::ExecTaskStreamingResponse::kStderr:
          output.after_exit = "a stderr frame";
          break;
        case driver::ExecTaskStreamingResponse::kExit:
          output.after_exit = "a second exit frame";
          break;
        case driver::ExecTaskStreamingResponse::FRAME_NOT_SET:
          output.after_exit = "an empty response";
          break;
      }
    }
    switch (response.frame_case()) {
      case driver::ExecTaskStreamingResponse::kStdout:
        output.largest_frame =
            std::max(output.largest_frame, response.stdout().size());
        output.stdout_bytes += response.stdout().size();
        if (stdout_hash != nullptr) {
          stdout_hash->Update(response.stdout());
        } else {
          output.stdout_data += response.stdout();
        }
        break;
      case driver::ExecTaskStreamingResponse::kStderr:
        output.largest_frame =
            std::max(output.largest_frame, response.stderr().size());
        output.stderr_data += response.stderr();
        break;
      case driver::ExecTaskStreamingResponse::kExit:
        if (!output.exit.has_value()) output.exit = response.exit();
        if (!half_closed) {
          half_closed = true;
          // An error here shows again in the next Read.
          (void)stream.WritesDone();
        }
        break;
      case driver::ExecTaskStreamingResponse::FRAME_NOT_SET:
        break;
    }
  }
}

// The exit frame came, last, and frames were at most 32 KiB.
absl::Status ExpectWellFramed(const ExecOutput& output) {
  if (!output.exit.has_value()) {
    // Stdout is not kept when it is hashed: then only its size is known.
    const std::string stdout_text =
        output.stdout_data.size() == output.stdout_bytes
            ? Quote(output.stdout_data)
            : absl::StrCat(output.stdout_bytes, " bytes");
    return Mismatch(
        absl::StrCat("the call ended without an exit frame (stdout ",
                     stdout_text, ", stderr ", Quote(output.stderr_data), ")"));
  }
  if (!output.after_exit.empty()) {
    return Mismatch(absl::StrCat(output.after_exit,
                                 " came after the exit frame; the exit must "
                                 "be the last response"));
  }
  if (output.largest_frame > kMaxFrame) {
    return Mismatch(absl::StrCat("an output frame carried ",
                                 output.largest_frame,
                                 " bytes; at most 32 KiB are allowed"));
  }
  return absl::OkStatus();
}

absl::Status ExpectExecOutput(const ExecOutput& output,
                              absl::string_view want_stdout,
                              absl::string_view want_stderr, int exit_code) {
  CONFORMANCE_RETURN_IF_ERROR(ExpectWellFramed(output));
  std::vector<std::string> problems;
  if (output.stdout_data != want_stdout) {
    problems.push_back(absl::StrCat("stdout ", Quote(output.stdout_data),
                                    ", want ", Quote(want_stdout)));
  }
  if (output.stderr_data != want_stderr) {
    problems.push_back(absl::StrCat("stderr ", Quote(output.stderr_data),
                                    ", want ", Quote(want_stderr)));
  }
  if (output.exit->exit_code() != exit_code || output.exit->signal() != 0) {
    problems.push_back(absl::StrCat("exit ", DescribeExit(*output.exit),
                                    ", want exit_code ", exit_code));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrJoin(problems, "; "));
}

driver::ExecTaskStreamingRequest StdinFrame(absl::string_view data) {
  driver::ExecTaskStreamingRequest request;
  request.set_stdin(std::string(data));
  return request;
}

driver::ExecTaskStreamingRequest StdinCloseFrame() {
  driver::ExecTaskStreamingRequest request;
  request.mutable_stdin_close();
  return request;
}

driver::ExecTaskStreamingRequest ResizeFrame(uint32_t rows, uint32_t columns) {
  driver::ExecTaskStreamingRequest request;
  request.mutable_resize()->set_rows(rows);
  request.mutable_resize()->set_columns(columns);
  return request;
}

// --- The checks.

absl::Status CookieRefused(Context& context) {
  const std::string dir = absl::StrCat(context.work_dir(), "/cookie");
  if (mkdir(dir.c_str(), 0750) != 0) {
    return absl::InternalError(absl::StrCat("cannot make ", dir));
  }
  constexpr absl::Duration kTimeout = absl::Seconds(10);
  base::SubprocessOptions run;
  run.env = base::EnvironmentWithout("BERTH_PLUGIN_");
  run.env.push_back(absl::StrCat(plugin::kSocketDirEnv, "=", dir));
  run.env.push_back(absl::StrCat(plugin::kProtocolVersionsEnv, "=",
                                 plugin::kAppProtocolVersion));
  run.timeout = kTimeout;
  CONFORMANCE_ASSIGN_OR_RETURN(base::SubprocessResult result,
                               base::RunSubprocess(context.binary(), run));
  std::vector<std::string> problems;
  if (result.timed_out) {
    problems.push_back(absl::StrCat("it was still running ",
                                    absl::FormatDuration(kTimeout),
                                    " after it started (killed)"));
  } else if (!result.exited()) {
    problems.push_back(absl::StrCat("it ", result.Describe()));
  } else if (result.exit_code() == 0) {
    problems.push_back("it exited with code 0");
  }
  for (absl::string_view line : absl::StrSplit(result.stdout_data, '\n')) {
    if (plugin::ParseHandshake(line).ok()) {
      problems.push_back(
          absl::StrCat("it printed a handshake line ", Quote(line)));
    }
  }
  if (absl::StripAsciiWhitespace(result.stderr_data).empty()) {
    problems.push_back(
        "it wrote nothing on stderr (a message for a human is expected)");
  }
  std::vector<std::string> left;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    left.push_back(entry.path().filename().string());
  }
  if (!left.empty()) {
    problems.push_back(absl::StrCat("it left ", absl::StrJoin(left, ", "),
                                    " in the socket directory"));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrCat("started without ", plugin::kMagicCookieKey,
                               ": ", absl::StrJoin(problems, "; ")));
}

absl::Status Health(Context& context) {
  return ExpectServing(context, kRpcTimeout);
}

absl::Status PluginInfo(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(
      plugin::v1::GetPluginInfoResponse info,
      context.driver().GetPluginInfo({}, context.Rpc()));
  std::vector<std::string> problems;
  if (info.type() != plugin::v1::PLUGIN_TYPE_DRIVER) {
    problems.push_back(absl::StrCat("type is ",
                                    plugin::v1::PluginType_Name(info.type()),
                                    "; want PLUGIN_TYPE_DRIVER"));
  }
  if (info.name().empty()) problems.push_back("name is empty");
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(
      absl::StrCat("GetPluginInfo: ", absl::StrJoin(problems, "; ")));
}

absl::Status ApiVersions(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(
      plugin::v1::GetCapabilitiesResponse capabilities,
      context.driver().GetPluginCapabilities({}, context.Rpc()));
  absl::flat_hash_set<std::string> packages;
  std::vector<std::string> listed;
  for (const plugin::v1::ApiVersion& version : capabilities.api_versions()) {
    packages.insert(version.package());
    listed.push_back(absl::StrCat(version.package(), "@", version.revision()));
  }
  std::vector<std::string> missing;
  for (const char* want : {"berth.plugin.v1", "berth.driver.v1"}) {
    if (!packages.contains(want)) missing.push_back(want);
  }
  if (missing.empty()) return absl::OkStatus();
  return Mismatch(absl::StrCat("PluginService.GetCapabilities lists [",
                               absl::StrJoin(listed, ", "), "]; missing ",
                               absl::StrJoin(missing, " and ")));
}

absl::Status ConfigSchema(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(
      plugin::v1::GetConfigSchemaResponse schema,
      context.driver().GetConfigSchema({}, context.Rpc()));
  const plugin::v1::ConfigField* command = nullptr;
  const plugin::v1::ConfigField* args = nullptr;
  for (const plugin::v1::ConfigField& field : schema.task_config().fields()) {
    if (field.name() == "command") command = &field;
    if (field.name() == "args") args = &field;
  }
  std::vector<std::string> problems;
  if (command == nullptr) {
    problems.push_back("the task schema has no field \"command\"");
  } else {
    if (command->type() != plugin::v1::CONFIG_FIELD_TYPE_STRING) {
      problems.push_back(absl::StrCat(
          "\"command\" is ", plugin::v1::ConfigFieldType_Name(command->type()),
          "; want CONFIG_FIELD_TYPE_STRING"));
    }
    if (!command->required()) problems.push_back("\"command\" is not required");
  }
  if (args == nullptr) {
    problems.push_back("the task schema has no field \"args\"");
  } else if (args->type() != plugin::v1::CONFIG_FIELD_TYPE_STRING_LIST) {
    problems.push_back(absl::StrCat(
        "\"args\" is ", plugin::v1::ConfigFieldType_Name(args->type()),
        "; want CONFIG_FIELD_TYPE_STRING_LIST"));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(
      absl::StrCat("GetConfigSchema: ", absl::StrJoin(problems, "; ")));
}

absl::Status Capabilities(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::GetCapabilitiesResponse response,
      context.driver().GetCapabilities({}, context.Rpc()));
  const driver::DriverCapabilities& capabilities = response.capabilities();
  std::vector<std::string> problems;
  if (!response.has_capabilities()) problems.push_back("capabilities unset");
  if (capabilities.fs_isolation() == driver::FS_ISOLATION_UNSPECIFIED) {
    problems.push_back("fs_isolation is FS_ISOLATION_UNSPECIFIED");
  }
  if (capabilities.exec_tty() && !capabilities.exec_streaming()) {
    problems.push_back("exec_tty without exec_streaming");
  }
  for (int mode : capabilities.network_isolation_modes()) {
    if (mode == driver::NETWORK_ISOLATION_MODE_UNSPECIFIED) {
      problems.push_back(
          "network_isolation_modes lists NETWORK_ISOLATION_MODE_UNSPECIFIED");
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrCat("DriverService.GetCapabilities: ",
                               absl::StrJoin(problems, "; ")));
}

absl::Status Fingerprint(Context& context) {
  constexpr absl::Duration kFirst = absl::Seconds(5);
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::FingerprintStream> stream,
      context.driver().Fingerprint({}, context.Rpc(absl::Seconds(30))));
  absl::StatusOr<std::optional<driver::FingerprintResponse>> first =
      stream->Next(absl::Now() + kFirst);
  if (absl::IsDeadlineExceeded(first.status())) {
    return Mismatch(absl::StrCat("no fingerprint within ",
                                 absl::FormatDuration(kFirst),
                                 " of the call (one is due at once)"));
  }
  if (!first.ok()) return first.status();
  if (!first->has_value()) {
    return Mismatch("the stream ended (OK) before its first fingerprint");
  }
  const driver::FingerprintResponse& fingerprint = **first;
  if (fingerprint.health() == driver::HEALTH_STATE_HEALTHY) {
    return absl::OkStatus();
  }
  if (fingerprint.health() == driver::HEALTH_STATE_UNSPECIFIED) {
    return Mismatch(
        "the first fingerprint's health is HEALTH_STATE_UNSPECIFIED");
  }
  if (fingerprint.health_description().empty()) {
    return Mismatch(absl::StrCat("the first fingerprint's health is ",
                                 driver::HealthState_Name(fingerprint.health()),
                                 " without a health_description saying why"));
  }
  LOG(WARNING) << "the driver is "
               << driver::HealthState_Name(fingerprint.health()) << ": "
               << fingerprint.health_description();
  return absl::OkStatus();
}

absl::Status StartWaitInspect(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               context.ShellTask("start-wait", "sleep 2"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::StartTaskResponse started,
                               context.StartTask(task));
  if (!started.has_handle()) {
    return Mismatch("StartTask answered without a handle");
  }
  if (started.handle().config().id() != task.id()) {
    return Mismatch(absl::StrCat("the handle's config has id ",
                                 Quote(started.handle().config().id()),
                                 "; want the task's, ", Quote(task.id())));
  }
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskStatus running,
                               context.InspectTask(task.id()));
  CONFORMANCE_RETURN_IF_ERROR(ExpectState(running, driver::TASK_STATE_RUNNING,
                                          "right after StartTask"));
  if (running.id() != task.id()) {
    return Mismatch(absl::StrCat("InspectTask: id ", Quote(running.id()),
                                 "; want ", Quote(task.id())));
  }
  if (!running.has_started_at()) {
    return Mismatch("InspectTask of a running task: started_at is unset");
  }
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               context.WaitTask(task.id()));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(exit, 0, 0, "WaitTask of `sleep 2`"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskStatus exited,
                               context.InspectTask(task.id()));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectState(exited, driver::TASK_STATE_EXITED, "after WaitTask"));
  if (!exited.has_exit_result()) {
    return Mismatch("InspectTask of an exited task: exit_result is unset");
  }
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectExit(exited.exit_result(), 0, 0, "InspectTask's exit_result"));
  if (!exited.has_completed_at()) {
    return Mismatch("InspectTask of an exited task: completed_at is unset");
  }
  return absl::OkStatus();
}

// Runs `script`, waits for it and expects the exit result given, from
// WaitTask and from InspectTask.
absl::Status ExpectTaskExit(Context& context, absl::string_view hint,
                            absl::string_view script, int exit_code,
                            int signal) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               context.ShellTask(hint, script));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               context.WaitTask(task.id()));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(
      exit, exit_code, signal, absl::StrCat("WaitTask of `", script, "`")));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskStatus status,
                               context.InspectTask(task.id()));
  return ExpectExit(
      status.exit_result(), exit_code, signal,
      absl::StrCat("InspectTask's exit_result of `", script, "`"));
}

absl::Status ExitCode(Context& context) {
  return ExpectTaskExit(context, "exit-code", "exit 3", 3, 0);
}

absl::Status ExitSignal(Context& context) {
  return ExpectTaskExit(context, "exit-signal", "kill -KILL $$", 0, 9);
}

absl::Status WaitTwice(Context& context) {
  constexpr absl::string_view kScript = "sleep 1; exit 7";
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               context.ShellTask("wait-twice", kScript));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  absl::StatusOr<driver::ExitResult> other = absl::UnknownError("not waited");
  std::thread waiter([&] { other = context.WaitTask(task.id()); });
  absl::StatusOr<driver::ExitResult> first = context.WaitTask(task.id());
  waiter.join();
  if (!first.ok()) return first.status();
  if (!other.ok()) return other.status();
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectExit(*first, 7, 0, "one of two concurrent WaitTask calls"));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectExit(*other, 7, 0, "the other of two concurrent WaitTask calls"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult after,
                               context.WaitTask(task.id(), kRpcTimeout));
  return ExpectExit(after, 7, 0, "WaitTask after the exit");
}

absl::Status StopSignal(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StartSleeper(context, "stop-signal"));
  CONFORMANCE_RETURN_IF_ERROR(
      context.StopTask(task.id(), "SIGTERM", absl::Seconds(10)));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               context.WaitTask(task.id()));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectExit(exit, 0, 15, "WaitTask after StopTask(SIGTERM)"));
  const absl::Status again =
      context.StopTask(task.id(), "SIGTERM", absl::Seconds(1));
  if (!again.ok()) {
    return Mismatch(absl::StrCat("StopTask of an exited task must succeed: ",
                                 DescribeError(again)));
  }
  return absl::OkStatus();
}

absl::Status StopTimeoutKill(Context& context) {
  constexpr absl::Duration kTimeout = absl::Seconds(1);
  if (std::optional<std::string> why = context.WhyTaskFilesUnobservable()) {
    return SkipCheck(*why);
  }
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("stop-timeout",
                        "trap '' TERM; : > ready; while :; do sleep 1; done"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  CONFORMANCE_RETURN_IF_ERROR(context.WaitForTaskFile(task, "ready"));
  const absl::Time stop = absl::Now();
  CONFORMANCE_RETURN_IF_ERROR(context.StopTask(task.id(), "SIGTERM", kTimeout));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               context.WaitTask(task.id()));
  const absl::Duration took = absl::Now() - stop;
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(
      exit, 0, 9,
      "WaitTask after StopTask(SIGTERM, 1s) of a task ignoring SIGTERM"));
  if (took < kTimeout * 0.9) {
    return Mismatch(absl::StrCat("the task ignoring SIGTERM was killed ",
                                 absl::FormatDuration(took),
                                 " after StopTask, before its timeout of ",
                                 absl::FormatDuration(kTimeout)));
  }
  return absl::OkStatus();
}

absl::Status Destroy(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StartSleeper(context, "destroy"));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectError(context.DestroyTask(task.id(), /*force=*/false),
                  absl::StatusCode::kFailedPrecondition, task.id(), "",
                  "DestroyTask without force of a running task"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskStatus status,
                               context.InspectTask(task.id()));
  CONFORMANCE_RETURN_IF_ERROR(ExpectState(status, driver::TASK_STATE_RUNNING,
                                          "after a refused DestroyTask"));
  CONFORMANCE_RETURN_IF_ERROR(context.DestroyTask(task.id(), /*force=*/true));
  return ExpectError(context.InspectTask(task.id()).status(),
                     absl::StatusCode::kNotFound, task.id(), task.id(),
                     "InspectTask after DestroyTask(force)");
}

absl::Status SignalTask(Context& context) {
  if (std::optional<std::string> why = context.WhyTaskFilesUnobservable()) {
    return SkipCheck(*why);
  }
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask(
          "signal",
          "trap 'exit 42' USR1; : > ready; while :; do sleep 0.1; done"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  CONFORMANCE_RETURN_IF_ERROR(context.WaitForTaskFile(task, "ready"));
  driver::SignalTaskRequest request;
  request.set_task_id(task.id());
  request.set_signal("SIGUSR1");
  CONFORMANCE_RETURN_IF_ERROR(
      context.driver().SignalTask(request, context.Rpc()).status());
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               context.WaitTask(task.id()));
  return ExpectExit(exit, 42, 0,
                    "WaitTask after SignalTask(SIGUSR1) of a task whose "
                    "USR1 trap exits 42");
}

absl::Status TaskEvents(Context& context) {
  constexpr absl::Duration kTimeout = absl::Seconds(10);
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::TaskEventsStream> events,
      context.driver().TaskEvents({}, context.Rpc(absl::Seconds(60))));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               context.ShellTask("events", "exit 0"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  const absl::Time deadline = absl::Now() + kTimeout;
  while (true) {
    absl::StatusOr<std::optional<driver::TaskEventsResponse>> event =
        events->Next(deadline);
    if (absl::IsDeadlineExceeded(event.status())) {
      return Mismatch(absl::StrCat("no event of task ", task.id(), " within ",
                                   absl::FormatDuration(kTimeout),
                                   " of its start"));
    }
    if (!event.ok()) return event.status();
    if (!event->has_value()) {
      return Mismatch(absl::StrCat("the stream ended (OK) before an event of ",
                                   "task ", task.id()));
    }
    if ((*event)->task_id() != task.id()) continue;
    if (!(*event)->has_timestamp()) {
      return Mismatch("an event of the task has no timestamp");
    }
    if ((*event)->message().empty()) {
      return Mismatch("an event of the task has no message");
    }
    return absl::OkStatus();
  }
}

// A TaskStats sample: of the task, timed, with measured fields. A first
// sample may come before the task's program has touched memory charged to
// its cgroup (on cgroup v1 the pages of a process that joined the cgroup
// stay charged where they were), so an rss of 0 is an error only when
// `rss_must_be_positive`; later samples must show it.
absl::Status ExpectSample(const stats::TaskResourceUsage& sample,
                          const std::string& task_id, absl::string_view which,
                          bool rss_must_be_positive = true) {
  std::vector<std::string> problems;
  if (sample.task_id() != task_id) {
    problems.push_back(absl::StrCat("task_id ", Quote(sample.task_id()),
                                    ", want ", Quote(task_id)));
  }
  if (!sample.has_timestamp()) problems.push_back("no timestamp");
  const stats::CpuStats& cpu = sample.usage().cpu();
  const stats::MemoryStats& memory = sample.usage().memory();
  if (cpu.measured().empty() && memory.measured().empty()) {
    problems.push_back("neither CPU nor memory lists a measured field");
  }
  for (int field : memory.measured()) {
    if (field == stats::MEMORY_FIELD_RSS && memory.rss() == 0 &&
        rss_must_be_positive) {
      problems.push_back("rss is listed as measured but is 0");
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(
      absl::StrCat("the ", which, " sample: ", absl::StrJoin(problems, "; ")));
}

absl::Status TaskStats(Context& context) {
  constexpr absl::Duration kInterval = absl::Seconds(1);
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("stats", "while :; do :; done"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  driver::TaskStatsRequest request;
  request.set_task_id(task.id());
  request.mutable_interval()->set_seconds(absl::ToInt64Seconds(kInterval));
  const absl::Time opened = absl::Now();
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::TaskStatsStream> stream,
      context.driver().TaskStats(request, context.Rpc(absl::Seconds(60))));
  absl::StatusOr<std::optional<stats::TaskResourceUsage>> first =
      stream->Next(opened + 2 * kInterval);
  if (absl::IsDeadlineExceeded(first.status())) {
    return Mismatch(absl::StrCat("no sample within two intervals (",
                                 absl::FormatDuration(2 * kInterval),
                                 ") of the call"));
  }
  if (!first.ok()) return first.status();
  if (!first->has_value()) {
    return Mismatch("the stream ended (OK) before its first sample");
  }
  CONFORMANCE_RETURN_IF_ERROR(ExpectSample(**first, task.id(), "first",
                                           /*rss_must_be_positive=*/false));
  const absl::Time after_first = absl::Now();
  absl::StatusOr<std::optional<stats::TaskResourceUsage>> second =
      stream->Next(after_first + 2 * kInterval);
  if (absl::IsDeadlineExceeded(second.status())) {
    return Mismatch(absl::StrCat("no second sample within two intervals (",
                                 absl::FormatDuration(2 * kInterval),
                                 ") of the first"));
  }
  if (!second.ok()) return second.status();
  if (!second->has_value()) {
    return Mismatch(
        "the stream ended (OK) after one sample, with the task "
        "still running");
  }
  CONFORMANCE_RETURN_IF_ERROR(ExpectSample(**second, task.id(), "second"));
  const stats::CpuStats& cpu = (*second)->usage().cpu();
  bool percent_measured = false;
  for (int field : cpu.measured()) {
    if (field == stats::CPU_FIELD_PERCENT) percent_measured = true;
  }
  if (percent_measured && cpu.percent() <= 0) {
    return Mismatch(absl::StrCat("the second sample measures percent as ",
                                 cpu.percent(),
                                 " for a task spinning on a core"));
  }
  if (cpu.percent() > 0 && cpu.total_ticks() <= 0) {
    return Mismatch(absl::StrCat(
        "the second sample has percent ", cpu.percent(), " but total_ticks ",
        cpu.total_ticks(), " (derived from percent, always carried)"));
  }
  return absl::OkStatus();
}

absl::Status ExecTask(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StartSleeper(context, "exec"));
  driver::ExecTaskRequest request;
  request.set_task_id(task.id());
  request.add_command("/bin/sh");
  request.add_command("-c");
  request.add_command(
      "printf 'out %s' \"$BERTH_CONFORMANCE_TASK\"; printf err >&2; exit 7");
  request.mutable_timeout()->set_seconds(20);
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::ExecTaskResponse response,
      context.driver().ExecTask(request, context.Rpc(absl::Seconds(30))));
  std::vector<std::string> problems;
  const std::string want_stdout = absl::StrCat("out ", task.id());
  if (response.stdout() != want_stdout) {
    problems.push_back(absl::StrCat(
        "stdout ", Quote(response.stdout()), ", want ", Quote(want_stdout),
        " (the command prints the task's BERTH_CONFORMANCE_TASK)"));
  }
  if (response.stderr() != "err") {
    problems.push_back(
        absl::StrCat("stderr ", Quote(response.stderr()), ", want \"err\""));
  }
  if (response.result().exit_code() != 7 || response.result().signal() != 0) {
    problems.push_back(absl::StrCat("result ", DescribeExit(response.result()),
                                    ", want exit_code 7"));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrCat("ExecTask: ", absl::StrJoin(problems, "; ")));
}

absl::Status ExecStreamingOutput(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StartSleeper(context, "exec-output"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  // Stdin stays open: the command does not read it, and its exit must end
  // the call all the same.
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::ExecStream> stream,
      OpenExec(context, task.id(),
               {"/bin/sh", "-c", "printf out; printf err >&2; exit 43"},
               /*tty=*/false, deadline));
  CONFORMANCE_ASSIGN_OR_RETURN(ExecOutput output, ReadExec(*stream, deadline));
  return ExpectExecOutput(output, "out", "err", 43);
}

absl::Status ExecStreamingStdin(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StartSleeper(context, "exec-stdin"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  {
    CONFORMANCE_ASSIGN_OR_RETURN(
        std::unique_ptr<host::ExecStream> stream,
        OpenExec(context, task.id(), {"cat"}, /*tty=*/false, deadline));
    CONFORMANCE_RETURN_IF_ERROR(Send(*stream, StdinFrame("hello\n"), deadline));
    CONFORMANCE_RETURN_IF_ERROR(Send(*stream, StdinFrame("world\n"), deadline));
    CONFORMANCE_RETURN_IF_ERROR(Send(*stream, StdinCloseFrame(), deadline));
    CONFORMANCE_ASSIGN_OR_RETURN(ExecOutput output,
                                 ReadExec(*stream, deadline));
    const absl::Status expected =
        ExpectExecOutput(output, "hello\nworld\n", "", 0);
    if (!expected.ok()) {
      return Mismatch(absl::StrCat("`cat` with stdin then stdin_close: ",
                                   expected.message()));
    }
  }
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::ExecStream> stream,
      OpenExec(context, task.id(), {"cat"}, /*tty=*/false, deadline));
  CONFORMANCE_RETURN_IF_ERROR(Send(*stream, StdinFrame("half\n"), deadline));
  CONFORMANCE_RETURN_IF_ERROR(stream->WritesDone());
  CONFORMANCE_ASSIGN_OR_RETURN(
      ExecOutput output, ReadExec(*stream, deadline, /*half_closed=*/true));
  const absl::Status expected = ExpectExecOutput(output, "half\n", "", 0);
  if (!expected.ok()) {
    return Mismatch(absl::StrCat(
        "`cat` with stdin then a half-close of the stream (which closes "
        "stdin): ",
        expected.message()));
  }
  return absl::OkStatus();
}

// Deterministic bytes for the 100 MB check (xorshift64*).
class ByteSource {
 public:
  void Fill(std::string& buffer) {
    for (size_t i = 0; i < buffer.size(); i += 8) {
      state_ ^= state_ >> 12;
      state_ ^= state_ << 25;
      state_ ^= state_ >> 27;
      uint64_t word = state_ * 0x2545F4914F6CDD1DULL;
      for (size_t j = i; j < i + 8 && j < buffer.size(); ++j) {
        buffer[j] = static_cast<char>(word & 0xff);
        word >>= 8;
      }
    }
  }

 private:
  uint64_t state_ = 0x9E3779B97F4A7C15ULL;
};

absl::Status ExecStreaming100MB(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StartSleeper(context, "exec-100mb"));
  const absl::Time deadline = absl::Now() + absl::Seconds(240);
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::ExecStream> stream,
      OpenExec(context, task.id(), {"cat"}, /*tty=*/false, deadline));

  // One thread sends stdin while this one reads stdout, so that neither
  // side's flow control stops the other.
  Sha256 sent_hash;
  uint64_t sent = 0;
  absl::Status send_status;
  std::thread sender([&] {
    ByteSource source;
    std::string chunk(kMaxFrame, '\0');
    while (sent < kBigExecBytes) {
      chunk.resize(std::min<uint64_t>(kMaxFrame, kBigExecBytes - sent));
      source.Fill(chunk);
      sent_hash.Update(chunk);
      send_status = Send(*stream, StdinFrame(chunk), deadline);
      if (!send_status.ok()) return;
      sent += chunk.size();
    }
    send_status = Send(*stream, StdinCloseFrame(), deadline);
    // This thread writes: it half-closes too (the reader must not).
    if (send_status.ok()) send_status = stream->WritesDone();
  });
  Sha256 received_hash;
  absl::StatusOr<ExecOutput> output =
      ReadExec(*stream, deadline, /*half_closed=*/true, &received_hash);
  if (!output.ok()) stream->Cancel();  // unblocks the sender
  sender.join();
  if (!output.ok()) return output.status();
  if (!send_status.ok()) {
    return absl::Status(send_status.code(),
                        absl::StrCat("sending stdin after ", sent,
                                     " bytes: ", send_status.message()));
  }
  CONFORMANCE_RETURN_IF_ERROR(ExpectWellFramed(*output));
  const std::string want = Sha256::Hex(sent_hash.Finish());
  const std::string got = Sha256::Hex(received_hash.Finish());
  std::vector<std::string> problems;
  if (output->stdout_bytes != kBigExecBytes) {
    problems.push_back(absl::StrCat("stdout carried ", output->stdout_bytes,
                                    " bytes, want ", kBigExecBytes));
  }
  if (got != want) {
    problems.push_back(
        absl::StrCat("stdout's SHA-256 is ", got, ", stdin's ", want));
  }
  if (output->exit->exit_code() != 0 || output->exit->signal() != 0) {
    problems.push_back(absl::StrCat("exit ", DescribeExit(*output->exit),
                                    ", want exit_code 0"));
  }
  if (!output->stderr_data.empty()) {
    problems.push_back(
        absl::StrCat("stderr ", Quote(output->stderr_data), ", want none"));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(
      absl::StrCat("100 MiB through `cat`: ", absl::StrJoin(problems, "; ")));
}

absl::Status ExecStreamingTty(Context& context) {
  // Reads a line (so that the resizes come first), then waits (bounded)
  // for the latest size to apply, prints it and two lines.
  constexpr absl::string_view kScript =
      "read line; i=0; while [ $i -lt 200 ]; do s=$(stty size); "
      "[ \"$s\" = \"31 97\" ] && break; i=$((i+1)); sleep 0.05; done; "
      "echo \"size $s\"; printf 'a\\nb\\n'";
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StartSleeper(context, "exec-tty"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::ExecStream> stream,
      OpenExec(context, task.id(), {"/bin/sh", "-c", std::string(kScript)},
               /*tty=*/true, deadline));
  // Several resizes in a row, the latest wins; stdin must still flow.
  CONFORMANCE_RETURN_IF_ERROR(Send(*stream, ResizeFrame(10, 20), deadline));
  CONFORMANCE_RETURN_IF_ERROR(Send(*stream, ResizeFrame(20, 40), deadline));
  CONFORMANCE_RETURN_IF_ERROR(Send(*stream, ResizeFrame(31, 97), deadline));
  CONFORMANCE_RETURN_IF_ERROR(Send(*stream, StdinFrame("go\n"), deadline));
  CONFORMANCE_ASSIGN_OR_RETURN(ExecOutput output, ReadExec(*stream, deadline));
  CONFORMANCE_RETURN_IF_ERROR(ExpectWellFramed(output));
  std::vector<std::string> problems;
  if (!absl::StrContains(output.stdout_data, "size 31 97\r\n")) {
    problems.push_back(absl::StrCat(
        "after resizes to 31x97, `stty size` did not print \"31 97\" "
        "followed by \\r\\n: output ",
        Quote(output.stdout_data)));
  }
  if (!absl::StrContains(output.stdout_data, "a\r\nb\r\n")) {
    problems.push_back(absl::StrCat("lines do not end in \\r\\n: output ",
                                    Quote(output.stdout_data)));
  }
  for (size_t i = 0; i < output.stdout_data.size(); ++i) {
    if (output.stdout_data[i] == '\n' &&
        (i == 0 || output.stdout_data[i - 1] != '\r')) {
      problems.push_back(absl::StrCat("a bare \\n at byte ", i, " of ",
                                      Quote(output.stdout_data)));
      break;
    }
  }
  if (!output.stderr_data.empty()) {
    problems.push_back(
        absl::StrCat("with a TTY everything comes as stdout, "
                     "but stderr carried ",
                     Quote(output.stderr_data)));
  }
  if (output.exit->exit_code() != 0 || output.exit->signal() != 0) {
    problems.push_back(absl::StrCat("exit ", DescribeExit(*output.exit),
                                    ", want exit_code 0"));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrJoin(problems, "; "));
}

// --- AttachTask.

// Reads an attach's output until `done` says so or the call ends (then
// `*ended`); the deadline bounds it.
absl::Status ReadAttach(host::AttachStream& stream, absl::Time deadline,
                        std::string* out, std::string* err,
                        const std::function<bool()>& done, bool* ended) {
  *ended = false;
  while (!done()) {
    absl::StatusOr<std::optional<driver::AttachTaskResponse>> read =
        stream.Read(deadline);
    if (!read.ok()) {
      return absl::Status(
          read.status().code(),
          absl::StrCat(read.status().message(), " (after stdout ", Quote(*out),
                       ", stderr ", Quote(*err), ")"));
    }
    if (!read->has_value()) {
      *ended = true;
      return absl::OkStatus();
    }
    *out += (*read)->stdout();
    *err += (*read)->stderr();
  }
  return absl::OkStatus();
}

driver::AttachTaskRequest AttachSetupFrame(const std::string& task_id,
                                           bool want_stdin) {
  driver::AttachTaskRequest request;
  request.mutable_setup()->set_task_id(task_id);
  request.mutable_setup()->set_stdin(want_stdin);
  request.mutable_setup()->mutable_terminal_size()->set_rows(24);
  request.mutable_setup()->mutable_terminal_size()->set_columns(80);
  return request;
}

absl::Status AttachTty(Context& context) {
  // Prints before any attach (the first attach must get it), reads a line,
  // then waits (bounded) for the latest size and prints it.
  constexpr absl::string_view kScript =
      "echo ready; read line; echo \"got=$line\"; i=0; "
      "while [ $i -lt 200 ]; do s=$(stty size); "
      "[ \"$s\" = \"31 97\" ] && break; i=$((i+1)); sleep 0.05; done; "
      "echo \"size $s\"";
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               context.ShellTask("attach-tty", kScript));
  task.set_tty(true);
  task.set_stdin_open(true);
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::AttachStream> stream,
      context.driver().AttachTask(context.RpcUntil(deadline)));
  CONFORMANCE_RETURN_IF_ERROR(
      stream->Write(AttachSetupFrame(task.id(), /*want_stdin=*/true)));
  std::string out, err;
  bool ended = false;
  CONFORMANCE_RETURN_IF_ERROR(ReadAttach(
      *stream, deadline, &out, &err,
      [&] { return absl::StrContains(out, "ready\r\n"); }, &ended));
  if (ended) {
    return Mismatch(absl::StrCat(
        "the attach ended before the task read its stdin; output ", Quote(out),
        " (the first attach must get the output written before "
        "it: \"ready\\r\\n\")"));
  }
  driver::AttachTaskRequest resize;
  resize.mutable_resize()->set_rows(31);
  resize.mutable_resize()->set_columns(97);
  CONFORMANCE_RETURN_IF_ERROR(stream->Write(resize));
  driver::AttachTaskRequest line;
  line.set_stdin("hello\n");
  CONFORMANCE_RETURN_IF_ERROR(stream->Write(line));
  CONFORMANCE_RETURN_IF_ERROR(ReadAttach(
      *stream, deadline, &out, &err, [] { return false; }, &ended));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               context.WaitTask(task.id()));
  std::vector<std::string> problems;
  if (!absl::StrContains(out, "got=hello\r\n")) {
    problems.push_back(absl::StrCat(
        "stdin \"hello\\n\" did not reach the task's `read`: output ",
        Quote(out)));
  }
  if (!absl::StrContains(out, "size 31 97\r\n")) {
    problems.push_back(absl::StrCat(
        "after a resize to 31x97, `stty size` did not print \"31 97\": "
        "output ",
        Quote(out)));
  }
  if (!err.empty()) {
    problems.push_back(absl::StrCat(
        "with a TTY everything comes as stdout, but stderr carried ",
        Quote(err)));
  }
  if (exit.exit_code() != 0 || exit.signal() != 0) {
    problems.push_back(
        absl::StrCat("exit ", DescribeExit(exit), ", want exit_code 0"));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrJoin(problems, "; "));
}

absl::Status AttachStdin(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               context.ShellTask("attach-stdin", "exec cat"));
  task.set_stdin_open(true);
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::AttachStream> stream,
      context.driver().AttachTask(context.RpcUntil(deadline)));
  CONFORMANCE_RETURN_IF_ERROR(
      stream->Write(AttachSetupFrame(task.id(), /*want_stdin=*/true)));
  for (absl::string_view data : {"hello\n", "world\n"}) {
    driver::AttachTaskRequest request;
    request.set_stdin(std::string(data));
    CONFORMANCE_RETURN_IF_ERROR(stream->Write(request));
  }
  driver::AttachTaskRequest close;
  close.mutable_stdin_close();
  CONFORMANCE_RETURN_IF_ERROR(stream->Write(close));
  std::string out, err;
  bool ended = false;
  CONFORMANCE_RETURN_IF_ERROR(ReadAttach(
      *stream, deadline, &out, &err, [] { return false; }, &ended));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               context.WaitTask(task.id()));
  std::vector<std::string> problems;
  if (out != "hello\nworld\n") {
    problems.push_back(absl::StrCat("`cat` gave back ", Quote(out),
                                    ", want \"hello\\nworld\\n\""));
  }
  if (exit.exit_code() != 0 || exit.signal() != 0) {
    problems.push_back(absl::StrCat(
        "exit ", DescribeExit(exit),
        ", want exit_code 0 (stdin_close must end `cat`'s stdin)"));
  }
  // A task without stdin_open refuses an attach asking for stdin.
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig plain,
                               StartSleeper(context, "attach-no-stdin"));
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::AttachStream> refused,
      context.driver().AttachTask(context.RpcUntil(deadline)));
  (void)refused->Write(AttachSetupFrame(plain.id(), /*want_stdin=*/true));
  const absl::Status status = refused->Finish();
  if (!absl::IsFailedPrecondition(status) ||
      !absl::StrContains(status.message(), plain.id())) {
    problems.push_back(absl::StrCat(
        "an attach asking for the stdin of a task without stdin_open gave ",
        status.ToString(), ", want FAILED_PRECONDITION naming the task"));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrJoin(problems, "; "));
}

absl::Status UnknownTaskNotFound(Context& context) {
  const std::string id = absl::StrFormat(
      "no-such-task-%016x", absl::Uniform<uint64_t>(absl::BitGen()));
  const driver::DriverCapabilities& capabilities = *context.capabilities();
  std::vector<std::pair<std::string, std::function<absl::Status()>>> calls;
  calls.emplace_back(
      "WaitTask", [&] { return context.WaitTask(id, kRpcTimeout).status(); });
  calls.emplace_back("StopTask", [&] {
    return context.StopTask(id, "SIGTERM", absl::Seconds(1));
  });
  calls.emplace_back("InspectTask",
                     [&] { return context.InspectTask(id).status(); });
  calls.emplace_back("DestroyTask", [&] {
    driver::DestroyTaskRequest request;
    request.set_task_id(id);
    request.set_force(true);
    return context.driver().DestroyTask(request, context.Rpc()).status();
  });
  if (capabilities.send_signals()) {
    calls.emplace_back("SignalTask", [&] {
      driver::SignalTaskRequest request;
      request.set_task_id(id);
      request.set_signal("SIGTERM");
      return context.driver().SignalTask(request, context.Rpc()).status();
    });
  }
  if (capabilities.exec()) {
    calls.emplace_back("ExecTask", [&] {
      driver::ExecTaskRequest request;
      request.set_task_id(id);
      request.add_command("true");
      return context.driver().ExecTask(request, context.Rpc()).status();
    });
  }
  if (capabilities.stats()) {
    calls.emplace_back("TaskStats", [&]() -> absl::Status {
      driver::TaskStatsRequest request;
      request.set_task_id(id);
      CONFORMANCE_ASSIGN_OR_RETURN(
          std::unique_ptr<host::TaskStatsStream> stream,
          context.driver().TaskStats(request, context.Rpc()));
      absl::StatusOr<std::optional<stats::TaskResourceUsage>> next =
          stream->Next(absl::Now() + kRpcTimeout);
      return next.status();
    });
  }
  if (capabilities.exec_streaming()) {
    calls.emplace_back("ExecTaskStreaming", [&]() -> absl::Status {
      const absl::Time deadline = absl::Now() + kRpcTimeout;
      CONFORMANCE_ASSIGN_OR_RETURN(
          std::unique_ptr<host::ExecStream> stream,
          OpenExec(context, id, {"true"}, /*tty=*/false, deadline));
      return ReadExec(*stream, deadline).status();
    });
  }
  std::vector<std::string> problems;
  for (const auto& [name, call] : calls) {
    const absl::Status status = call();
    const absl::Status expected =
        ExpectError(status, absl::StatusCode::kNotFound, id, id, name);
    if (!expected.ok()) problems.push_back(std::string(expected.message()));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrCat("unknown task id ", id, ": ",
                               absl::StrJoin(problems, "; ")));
}

absl::Status MissingCommand(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               context.TaskWithoutCommand("no-program"));
  const absl::Status started = context.StartTask(task).status();
  CONFORMANCE_RETURN_IF_ERROR(ExpectError(
      started, absl::StatusCode::kInvalidArgument, task.id(), "command",
      "StartTask of a driver config without \"command\""));
  return ExpectError(context.InspectTask(task.id()).status(),
                     absl::StatusCode::kNotFound, task.id(), "",
                     "InspectTask of the refused task (nothing of it may "
                     "be left)");
}

absl::Status TaskStatsPluginKilled(Context& context) {
  const bool recover = context.capabilities()->recover();
  // Without recover the task cannot be stopped after the kill: it must end
  // by itself.
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("stats-killed",
                        recover ? "exec sleep 300" : "exec sleep 20"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  driver::TaskStatsRequest request;
  request.set_task_id(task.id());
  request.mutable_interval()->set_seconds(1);
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::TaskStatsStream> stream,
      context.driver().TaskStats(request, context.Rpc(absl::Seconds(60))));
  absl::StatusOr<std::optional<stats::TaskResourceUsage>> first =
      stream->Next(absl::Now() + absl::Seconds(5));
  if (!first.ok()) return first.status();
  if (!first->has_value()) {
    return Mismatch("the stream ended (OK) before its first sample");
  }
  context.KillPlugin();
  absl::StatusOr<std::optional<stats::TaskResourceUsage>> next =
      stream->Next(absl::Now() + absl::Seconds(5));
  // The plugin is relaunched for the checks that follow (and to destroy
  // the task, which the clean-up recovers first).
  const absl::Status relaunched = context.EnsurePlugin();
  if (next.ok()) {
    return Mismatch(
        absl::StrCat("after the plugin was killed (SIGKILL), TaskStats ",
                     next->has_value() ? "gave another sample" : "ended OK",
                     "; want ErrPluginShutdown"));
  }
  if (!host::IsPluginShutdown(next.status())) {
    return Mismatch(absl::StrCat(
        "after the plugin was killed (SIGKILL), TaskStats ended with ",
        DescribeError(next.status()), "; want ErrPluginShutdown"));
  }
  if (!relaunched.ok()) {
    return absl::Status(
        relaunched.code(),
        absl::StrCat("relaunching the plugin: ", relaunched.message()));
  }
  return absl::OkStatus();
}

absl::Status RecoverTask(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig running,
                               StartSleeper(context, "recover-running"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig exited,
                               context.ShellTask("recover-exited", "exit 3"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(exited).status());
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult before,
                               context.WaitTask(exited.id()));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(before, 3, 0, "WaitTask of `exit 3`"));

  context.KillPlugin();
  CONFORMANCE_RETURN_IF_ERROR(context.EnsurePlugin());

  driver::RecoverTaskRequest request;
  *request.mutable_handle() = *context.HandleOf(running.id());
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::RecoverTaskResponse recovered,
      context.driver().RecoverTask(request, context.Rpc(absl::Seconds(30))));
  CONFORMANCE_RETURN_IF_ERROR(ExpectState(
      recovered.status(), driver::TASK_STATE_RUNNING,
      "(RecoverTask's status) of a running task after the plugin was killed "
      "and relaunched"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskStatus status,
                               context.InspectTask(running.id()));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectState(status, driver::TASK_STATE_RUNNING, "after RecoverTask"));

  *request.mutable_handle() = *context.HandleOf(exited.id());
  CONFORMANCE_ASSIGN_OR_RETURN(
      recovered,
      context.driver().RecoverTask(request, context.Rpc(absl::Seconds(30))));
  CONFORMANCE_RETURN_IF_ERROR(ExpectState(
      recovered.status(), driver::TASK_STATE_EXITED,
      "(RecoverTask's status) of a task that exited before the plugin was "
      "killed"));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectExit(recovered.status().exit_result(), 3, 0,
                 "RecoverTask's exit_result of `exit 3`"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult after,
                               context.WaitTask(exited.id(), kRpcTimeout));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectExit(after, 3, 0, "WaitTask of the recovered `exit 3`"));

  CONFORMANCE_RETURN_IF_ERROR(
      context.StopTask(running.id(), "SIGTERM", absl::Seconds(5)));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult stopped,
                               context.WaitTask(running.id()));
  return ExpectExit(stopped, 0, 15,
                    "WaitTask after StopTask(SIGTERM) of the recovered task");
}

// The handle InspectTask gives with `task` (InspectTaskResponse.handle);
// nullopt when it gives none. A handle naming another task is a Mismatch.
absl::StatusOr<std::optional<driver::TaskHandle>> InspectedHandle(
    Context& context, const driver::TaskConfig& task) {
  driver::InspectTaskRequest request;
  request.set_task_id(task.id());
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::InspectTaskResponse inspected,
      context.driver().InspectTask(request, context.Rpc()));
  if (!inspected.has_handle()) return std::nullopt;
  if (inspected.handle().config().id() != task.id()) {
    return Mismatch(absl::StrCat(
        "InspectTask of task ", task.id(), " gave a handle whose config.id is ",
        Quote(inspected.handle().config().id()), "; want the task's id"));
  }
  return inspected.handle();
}

// A node that never got StartTask's reply adopts the run with the handle
// InspectTask gives, and recovers it with that handle after the driver's
// next restart (DRIVERS.md, "InspectTask's handle").
absl::Status InspectHandleRecovers(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig running,
                               StartSleeper(context, "inspect-handle-running"));
  CONFORMANCE_ASSIGN_OR_RETURN(std::optional<driver::TaskHandle> of_running,
                               InspectedHandle(context, running));
  if (!of_running.has_value()) {
    return SkipCheck(
        "InspectTask gives no handle (InspectTaskResponse.handle; the SDK's "
        "Driver::HandleOf)");
  }
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig exited,
      context.ShellTask("inspect-handle-exited", "exit 5"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(exited).status());
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult before,
                               context.WaitTask(exited.id()));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(before, 5, 0, "WaitTask of `exit 5`"));
  CONFORMANCE_ASSIGN_OR_RETURN(std::optional<driver::TaskHandle> of_exited,
                               InspectedHandle(context, exited));
  if (!of_exited.has_value()) {
    return Mismatch(
        "InspectTask gave a handle with a running task but none with an "
        "exited one (a node adopts an exited run too)");
  }

  context.KillPlugin();
  CONFORMANCE_RETURN_IF_ERROR(context.EnsurePlugin());

  driver::RecoverTaskRequest request;
  *request.mutable_handle() = *of_running;
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::RecoverTaskResponse recovered,
      context.driver().RecoverTask(request, context.Rpc(absl::Seconds(30))));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectState(recovered.status(), driver::TASK_STATE_RUNNING,
                  "(RecoverTask's status, from InspectTask's handle) of a "
                  "running task after the plugin was killed and relaunched"));
  *request.mutable_handle() = *of_exited;
  CONFORMANCE_ASSIGN_OR_RETURN(
      recovered,
      context.driver().RecoverTask(request, context.Rpc(absl::Seconds(30))));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectState(recovered.status(), driver::TASK_STATE_EXITED,
                  "(RecoverTask's status, from InspectTask's handle) of a "
                  "task that exited before the plugin was killed"));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectExit(recovered.status().exit_result(), 5, 0,
                 "RecoverTask's exit_result (from InspectTask's handle) of "
                 "`exit 5`"));

  CONFORMANCE_RETURN_IF_ERROR(
      context.StopTask(running.id(), "SIGTERM", absl::Seconds(5)));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult stopped,
                               context.WaitTask(running.id()));
  return ExpectExit(stopped, 0, 15,
                    "WaitTask after StopTask(SIGTERM) of the task recovered "
                    "from InspectTask's handle");
}

absl::Status Shutdown(Context& context) {
  const bool recover = context.capabilities()->recover();
  std::optional<driver::TaskConfig> task;
  if (recover) {
    CONFORMANCE_ASSIGN_OR_RETURN(task, StartSleeper(context, "shutdown"));
  }
  const host::PluginExit exit = context.StopPlugin();
  if (!exit.status_known || exit.exit_code != 0 || exit.signal != 0) {
    return Mismatch(absl::StrCat(
        "after PluginService.Shutdown the plugin ", exit.ToString(),
        "; want exit code 0 within the grace period (",
        absl::FormatDuration(host::PluginProcess::kDefaultStopGrace), ")"));
  }
  CONFORMANCE_RETURN_IF_ERROR(context.EnsurePlugin());
  if (!recover) return absl::OkStatus();
  driver::RecoverTaskRequest request;
  *request.mutable_handle() = *context.HandleOf(task->id());
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::RecoverTaskResponse recovered,
      context.driver().RecoverTask(request, context.Rpc(absl::Seconds(30))));
  return ExpectState(recovered.status(), driver::TASK_STATE_RUNNING,
                     "(RecoverTask's status) of a task after the plugin "
                     "shut down (its tasks keep running)");
}

// The checks of each call, in the order they run.
std::vector<Check> CallChecks() {
  return {
      {"cookie_refused",
       "started by hand without the magic cookie, the binary exits non-zero "
       "with a message on stderr, no handshake line and no socket",
       std::nullopt, /*needs_plugin=*/false, &CookieRefused},
      {"health", "grpc.health.v1 Check(\"plugin\") is SERVING", std::nullopt,
       true, &Health},
      {"plugin_info", "GetPluginInfo: type PLUGIN_TYPE_DRIVER and a name",
       std::nullopt, true, &PluginInfo},
      {"api_versions",
       "PluginService.GetCapabilities lists berth.plugin.v1 and "
       "berth.driver.v1",
       std::nullopt, true, &ApiVersions},
      {"config_schema",
       "the task schema has \"command\" (string, required) and \"args\" "
       "(string list)",
       std::nullopt, true, &ConfigSchema},
      {"capabilities",
       "DriverService.GetCapabilities is consistent (fs_isolation set; "
       "exec_tty only with exec_streaming)",
       std::nullopt, true, &Capabilities},
      {"fingerprint",
       "the first fingerprint within 5s: HEALTHY, or a health with a "
       "description",
       std::nullopt, true, &Fingerprint},
      {"start_wait_inspect",
       "StartTask gives a handle; InspectTask RUNNING, WaitTask exit 0, "
       "InspectTask EXITED with its result",
       std::nullopt, true, &StartWaitInspect},
      {"exit_code", "`exit 3` gives exit_code 3", std::nullopt, true,
       &ExitCode},
      {"exit_signal", "`kill -KILL $$` gives signal 9 and exit_code 0",
       std::nullopt, true, &ExitSignal},
      {"wait_twice",
       "two concurrent WaitTask calls and one after the exit give the same "
       "result",
       std::nullopt, true, &WaitTwice},
      {"stop_signal",
       "StopTask(SIGTERM) ends a task by signal 15; stopping it again "
       "succeeds",
       std::nullopt, true, &StopSignal},
      {"stop_timeout_kill",
       "a task ignoring SIGTERM is killed (signal 9) after StopTask's "
       "timeout, not before",
       std::nullopt, true, &StopTimeoutKill},
      {"destroy",
       "DestroyTask of a running task: FAILED_PRECONDITION without force; "
       "with force it is gone (NOT_FOUND)",
       std::nullopt, true, &Destroy},
      {"signal_task", "SignalTask(SIGUSR1) reaches the task's trap",
       Capability::kSendSignals, true, &SignalTask},
      {"task_events", "TaskEvents streams an event of a started task",
       std::nullopt, true, &TaskEvents},
      {"task_stats",
       "TaskStats: first sample within two intervals, measured fields, "
       "total_ticks carried",
       Capability::kStats, true, &TaskStats},
      {"exec_task",
       "ExecTask returns stdout, stderr and exit code, in the task's "
       "environment",
       Capability::kExec, true, &ExecTask},
      {"exec_streaming_output",
       "ExecTaskStreaming: stdout \"out\", stderr \"err\", exit 43, the exit "
       "frame last",
       Capability::kExecStreaming, true, &ExecStreamingOutput},
      {"exec_streaming_stdin",
       "ExecTaskStreaming: stdin then stdin_close (and then a half-close) "
       "through `cat`",
       Capability::kExecStreaming, true, &ExecStreamingStdin},
      {"exec_streaming_100mb",
       "ExecTaskStreaming: 100 MiB through `cat` with the same SHA-256",
       Capability::kExecStreaming, true, &ExecStreaming100MB},
      {"exec_streaming_tty",
       "ExecTaskStreaming with a TTY: resizes then `stty size` prints 31 97; "
       "lines end in \\r\\n",
       Capability::kExecTty, true, &ExecStreamingTty},
      {"attach_tty",
       "AttachTask to a tty, stdin_open task: the output written before it "
       "first, stdin to its `read`, a resize seen by `stty size`, the call "
       "ending OK at the task's end",
       Capability::kAttach, true, &AttachTty},
      {"attach_stdin",
       "AttachTask to a stdin_open `cat`: stdin back as stdout, stdin_close "
       "ends it (exit 0); stdin of a task without stdin_open is "
       "FAILED_PRECONDITION",
       Capability::kAttach, true, &AttachStdin},
      {"unknown_task_not_found",
       "every task call with an unknown id is NOT_FOUND naming the id",
       std::nullopt, true, &UnknownTaskNotFound},
      {"missing_command",
       "a driver config without \"command\" is INVALID_ARGUMENT naming it, "
       "and leaves nothing",
       std::nullopt, true, &MissingCommand},
      {"task_stats_plugin_killed",
       "an open TaskStats stream ends with ErrPluginShutdown when the plugin "
       "is killed (SIGKILL); the plugin is relaunched",
       Capability::kStats, true, &TaskStatsPluginKilled},
      {"recover_task",
       "after the plugin is killed and relaunched, RecoverTask finds a "
       "running task RUNNING (then stops it) and an exited one EXITED with "
       "its code",
       Capability::kRecover, true, &RecoverTask},
      {"inspect_handle_recovers",
       "InspectTask's handle (when it gives one) names the task, and after "
       "the plugin is killed and relaunched RecoverTask takes it: a running "
       "task RUNNING, an exited one EXITED with its code",
       Capability::kRecover, true, &InspectHandleRecovers},
      {"shutdown",
       "PluginService.Shutdown: the plugin exits 0 within the grace period; "
       "its tasks keep running (with recover)",
       std::nullopt, true, &Shutdown},
  };
}

}  // namespace

const std::vector<Check>& AllChecks() {
  static const auto* const checks = [] {
    auto* all = new std::vector<Check>(CallChecks());
    for (Check& check : NodeContractChecks()) all->push_back(check);
    for (Check& check : IsolationChecks()) all->push_back(check);
    return all;
  }();
  return *checks;
}

}  // namespace berth::conformance
