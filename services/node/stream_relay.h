// DriverStreamRelay: one bidirectional NodeService call (ExecTaskStreaming,
// AttachTask) relayed to the same call of the task's driver. Private to
// //services/node:node_service.

#ifndef SERVICES_NODE_STREAM_RELAY_H_
#define SERVICES_NODE_STREAM_RELAY_H_

#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "plugins/host/driver_client.h"
#include "services/common/status.h"
#include "services/common/stream_log.h"
#include "services/node/task_manager.h"

namespace berth::node {

// Relays one call between the caller and the task's driver: the caller's
// first request is the setup (its task id, a name or prefix, becomes the
// task's full id for the driver); then a thread writes the caller's requests
// to the driver (never a reaction of the call: a driver that stops reading,
// as when the command or task does not read its stdin, must not hold one of
// gRPC's threads), reading ahead at most kUpstreamBytes; another reads the
// driver's responses and writes them to the caller one at a time. Either
// side cancelling cancels the other. The call ends with the driver's status
// (or as DriverStreamEndedOk says). Deletes itself when the call is done.
//
// Subclasses say how the driver's stream is opened (Open) and may add to
// the end of the relay (Relayed, DriverStreamEndedOk).
template <typename Request, typename Response>
class DriverStreamRelay : public grpc::ServerBidiReactor<Request, Response> {
 public:
  using Stream = plugin::host::BidiStream<Request, Response>;

  // Caller requests read ahead of the driver's stream: beyond this the relay
  // stops reading the caller (gRPC's flow control then holds it back), and
  // reads on once the driver has taken half of them.
  static constexpr size_t kUpstreamBytes = 256 * 1024;

  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
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
        // Half-closed by the caller (it sends nothing more), or cancelled.
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

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    write_ok_ = ok;
  }

  void OnCancel() override { canceller_.Cancel(); }

  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stop_upstream_ = true;
    }
    for (std::thread* thread : {&upstream_, &downstream_}) {
      if (!thread->joinable()) continue;
      if (thread->get_id() == std::this_thread::get_id()) {
        thread->detach();
      } else {
        thread->join();
      }
    }
    delete this;
  }

 protected:
  // `rpc` names the call in LogStreamEnd.
  DriverStreamRelay(TaskManager* tasks, grpc::CallbackServerContext* context,
                    const char* rpc)
      : tasks_(tasks), context_(context), rpc_(rpc) {
    this->StartRead(&request_);
  }

  // The driver's stream of the task `target` (the running task the setup
  // named), opened with `options`; an error ends the call.
  virtual absl::StatusOr<std::unique_ptr<Stream>> Open(
      const TaskManager::Target& target,
      const plugin::host::CallOptions& options) = 0;

  // Each response of the driver's, before it goes to the caller (on the
  // thread that reads the driver).
  virtual void Relayed(const Response& /*response*/) {}

  // The driver's stream ended OK and the caller is still there: ends the
  // call (FinishCall), by default OK.
  virtual void DriverStreamEndedOk() { FinishCall(grpc::Status::OK); }

  TaskManager* tasks() const { return tasks_; }
  grpc::CallbackServerContext* context() const { return context_; }

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

  // Ends the call as cancelled by the caller.
  void Cancelled() {
    const grpc::Status cancelled(grpc::StatusCode::CANCELLED, "cancelled");
    LogStreamEnd(rpc_, cancelled, /*caller_cancelled=*/true);
    FinishCall(cancelled);
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

 private:
  absl::Status Start() {
    if (!request_.has_setup()) {
      return absl::InvalidArgumentError("the first request must be the setup");
    }
    absl::StatusOr<TaskManager::Target> target =
        tasks_->RunningTarget(request_.setup().task_id());
    if (!target.ok()) return target.status();
    // The driver knows the task by its full id, not a name or prefix.
    request_.mutable_setup()->set_task_id(target->id);
    absl::StatusOr<std::unique_ptr<Stream>> stream =
        Open(*target, {absl::InfiniteFuture(), &canceller_});
    if (!stream.ok()) return stream.status();
    if (absl::Status s = (*stream)->Write(request_); !s.ok()) return s;
    request_.Clear();
    stream_ = *std::move(stream);
    upstream_ = std::thread([this] { Upstream(); });
    downstream_ = std::thread([this] { Downstream(); });
    return absl::OkStatus();
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

  // The caller's requests, in order, to the driver; its half-close as the
  // driver stream's (for exec, the command's stdin ends). A request the
  // driver's stream no longer takes (it has ended: Downstream finishes the
  // call) is dropped.
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
    if (writable && !context_->IsCancelled()) (void)stream_->WritesDone();
  }

  void Downstream() {
    while (true) {
      absl::StatusOr<std::optional<Response>> next = stream_->Read();
      if (!next.ok() || !next->has_value()) break;
      Relayed(**next);
      if (!Send(**std::move(next))) {
        canceller_.Cancel();
        break;
      }
    }
    absl::Status finished = stream_->Finish();
    if (context_->IsCancelled()) {
      Cancelled();
      return;
    }
    if (!finished.ok()) {
      FinishCall(ToGrpcStatus(finished));
      return;
    }
    DriverStreamEndedOk();
  }

  TaskManager* const tasks_;
  grpc::CallbackServerContext* const context_;
  const char* const rpc_;
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

}  // namespace berth::node

#endif  // SERVICES_NODE_STREAM_RELAY_H_
