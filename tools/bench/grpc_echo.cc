#include "tools/bench/grpc_echo.h"

#include <deque>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "berth/driver/v1/driver.pb.h"
#include "grpcpp/support/status.h"

namespace berth::bench {
namespace {

using driver::v1::ExecTaskStreamingRequest;
using driver::v1::ExecTaskStreamingResponse;

grpc::Status NoSetup() {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "ExecTaskStreaming: the first request must carry setup");
}

grpc::Status Gone(grpc::CallbackServerContext* context) {
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "ExecTaskStreaming (echo) was cancelled");
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "ExecTaskStreaming (echo): the stream is gone");
}

// One call of EchoService. Reads are chained from OnReadDone and
// writes from OnWriteDone; between them a queue of responses, the front one
// being written. Reading pauses while kEchoQueueBytes of stdin are queued and
// resumes from OnWriteDone. The call is finished from OnWriteDone once the
// exit frame is written (or a write failed), never while a read is being
// started.
class EchoReactor final
    : public grpc::ServerBidiReactor<ExecTaskStreamingRequest,
                                     ExecTaskStreamingResponse> {
 public:
  explicit EchoReactor(grpc::CallbackServerContext* context)
      : context_(context) {
    StartNextRead();
  }

  void OnReadDone(bool ok) override {
    if (!setup_seen_) {
      setup_seen_ = true;
      if (!ok || !request_.has_setup()) {
        FinishOnce(NoSetup());
        return;
      }
      StartNextRead();
      return;
    }
    ExecTaskStreamingResponse* write = nullptr;
    bool read = false;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {  // half-closed (or cancelled): the end of stdin
        EndStdin();
      } else if (!stdin_ended_) {
        switch (request_.frame_case()) {
          case ExecTaskStreamingRequest::kStdin:
            if (!request_.stdin().empty()) {
              queued_bytes_ += request_.stdin().size();
              out_.emplace_back();
              out_.back().mutable_stdout()->swap(*request_.mutable_stdin());
            }
            break;
          case ExecTaskStreamingRequest::kStdinClose:
            EndStdin();
            break;
          default:
            break;
        }
      }
      if (!writing_ && !out_.empty()) {
        writing_ = true;
        write = &out_.front();
      }
      // After the end of stdin nothing more is read: the call ends once the
      // exit frame is written.
      if (ok && !stdin_ended_) {
        read = queued_bytes_ < kEchoQueueBytes;
        read_paused_ = !read;
      }
    }
    if (write != nullptr) StartWrite(write);
    if (read) StartNextRead();
  }

  void OnWriteDone(bool ok) override {
    ExecTaskStreamingResponse* write = nullptr;
    bool read = false;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        writing_ = false;
      } else {
        const bool was_exit = out_.front().has_exit();
        queued_bytes_ -= out_.front().stdout().size();
        out_.pop_front();
        if (was_exit) {
          writing_ = false;
          exit_written_ = true;
        } else if (out_.empty()) {
          writing_ = false;
        } else {
          write = &out_.front();
        }
        if (read_paused_ && queued_bytes_ < kEchoQueueBytes) {
          read_paused_ = false;
          read = true;
        }
      }
    }
    if (!ok) {
      FinishOnce(Gone(context_));
      return;
    }
    if (exit_written_) {  // this thread set it; nothing else writes now
      FinishOnce(grpc::Status::OK);
      return;
    }
    if (write != nullptr) StartWrite(write);
    if (read) StartNextRead();
  }

  void OnDone() override { delete this; }

 private:
  // Queues the exit frame after the stdout frames, once.
  void EndStdin() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stdin_ended_) return;
    stdin_ended_ = true;
    out_.emplace_back();
    out_.back().mutable_exit()->set_exit_code(0);
  }

  bool NoReadStarting() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return starting_reads_ == 0;
  }

  void StartNextRead() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      ++starting_reads_;
    }
    StartRead(&request_);
    absl::MutexLock lock(&mu_);
    --starting_reads_;
  }

  void FinishOnce(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      mu_.Await(absl::Condition(this, &EchoReactor::NoReadStarting));
    }
    Finish(status);
  }

  grpc::CallbackServerContext* const context_;
  ExecTaskStreamingRequest request_;  // the reading side only
  bool setup_seen_ = false;           // the reading side only
  bool exit_written_ = false;         // the writing side only

  absl::Mutex mu_;
  // References stay valid while other elements are added at the back.
  std::deque<ExecTaskStreamingResponse> out_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // out_.front() is written
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool stdin_ended_ ABSL_GUARDED_BY(mu_) = false;
  int starting_reads_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerBidiReactor<ExecTaskStreamingRequest, ExecTaskStreamingResponse>*
EchoService::ExecTaskStreaming(grpc::CallbackServerContext* context) {
  return new EchoReactor(context);
}

}  // namespace berth::bench
