#include "plugins/sdk/fake_driver.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "plugins/sdk/proto_time.h"

namespace berth::plugin::testing {

DriverInfo FakeDriver::Info() const {
  return {"fake", "0.0.1", "a driver for the SDK's tests"};
}

v1::ConfigSchema FakeDriver::TaskConfigSchema() const {
  v1::ConfigSchema schema;
  v1::ConfigField* command = schema.add_fields();
  command->set_name("command");
  command->set_type(v1::CONFIG_FIELD_TYPE_STRING);
  command->set_required(true);
  v1::ConfigField* args = schema.add_fields();
  args->set_name("args");
  args->set_type(v1::CONFIG_FIELD_TYPE_STRING_LIST);
  return schema;
}

driver::v1::DriverCapabilities FakeDriver::Capabilities() const {
  driver::v1::DriverCapabilities capabilities;
  capabilities.set_send_signals(true);
  capabilities.set_exec_streaming(true);  // the SDK decides
  capabilities.set_exec_tty(true);
  capabilities.set_stats(true);
  return capabilities;
}

absl::StatusOr<driver::v1::StartTaskResponse> FakeDriver::StartTask(
    const driver::v1::TaskConfig& task) {
  absl::MutexLock lock(&mu_);
  if (tasks_.count(task.id()) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("task ", task.id(), " already exists"));
  }
  tasks_[task.id()].config = task;
  driver::v1::StartTaskResponse response;
  response.mutable_handle()->set_state(driver::v1::TASK_STATE_RUNNING);
  response.mutable_handle()->set_driver_state(
      absl::StrCat("fake-run:", task.id()));
  driver::v1::TaskEventsResponse event;
  event.set_task_id(task.id());
  event.set_message("started");
  PublishTaskEvent(event);
  return response;
}

absl::StatusOr<driver::v1::ExitResult> FakeDriver::WaitTask(
    const std::string& task_id, const CancelToken& cancel) {
  absl::MutexLock lock(&mu_);
  auto exited = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    auto it = tasks_.find(task_id);
    return it == tasks_.end() || it->second.exit.has_value();
  };
  while (!exited()) {
    if (cancel.IsCancelled()) {
      ++cancelled_waits_;
      return absl::CancelledError("cancelled");
    }
    mu_.AwaitWithTimeout(absl::Condition(&exited), absl::Milliseconds(10));
  }
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  }
  return *it->second.exit;
}

absl::Status FakeDriver::StopTask(const std::string& task_id, absl::Duration,
                                  int signal) {
  {
    absl::MutexLock lock(&mu_);
    if (tasks_.count(task_id) == 0) {
      return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
    }
    last_stop_signal_ = signal;
  }
  Exit(task_id, 128 + signal);
  return absl::OkStatus();
}

absl::Status FakeDriver::DestroyTask(const std::string& task_id, bool force) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  }
  if (!it->second.exit.has_value() && !force) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, " is running"));
  }
  tasks_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<driver::v1::TaskStatus> FakeDriver::InspectTask(
    const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  }
  driver::v1::TaskStatus status;
  status.set_id(task_id);
  status.set_state(it->second.exit.has_value()
                       ? driver::v1::TASK_STATE_EXITED
                       : driver::v1::TASK_STATE_RUNNING);
  if (it->second.exit.has_value()) {
    *status.mutable_exit_result() = *it->second.exit;
  }
  return status;
}

absl::StatusOr<driver::v1::TaskHandle> FakeDriver::HandleOf(
    const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  if (handle_mode_ == HandleMode::kUnimplemented) {
    return Driver::HandleOf(task_id);
  }
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  }
  driver::v1::TaskHandle handle;
  *handle.mutable_config() = it->second.config;
  handle.set_state(it->second.exit.has_value()
                       ? driver::v1::TASK_STATE_EXITED
                       : driver::v1::TASK_STATE_RUNNING);
  handle.set_driver_state(absl::StrCat("fake-run:", task_id));
  if (handle_mode_ == HandleMode::kOtherTask) {
    handle.mutable_config()->set_id(task_id + "-other");
  }
  return handle;
}

void FakeDriver::set_handle_mode(HandleMode mode) {
  absl::MutexLock lock(&mu_);
  handle_mode_ = mode;
}

absl::StatusOr<stats::v1::TaskResourceUsage> FakeDriver::TaskStats(
    const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  if (tasks_.count(task_id) == 0) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  }
  ++stats_samples_;
  stats::v1::TaskResourceUsage usage;
  usage.mutable_usage()->mutable_memory()->set_rss(stats_samples_);
  usage.mutable_usage()->mutable_memory()->add_measured(
      stats::v1::MEMORY_FIELD_RSS);
  return usage;
}

void FakeDriver::Exit(const std::string& task_id, int exit_code) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end() || it->second.exit.has_value()) return;
  driver::v1::ExitResult result;
  result.set_exit_code(exit_code);
  *result.mutable_exited_at() = ToProtoTimestamp(absl::Now());
  it->second.exit = result;
}

int FakeDriver::last_stop_signal() const {
  absl::MutexLock lock(&mu_);
  return last_stop_signal_;
}

int FakeDriver::stats_samples() const {
  absl::MutexLock lock(&mu_);
  return stats_samples_;
}

int FakeDriver::cancelled_waits() const {
  absl::MutexLock lock(&mu_);
  return cancelled_waits_;
}

namespace {

ExitStatus Exited(int code) {
  ExitStatus status;
  status.exit_code = code;
  return status;
}

// Copies stdin to `out` until its end; false if `out` broke.
bool Echo(const ExecOptions& options) {
  std::vector<char> buffer(20000);  // not a multiple of the frame size
  while (true) {
    const size_t n = options.in->Read(buffer.data(), buffer.size());
    if (n == 0) return true;
    if (!options.out->Write(absl::string_view(buffer.data(), n))) return false;
  }
}

int Argument(const ExecOptions& options, int fallback) {
  int value = fallback;
  if (options.command.size() > 1) {
    (void)absl::SimpleAtoi(options.command[1], &value);
  }
  return value;
}

}  // namespace

absl::StatusOr<ExitStatus> FakeExecDriver::ExecTaskStreaming(
    const ExecOptions& options) {
  const std::string& what = options.command[0];
  if (what == "echo") {
    Echo(options);
    return Exited(0);
  }
  if (what == "mixed") {
    options.out->Write("out");
    options.err->Write("err");
    return Exited(43);
  }
  if (what == "concurrent") {
    const int lines = Argument(options, 1000);
    auto write_lines = [&](ExecOutput* output, absl::string_view name) {
      for (int i = 0; i < lines; ++i) {
        // Lines of growing length, some longer than a frame.
        std::string line = absl::StrCat(name, " ", i, " ");
        line.append((i * 997) % 40000, '.');
        line.push_back('\n');
        if (!output->Write(line)) return;
      }
    };
    std::thread out_thread(write_lines, options.out, "out");
    std::thread err_thread(write_lines, options.err, "err");
    out_thread.join();
    err_thread.join();
    return Exited(7);
  }
  if (what == "big") {
    options.out->Write(std::string(Argument(options, 100000), 'x'));
    return Exited(0);
  }
  if (what == "resize-last") {
    Echo(options);
    std::optional<TerminalSize> latest = options.resizes->TakeLatest();
    options.err->Write(latest.has_value()
                           ? absl::StrCat(latest->rows, "x", latest->columns)
                           : "none");
    options.err->Write(options.resizes->TakeLatest().has_value() ? " again"
                                                                 : " empty");
    return Exited(0);
  }
  if (what == "wait-cancel") {
    wait_cancel_started_.Notify();
    while (!options.cancel->WaitFor(absl::Seconds(1))) {
    }
    absl::MutexLock lock(&exec_mu_);
    ++cancelled_execs_;
    return absl::CancelledError("the caller cancelled");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("command ", what, " is not known to the fake driver"));
}

int FakeExecDriver::cancelled_execs() const {
  absl::MutexLock lock(&exec_mu_);
  return cancelled_execs_;
}

absl::Status FakeRawExecDriver::ExecTaskStreamingRaw(ExecTaskStream* stream) {
  driver::v1::ExecTaskStreamingResponse response;
  response.set_stdout(absl::StrCat(
      "setup: ", absl::StrJoin(stream->setup().command(), " "), "\n"));
  if (!stream->Send(response)) return absl::OkStatus();
  driver::v1::ExecTaskStreamingRequest request;
  while (stream->Recv(&request)) {
    if (request.has_stdin_close()) break;
    if (request.frame_case() == driver::v1::ExecTaskStreamingRequest::kStdin) {
      response.set_stdout(request.stdin());
      if (!stream->Send(response)) return absl::OkStatus();
    }
  }
  stream->CloseRecv();
  response.mutable_exit()->set_exit_code(5);
  stream->Send(response);
  return absl::OkStatus();
}

}  // namespace berth::plugin::testing
