#include "plugins/host/driver_client.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "berth/plugin/v1/plugin.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "plugins/host/errors.h"
#include "plugins/host/plugin_lifetime.h"
#include "services/common/status.h"
#include "services/common/unix_socket.h"

namespace berth::plugin::host {
namespace internal {

// What every call of one DriverClient shares; kept alive by its streams.
struct ClientShared {
  std::string name;
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<PluginLifetime> lifetime;
  std::string socket_path;
  absl::Duration exit_wait;
};

namespace {

// When the plugin's socket no longer accepts connections, how long to wait
// for the process to be seen ending, so that the error says how it ended
// rather than only that its socket is closed.
constexpr absl::Duration kPreferExitReason = absl::Milliseconds(200);

// A plugin's grace period when ShutdownRequest leaves it unset.
constexpr absl::Duration kDefaultShutdownGrace = absl::Seconds(2);

}  // namespace

// One call (unary or stream): its ClientContext, registered with the plugin's
// lifetime (cancelled when the plugin goes) and the caller's canceller, and
// the mapping of its outcome to an absl::Status.
class Call {
 public:
  Call(std::shared_ptr<const ClientShared> shared, absl::string_view rpc,
       std::string subject, const CallOptions& options)
      : shared_(std::move(shared)),
        rpc_(rpc),
        options_(options),
        subject_(std::move(subject)) {}

  ~Call() {
    End();
    {
      absl::MutexLock lock(&mu_);
      timer_quit_ = true;
      timer_cv_.Signal();
    }
    if (timer_.joinable()) timer_.join();
  }

  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  grpc::ClientContext* context() { return &context_; }

  // Sets the deadline and registers the call. ErrPluginShutdown when the
  // plugin is already gone, CANCELLED when the caller already cancelled.
  absl::Status Begin() ABSL_LOCKS_EXCLUDED(mu_) {
    if (options_.deadline != absl::InfiniteFuture()) {
      context_.set_deadline(absl::ToChronoTime(options_.deadline));
    }
    if (!shared_->lifetime->Register(&context_)) return Shutdown();
    if (options_.canceller != nullptr &&
        !options_.canceller->Register(&context_)) {
      shared_->lifetime->Unregister(&context_);
      return CallerCancelled();
    }
    absl::MutexLock lock(&mu_);
    registered_ = true;
    return absl::OkStatus();
  }

  // Unregisters the call (idempotent); before the context goes.
  void End() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!registered_) return;
    registered_ = false;
    shared_->lifetime->Unregister(&context_);
    if (options_.canceller != nullptr) {
      options_.canceller->Unregister(&context_);
    }
  }

  void set_subject(std::string subject) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    subject_ = std::move(subject);
  }

  // The caller cancels: the call ends with CANCELLED.
  void CancelByCaller() {
    cancelled_by_caller_ = true;
    context_.TryCancel();
  }

  // Cancels for the caller's good (a stream destroyed early): no error is
  // reported to anyone.
  void CancelQuietly() { CancelByCaller(); }

  // Cancels the call if `deadline` passes before DisarmReadDeadline.
  void ArmReadDeadline(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_) {
    if (deadline == absl::InfiniteFuture()) return;
    absl::MutexLock lock(&mu_);
    timer_deadline_ = deadline;
    timer_armed_ = true;
    ++timer_generation_;
    if (!timer_.joinable()) timer_ = std::thread([this] { TimerLoop(); });
    timer_cv_.Signal();
  }

  void DisarmReadDeadline() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!timer_armed_) return;
    timer_armed_ = false;
    ++timer_generation_;
    timer_cv_.Signal();
  }

  // The outcome of the call, mapped (see driver_client.h).
  absl::Status Map(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    if (status.ok()) return absl::OkStatus();
    if (caller_cancelled()) return CallerCancelled();
    if (shared_->lifetime->gone()) return Shutdown();
    const grpc::StatusCode code = status.error_code();
    if (read_deadline_fired()) {
      VLOG(1) << Describe() << ": the deadline of a read passed";
      return absl::DeadlineExceededError(
          absl::StrCat(Describe(), ": no message before the read deadline"));
    }
    if (code == grpc::StatusCode::DEADLINE_EXCEEDED &&
        options_.deadline != absl::InfiniteFuture() &&
        absl::Now() >= options_.deadline) {
      VLOG(1) << Describe() << ": the caller's deadline passed";
      return absl::DeadlineExceededError(absl::StrCat(
          Describe(), ": deadline exceeded (",
          absl::FormatTime(options_.deadline), ", set by the caller)"));
    }
    if ((code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::CANCELLED) &&
        PluginGone(/*wait_if_live=*/true)) {
      return Shutdown();
    }
    const absl::Status error = FromGrpcStatus(status);
    return absl::Status(error.code(),
                        absl::StrCat(Describe(), ": ", error.message()));
  }

  // Why a write failed: CANCELLED, ErrPluginShutdown, or FAILED_PRECONDITION
  // for a call the plugin ended (Read/Finish tell how).
  absl::Status WriteFailed() {
    if (caller_cancelled()) return CallerCancelled();
    if (PluginGone(/*wait_if_live=*/false)) return Shutdown();
    return absl::FailedPreconditionError(absl::StrCat(
        Describe(), ": the call has ended; Read() or Finish() tells how"));
  }

 private:
  std::string Describe() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return absl::StrCat("plugin ", shared_->name, ": ", rpc_,
                        subject_.empty() ? "" : " (", subject_,
                        subject_.empty() ? "" : ")");
  }

  bool caller_cancelled() const {
    return cancelled_by_caller_ ||
           (options_.canceller != nullptr && options_.canceller->cancelled());
  }

  bool read_deadline_fired() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return timer_fired_;
  }

  absl::Status CallerCancelled() const {
    VLOG(1) << Describe() << ": cancelled by the caller";
    return absl::CancelledError(
        absl::StrCat(Describe(), ": cancelled by the caller"));
  }

  absl::Status Shutdown() const {
    const std::string reason = shared_->lifetime->reason();
    VLOG(1) << Describe() << ": plugin is gone: " << reason;
    std::string subject;
    {
      absl::MutexLock lock(&mu_);
      subject = subject_;
    }
    return ErrPluginShutdown(
        shared_->name,
        absl::StrCat(reason, "; ", rpc_, subject.empty() ? "" : " (", subject,
                     subject.empty() ? "" : ")", " did not complete"));
  }

  // Whether the plugin is gone, after a failure that suggests it: known
  // gone, or its socket no longer accepts connections, or (`wait_if_live`)
  // its process ends within exit_wait.
  bool PluginGone(bool wait_if_live) {
    PluginLifetime& lifetime = *shared_->lifetime;
    if (lifetime.gone()) return true;
    bool live = true;
    if (!shared_->socket_path.empty()) {
      absl::StatusOr<SocketPathState> state =
          ProbeSocketPath(shared_->socket_path);
      // A socket that cannot be probed (e.g. EACCES) is not known closed.
      live = !state.ok() || *state == SocketPathState::kLive;
    }
    if (!live) {
      if (lifetime.WaitGone(std::min(kPreferExitReason, shared_->exit_wait))) {
        return true;
      }
      lifetime.MarkGone(absl::StrCat("its socket ", shared_->socket_path,
                                     " no longer accepts connections"));
      return true;
    }
    return wait_if_live && lifetime.WaitGone(shared_->exit_wait);
  }

  // Waits (on a CondVar, whose waiters check their own predicates: absl
  // conditions evaluated by other threads trip ThreadSanitizer, which does
  // not see inside Debian's uninstrumented Abseil) until the read deadline
  // armed passes or is disarmed.
  void TimerLoop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (true) {
      while (!timer_quit_ && !timer_armed_) timer_cv_.Wait(&mu_);
      if (timer_quit_) return;
      const uint64_t generation = timer_generation_;
      bool expired = false;
      while (!timer_quit_ && timer_generation_ == generation) {
        if (timer_cv_.WaitWithDeadline(&mu_, timer_deadline_) &&
            timer_generation_ == generation && !timer_quit_ &&
            absl::Now() >= timer_deadline_) {
          expired = true;
          break;
        }
      }
      if (expired) {
        timer_fired_ = true;
        timer_armed_ = false;
        ++timer_generation_;
        context_.TryCancel();
      }
    }
  }

  const std::shared_ptr<const ClientShared> shared_;
  const std::string rpc_;
  const CallOptions options_;
  grpc::ClientContext context_;
  std::atomic<bool> cancelled_by_caller_{false};

  mutable absl::Mutex mu_;
  std::string subject_ ABSL_GUARDED_BY(mu_);
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  // The read deadline (ArmReadDeadline) and the thread that watches it.
  absl::Time timer_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool timer_armed_ ABSL_GUARDED_BY(mu_) = false;
  bool timer_fired_ ABSL_GUARDED_BY(mu_) = false;
  bool timer_quit_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t timer_generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar timer_cv_;
  std::thread timer_;
};

}  // namespace internal

namespace {

std::string Task(const std::string& id) {
  return id.empty() ? "" : absl::StrCat("task ", id);
}

}  // namespace

// CallCanceller.

void CallCanceller::Cancel() {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (grpc::ClientContext* context : calls_) context->TryCancel();
  calls_.clear();
}

bool CallCanceller::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

bool CallCanceller::Register(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  calls_.insert(context);
  return true;
}

void CallCanceller::Unregister(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  calls_.erase(context);
}

// ServerStream.

template <typename Response>
ServerStream<Response>::ServerStream(
    std::unique_ptr<internal::Call> call,
    std::unique_ptr<grpc::ClientReader<Response>> reader)
    : call_(std::move(call)), reader_(std::move(reader)) {}

template <typename Response>
ServerStream<Response>::~ServerStream() {
  if (!final_.has_value()) {
    call_->CancelQuietly();
    Response ignored;
    while (reader_->Read(&ignored)) {
    }
    (void)reader_->Finish();
  }
  call_->End();
}

template <typename Response>
absl::StatusOr<std::optional<Response>> ServerStream<Response>::Next(
    absl::Time deadline) {
  if (!final_.has_value()) {
    call_->ArmReadDeadline(deadline);
    Response response;
    const bool read = reader_->Read(&response);
    call_->DisarmReadDeadline();
    if (read) return std::optional<Response>(std::move(response));
    const grpc::Status status = reader_->Finish();
    call_->End();
    final_ = call_->Map(status);
  }
  if (final_->ok()) return std::optional<Response>();
  return *final_;
}

template <typename Response>
void ServerStream<Response>::Cancel() {
  call_->CancelByCaller();
}

template class ServerStream<driver::v1::FingerprintResponse>;
template class ServerStream<driver::v1::TaskEventsResponse>;
template class ServerStream<driver::v1::TaskStatsResponse>;

absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>>
TaskStatsStream::Next(absl::Time deadline) {
  absl::StatusOr<std::optional<driver::v1::TaskStatsResponse>> next =
      stream_->Next(deadline);
  if (!next.ok()) return next.status();
  if (!next->has_value()) return std::optional<stats::v1::TaskResourceUsage>();
  return std::optional<stats::v1::TaskResourceUsage>(
      std::move(*(*next)->mutable_usage()));
}

// BidiStream.

template <typename Request, typename Response>
BidiStream<Request, Response>::BidiStream(
    std::unique_ptr<internal::Call> call,
    std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> stream)
    : call_(std::move(call)), stream_(std::move(stream)) {}

template <typename Request, typename Response>
BidiStream<Request, Response>::~BidiStream() {
  bool done;
  {
    absl::MutexLock lock(&mu_);
    done = final_.has_value();
  }
  if (!done) {
    call_->CancelQuietly();
    (void)Finish();
  }
  call_->End();
}

template <typename Request, typename Response>
absl::Status BidiStream<Request, Response>::Write(const Request& request) {
  if (request.has_setup()) call_->set_subject(Task(request.setup().task_id()));
  if (stream_->Write(request)) return absl::OkStatus();
  return call_->WriteFailed();
}

template <typename Request, typename Response>
absl::Status BidiStream<Request, Response>::WritesDone() {
  if (stream_->WritesDone()) return absl::OkStatus();
  return call_->WriteFailed();
}

template <typename Request, typename Response>
absl::StatusOr<std::optional<Response>> BidiStream<Request, Response>::Read(
    absl::Time deadline) {
  bool done;
  {
    absl::MutexLock lock(&mu_);
    done = final_.has_value();
  }
  if (!done) {
    call_->ArmReadDeadline(deadline);
    Response response;
    const bool read = stream_->Read(&response);
    call_->DisarmReadDeadline();
    if (read) {
      return std::optional<Response>(std::move(response));
    }
  }
  absl::Status status = Finish();
  if (status.ok()) {
    return std::optional<Response>();
  }
  return status;
}

template <typename Request, typename Response>
absl::Status BidiStream<Request, Response>::Finish() {
  {
    absl::MutexLock lock(&mu_);
    if (final_.has_value()) return *final_;
    if (finishing_) {
      mu_.Await(absl::Condition(&finished_));
      return *final_;
    }
    finishing_ = true;
  }
  // gRPC's Finish waits for every response to be read when the call ends
  // OK: drop those not read.
  Response ignored;
  while (stream_->Read(&ignored)) {
  }
  const grpc::Status status = stream_->Finish();
  call_->End();
  absl::Status mapped = call_->Map(status);
  absl::MutexLock lock(&mu_);
  final_ = mapped;
  finished_ = true;
  return mapped;
}

template <typename Request, typename Response>
void BidiStream<Request, Response>::Cancel() {
  call_->CancelByCaller();
}

template class BidiStream<driver::v1::ExecTaskStreamingRequest,
                          driver::v1::ExecTaskStreamingResponse>;
template class BidiStream<driver::v1::AttachTaskRequest,
                          driver::v1::AttachTaskResponse>;

// DriverClient.

DriverClient::DriverClient(std::shared_ptr<grpc::Channel> channel,
                           std::shared_ptr<PluginLifetime> lifetime,
                           Options options)
    : shared_(std::make_shared<internal::ClientShared>(internal::ClientShared{
          lifetime->name(), channel, lifetime, std::move(options.socket_path),
          options.exit_wait})),
      plugin_(plugin::v1::PluginService::NewStub(channel)),
      driver_(driver::v1::DriverService::NewStub(channel)) {}

DriverClient::~DriverClient() = default;

const std::string& DriverClient::name() const { return shared_->name; }

template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> DriverClient::Unary(
    absl::string_view rpc, std::string subject, Stub* stub,
    grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                 Response*),
    const Request& request, const CallOptions& options) {
  internal::Call call(shared_, rpc, std::move(subject), options);
  if (absl::Status begun = call.Begin(); !begun.ok()) return begun;
  Response response;
  const grpc::Status status =
      (stub->*method)(call.context(), request, &response);
  call.End();
  if (absl::Status mapped = call.Map(status); !mapped.ok()) return mapped;
  return response;
}

template <typename Request, typename Response>
absl::StatusOr<std::unique_ptr<ServerStream<Response>>>
DriverClient::OpenServerStream(absl::string_view rpc, std::string subject,
                               std::unique_ptr<grpc::ClientReader<Response>> (
                                   driver::v1::DriverService::Stub::*method)(
                                   grpc::ClientContext*, const Request&),
                               const Request& request,
                               const CallOptions& options) {
  auto call = std::make_unique<internal::Call>(shared_, rpc, std::move(subject),
                                               options);
  if (absl::Status begun = call->Begin(); !begun.ok()) return begun;
  std::unique_ptr<grpc::ClientReader<Response>> reader =
      (driver_.get()->*method)(call->context(), request);
  return std::make_unique<ServerStream<Response>>(std::move(call),
                                                  std::move(reader));
}

absl::StatusOr<plugin::v1::GetPluginInfoResponse> DriverClient::GetPluginInfo(
    const plugin::v1::GetPluginInfoRequest& request,
    const CallOptions& options) {
  return Unary("PluginService.GetPluginInfo", "", plugin_.get(),
               &plugin::v1::PluginService::Stub::GetPluginInfo, request,
               options);
}

absl::StatusOr<plugin::v1::GetCapabilitiesResponse>
DriverClient::GetPluginCapabilities(
    const plugin::v1::GetCapabilitiesRequest& request,
    const CallOptions& options) {
  return Unary("PluginService.GetCapabilities", "", plugin_.get(),
               &plugin::v1::PluginService::Stub::GetCapabilities, request,
               options);
}

absl::StatusOr<plugin::v1::GetConfigSchemaResponse>
DriverClient::GetConfigSchema(const plugin::v1::GetConfigSchemaRequest& request,
                              const CallOptions& options) {
  return Unary("PluginService.GetConfigSchema", "", plugin_.get(),
               &plugin::v1::PluginService::Stub::GetConfigSchema, request,
               options);
}

absl::StatusOr<plugin::v1::SetConfigResponse> DriverClient::SetConfig(
    const plugin::v1::SetConfigRequest& request, const CallOptions& options) {
  return Unary("PluginService.SetConfig", "", plugin_.get(),
               &plugin::v1::PluginService::Stub::SetConfig, request, options);
}

absl::StatusOr<plugin::v1::ShutdownResponse> DriverClient::Shutdown(
    const plugin::v1::ShutdownRequest& request, const CallOptions& options) {
  absl::StatusOr<plugin::v1::ShutdownResponse> response =
      Unary("PluginService.Shutdown", "", plugin_.get(),
            &plugin::v1::PluginService::Stub::Shutdown, request, options);
  if (!response.ok()) return response;
  // A gRPC server shutting down waits for its clients to close their
  // connections, which a client does once it reads the server's GOAWAY; an
  // idle C++ client reads nothing until its backup poller runs (every 5 s).
  // Watching the channel reads it, so that the plugin is not held.
  absl::Duration grace = internal::kDefaultShutdownGrace;
  if (request.has_grace_period()) {
    grace = absl::Seconds(request.grace_period().seconds()) +
            absl::Nanoseconds(request.grace_period().nanos());
  }
  shared_->channel->WaitForStateChange(
      GRPC_CHANNEL_READY,
      absl::ToChronoTime(std::min(options.deadline, absl::Now() + grace)));
  return response;
}

absl::StatusOr<driver::v1::GetCapabilitiesResponse>
DriverClient::GetCapabilities(const driver::v1::GetCapabilitiesRequest& request,
                              const CallOptions& options) {
  return Unary("DriverService.GetCapabilities", "", driver_.get(),
               &driver::v1::DriverService::Stub::GetCapabilities, request,
               options);
}

absl::StatusOr<std::unique_ptr<FingerprintStream>> DriverClient::Fingerprint(
    const driver::v1::FingerprintRequest& request, const CallOptions& options) {
  return OpenServerStream("DriverService.Fingerprint", "",
                          &driver::v1::DriverService::Stub::Fingerprint,
                          request, options);
}

absl::StatusOr<driver::v1::StartTaskResponse> DriverClient::StartTask(
    const driver::v1::StartTaskRequest& request, const CallOptions& options) {
  return Unary("DriverService.StartTask", Task(request.task().id()),
               driver_.get(), &driver::v1::DriverService::Stub::StartTask,
               request, options);
}

absl::StatusOr<driver::v1::WaitTaskResponse> DriverClient::WaitTask(
    const driver::v1::WaitTaskRequest& request, const CallOptions& options) {
  return Unary("DriverService.WaitTask", Task(request.task_id()), driver_.get(),
               &driver::v1::DriverService::Stub::WaitTask, request, options);
}

absl::StatusOr<driver::v1::StopTaskResponse> DriverClient::StopTask(
    const driver::v1::StopTaskRequest& request, const CallOptions& options) {
  return Unary("DriverService.StopTask", Task(request.task_id()), driver_.get(),
               &driver::v1::DriverService::Stub::StopTask, request, options);
}

absl::StatusOr<driver::v1::DestroyTaskResponse> DriverClient::DestroyTask(
    const driver::v1::DestroyTaskRequest& request, const CallOptions& options) {
  return Unary("DriverService.DestroyTask", Task(request.task_id()),
               driver_.get(), &driver::v1::DriverService::Stub::DestroyTask,
               request, options);
}

absl::StatusOr<driver::v1::InspectTaskResponse> DriverClient::InspectTask(
    const driver::v1::InspectTaskRequest& request, const CallOptions& options) {
  return Unary("DriverService.InspectTask", Task(request.task_id()),
               driver_.get(), &driver::v1::DriverService::Stub::InspectTask,
               request, options);
}

absl::StatusOr<driver::v1::RecoverTaskResponse> DriverClient::RecoverTask(
    const driver::v1::RecoverTaskRequest& request, const CallOptions& options) {
  return Unary("DriverService.RecoverTask",
               Task(request.handle().config().id()), driver_.get(),
               &driver::v1::DriverService::Stub::RecoverTask, request, options);
}

absl::StatusOr<driver::v1::SignalTaskResponse> DriverClient::SignalTask(
    const driver::v1::SignalTaskRequest& request, const CallOptions& options) {
  return Unary("DriverService.SignalTask", Task(request.task_id()),
               driver_.get(), &driver::v1::DriverService::Stub::SignalTask,
               request, options);
}

absl::StatusOr<std::unique_ptr<TaskEventsStream>> DriverClient::TaskEvents(
    const driver::v1::TaskEventsRequest& request, const CallOptions& options) {
  return OpenServerStream("DriverService.TaskEvents", "",
                          &driver::v1::DriverService::Stub::TaskEvents, request,
                          options);
}

absl::StatusOr<std::unique_ptr<TaskStatsStream>> DriverClient::TaskStats(
    const driver::v1::TaskStatsRequest& request, const CallOptions& options) {
  absl::StatusOr<std::unique_ptr<ServerStream<driver::v1::TaskStatsResponse>>>
      stream = OpenServerStream(
          "DriverService.TaskStats", Task(request.task_id()),
          &driver::v1::DriverService::Stub::TaskStats, request, options);
  if (!stream.ok()) return stream.status();
  return std::make_unique<TaskStatsStream>(std::move(*stream));
}

absl::StatusOr<driver::v1::ExecTaskResponse> DriverClient::ExecTask(
    const driver::v1::ExecTaskRequest& request, const CallOptions& options) {
  return Unary("DriverService.ExecTask", Task(request.task_id()), driver_.get(),
               &driver::v1::DriverService::Stub::ExecTask, request, options);
}

absl::StatusOr<std::unique_ptr<ExecStream>> DriverClient::ExecTaskStreaming(
    const CallOptions& options) {
  auto call = std::make_unique<internal::Call>(
      shared_, "DriverService.ExecTaskStreaming", "", options);
  if (absl::Status begun = call->Begin(); !begun.ok()) return begun;
  auto stream = driver_->ExecTaskStreaming(call->context());
  return std::make_unique<ExecStream>(std::move(call), std::move(stream));
}

absl::StatusOr<std::unique_ptr<AttachStream>> DriverClient::AttachTask(
    const CallOptions& options) {
  auto call = std::make_unique<internal::Call>(
      shared_, "DriverService.AttachTask", "", options);
  if (absl::Status begun = call->Begin(); !begun.ok()) return begun;
  auto stream = driver_->AttachTask(call->context());
  return std::make_unique<AttachStream>(std::move(call), std::move(stream));
}

absl::StatusOr<driver::v1::CreateNetworkResponse> DriverClient::CreateNetwork(
    const driver::v1::CreateNetworkRequest& request,
    const CallOptions& options) {
  return Unary("DriverService.CreateNetwork",
               request.allocation_id().empty()
                   ? ""
                   : absl::StrCat("allocation ", request.allocation_id()),
               driver_.get(), &driver::v1::DriverService::Stub::CreateNetwork,
               request, options);
}

absl::StatusOr<driver::v1::DestroyNetworkResponse> DriverClient::DestroyNetwork(
    const driver::v1::DestroyNetworkRequest& request,
    const CallOptions& options) {
  return Unary("DriverService.DestroyNetwork",
               request.allocation_id().empty()
                   ? ""
                   : absl::StrCat("allocation ", request.allocation_id()),
               driver_.get(), &driver::v1::DriverService::Stub::DestroyNetwork,
               request, options);
}

}  // namespace berth::plugin::host
