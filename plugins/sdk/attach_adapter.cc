#include "plugins/sdk/attach_adapter.h"

#include <atomic>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "plugins/sdk/attach.h"
#include "services/common/status.h"

namespace berth::plugin::internal {
namespace {

using driver::v1::AttachSetup;
using driver::v1::AttachTaskRequest;
using driver::v1::AttachTaskResponse;

// Request bytes read ahead of the driver before the SDK stops reading the
// stream (gRPC's flow control then holds the caller back).
constexpr size_t kQueueBytes = 256 * 1024;

class AttachCall final : public AttachReactor, public AttachTaskStream {
 public:
  AttachCall(Driver& driver, grpc::CallbackServerContext* context,
             AttachEnd on_end)
      : driver_(driver), context_(context), on_end_(std::move(on_end)) {
    StartRead(&request_);
  }

  // ---- AttachTaskStream ----

  const AttachSetup& setup() const override { return setup_; }

  bool Recv(AttachTaskRequest* request) override ABSL_LOCKS_EXCLUDED(mu_) {
    bool resume = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &AttachCall::RecvReady));
      if (queue_.empty()) return false;
      *request = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= request->ByteSizeLong();
      if (paused_ && queued_bytes_ < kQueueBytes / 2 && !finished_) {
        paused_ = false;
        ++reads_starting_;
        resume = true;
      }
    }
    if (resume) StartNextRead();
    return true;
  }

  void CloseRecv() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    recv_closed_ = true;
    queue_.clear();
  }

  bool Send(const AttachTaskResponse& response) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      // One write at a time: the driver's threads queue here.
      mu_.Await(absl::Condition(
          +[](AttachCall* call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(call->mu_) {
            return !call->writing_ || call->finished_;
          },
          this));
      if (finished_ || write_failed_ || token_.IsCancelled()) return false;
      // Finish waits for writing_ to clear.
      writing_ = true;
      response_ = response;
    }
    StartWrite(&response_);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](AttachCall* call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(call->mu_) {
          return !call->writing_;
        },
        this));
    return !write_failed_;
  }

  const CancelToken& cancel() const override { return token_; }

  // ---- reactions ----

  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    if (!got_setup_) {
      got_setup_ = true;
      OnSetup(ok);
      return;
    }
    bool again = false;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        read_ended_ = true;  // half-closed or cancelled
        return;
      }
      if (!recv_closed_) {
        queued_bytes_ += request_.ByteSizeLong();
        queue_.push_back(std::move(request_));
      }
      request_.Clear();
      if (finished_) return;
      if (queued_bytes_ >= kQueueBytes) {
        paused_ = true;
      } else {
        ++reads_starting_;
        again = true;
      }
    }
    if (again) StartNextRead();
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) write_failed_ = true;
  }

  void OnCancel() override {
    caller_cancelled_.store(true);
    token_.Cancel();
    absl::MutexLock lock(&mu_);
    read_ended_ = true;
  }

  void OnDone() override { Unref(); }

 private:
  void OnSetup(bool ok) {
    if (!ok) {
      FinishCall(grpc::Status(grpc::StatusCode::CANCELLED,
                              "AttachTask was cancelled by its caller before "
                              "its setup"));
      return;
    }
    if (request_.frame_case() != AttachTaskRequest::kSetup) {
      FinishCall(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       "the first request of AttachTask must be a setup"));
      return;
    }
    if (request_.setup().task_id().empty()) {
      FinishCall(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "setup.task_id is required"));
      return;
    }
    setup_ = request_.setup();
    request_.Clear();
    {
      absl::MutexLock lock(&mu_);
      ++refs_;  // the driver's thread
      ++reads_starting_;
    }
    StartNextRead();
    std::thread([this] {
      FinishCall(Run());
      Unref();
    }).detach();
  }

  grpc::Status Run() {
    const absl::Status status = driver_.AttachTask(this);
    if (caller_cancelled_.load() || context_->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          absl::StrCat("AttachTask of task ", setup_.task_id(),
                                       " was cancelled by its caller"));
    }
    return ToGrpcStatus(status);
  }

  // StartRead for a read counted in reads_starting_.
  void StartNextRead() ABSL_LOCKS_EXCLUDED(mu_) {
    StartRead(&request_);
    absl::MutexLock lock(&mu_);
    --reads_starting_;
  }

  bool RecvReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || read_ended_ || recv_closed_ || finished_;
  }

  void FinishCall(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      mu_.Await(absl::Condition(
          +[](AttachCall* call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(call->mu_) {
            return !call->writing_ && call->reads_starting_ == 0;
          },
          this));
    }
    token_.Cancel();  // the stream has ended: whatever the driver waits on
    on_end_(status, caller_cancelled_.load() || context_->IsCancelled());
    Finish(status);
  }

  void Unref() ABSL_LOCKS_EXCLUDED(mu_) {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      last = --refs_ == 0;
    }
    if (last) delete this;
  }

  Driver& driver_;
  grpc::CallbackServerContext* const context_;
  const AttachEnd on_end_;
  CancelToken token_;
  std::atomic<bool> caller_cancelled_{false};
  // Only the reactor's reads touch these (one read at a time).
  bool got_setup_ = false;
  AttachTaskRequest request_;
  AttachSetup setup_;

  absl::Mutex mu_;
  std::deque<AttachTaskRequest> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool read_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool recv_closed_ ABSL_GUARDED_BY(mu_) = false;
  int reads_starting_ ABSL_GUARDED_BY(mu_) = 0;
  // Written by the one Send that set writing_, read by gRPC until
  // OnWriteDone.
  AttachTaskResponse response_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int refs_ ABSL_GUARDED_BY(mu_) = 1;  // the reactor; +1 for the thread
};

}  // namespace

AttachReactor* NewAttachTaskReactor(Driver& driver,
                                    grpc::CallbackServerContext* context,
                                    AttachEnd on_end) {
  return new AttachCall(driver, context, std::move(on_end));
}

}  // namespace berth::plugin::internal
