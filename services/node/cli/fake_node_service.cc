#include "services/node/cli/fake_node_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace berth::cli::testing {
namespace {

namespace driverpb = ::berth::driver::v1;
namespace nodepb = ::berth::node::v1;

grpc::Status NotFound(const std::string& name) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("no task \"", name, "\""));
}

}  // namespace

FakeNodeService::FakeNodeService() {
  run_outcome_.set_id("00112233445566778899aabbccddeeff");
  run_outcome_.set_state(nodepb::TASK_STATE_EXITED);
  run_outcome_.mutable_exit_result()->set_exit_code(0);
}

void FakeNodeService::AddTask(const nodepb::Task& task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(task);
}

void FakeNodeService::SetRunOutcome(const nodepb::Task& outcome,
                                    int logs_calls) {
  absl::MutexLock lock(&mu_);
  run_outcome_ = outcome;
  run_outcome_logs_calls_ = logs_calls;
}

void FakeNodeService::SetLogs(const std::string& task_id,
                              std::vector<nodepb::TaskLogsResponse> chunks) {
  absl::MutexLock lock(&mu_);
  logs_[task_id] = std::move(chunks);
}

void FakeNodeService::SetStats(const std::string& task_id,
                               std::vector<nodepb::TaskStatsResponse> samples,
                               bool hold_open) {
  absl::MutexLock lock(&mu_);
  stats_[task_id] = {std::move(samples), hold_open};
}

void FakeNodeService::EndHeldStreams() {
  absl::MutexLock lock(&mu_);
  end_held_streams_ = true;
}

void FakeNodeService::SetNodeStatus(const nodepb::GetNodeStatusResponse& s) {
  absl::MutexLock lock(&mu_);
  node_status_ = s;
}

void FakeNodeService::FailCalls(const std::string& method,
                                const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  failures_[method] = status;
}

void FakeNodeService::SetExecHandler(ExecHandler handler) {
  absl::MutexLock lock(&mu_);
  exec_handler_ = std::move(handler);
}

void FakeNodeService::SetExecScript(
    std::vector<driverpb::ExecTaskStreamingResponse> output,
    const driverpb::ExitResult& exit) {
  absl::MutexLock lock(&mu_);
  exec_output_ = std::move(output);
  exec_exit_ = exit;
}

std::vector<nodepb::RunTaskRequest> FakeNodeService::run_requests() const {
  absl::MutexLock lock(&mu_);
  return run_requests_;
}
std::vector<nodepb::ListTasksRequest> FakeNodeService::list_requests() const {
  absl::MutexLock lock(&mu_);
  return list_requests_;
}
std::vector<nodepb::StopTaskRequest> FakeNodeService::stop_requests() const {
  absl::MutexLock lock(&mu_);
  return stop_requests_;
}
std::vector<nodepb::RemoveTaskRequest> FakeNodeService::remove_requests()
    const {
  absl::MutexLock lock(&mu_);
  return remove_requests_;
}
std::vector<nodepb::TaskLogsRequest> FakeNodeService::logs_requests() const {
  absl::MutexLock lock(&mu_);
  return logs_requests_;
}
std::vector<nodepb::TaskStatsRequest> FakeNodeService::stats_requests() const {
  absl::MutexLock lock(&mu_);
  return stats_requests_;
}
std::vector<driverpb::ExecTaskStreamingRequest> FakeNodeService::exec_requests()
    const {
  absl::MutexLock lock(&mu_);
  return exec_requests_;
}
bool FakeNodeService::exec_half_closed() const {
  absl::MutexLock lock(&mu_);
  return exec_half_closed_;
}
void FakeNodeService::RecordExecRequest(
    const driverpb::ExecTaskStreamingRequest& request) {
  absl::MutexLock lock(&mu_);
  exec_requests_.push_back(request);
}

grpc::Status FakeNodeService::Failure(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(method);
  return it == failures_.end() ? grpc::Status::OK : it->second;
}

nodepb::Task* FakeNodeService::Find(const std::string& name) {
  nodepb::Task* by_prefix = nullptr;
  int prefix_matches = 0;
  for (nodepb::Task& task : tasks_) {
    if (task.id() == name || task.spec().name() == name) return &task;
    if (!name.empty() && absl::StartsWith(task.id(), name)) {
      by_prefix = &task;
      ++prefix_matches;
    }
  }
  return prefix_matches == 1 ? by_prefix : nullptr;
}

grpc::Status FakeNodeService::RunTask(grpc::ServerContext*,
                                      const nodepb::RunTaskRequest* request,
                                      nodepb::RunTaskResponse* response) {
  if (grpc::Status failure = Failure("RunTask"); !failure.ok()) return failure;
  absl::MutexLock lock(&mu_);
  run_requests_.push_back(*request);
  nodepb::Task outcome = run_outcome_;
  *outcome.mutable_spec() = request->spec();
  nodepb::Task task = outcome;
  task.clear_exit_result();
  task.clear_error();
  task.set_state(nodepb::TASK_STATE_RUNNING);
  tasks_.push_back(task);
  pending_outcomes_[task.id()] = {outcome, run_outcome_logs_calls_};
  *response->mutable_task() = task;
  response->mutable_task()->set_state(nodepb::TASK_STATE_PENDING);
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::ListTasks(grpc::ServerContext*,
                                        const nodepb::ListTasksRequest* request,
                                        nodepb::ListTasksResponse* response) {
  if (grpc::Status failure = Failure("ListTasks"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  list_requests_.push_back(*request);
  for (const nodepb::Task& task : tasks_) {
    if (request->all() || task.state() == nodepb::TASK_STATE_RUNNING) {
      *response->add_tasks() = task;
    }
  }
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::InspectTask(
    grpc::ServerContext*, const nodepb::InspectTaskRequest* request,
    nodepb::InspectTaskResponse* response) {
  if (grpc::Status failure = Failure("InspectTask"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  const nodepb::Task* task = Find(request->task_id());
  if (task == nullptr) return NotFound(request->task_id());
  *response->mutable_task() = *task;
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::StopTask(grpc::ServerContext*,
                                       const nodepb::StopTaskRequest* request,
                                       nodepb::StopTaskResponse* response) {
  if (grpc::Status failure = Failure("StopTask"); !failure.ok()) return failure;
  absl::MutexLock lock(&mu_);
  stop_requests_.push_back(*request);
  nodepb::Task* task = Find(request->task_id());
  if (task == nullptr) return NotFound(request->task_id());
  task->set_state(nodepb::TASK_STATE_EXITED);
  task->set_stopped(true);
  task->mutable_exit_result()->set_exit_code(0);
  task->mutable_exit_result()->set_signal(request->signal() == "SIGINT" ? 2
                                          : request->signal() == "SIGKILL"
                                              ? 9
                                              : 15);
  pending_outcomes_.erase(task->id());
  *response->mutable_task() = *task;
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::RemoveTask(
    grpc::ServerContext*, const nodepb::RemoveTaskRequest* request,
    nodepb::RemoveTaskResponse*) {
  if (grpc::Status failure = Failure("RemoveTask"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  remove_requests_.push_back(*request);
  nodepb::Task* task = Find(request->task_id());
  if (task == nullptr) return NotFound(request->task_id());
  if (task->state() == nodepb::TASK_STATE_RUNNING && !request->force()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("task ", task->id(),
                                     " is running: stop it first or force"));
  }
  const std::string id = task->id();
  for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
    if (it->id() == id) {
      tasks_.erase(it);
      break;
    }
  }
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::ExecTaskStreaming(grpc::ServerContext* context,
                                                ExecStream* stream) {
  if (grpc::Status failure = Failure("ExecTaskStreaming"); !failure.ok()) {
    return failure;
  }
  ExecHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = exec_handler_;
  }
  if (handler) return handler(context, stream);
  return DefaultExec(context, stream);
}

grpc::Status FakeNodeService::DefaultExec(grpc::ServerContext*,
                                          ExecStream* stream) {
  driverpb::ExecTaskStreamingRequest request;
  if (!stream->Read(&request) || !request.has_setup()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first request must be the setup");
  }
  RecordExecRequest(request);
  const bool tty = request.setup().tty();
  {
    absl::MutexLock lock(&mu_);
    if (Find(request.setup().task_id()) == nullptr) {
      return NotFound(request.setup().task_id());
    }
  }
  std::vector<driverpb::ExecTaskStreamingResponse> output;
  driverpb::ExecTaskStreamingResponse exit;
  {
    absl::MutexLock lock(&mu_);
    output = exec_output_;
    *exit.mutable_exit() = exec_exit_;
  }
  for (const auto& frame : output) stream->Write(frame);
  bool stdin_closed = false;
  while (!stdin_closed) {
    if (!stream->Read(&request)) {
      absl::MutexLock lock(&mu_);
      exec_half_closed_ = true;
      break;
    }
    RecordExecRequest(request);
    if (request.has_stdin()) {
      driverpb::ExecTaskStreamingResponse echo;
      echo.set_stdout(request.stdin());
      stream->Write(echo);
    }
    stdin_closed = request.has_stdin_close();
  }
  // Without a terminal the caller half-closes after stdin_close.
  if (stdin_closed && !tty) {
    while (stream->Read(&request)) RecordExecRequest(request);
    absl::MutexLock lock(&mu_);
    exec_half_closed_ = true;
  }
  stream->Write(exit);
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::TaskStats(
    grpc::ServerContext* context, const nodepb::TaskStatsRequest* request,
    grpc::ServerWriter<nodepb::TaskStatsResponse>* writer) {
  if (grpc::Status failure = Failure("TaskStats"); !failure.ok()) {
    return failure;
  }
  StatsScript script;
  {
    absl::MutexLock lock(&mu_);
    stats_requests_.push_back(*request);
    if (Find(request->task_id()) == nullptr) {
      return NotFound(request->task_id());
    }
    script = stats_[request->task_id()];
  }
  for (const auto& sample : script.samples) {
    if (!writer->Write(sample)) return grpc::Status::OK;
  }
  while (script.hold_open && !context->IsCancelled()) {
    {
      absl::MutexLock lock(&mu_);
      if (end_held_streams_) break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::TaskLogs(
    grpc::ServerContext*, const nodepb::TaskLogsRequest* request,
    grpc::ServerWriter<nodepb::TaskLogsResponse>* writer) {
  if (grpc::Status failure = Failure("TaskLogs"); !failure.ok()) {
    return failure;
  }
  std::vector<nodepb::TaskLogsResponse> chunks;
  {
    absl::MutexLock lock(&mu_);
    logs_requests_.push_back(*request);
    const nodepb::Task* task = Find(request->task_id());
    if (task == nullptr) return NotFound(request->task_id());
    chunks = logs_[task->id()];
  }
  for (const auto& chunk : chunks) {
    if (!writer->Write(chunk)) break;
  }
  absl::MutexLock lock(&mu_);
  nodepb::Task* task = Find(request->task_id());
  if (task == nullptr) return grpc::Status::OK;
  auto pending = pending_outcomes_.find(task->id());
  if (pending != pending_outcomes_.end() &&
      --pending->second.logs_calls_left <= 0) {
    *task = pending->second.outcome;
    pending_outcomes_.erase(pending);
  }
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::GetNodeStatus(
    grpc::ServerContext*, const nodepb::GetNodeStatusRequest*,
    nodepb::GetNodeStatusResponse* response) {
  if (grpc::Status failure = Failure("GetNodeStatus"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  *response = node_status_;
  return grpc::Status::OK;
}

}  // namespace berth::cli::testing
