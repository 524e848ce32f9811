#include "services/node/node_service.h"

#include <atomic>
#include <deque>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/proto_time.h"
#include "glog/logging.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/errors.h"
#include "services/common/dial.h"
#include "services/common/status.h"
#include "services/common/stream_log.h"
#include "services/node/log_reader.h"

namespace berth::node {
namespace {

// The longest a stream handler waits before looking at cancellation.
constexpr absl::Duration kPoll = absl::Milliseconds(250);

grpc::Status Ended(absl::string_view rpc, grpc::ServerContext* context,
                   const grpc::Status& status) {
  LogStreamEnd(rpc, status, context);
  return status;
}

v1::ComponentStatus CheckHealth(const std::string& name,
                                const std::string& socket) {
  v1::ComponentStatus status;
  status.set_name(name);
  status.set_socket(socket);
  if (socket.empty()) {
    status.set_message("not configured");
    return status;
  }
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("unix:", socket), grpc::InsecureChannelCredentials(),
      UnixChannelArguments()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = stub->Check(&context, request, &response);
  status.set_healthy(s.ok() &&
                     response.status() ==
                         grpc::health::v1::HealthCheckResponse::SERVING);
  status.set_message(s.ok() ? (status.healthy() ? "serving" : "not serving")
                            : s.error_message());
  return status;
}

}  // namespace

NodeServiceImpl::NodeServiceImpl(Options options, TaskManager* tasks,
                                 PluginManager* plugins, EventBus* events)
    : options_(std::move(options)),
      tasks_(tasks),
      plugins_(plugins),
      events_(events),
      started_at_(absl::Now()) {}

void NodeServiceImpl::Shutdown() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (plugin::host::CallCanceller* canceller : stats_streams_) {
    canceller->Cancel();
  }
}

bool NodeServiceImpl::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

grpc::Status NodeServiceImpl::RunTask(grpc::ServerContext*,
                                      const v1::RunTaskRequest* request,
                                      v1::RunTaskResponse* response) {
  absl::StatusOr<v1::Task> task =
      tasks_->Run(request->spec(), request->remove_on_start_failure());
  if (!task.ok()) return ToGrpcStatus(task.status());
  *response->mutable_task() = *std::move(task);
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::ListTasks(grpc::ServerContext*,
                                        const v1::ListTasksRequest* request,
                                        v1::ListTasksResponse* response) {
  for (v1::Task& task : tasks_->List(request->all())) {
    *response->add_tasks() = std::move(task);
  }
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::InspectTask(grpc::ServerContext*,
                                          const v1::InspectTaskRequest* request,
                                          v1::InspectTaskResponse* response) {
  absl::StatusOr<v1::Task> task = tasks_->Inspect(request->task_id());
  if (!task.ok()) return ToGrpcStatus(task.status());
  *response->mutable_task() = *std::move(task);
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::StopTask(grpc::ServerContext*,
                                       const v1::StopTaskRequest* request,
                                       v1::StopTaskResponse* response) {
  // Unset: the task's own (spec.stop_timeout, else 5 seconds).
  absl::Duration timeout = -absl::Seconds(1);
  if (request->has_timeout()) {
    timeout = base::FromProtoDuration(request->timeout());
    if (timeout < absl::ZeroDuration()) {
      return ToGrpcStatus(
          absl::InvalidArgumentError("timeout must not be negative"));
    }
  }
  absl::StatusOr<v1::Task> task =
      tasks_->Stop(request->task_id(), timeout, request->signal());
  if (!task.ok()) return ToGrpcStatus(task.status());
  *response->mutable_task() = *std::move(task);
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::RemoveTask(grpc::ServerContext*,
                                         const v1::RemoveTaskRequest* request,
                                         v1::RemoveTaskResponse*) {
  return ToGrpcStatus(tasks_->Remove(request->task_id(), request->force()));
}

namespace {

// Caller requests read ahead of the driver's stream (exec's and attach's):
// beyond this the relay stops reading the caller (gRPC's flow control then
// holds it back).
constexpr size_t kUpstreamBytes = 256 * 1024;

// What ExecRelay and AttachRelay share: one call relayed to the task's
// driver's stream of the same messages. The call's reads queue the caller's
// requests (at most kUpstreamBytes ahead); a thread writes them to the
// driver in order, the caller's half-close as the driver stream's (never a
// reaction of the call: a driver that stops reading, as when the task does
// not read its stdin, must not hold one of gRPC's threads); a request the
// driver's stream no longer takes (it has ended) is dropped. Another thread
// reads the driver's responses and writes them to the caller one at a time;
// when the driver's stream ends, DriverEnded ends the call.
//
// A subclass opens the driver's stream for the setup (Open), may end the
// call its own way (DriverEnded) and let go of what it holds of the service
// (ReleaseHolds); its constructor ends with Begin.
template <typename Request, typename Response>
class DriverStreamRelay : public grpc::ServerBidiReactor<Request, Response> {
 public:
  void OnReadDone(bool ok) final ABSL_LOCKS_EXCLUDED(mu_) {
    if (stream_ == nullptr) {
      if (!ok) {
        FinishCall(grpc::Status(grpc::StatusCode::CANCELLED,
                                "the caller ended the call before its setup"));
        return;
      }
      absl::Status started = Start();
      if (!started.ok()) {
        FinishCall(ToGrpcStatus(started));
        return;
      }
      ReadNext();
      return;
    }
    bool again = false;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        // Half-closed by the caller (it sends nothing more; for exec, the
        // command's stdin ends), or cancelled.
        read_ended_ = true;
        return;
      }
      queued_bytes_ += request_.ByteSizeLong();
      queue_.push_back(std::move(request_));
      request_.Clear();
      if (queued_bytes_ < kUpstreamBytes) {
        again = true;
      } else {
        paused_ = true;  // Upstream reads on once it has caught up
      }
    }
    if (again) ReadNext();
  }

  void OnWriteDone(bool ok) final ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    write_ok_ = ok;
  }

  void OnCancel() final { canceller_.Cancel(); }

  // Never waits: gRPC runs OnDone on its executor (or a callback thread),
  // whose queue also carries transport work such as a combiner's offload;
  // joining a thread stuck in a driver stream's Write or WritesDone there
  // could wait on work queued behind this very reaction. The threads are
  // joined, and the relay deleted, on a thread of its own.
  void OnDone() final ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stop_upstream_ = true;
    }
    // Here, not at deletion: the service may be gone by then.
    ReleaseHolds();
    slot_.Release();
    std::thread([this] { JoinAndDelete(); }).detach();
  }

 protected:
  using Stream = plugin::host::BidiStream<Request, Response>;

  // `rpc` names the call in the log ("berth.node.v1.NodeService/...").
  DriverStreamRelay(grpc::CallbackServerContext* context, const char* rpc)
      : context_(context), rpc_(rpc) {}

  // The end of the subclass's constructor: the call refused if its client
  // holds as many streams as it may (`slot` an error), else its first read.
  void Begin(absl::StatusOr<StreamLimiter::Slot> slot) {
    if (!slot.ok()) {
      // Refused before reading.
      this->Finish(ToGrpcStatus(slot.status()));
      return;
    }
    slot_ = *std::move(slot);
    this->StartRead(&request_);
  }

  // The driver's stream for the caller's setup request, which it may
  // rewrite before the relay sends it (the task's full id); calls to the
  // driver take canceller().
  virtual absl::StatusOr<std::unique_ptr<Stream>> Open(Request* setup) = 0;

  // The driver's stream has ended with `finished` (its responses all sent,
  // `sent_exit` whether one was an exit) and the caller has not cancelled:
  // ends the call, by default with the driver's status.
  virtual void DriverEnded(const absl::Status& finished, bool sent_exit) {
    (void)sent_exit;
    FinishCall(ToGrpcStatus(finished));
  }

  // In OnDone: lets go of what the relay holds of the service.
  virtual void ReleaseHolds() {}

  grpc::CallbackServerContext* context() const { return context_; }
  plugin::host::CallCanceller* canceller() { return &canceller_; }

  // Sends one response to the caller; false when it is gone.
  bool Send(Response response) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    response_ = std::move(response);
    writing_ = true;
    this->StartWrite(&response_);
    mu_.Await(absl::Condition(
        +[](bool* writing) { return !*writing; }, &writing_));
    return write_ok_;
  }

  // Finish, once no StartRead is under way (none starts after it).
  void FinishCall(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      finishing_ = true;
      mu_.Await(absl::Condition(
          +[](int* starting) { return *starting == 0; }, &reads_starting_));
    }
    this->Finish(status);
  }

  // Ends the call the caller cancelled.
  void FinishCancelled() {
    const grpc::Status cancelled(grpc::StatusCode::CANCELLED, "cancelled");
    LogStreamEnd(rpc_, cancelled, /*caller_cancelled=*/true);
    FinishCall(cancelled);
  }

 private:
  absl::Status Start() {
    if (!request_.has_setup()) {
      return absl::InvalidArgumentError("the first request must be the setup");
    }
    absl::StatusOr<std::unique_ptr<Stream>> stream = Open(&request_);
    if (!stream.ok()) return stream.status();
    if (absl::Status s = (*stream)->Write(request_); !s.ok()) return s;
    request_.Clear();
    stream_ = *std::move(stream);
    upstream_ = std::thread([this] { Upstream(); });
    downstream_ = std::thread([this] { Downstream(); });
    return absl::OkStatus();
  }

  // After OnDone, on a thread that is neither of the relay's.
  void JoinAndDelete() {
    for (std::thread* thread : {&upstream_, &downstream_}) {
      if (thread->joinable()) thread->join();
    }
    delete this;
  }

  // The next read of the caller's requests, unless the call is finishing.
  void ReadNext() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (finishing_) return;
      ++reads_starting_;
    }
    this->StartRead(&request_);
    absl::MutexLock lock(&mu_);
    --reads_starting_;
  }

  void Upstream() ABSL_LOCKS_EXCLUDED(mu_) {
    bool writable = true;
    while (true) {
      Request next;
      bool resume = false;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](DriverStreamRelay* relay)
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(relay->mu_) {
                   return !relay->queue_.empty() || relay->read_ended_ ||
                          relay->stop_upstream_;
                 },
            this));
        if (stop_upstream_) return;
        if (queue_.empty()) break;  // the caller sends nothing more
        next = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= next.ByteSizeLong();
        if (paused_ && queued_bytes_ < kUpstreamBytes / 2) {
          paused_ = false;
          resume = true;
        }
      }
      if (resume) ReadNext();
      if (writable) writable = stream_->Write(next).ok();
    }
    if (writable && !canceller_.cancelled()) (void)stream_->WritesDone();
  }

  void Downstream() {
    bool sent_exit = false;
    while (true) {
      absl::StatusOr<std::optional<Response>> next = stream_->Read();
      if (!next.ok() || !next->has_value()) break;
      if ((*next)->has_exit()) sent_exit = true;
      if (!Send(**std::move(next))) {
        canceller_.Cancel();
        break;
      }
    }
    absl::Status finished = stream_->Finish();
    if (context_->IsCancelled()) {
      FinishCancelled();
      return;
    }
    DriverEnded(finished, sent_exit);
  }

  grpc::CallbackServerContext* const context_;
  const char* const rpc_;
  // Its place among its client's streams, released in OnDone.
  StreamLimiter::Slot slot_;
  plugin::host::CallCanceller canceller_;
  // Only the call's reads touch it (one at a time).
  Request request_;
  std::unique_ptr<Stream> stream_;
  std::thread upstream_;
  std::thread downstream_;
  absl::Mutex mu_;
  std::deque<Request> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool read_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_upstream_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  int reads_starting_ ABSL_GUARDED_BY(mu_) = 0;
  Response response_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mu_) = true;
};

// Relays one ExecTaskStreaming call between the caller and the task's
// driver (see DriverStreamRelay). The call ends with the driver's status.
class ExecRelay final
    : public DriverStreamRelay<driver::v1::ExecTaskStreamingRequest,
                               driver::v1::ExecTaskStreamingResponse> {
 public:
  ExecRelay(TaskManager* tasks, grpc::CallbackServerContext* context,
            absl::StatusOr<StreamLimiter::Slot> slot)
      : DriverStreamRelay(context,
                          "berth.node.v1.NodeService/ExecTaskStreaming"),
        tasks_(tasks) {
    Begin(std::move(slot));
  }

 private:
  absl::StatusOr<std::unique_ptr<Stream>> Open(
      driver::v1::ExecTaskStreamingRequest* setup) override {
    absl::StatusOr<TaskManager::Target> target =
        tasks_->RunningTarget(setup->setup().task_id());
    if (!target.ok()) return target.status();
    // The driver knows the task by its full id, not a name or prefix.
    setup->mutable_setup()->set_task_id(target->id);
    return target->driver->ExecTaskStreaming(
        {absl::InfiniteFuture(), canceller()});
  }

  TaskManager* const tasks_;
};

}  // namespace

grpc::ServerBidiReactor<driver::v1::ExecTaskStreamingRequest,
                        driver::v1::ExecTaskStreamingResponse>*
NodeServiceImpl::ExecTaskStreaming(grpc::CallbackServerContext* context) {
  return new ExecRelay(
      tasks_, context,
      AcquireStream(*context, "berth.node.v1.NodeService/ExecTaskStreaming"));
}

namespace {

// Relays one AttachTask call between the caller and the task's driver (see
// DriverStreamRelay); when the driver's stream ends OK without an exit
// frame, it waits for the run to end and sends its exit. Either side
// cancelling cancels the other; the task keeps running. At most
// kMaxAttachesPerTask calls per task at once.
class AttachRelay final
    : public DriverStreamRelay<driver::v1::AttachTaskRequest,
                               driver::v1::AttachTaskResponse> {
 public:
  AttachRelay(NodeServiceImpl* service, TaskManager* tasks,
              PluginManager* plugins, grpc::CallbackServerContext* context,
              absl::StatusOr<StreamLimiter::Slot> slot)
      : DriverStreamRelay(context, "berth.node.v1.NodeService/AttachTask"),
        service_(service),
        tasks_(tasks),
        plugins_(plugins) {
    Begin(std::move(slot));
  }

  ~AttachRelay() override {
    if (holds_slot_) service_->ReleaseAttachSlot(id_);
  }

 private:
  absl::StatusOr<std::unique_ptr<Stream>> Open(
      driver::v1::AttachTaskRequest* setup) override {
    absl::StatusOr<TaskManager::Target> target =
        tasks_->RunningTarget(setup->setup().task_id());
    if (!target.ok()) return target.status();
    absl::StatusOr<driver::v1::DriverCapabilities> caps =
        plugins_->Capabilities(target->driver_name);
    if (!caps.ok()) return caps.status();
    if (!caps->attach()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", target->id, ": driver ", target->driver_name,
          " does not support attaching to tasks (its capabilities claim no "
          "attach)"));
    }
    id_ = target->id;
    run_ = target->run;
    if (!service_->AcquireAttachSlot(id_)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "task ", id_, " has ", NodeServiceImpl::kMaxAttachesPerTask,
          " callers attached, the most berth allows at once"));
    }
    holds_slot_ = true;
    // The driver knows the task by its full id, not a name or prefix.
    setup->mutable_setup()->set_task_id(target->id);
    return target->driver->AttachTask({absl::InfiniteFuture(), canceller()});
  }

  // The attach slot is released here: the service may be gone by the time
  // the relay is deleted.
  void ReleaseHolds() override {
    if (holds_slot_) service_->ReleaseAttachSlot(id_);
    holds_slot_ = false;
  }

  void DriverEnded(const absl::Status& finished, bool sent_exit) override {
    if (!finished.ok() || sent_exit) {
      FinishCall(ToGrpcStatus(finished));
      return;
    }
    // The task's output ended: its run ends (or has ended); its exit is the
    // last frame.
    while (true) {
      absl::StatusOr<std::optional<driver::v1::ExitResult>> exit =
          tasks_->AwaitRunExit(id_, run_, absl::Milliseconds(250));
      if (context()->IsCancelled()) {
        FinishCancelled();
        return;
      }
      if (absl::IsDeadlineExceeded(exit.status())) continue;
      if (!exit.ok()) {
        FinishCall(ToGrpcStatus(exit.status()));
        return;
      }
      if (exit->has_value()) {
        driver::v1::AttachTaskResponse response;
        *response.mutable_exit() = **exit;
        if (!Send(std::move(response))) {
          FinishCancelled();
          return;
        }
      }
      FinishCall(grpc::Status::OK);
      return;
    }
  }

  NodeServiceImpl* const service_;
  TaskManager* const tasks_;
  PluginManager* const plugins_;
  std::string id_;
  uint32_t run_ = 0;
  bool holds_slot_ = false;
};

}  // namespace

bool NodeServiceImpl::AcquireAttachSlot(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  int& count = attaches_[task_id];
  if (count >= kMaxAttachesPerTask) return false;
  ++count;
  return true;
}

absl::StatusOr<StreamLimiter::Slot> NodeServiceImpl::AcquireStream(
    const grpc::ServerContextBase& context, absl::string_view rpc) {
  if (options_.streams == nullptr) return StreamLimiter::Slot();
  return options_.streams->Acquire(context, rpc);
}

void NodeServiceImpl::ReleaseAttachSlot(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  auto it = attaches_.find(task_id);
  if (it == attaches_.end()) return;
  if (--it->second <= 0) attaches_.erase(it);
}

grpc::ServerBidiReactor<driver::v1::AttachTaskRequest,
                        driver::v1::AttachTaskResponse>*
NodeServiceImpl::AttachTask(grpc::CallbackServerContext* context) {
  return new AttachRelay(
      this, tasks_, plugins_, context,
      AcquireStream(*context, "berth.node.v1.NodeService/AttachTask"));
}

grpc::Status NodeServiceImpl::TaskStats(
    grpc::ServerContext* context, const v1::TaskStatsRequest* request,
    grpc::ServerWriter<v1::TaskStatsResponse>* writer) {
  absl::StatusOr<StreamLimiter::Slot> slot =
      AcquireStream(*context, "berth.node.v1.NodeService/TaskStats");
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  absl::StatusOr<TaskManager::Target> target =
      tasks_->RunningTarget(request->task_id());
  if (!target.ok()) return ToGrpcStatus(target.status());
  driver::v1::TaskStatsRequest stats_request;
  stats_request.set_task_id(target->id);
  if (request->has_interval()) {
    *stats_request.mutable_interval() = request->interval();
  }
  plugin::host::CallCanceller canceller;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "berth-node is stopping");
    }
    stats_streams_.insert(&canceller);
  }
  grpc::Status status =
      ResumingStats(context, *target, stats_request, &canceller, writer);
  absl::MutexLock lock(&mu_);
  stats_streams_.erase(&canceller);
  return status;
}

grpc::Status NodeServiceImpl::ResumingStats(
    grpc::ServerContext* context, TaskManager::Target target,
    const driver::v1::TaskStatsRequest& request,
    plugin::host::CallCanceller* canceller,
    grpc::ServerWriter<v1::TaskStatsResponse>* writer) {
  // As `docker stats` goes on across a restart of the daemon's runtime: when
  // the driver goes away, the stream waits for the relaunched driver to have
  // recovered the task (NOT_FOUND until then) and goes on from there.
  constexpr absl::Duration kResumeWait = absl::Seconds(60);
  constexpr absl::Duration kRetry = absl::Milliseconds(200);
  std::optional<absl::Time> resume_by;
  while (true) {
    bool wrote = false;
    absl::Status driver_error;
    grpc::Status status = StreamStats(context, target.driver, request,
                                      canceller, writer, &wrote, &driver_error);
    if (wrote) resume_by.reset();
    const bool driver_gone =
        plugin::host::IsPluginShutdown(driver_error) ||
        (resume_by.has_value() && absl::IsNotFound(driver_error));
    if (!driver_gone || stopping() || context->IsCancelled()) return status;
    if (!resume_by.has_value()) {
      resume_by = absl::Now() + kResumeWait;
      LOG(INFO) << "task " << target.id << ": its driver went away during "
                << "TaskStats; resuming once it is back";
    }
    while (true) {
      if (absl::Now() > *resume_by) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            absl::StrCat("task ", target.id,
                                         ": its driver did not come back "
                                         "within ",
                                         absl::FormatDuration(kResumeWait)));
      }
      absl::SleepFor(kRetry);
      if (stopping() || context->IsCancelled()) return status;
      absl::StatusOr<TaskManager::Target> again =
          tasks_->RunningTarget(target.id);
      if (again.ok()) {
        target = *std::move(again);
        break;
      }
      // Ended or removed meanwhile: the stream ends as it would have.
      if (absl::IsFailedPrecondition(again.status()) ||
          absl::IsNotFound(again.status())) {
        return grpc::Status::OK;
      }
    }
  }
}

grpc::Status NodeServiceImpl::StreamStats(
    grpc::ServerContext* context,
    const std::shared_ptr<plugin::host::DriverClient>& driver,
    const driver::v1::TaskStatsRequest& request,
    plugin::host::CallCanceller* canceller,
    grpc::ServerWriter<v1::TaskStatsResponse>* writer, bool* wrote,
    absl::Status* driver_error) {
  constexpr char kRpc[] = "berth.node.v1.NodeService/TaskStats";
  absl::StatusOr<std::unique_ptr<plugin::host::TaskStatsStream>> stats =
      driver->TaskStats(request, {absl::InfiniteFuture(), canceller});
  if (!stats.ok()) {
    *driver_error = stats.status();
    return ToGrpcStatus(stats.status());
  }
  while (true) {
    // A caller that went away is seen at the next sample's Write.
    absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>> usage =
        (*stats)->Next();
    if (!usage.ok() && canceller->cancelled()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "berth-node is stopping");
    }
    if (!usage.ok()) {
      *driver_error = usage.status();
      return ToGrpcStatus(usage.status());
    }
    if (!usage->has_value()) return grpc::Status::OK;  // the task ended
    v1::TaskStatsResponse response;
    *response.mutable_usage() = **usage;
    if (!writer->Write(response)) {
      return Ended(kRpc, context,
                   grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
    *wrote = true;
  }
}

grpc::Status NodeServiceImpl::TaskLogs(
    grpc::ServerContext* context, const v1::TaskLogsRequest* request,
    grpc::ServerWriter<v1::TaskLogsResponse>* writer) {
  constexpr char kRpc[] = "berth.node.v1.NodeService/TaskLogs";
  absl::StatusOr<StreamLimiter::Slot> slot = AcquireStream(*context, kRpc);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  absl::StatusOr<v1::Task> task = tasks_->Inspect(request->task_id());
  if (!task.ok()) return ToGrpcStatus(task.status());
  const std::string id = task->id();
  LogReadOptions options;
  options.log_dir = tasks_->LogDir(id);
  options.earlier_log_dirs = tasks_->EarlierLogDirs(id);
  for (int stream : request->streams()) {
    options.streams.push_back(static_cast<v1::LogStream>(stream));
  }
  options.tail_lines = request->tail_lines();
  options.follow = request->follow();
  options.running = [this, &id] {
    absl::StatusOr<v1::Task> now = tasks_->Inspect(id);
    if (!now.ok()) return false;
    return now->state() != v1::TASK_STATE_EXITED &&
           now->state() != v1::TASK_STATE_FAILED;
  };
  options.cancelled = [this, context] {
    return context->IsCancelled() || stopping();
  };
  options.wait = [this, &id](absl::Duration timeout) {
    tasks_->AwaitFinished(id, timeout);
  };
  bool write_failed = false;
  absl::Status read =
      ReadTaskLogs(options, [&](v1::LogStream stream, absl::string_view data) {
        v1::TaskLogsResponse response;
        response.set_stream(stream);
        response.set_data(std::string(data));
        if (writer->Write(response)) return true;
        write_failed = true;
        return false;
      });
  if (write_failed || context->IsCancelled()) {
    return Ended(kRpc, context,
                 grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  if (!read.ok()) {
    return ToGrpcStatus(absl::Status(
        read.code(), absl::StrCat("task ", id, ": ", read.message())));
  }
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::Events(
    grpc::ServerContext* context, const v1::EventsRequest* request,
    grpc::ServerWriter<v1::EventsResponse>* writer) {
  constexpr char kRpc[] = "berth.node.v1.NodeService/Events";
  absl::StatusOr<StreamLimiter::Slot> slot = AcquireStream(*context, kRpc);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  std::vector<std::string> ids;
  for (const std::string& ref : request->task_ids()) {
    absl::StatusOr<v1::Task> task = tasks_->Inspect(ref);
    if (!task.ok()) return ToGrpcStatus(task.status());
    ids.push_back(task->id());
  }
  std::unique_ptr<EventBus::Subscription> subscription = events_->Subscribe();
  // Sends headers now, so that a caller knows it is subscribed.
  writer->SendInitialMetadata();
  while (!context->IsCancelled() && !stopping()) {
    std::optional<v1::EventsResponse> event =
        subscription->Next(absl::Now() + kPoll);
    if (!event.has_value()) continue;
    if (!ids.empty() &&
        std::find(ids.begin(), ids.end(), event->task_id()) == ids.end()) {
      continue;
    }
    if (!writer->Write(*event)) break;
  }
  if (stopping() && !context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "berth-node is stopping");
  }
  return Ended(kRpc, context,
               grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
}

grpc::Status NodeServiceImpl::GetNodeStatus(
    grpc::ServerContext*, const v1::GetNodeStatusRequest*,
    v1::GetNodeStatusResponse* response) {
  response->set_version(options_.version);
  // Services the node was told to run without are not listed.
  if (std::optional<v1::ComponentStatus> netns = tasks_->NetnsStatus()) {
    *response->add_services() = *std::move(netns);
  }
  if (!options_.stats_socket.empty()) {
    *response->add_services() =
        CheckHealth("berth-stats", options_.stats_socket);
  }
  if (!options_.proxy_socket.empty()) {
    *response->add_services() =
        CheckHealth("berth-proxy", options_.proxy_socket);
  }
  if (options_.images != nullptr) {
    *response->add_services() = options_.images->Status();
  }
  for (v1::ComponentStatus& plugin : plugins_->Status()) {
    *response->add_plugins() = std::move(plugin);
  }
  *response->mutable_started_at() = base::ToProtoTimestamp(started_at_);
  return grpc::Status::OK;
}

}  // namespace berth::node
