#include "plugins/sdk/exec_adapter.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
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
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/sdk/exec.h"
#include "plugins/sdk/proto_time.h"
#include "services/common/status.h"

namespace berth::plugin::internal {
namespace {

using driver::v1::ExecSetup;
using driver::v1::ExecTaskStreamingRequest;
using driver::v1::ExecTaskStreamingResponse;

// How much stdin (or, at the raw level, how many request bytes) the reader
// thread queues ahead of the driver before it stops reading the stream, which
// then holds the caller back by gRPC's flow control.
constexpr size_t kQueueBytes = 256 * 1024;

// How often a blocked ResizeEvents::WaitUntil looks at the cancellation.
constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(50);

// The write side of the stream: one writer at a time, one response message
// and one buffer reused for every output frame.
class FrameWriter {
 public:
  explicit FrameWriter(ExecServerStream* stream)
      : stream_(stream), buffer_(new std::string) {
    buffer_->reserve(kMaxExecFrameBytes);
  }
  ~FrameWriter() { delete buffer_; }
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;

  bool WriteOutput(bool is_stderr, absl::string_view data)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!open_) return false;
    while (!data.empty()) {
      const size_t size = std::min(data.size(), kMaxExecFrameBytes);
      buffer_->assign(data.data(), size);
      data.remove_prefix(size);
      // The buffer is lent to the response for the write and taken back.
      if (is_stderr) {
        response_.set_allocated_stderr(buffer_);
      } else {
        response_.set_allocated_stdout(buffer_);
      }
      const bool written = stream_->Write(response_);
      buffer_ =
          is_stderr ? response_.release_stderr() : response_.release_stdout();
      if (!written) {
        open_ = false;
        return false;
      }
    }
    return true;
  }

  bool WriteResponse(const ExecTaskStreamingResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_) {
    switch (response.frame_case()) {
      case ExecTaskStreamingResponse::kStdout:
        return WriteOutput(false, response.stdout());
      case ExecTaskStreamingResponse::kStderr:
        return WriteOutput(true, response.stderr());
      default:
        break;
    }
    absl::MutexLock lock(&mu_);
    if (!open_) return false;
    if (!stream_->Write(response)) open_ = false;
    return open_;
  }

  // Sends the exit frame after every write in progress and closes the
  // writer: later writes fail.
  bool CloseWithExit(const driver::v1::ExitResult& result)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!open_) return false;
    open_ = false;
    *response_.mutable_exit() = result;
    const bool written = stream_->Write(response_);
    response_.clear_frame();
    return written;
  }

  void Close() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }

 private:
  ExecServerStream* const stream_;
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  ExecTaskStreamingResponse response_ ABSL_GUARDED_BY(mu_);
  std::string* buffer_ ABSL_GUARDED_BY(mu_);  // owned
};

class OutputWriter : public ExecOutput {
 public:
  OutputWriter(FrameWriter* writer, bool is_stderr)
      : writer_(writer), is_stderr_(is_stderr) {}
  bool Write(absl::string_view data) override {
    return writer_->WriteOutput(is_stderr_, data);
  }

 private:
  FrameWriter* const writer_;
  const bool is_stderr_;
};

// Stdin between the reader thread (Push, End) and the driver (Read, Close).
class StdinPipe : public ExecStdin {
 public:
  // Queues `data`; blocks while kQueueBytes are queued. False (dropping
  // it) once the driver closed stdin.
  bool Push(std::string data) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto room = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return closed_ || queued_ < kQueueBytes;
    };
    mu_.Await(absl::Condition(&room));
    if (closed_ || ended_) return false;
    queued_ += data.size();
    chunks_.push_back(std::move(data));
    return true;
  }

  // The end of stdin, after what is queued.
  void End() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }

  size_t Read(char* buffer, size_t size) override ABSL_LOCKS_EXCLUDED(mu_) {
    if (size == 0) return 0;
    absl::MutexLock lock(&mu_);
    auto readable = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return closed_ || ended_ || !chunks_.empty();
    };
    mu_.Await(absl::Condition(&readable));
    if (closed_ || chunks_.empty()) return 0;
    const std::string& front = chunks_.front();
    const size_t n = std::min(size, front.size() - offset_);
    std::memcpy(buffer, front.data() + offset_, n);
    offset_ += n;
    queued_ -= n;
    if (offset_ == front.size()) {
      chunks_.pop_front();
      offset_ = 0;
    }
    return n;
  }

  void Close() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    chunks_.clear();
    queued_ = 0;
    offset_ = 0;
  }

 private:
  absl::Mutex mu_;
  std::deque<std::string> chunks_ ABSL_GUARDED_BY(mu_);
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;  // into chunks_.front()
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // bytes not read yet
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// The latest terminal size not yet taken.
class ResizeSlot : public ResizeEvents {
 public:
  explicit ResizeSlot(const CancelToken* cancel)
      : cancel_(cancel), event_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    PLOG_IF(ERROR, event_fd_ < 0) << "cannot make an eventfd for resizes";
  }
  ~ResizeSlot() override {
    if (event_fd_ >= 0) close(event_fd_);
  }

  void Put(TerminalSize size) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const bool was_pending = pending_.has_value();
    pending_ = size;
    if (!was_pending && event_fd_ >= 0) {
      const uint64_t one = 1;
      (void)!write(event_fd_, &one, sizeof(one));
    }
  }

  std::optional<TerminalSize> TakeLatest() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::optional<TerminalSize> taken;
    taken.swap(pending_);
    if (taken.has_value() && event_fd_ >= 0) {
      uint64_t count;
      (void)!read(event_fd_, &count, sizeof(count));
    }
    return taken;
  }

  bool WaitUntil(absl::Time deadline) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto pending = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return pending_.has_value();
    };
    while (!pending() && !cancel_->IsCancelled() && absl::Now() < deadline) {
      mu_.AwaitWithDeadline(
          absl::Condition(&pending),
          std::min(deadline, absl::Now() + kCancelPollInterval));
    }
    return pending_.has_value();
  }

  int fd() override { return event_fd_; }

 private:
  const CancelToken* const cancel_;
  const int event_fd_;
  absl::Mutex mu_;
  std::optional<TerminalSize> pending_ ABSL_GUARDED_BY(mu_);
};

// Requests for the raw level, between the reader thread and the driver.
class RequestQueue {
 public:
  void Push(ExecTaskStreamingRequest request) ABSL_LOCKS_EXCLUDED(mu_) {
    const size_t size = request.ByteSizeLong();
    absl::MutexLock lock(&mu_);
    auto room = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return closed_ || queued_ < kQueueBytes;
    };
    mu_.Await(absl::Condition(&room));
    if (closed_) return;
    queued_ += size;
    requests_.push_back({std::move(request), size});
  }

  void End() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }

  bool Pop(ExecTaskStreamingRequest* request) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return closed_ || ended_ || !requests_.empty();
    };
    mu_.Await(absl::Condition(&ready));
    if (closed_ || requests_.empty()) return false;
    *request = std::move(requests_.front().request);
    queued_ -= requests_.front().size;
    requests_.pop_front();
    return true;
  }

  void Close() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    requests_.clear();
    queued_ = 0;
  }

 private:
  struct Queued {
    ExecTaskStreamingRequest request;
    size_t size;
  };
  absl::Mutex mu_;
  std::deque<Queued> requests_ ABSL_GUARDED_BY(mu_);
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

class RawStream : public ExecTaskStream {
 public:
  RawStream(const ExecSetup& setup, FrameWriter* writer, RequestQueue* queue,
            const CancelToken* cancel)
      : setup_(setup), writer_(writer), queue_(queue), cancel_(cancel) {}

  const ExecSetup& setup() const override { return setup_; }
  bool Recv(ExecTaskStreamingRequest* request) override {
    return queue_->Pop(request);
  }
  void CloseRecv() override { queue_->Close(); }
  bool Send(const ExecTaskStreamingResponse& response) override {
    return writer_->WriteResponse(response);
  }
  const CancelToken& cancel() const override { return *cancel_; }

 private:
  const ExecSetup& setup_;
  FrameWriter* const writer_;
  RequestQueue* const queue_;
  const CancelToken* const cancel_;
};

// Reads the stream until the caller half-closes or cancels it, handing each
// request to `route`; then calls `end` and notifies `done`.
template <typename Route, typename End>
std::thread StartReader(grpc::ServerContext* context, ExecServerStream* stream,
                        CancelToken* token, absl::Notification* done,
                        Route route, End end) {
  return std::thread([=] {
    ExecTaskStreamingRequest request;
    while (stream->Read(&request)) route(request);
    end();
    if (context->IsCancelled()) token->Cancel();
    done->Notify();
  });
}

// Waits for the reader thread: for the caller to half-close, or cancels the
// call after kHalfCloseGrace.
void FinishReader(grpc::ServerContext* context, const std::string& task_id,
                  const CancelToken& token, absl::Notification* done,
                  std::thread* reader) {
  // A cancelled call's pending Read does not always return at once (with
  // the "poll" polling engine it waits for other traffic): make it.
  if (token.IsCancelled() || context->IsCancelled()) context->TryCancel();
  if (!done->WaitForNotificationWithTimeout(kHalfCloseGrace)) {
    VLOG(1) << "ExecTaskStreaming of task " << task_id
            << ": the caller did not half-close the stream within "
            << absl::FormatDuration(kHalfCloseGrace)
            << " after the end; cancelling the call";
    context->TryCancel();
  }
  reader->join();
}

grpc::Status CancelledStatus(const std::string& task_id) {
  return grpc::Status(
      grpc::StatusCode::CANCELLED,
      absl::StrCat("ExecTaskStreaming of task ", task_id, " was cancelled"));
}

grpc::Status RunHighLevel(ExecStreamingDriver& exec, const ExecSetup& setup,
                          grpc::ServerContext* context,
                          ExecServerStream* stream, CancelToken* token) {
  FrameWriter writer(stream);
  OutputWriter out(&writer, /*is_stderr=*/false);
  OutputWriter err(&writer, /*is_stderr=*/true);
  StdinPipe in;
  ResizeSlot resizes(token);

  absl::Notification reader_done;
  std::thread reader = StartReader(
      context, stream, token, &reader_done,
      [&in, &resizes](ExecTaskStreamingRequest& request) {
        switch (request.frame_case()) {
          case ExecTaskStreamingRequest::kStdin:
            if (!request.stdin().empty()) {
              in.Push(std::move(*request.mutable_stdin()));
            }
            break;
          case ExecTaskStreamingRequest::kStdinClose:
            in.End();
            break;
          case ExecTaskStreamingRequest::kResize:
            resizes.Put({request.resize().rows(), request.resize().columns()});
            break;
          default:
            VLOG(1) << "ExecTaskStreaming: ignoring a request with frame "
                    << request.frame_case() << " after the setup";
            break;
        }
      },
      [&in] { in.End(); });

  ExecOptions options;
  options.task_id = setup.task_id();
  options.command.assign(setup.command().begin(), setup.command().end());
  options.tty = setup.tty();
  options.terminal_size = {setup.terminal_size().rows(),
                           setup.terminal_size().columns()};
  options.in = &in;
  options.out = &out;
  options.err = &err;
  options.resizes = &resizes;
  options.cancel = token;
  absl::StatusOr<ExitStatus> exit = exec.ExecTaskStreaming(options);
  in.Close();

  grpc::Status status;
  if (token->IsCancelled() || context->IsCancelled()) {
    writer.Close();
    status = CancelledStatus(setup.task_id());
  } else if (!exit.ok()) {
    writer.Close();
    status = ToGrpcStatus(exit.status());
  } else if (!writer.CloseWithExit(ToExitResult(*exit))) {
    status = context->IsCancelled()
                 ? CancelledStatus(setup.task_id())
                 : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                absl::StrCat("ExecTaskStreaming of task ",
                                             setup.task_id(),
                                             ": cannot send the exit frame"));
  }
  FinishReader(context, setup.task_id(), *token, &reader_done, &reader);
  return status;
}

grpc::Status RunRaw(RawExecStreamingDriver& exec, const ExecSetup& setup,
                    grpc::ServerContext* context, ExecServerStream* stream,
                    CancelToken* token) {
  FrameWriter writer(stream);
  RequestQueue queue;
  absl::Notification reader_done;
  std::thread reader = StartReader(
      context, stream, token, &reader_done,
      [&queue](ExecTaskStreamingRequest& request) {
        queue.Push(std::move(request));
      },
      [&queue] { queue.End(); });

  RawStream raw(setup, &writer, &queue, token);
  const absl::Status returned = exec.ExecTaskStreamingRaw(&raw);
  writer.Close();
  queue.Close();

  grpc::Status status = ToGrpcStatus(returned);
  if (token->IsCancelled() || context->IsCancelled()) {
    status = CancelledStatus(setup.task_id());
  }
  FinishReader(context, setup.task_id(), *token, &reader_done, &reader);
  return status;
}

}  // namespace

bool SupportsExecStreaming(Driver& driver) {
  return dynamic_cast<RawExecStreamingDriver*>(&driver) != nullptr ||
         dynamic_cast<ExecStreamingDriver*>(&driver) != nullptr;
}

grpc::Status ServeExecTaskStreaming(Driver& driver,
                                    grpc::ServerContext* context,
                                    ExecServerStream* stream,
                                    CallWatcher& watcher) {
  auto* raw = dynamic_cast<RawExecStreamingDriver*>(&driver);
  auto* high_level = dynamic_cast<ExecStreamingDriver*>(&driver);
  if (raw == nullptr && high_level == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        absl::StrCat("driver ", driver.Info().name,
                                     " does not implement ExecTaskStreaming"));
  }

  ExecTaskStreamingRequest first;
  if (!stream->Read(&first)) {
    if (context->IsCancelled()) return CancelledStatus("(no setup)");
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "ExecTaskStreaming: the stream ended before its "
                        "first request (setup)");
  }
  if (first.frame_case() != ExecTaskStreamingRequest::kSetup) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "ExecTaskStreaming: the first request must carry "
                        "setup");
  }
  const ExecSetup& setup = first.setup();
  if (setup.task_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "setup.task_id is required");
  }
  if (setup.command().empty() || setup.command(0).empty()) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("setup.command is required (task ", setup.task_id(), ")"));
  }
  absl::StatusOr<driver::v1::TaskStatus> task =
      driver.InspectTask(setup.task_id());
  if (!task.ok()) return ToGrpcStatus(task.status());
  if (task->state() != driver::v1::TASK_STATE_RUNNING) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("task ", setup.task_id(), " is not running (",
                     driver::v1::TaskState_Name(task->state()), ")"));
  }

  CancelToken token;
  CallWatcher::Registration registration(watcher, context, &token);
  if (raw != nullptr) return RunRaw(*raw, setup, context, stream, &token);
  return RunHighLevel(*high_level, setup, context, stream, &token);
}

}  // namespace berth::plugin::internal
