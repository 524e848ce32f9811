#include "services/node/cli/fake_node_service.h"

#include <algorithm>
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
namespace imagepb = ::berth::image::v1;
namespace nodepb = ::berth::node::v1;

grpc::Status NotFound(const std::string& name) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("no task \"", name, "\""));
}

grpc::Status NoImage(const std::string& reference) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("no image \"", reference, "\""));
}

// Enough of docker's normalisation for the tests: "busybox" is
// "docker.io/library/busybox:latest", "team/app" "docker.io/team/app:latest".
std::string Normalized(const std::string& reference) {
  std::string name = reference;
  const size_t slash = name.find('/');
  if (slash == std::string::npos) {
    name = absl::StrCat("docker.io/library/", name);
  } else if (name.find_first_of(".:") > slash && name.rfind("localhost/", 0)) {
    name = absl::StrCat("docker.io/", name);
  }
  const size_t last_slash = name.rfind('/');
  if (name.find('@') == std::string::npos &&
      name.find(':', last_slash) == std::string::npos) {
    absl::StrAppend(&name, ":latest");
  }
  return name;
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

void FakeNodeService::SetAttachHandler(AttachHandler handler) {
  absl::MutexLock lock(&mu_);
  attach_handler_ = std::move(handler);
}

void FakeNodeService::SetAttachScript(
    std::vector<driverpb::AttachTaskResponse> output,
    const driverpb::ExitResult& exit) {
  absl::MutexLock lock(&mu_);
  attach_output_ = std::move(output);
  attach_exit_ = exit;
}

driverpb::ExitResult FakeNodeService::EndRun(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  nodepb::Task* task = Find(task_id);
  if (task == nullptr) return driverpb::ExitResult();
  auto pending = pending_outcomes_.find(task->id());
  if (pending != pending_outcomes_.end()) {
    *task = pending->second.outcome;
    pending_outcomes_.erase(pending);
  }
  return task->exit_result();
}

std::vector<driverpb::AttachTaskRequest> FakeNodeService::attach_requests()
    const {
  absl::MutexLock lock(&mu_);
  return attach_requests_;
}
bool FakeNodeService::attach_cancelled() const {
  absl::MutexLock lock(&mu_);
  return attach_cancelled_;
}
void FakeNodeService::RecordAttachRequest(
    const driverpb::AttachTaskRequest& request) {
  absl::MutexLock lock(&mu_);
  attach_requests_.push_back(request);
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

grpc::Status FakeNodeService::AttachTask(grpc::ServerContext* context,
                                         AttachStream* stream) {
  if (grpc::Status failure = Failure("AttachTask"); !failure.ok()) {
    return failure;
  }
  AttachHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = attach_handler_;
  }
  if (handler) return handler(context, stream);
  return DefaultAttach(context, stream);
}

grpc::Status FakeNodeService::DefaultAttach(grpc::ServerContext* context,
                                            AttachStream* stream) {
  driverpb::AttachTaskRequest request;
  if (!stream->Read(&request) || !request.has_setup()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first request must be the setup");
  }
  RecordAttachRequest(request);
  const driverpb::AttachSetup setup = request.setup();
  std::vector<driverpb::AttachTaskResponse> output;
  {
    absl::MutexLock lock(&mu_);
    const nodepb::Task* task = Find(setup.task_id());
    if (task == nullptr) return NotFound(setup.task_id());
    if (setup.stdin() && !task->spec().stdin_open()) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("task ", setup.task_id(),
                       " has no stdin to attach to (started without -i)"));
    }
    if (task->state() != nodepb::TASK_STATE_RUNNING) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("task ", setup.task_id(), " is not running"));
    }
    output = attach_output_;
  }
  for (const auto& frame : output) stream->Write(frame);
  if (setup.stdin()) {
    while (true) {
      if (!stream->Read(&request)) {
        absl::MutexLock lock(&mu_);
        attach_cancelled_ = context->IsCancelled();
        return grpc::Status::CANCELLED;
      }
      RecordAttachRequest(request);
      if (request.has_stdin()) {
        driverpb::AttachTaskResponse echo;
        echo.set_stdout(request.stdin());
        stream->Write(echo);
      }
      if (request.has_stdin_close()) break;
    }
  }
  driverpb::AttachTaskResponse exit;
  {
    absl::MutexLock lock(&mu_);
    nodepb::Task* task = Find(setup.task_id());
    if (task == nullptr) return grpc::Status::OK;
    auto pending = pending_outcomes_.find(task->id());
    if (pending != pending_outcomes_.end()) {
      *task = pending->second.outcome;
      pending_outcomes_.erase(pending);
    } else {
      task->set_state(nodepb::TASK_STATE_EXITED);
      *task->mutable_exit_result() = attach_exit_;
    }
    if (task->state() != nodepb::TASK_STATE_EXITED) return grpc::Status::OK;
    *exit.mutable_exit() = task->exit_result();
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

void FakeNodeService::SetEvents(std::vector<nodepb::EventsResponse> events) {
  absl::MutexLock lock(&mu_);
  events_ = std::move(events);
}

grpc::Status FakeNodeService::Events(
    grpc::ServerContext*, const nodepb::EventsRequest*,
    grpc::ServerWriter<nodepb::EventsResponse>* writer) {
  std::vector<nodepb::EventsResponse> events;
  {
    absl::MutexLock lock(&mu_);
    events = events_;
  }
  for (const nodepb::EventsResponse& event : events) {
    if (!writer->Write(event)) break;
  }
  return grpc::Status::OK;
}

}  // namespace berth::cli::testing

namespace berth::cli::testing {

void FakeImageService::AddImage(const imagepb::Image& image) {
  absl::MutexLock lock(&mu_);
  Store(image);
}

void FakeImageService::SetPull(
    const std::string& reference,
    std::vector<imagepb::PullImageProgress> messages) {
  absl::MutexLock lock(&mu_);
  pulls_[reference] = std::move(messages);
}

void FakeImageService::HoldPullsOpen() {
  absl::MutexLock lock(&mu_);
  hold_pulls_ = true;
}

void FakeImageService::SetImportResponse(
    const imagepb::ImportImageResponse& response) {
  absl::MutexLock lock(&mu_);
  import_response_ = response;
}

void FakeImageService::SetPruneResponse(
    const imagepb::PruneImagesResponse& response) {
  absl::MutexLock lock(&mu_);
  prune_response_ = response;
}

void FakeImageService::FailCalls(const std::string& method,
                                 const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  failures_[method] = status;
}

std::vector<imagepb::PullImageRequest> FakeImageService::pull_requests() const {
  absl::MutexLock lock(&mu_);
  return pull_requests_;
}
bool FakeImageService::pull_cancelled() const {
  absl::MutexLock lock(&mu_);
  return pull_cancelled_;
}
std::vector<imagepb::InspectImageRequest> FakeImageService::inspect_requests()
    const {
  absl::MutexLock lock(&mu_);
  return inspect_requests_;
}
imagepb::ImportImageRequest FakeImageService::import_first() const {
  absl::MutexLock lock(&mu_);
  return import_first_;
}
std::vector<size_t> FakeImageService::import_chunk_sizes() const {
  absl::MutexLock lock(&mu_);
  return import_chunk_sizes_;
}
std::string FakeImageService::import_data() const {
  absl::MutexLock lock(&mu_);
  return import_data_;
}
std::vector<imagepb::RemoveImageRequest> FakeImageService::remove_requests()
    const {
  absl::MutexLock lock(&mu_);
  return remove_requests_;
}
std::vector<imagepb::TagImageRequest> FakeImageService::tag_requests() const {
  absl::MutexLock lock(&mu_);
  return tag_requests_;
}
std::vector<imagepb::PruneImagesRequest> FakeImageService::prune_requests()
    const {
  absl::MutexLock lock(&mu_);
  return prune_requests_;
}
std::vector<imagepb::Image> FakeImageService::images() const {
  absl::MutexLock lock(&mu_);
  return images_;
}

grpc::Status FakeImageService::Failure(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(method);
  return it == failures_.end() ? grpc::Status::OK : it->second;
}

imagepb::Image* FakeImageService::Find(const std::string& reference) {
  const std::string name = Normalized(reference);
  for (imagepb::Image& image : images_) {
    if (image.name() == reference || image.name() == name ||
        image.digest() == reference) {
      return &image;
    }
  }
  for (imagepb::Image& image : images_) {
    const std::string hex = image.config_digest().substr(
        std::min(image.config_digest().size(), sizeof("sha256:") - 1));
    if (reference.size() >= 12 && absl::StartsWith(hex, reference)) {
      return &image;
    }
  }
  return nullptr;
}

void FakeImageService::Store(const imagepb::Image& image) {
  for (imagepb::Image& stored : images_) {
    if (stored.name() == image.name()) {
      stored = image;
      return;
    }
  }
  images_.push_back(image);
  std::sort(images_.begin(), images_.end(),
            [](const imagepb::Image& a, const imagepb::Image& b) {
              return a.name() < b.name();
            });
}

grpc::Status FakeImageService::PullImage(
    grpc::ServerContext* context, const imagepb::PullImageRequest* request,
    grpc::ServerWriter<imagepb::PullImageProgress>* writer) {
  if (grpc::Status failure = Failure("PullImage"); !failure.ok()) {
    return failure;
  }
  std::vector<imagepb::PullImageProgress> messages;
  bool hold = false;
  {
    absl::MutexLock lock(&mu_);
    pull_requests_.push_back(*request);
    auto it = pulls_.find(request->reference());
    if (it == pulls_.end()) {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          absl::StrCat("pull ", request->reference(), ": manifest unknown"));
    }
    messages = it->second;
    hold = hold_pulls_;
  }
  for (const imagepb::PullImageProgress& message : messages) {
    if (!writer->Write(message)) return grpc::Status::CANCELLED;
  }
  if (hold) {
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
    absl::MutexLock lock(&mu_);
    pull_cancelled_ = true;
    return grpc::Status::CANCELLED;
  }
  if (!messages.empty() && messages.back().has_image()) {
    absl::MutexLock lock(&mu_);
    Store(messages.back().image());
  }
  return grpc::Status::OK;
}

grpc::Status FakeImageService::ImportImage(
    grpc::ServerContext*,
    grpc::ServerReader<imagepb::ImportImageRequest>* reader,
    imagepb::ImportImageResponse* response) {
  if (grpc::Status failure = Failure("ImportImage"); !failure.ok()) {
    return failure;
  }
  imagepb::ImportImageRequest first;
  if (!reader->Read(&first) || !first.has_options()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message must carry the options");
  }
  std::vector<size_t> sizes;
  std::string data = first.chunk();
  imagepb::ImportImageRequest chunk;
  while (reader->Read(&chunk)) {
    sizes.push_back(chunk.chunk().size());
    data += chunk.chunk();
  }
  absl::MutexLock lock(&mu_);
  import_first_ = first;
  import_chunk_sizes_ = std::move(sizes);
  import_data_ = std::move(data);
  *response = import_response_;
  for (const imagepb::Image& image : response->images()) Store(image);
  return grpc::Status::OK;
}

grpc::Status FakeImageService::ListImages(
    grpc::ServerContext*, const imagepb::ListImagesRequest*,
    imagepb::ListImagesResponse* response) {
  if (grpc::Status failure = Failure("ListImages"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  for (const imagepb::Image& image : images_) *response->add_images() = image;
  return grpc::Status::OK;
}

grpc::Status FakeImageService::InspectImage(
    grpc::ServerContext*, const imagepb::InspectImageRequest* request,
    imagepb::InspectImageResponse* response) {
  if (grpc::Status failure = Failure("InspectImage"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  inspect_requests_.push_back(*request);
  const imagepb::Image* image = Find(request->reference());
  if (image == nullptr) return NoImage(request->reference());
  *response->mutable_image() = *image;
  return grpc::Status::OK;
}

grpc::Status FakeImageService::RemoveImage(
    grpc::ServerContext*, const imagepb::RemoveImageRequest* request,
    imagepb::RemoveImageResponse* response) {
  if (grpc::Status failure = Failure("RemoveImage"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  remove_requests_.push_back(*request);
  const imagepb::Image* found = Find(request->reference());
  if (found == nullptr) return NoImage(request->reference());
  const imagepb::Image image = *found;
  images_.erase(images_.begin() + (found - images_.data()));
  response->add_untagged(image.name());
  // The config and layers go when no other name has the same image.
  for (const imagepb::Image& other : images_) {
    if (other.digest() == image.digest()) return grpc::Status::OK;
  }
  response->add_deleted(image.config_digest());
  for (const imagepb::Layer& layer : image.layers()) {
    response->add_deleted(layer.digest());
  }
  return grpc::Status::OK;
}

grpc::Status FakeImageService::TagImage(grpc::ServerContext*,
                                        const imagepb::TagImageRequest* request,
                                        imagepb::TagImageResponse* response) {
  if (grpc::Status failure = Failure("TagImage"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  tag_requests_.push_back(*request);
  const imagepb::Image* source = Find(request->source());
  if (source == nullptr) return NoImage(request->source());
  imagepb::Image tagged = *source;
  tagged.set_name(Normalized(request->target()));
  Store(tagged);
  *response->mutable_image() = tagged;
  return grpc::Status::OK;
}

grpc::Status FakeImageService::PruneImages(
    grpc::ServerContext*, const imagepb::PruneImagesRequest* request,
    imagepb::PruneImagesResponse* response) {
  if (grpc::Status failure = Failure("PruneImages"); !failure.ok()) {
    return failure;
  }
  absl::MutexLock lock(&mu_);
  prune_requests_.push_back(*request);
  *response = prune_response_;
  return grpc::Status::OK;
}

}  // namespace berth::cli::testing
