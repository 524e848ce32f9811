#include "plugins/sdk/exec_adapter.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
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
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "plugins/sdk/exec.h"
#include "plugins/sdk/proto_time.h"
#include "services/common/status.h"

namespace berth::plugin::internal {
namespace {

using driver::v1::ExecSetup;
using driver::v1::ExecTaskStreamingRequest;
using driver::v1::ExecTaskStreamingResponse;

// How much stdin (or, at the raw level, how many request bytes) is queued
// ahead of the driver before the SDK stops reading the stream, which then
// holds the caller back by gRPC's flow control.
constexpr size_t kQueueBytes = 256 * 1024;

// Output frames queued for writing (each from a reused buffer of at most
// kMaxExecFrameBytes; 1 MiB in all): a writer that finds them all taken
// waits until only kLowWaterFrames remain, so that it is not woken for
// every frame written.
constexpr size_t kWindowFrames = 32;
constexpr size_t kLowWaterFrames = kWindowFrames / 4;

// How often a blocked ResizeEvents::WaitUntil looks at the cancellation.
constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(50);

// Where output goes: the call's write side.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  virtual bool WriteOutput(bool is_stderr, absl::string_view data) = 0;
  virtual bool WriteResponse(const ExecTaskStreamingResponse& response) = 0;
};

class OutputWriter : public ExecOutput {
 public:
  OutputWriter(FrameSink* sink, bool is_stderr)
      : sink_(sink), is_stderr_(is_stderr) {}
  bool Write(absl::string_view data) override {
    return sink_->WriteOutput(is_stderr_, data);
  }

 private:
  FrameSink* const sink_;
  const bool is_stderr_;
};

// Stdin between the reactor (Push, End) and the driver (Read, Close). Push
// never blocks: it says whether there is room for more, and once there was
// not, `on_room` is called (outside the lock) when the driver made room.
class StdinPipe : public ExecStdin {
 public:
  explicit StdinPipe(std::function<void()> on_room)
      : on_room_(std::move(on_room)) {}

  // Queues `data` (dropped once stdin ended or the driver closed it).
  // Returns whether there is room for more.
  bool Push(std::string data) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (closed_ || ended_) return true;
    queued_ += data.size();
    chunks_.push_back(std::move(data));
    if (queued_ < kQueueBytes) return true;
    want_room_ = true;
    return false;
  }

  bool HasRoom() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return closed_ || ended_ || queued_ < kQueueBytes;
  }

  // The end of stdin, after what is queued.
  void End() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }

  size_t Read(char* buffer, size_t size) override ABSL_LOCKS_EXCLUDED(mu_) {
    if (size == 0) return 0;
    size_t n = 0;
    bool notify = false;
    {
      absl::MutexLock lock(&mu_);
      auto readable = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return closed_ || ended_ || !chunks_.empty();
      };
      mu_.Await(absl::Condition(&readable));
      if (closed_ || chunks_.empty()) return 0;
      // As much as is queued, across frames: fewer, larger writes onward.
      while (n < size && !chunks_.empty()) {
        const std::string& front = chunks_.front();
        const size_t take = std::min(size - n, front.size() - offset_);
        std::memcpy(buffer + n, front.data() + offset_, take);
        n += take;
        offset_ += take;
        queued_ -= take;
        if (offset_ == front.size()) {
          chunks_.pop_front();
          offset_ = 0;
        }
      }
      if (want_room_ && queued_ < kQueueBytes) {
        want_room_ = false;
        notify = true;
      }
    }
    if (notify) on_room_();
    return n;
  }

  void Close() override ABSL_LOCKS_EXCLUDED(mu_) {
    bool notify = false;
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      chunks_.clear();
      queued_ = 0;
      offset_ = 0;
      notify = want_room_;
      want_room_ = false;
    }
    if (notify) on_room_();
  }

 private:
  const std::function<void()> on_room_;
  absl::Mutex mu_;
  std::deque<std::string> chunks_ ABSL_GUARDED_BY(mu_);
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;  // into chunks_.front()
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // bytes not read yet
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool want_room_ ABSL_GUARDED_BY(mu_) = false;
};

// The latest terminal size not yet taken.
class ResizeSlot : public ResizeEvents {
 public:
  explicit ResizeSlot(const CancelToken* cancel)
      : cancel_(cancel), event_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    PLOG_IF(ERROR, !event_fd_) << "cannot make an eventfd for resizes";
  }

  void Put(TerminalSize size) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const bool was_pending = pending_.has_value();
    pending_ = size;
    if (!was_pending && event_fd_) {
      const uint64_t one = 1;
      (void)!write(event_fd_.get(), &one, sizeof(one));
    }
  }

  std::optional<TerminalSize> TakeLatest() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::optional<TerminalSize> taken;
    taken.swap(pending_);
    if (taken.has_value() && event_fd_) {
      uint64_t count;
      (void)!read(event_fd_.get(), &count, sizeof(count));
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

  int fd() override { return event_fd_.get(); }

 private:
  const CancelToken* const cancel_;
  const base::UniqueFd event_fd_;
  absl::Mutex mu_;
  std::optional<TerminalSize> pending_ ABSL_GUARDED_BY(mu_);
};

// Requests for the raw level, between the reactor and the driver; room as
// for StdinPipe.
class RequestQueue {
 public:
  explicit RequestQueue(std::function<void()> on_room)
      : on_room_(std::move(on_room)) {}

  bool Push(ExecTaskStreamingRequest request) ABSL_LOCKS_EXCLUDED(mu_) {
    const size_t size = request.ByteSizeLong();
    absl::MutexLock lock(&mu_);
    if (closed_ || ended_) return true;
    queued_ += size;
    requests_.push_back({std::move(request), size});
    if (queued_ < kQueueBytes) return true;
    want_room_ = true;
    return false;
  }

  bool HasRoom() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return closed_ || ended_ || queued_ < kQueueBytes;
  }

  void End() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }

  bool Pop(ExecTaskStreamingRequest* request) ABSL_LOCKS_EXCLUDED(mu_) {
    bool notify = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return closed_ || ended_ || !requests_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (closed_ || requests_.empty()) return false;
      *request = std::move(requests_.front().request);
      queued_ -= requests_.front().size;
      requests_.pop_front();
      if (want_room_ && queued_ < kQueueBytes) {
        want_room_ = false;
        notify = true;
      }
    }
    if (notify) on_room_();
    return true;
  }

  void Close() ABSL_LOCKS_EXCLUDED(mu_) {
    bool notify = false;
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      requests_.clear();
      queued_ = 0;
      notify = want_room_;
      want_room_ = false;
    }
    if (notify) on_room_();
  }

 private:
  struct Queued {
    ExecTaskStreamingRequest request;
    size_t size;
  };
  const std::function<void()> on_room_;
  absl::Mutex mu_;
  std::deque<Queued> requests_ ABSL_GUARDED_BY(mu_);
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool want_room_ ABSL_GUARDED_BY(mu_) = false;
};

class RawStream : public ExecTaskStream {
 public:
  RawStream(const ExecSetup& setup, FrameSink* sink, RequestQueue* queue,
            const CancelToken* cancel)
      : setup_(setup), sink_(sink), queue_(queue), cancel_(cancel) {}

  const ExecSetup& setup() const override { return setup_; }
  bool Recv(ExecTaskStreamingRequest* request) override {
    return queue_->Pop(request);
  }
  void CloseRecv() override { queue_->Close(); }
  bool Send(const ExecTaskStreamingResponse& response) override {
    return sink_->WriteResponse(response);
  }
  const CancelToken& cancel() const override { return *cancel_; }

 private:
  const ExecSetup& setup_;
  FrameSink* const sink_;
  RequestQueue* const queue_;
  const CancelToken* const cancel_;
};

// Threads for the calls' drivers, kept for the next call a while after
// theirs (starting a thread per call costs up to milliseconds on a loaded
// machine); one more is started when none is idle.
class CallThreads {
 public:
  static void Run(std::function<void()> work) {
    // Never destroyed: idle threads may outlive main().
    static CallThreads* const threads = new CallThreads;
    threads->Add(std::move(work));
  }

 private:
  static constexpr absl::Duration kIdle = absl::Seconds(30);

  void Add(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    work_.push_back(std::move(work));
    if (idle_ >= work_.size()) return;  // an idle thread takes it
    ++idle_;  // the new thread counts as idle until it takes work
    std::thread([this] { Loop(); }).detach();
  }

  bool HasWork() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !work_.empty();
  }

  void Loop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (true) {
      if (!mu_.AwaitWithTimeout(absl::Condition(this, &CallThreads::HasWork),
                                kIdle)) {
        --idle_;
        return;
      }
      std::function<void()> work = std::move(work_.front());
      work_.pop_front();
      --idle_;
      mu_.Unlock();
      work();
      work = nullptr;
      mu_.Lock();
      ++idle_;
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
};

grpc::Status CancelledStatus(const std::string& task_id) {
  return grpc::Status(
      grpc::StatusCode::CANCELLED,
      absl::StrCat("ExecTaskStreaming of task ", task_id, " was cancelled"));
}

// One ExecTaskStreaming call. The reactor's callbacks never block: they
// read the setup, then keep one read outstanding (while the driver's queue
// has room) and route what it gets. The checks and the driver run on a
// thread of CallThreads. Output goes through a window of kWindowFrames
// frames, each slot with a reused buffer: the driver's thread queues frames
// and waits while the window is full (so that a caller that does not read
// holds the driver back); one write is outstanding at a time, the next
// started from OnWriteDone. The high level's exit frame is queued after all
// output, and the call is finished from OnWriteDone once it is written,
// without waiting for the caller's half-close; otherwise from the driver's
// thread once the window is drained. The reactor deletes itself when both
// the call is done (OnDone) and the driver's thread is through with it.
class ExecCall final : public ExecReactor, public FrameSink {
 public:
  ExecCall(Driver& driver, grpc::CallbackServerContext* context, ExecEnd on_end)
      : driver_(driver),
        context_(context),
        on_end_(std::move(on_end)),
        raw_(dynamic_cast<RawExecStreamingDriver*>(&driver)),
        high_level_(dynamic_cast<ExecStreamingDriver*>(&driver)),
        in_([this] { ResumeRead(); }),
        resizes_(&token_),
        queue_([this] { ResumeRead(); }),
        out_(this, /*is_stderr=*/false),
        err_(this, /*is_stderr=*/true) {
    for (Slot& slot : slots_) {
      slot.buffer = new std::string;
      slot.buffer->reserve(kMaxExecFrameBytes);
    }
    if (raw_ == nullptr && high_level_ == nullptr) {
      FinishCall(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                              absl::StrCat("driver ", driver.Info().name,
                                           " does not implement "
                                           "ExecTaskStreaming")));
      return;
    }
    StartRead(&request_);
  }

  ~ExecCall() override {
    for (Slot& slot : slots_) delete slot.buffer;  // null while lent
  }

  // ---- reactions ----

  void OnReadDone(bool ok) override {
    if (!got_setup_) {
      got_setup_ = true;
      OnSetup(ok);
      return;
    }
    if (!ok) {  // half-closed or cancelled
      in_.End();
      queue_.End();
      return;
    }
    if (Route()) {
      StartNextRead();
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      read_paused_ = true;
    }
    // The driver may have made room meanwhile.
    if (raw_ != nullptr ? queue_.HasRoom() : in_.HasRoom()) ResumeRead();
  }

  // Writes are chained from here: the next queued frame, if any. Once the
  // high level's exit frame is written, the call ends here.
  void OnWriteDone(bool ok) override {
    ExecTaskStreamingResponse* next = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        write_failed_ = true;
        open_ = false;
        queued_ = 0;
        write_in_flight_ = false;
        return;
      }
      const bool was_exit = slots_[head_].response.has_exit();
      head_ = (head_ + 1) % kWindowFrames;
      --queued_;
      if (queued_ == 0) {
        write_in_flight_ = false;
      } else {
        next = &slots_[head_].response;
      }
      if (was_exit && finish_after_exit_ && !finish_taken_) {
        finish_taken_ = true;
        finished_ = true;
        finish = true;
        mu_.Await(absl::Condition(this, &ExecCall::NoReadStarting));
      }
    }
    if (finish) {
      on_end_(grpc::Status::OK,
              caller_cancelled_.load() || context_->IsCancelled());
      Finish(grpc::Status::OK);
      return;
    }
    if (next != nullptr) StartWrite(next);
  }

  void OnCancel() override {
    caller_cancelled_.store(true);
    token_.Cancel();
    in_.End();
    queue_.End();
  }

  void OnDone() override { Unref(); }

  // ---- FrameSink ----

  bool WriteOutput(bool is_stderr, absl::string_view data) override
      ABSL_LOCKS_EXCLUDED(writer_mu_, mu_) {
    absl::MutexLock writer_lock(&writer_mu_);
    while (!data.empty()) {
      const size_t size = std::min(data.size(), kMaxExecFrameBytes);
      const absl::string_view frame = data.substr(0, size);
      data.remove_prefix(size);
      if (!Enqueue([&](Slot& slot) {
            slot.buffer->assign(frame.data(), frame.size());
            // The buffer is lent to the response for the write and taken
            // back before the slot's next.
            if (is_stderr) {
              slot.response.set_allocated_stderr(slot.buffer);
            } else {
              slot.response.set_allocated_stdout(slot.buffer);
            }
            slot.buffer = nullptr;
          })) {
        return false;
      }
    }
    return true;
  }

  bool WriteResponse(const ExecTaskStreamingResponse& response) override
      ABSL_LOCKS_EXCLUDED(writer_mu_, mu_) {
    switch (response.frame_case()) {
      case ExecTaskStreamingResponse::kStdout:
        return WriteOutput(false, response.stdout());
      case ExecTaskStreamingResponse::kStderr:
        return WriteOutput(true, response.stderr());
      default:
        break;
    }
    absl::MutexLock writer_lock(&writer_mu_);
    return Enqueue([&](Slot& slot) { slot.response.CopyFrom(response); });
  }

 private:
  // One frame of the write window.
  struct Slot {
    ExecTaskStreamingResponse response;
    std::string* buffer = nullptr;  // owned; null while lent to response
  };

  bool NoWriteInFlight() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !write_in_flight_;
  }
  bool NoReadStarting() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return starting_reads_ == 0;
  }
  bool WindowOpen() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !open_ || queued_ <= kLowWaterFrames;
  }

  // Queues one frame, filled in by `fill` in a free slot, and starts its
  // write unless a write is outstanding (OnWriteDone then starts it). Waits
  // while the window is full. False once the stream is closed for writing
  // or a write failed. Call with writer_mu_ held: the free slot is the
  // writer's alone (OnWriteDone touches only queued ones), so that it is
  // filled without mu_.
  template <typename Fill>
  bool Enqueue(Fill fill) ABSL_LOCKS_EXCLUDED(mu_) {
    size_t index;
    {
      absl::MutexLock lock(&mu_);
      if (queued_ == kWindowFrames) {
        mu_.Await(absl::Condition(this, &ExecCall::WindowOpen));
      }
      if (!open_) return false;
      index = (head_ + queued_) % kWindowFrames;
    }
    Slot& slot = slots_[index];
    ReclaimBuffer(slot);
    fill(slot);
    ExecTaskStreamingResponse* start = nullptr;
    {
      absl::MutexLock lock(&mu_);
      // Nothing was queued meanwhile (writer_mu_), but a write may have
      // failed and emptied the window.
      if (!open_ || index != (head_ + queued_) % kWindowFrames) return false;
      ++queued_;
      if (!write_in_flight_) {
        write_in_flight_ = true;
        start = &slot.response;
      }
    }
    if (start != nullptr) StartWrite(start);
    return true;
  }

  // Takes the output buffer back from the slot's response and clears it.
  static void ReclaimBuffer(Slot& slot) {
    if (slot.response.has_stdout()) {
      slot.buffer = slot.response.release_stdout();
    } else if (slot.response.has_stderr()) {
      slot.buffer = slot.response.release_stderr();
    } else {
      slot.response.clear_frame();
    }
  }

  void OnSetup(bool ok) {
    if (!ok) {
      FinishCall(context_->IsCancelled() || caller_cancelled_.load()
                     ? CancelledStatus("(no setup)")
                     : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "ExecTaskStreaming: the stream ended "
                                    "before its first request (setup)"));
      return;
    }
    if (request_.frame_case() != ExecTaskStreamingRequest::kSetup) {
      FinishCall(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "ExecTaskStreaming: the first request must "
                              "carry setup"));
      return;
    }
    setup_ = std::move(*request_.mutable_setup());
    request_.Clear();
    if (setup_.task_id().empty()) {
      FinishCall(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "setup.task_id is required"));
      return;
    }
    if (setup_.command().empty() || setup_.command(0).empty()) {
      FinishCall(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              absl::StrCat("setup.command is required (task ",
                                           setup_.task_id(), ")")));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      ++refs_;
    }
    // From now on a read is outstanding whenever the driver's queue has room
    // (if the checks fail, the call ends with it outstanding).
    StartNextRead();
    // The driver may block (InspectTask, the exec itself): never on a
    // reactor thread.
    CallThreads::Run([this] {
      FinishCall(Run());
      Unref();
    });
  }

  // Hands request_ to the driver's side; whether there is room for more.
  bool Route() {
    if (raw_ != nullptr) return queue_.Push(std::move(request_));
    switch (request_.frame_case()) {
      case ExecTaskStreamingRequest::kStdin:
        if (!request_.stdin().empty()) {
          return in_.Push(std::move(*request_.mutable_stdin()));
        }
        break;
      case ExecTaskStreamingRequest::kStdinClose:
        in_.End();
        break;
      case ExecTaskStreamingRequest::kResize:
        resizes_.Put({request_.resize().rows(), request_.resize().columns()});
        break;
      default:
        VLOG(1) << "ExecTaskStreaming: ignoring a request with frame "
                << request_.frame_case() << " after the setup";
        break;
    }
    return true;
  }

  // Starts the next read unless the call is finished (or finishing).
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

  // The driver made room: reads resume if they were paused for it.
  void ResumeRead() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (!read_paused_) return;
      read_paused_ = false;
    }
    StartNextRead();
  }

  // On the call's thread: the checks, then the driver.
  grpc::Status Run() {
    absl::StatusOr<driver::v1::TaskStatus> task =
        driver_.InspectTask(setup_.task_id());
    if (!task.ok()) return ToGrpcStatus(task.status());
    if (task->state() != driver::v1::TASK_STATE_RUNNING) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("task ", setup_.task_id(), " is not running (",
                       driver::v1::TaskState_Name(task->state()), ")"));
    }
    return raw_ != nullptr ? RunRaw() : RunHighLevel();
  }

  bool Cancelled() const {
    return token_.IsCancelled() || caller_cancelled_.load() ||
           context_->IsCancelled();
  }

  grpc::Status RunHighLevel() {
    ExecOptions options;
    options.task_id = setup_.task_id();
    options.command.assign(setup_.command().begin(), setup_.command().end());
    options.tty = setup_.tty();
    options.terminal_size = {setup_.terminal_size().rows(),
                             setup_.terminal_size().columns()};
    options.in = &in_;
    options.out = &out_;
    options.err = &err_;
    options.resizes = &resizes_;
    options.cancel = &token_;
    absl::StatusOr<ExitStatus> exit = high_level_->ExecTaskStreaming(options);
    in_.Close();

    if (Cancelled()) {
      CloseWriter();
      return CancelledStatus(setup_.task_id());
    }
    if (!exit.ok()) {
      CloseWriter();
      return ToGrpcStatus(exit.status());
    }
    if (!CloseWithExit(ToExitResult(*exit))) {
      return Cancelled()
                 ? CancelledStatus(setup_.task_id())
                 : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                absl::StrCat("ExecTaskStreaming of task ",
                                             setup_.task_id(),
                                             ": cannot send the exit frame"));
    }
    return grpc::Status::OK;
  }

  grpc::Status RunRaw() {
    RawStream raw(setup_, this, &queue_, &token_);
    const absl::Status returned = raw_->ExecTaskStreamingRaw(&raw);
    CloseWriter();
    queue_.Close();
    if (Cancelled()) return CancelledStatus(setup_.task_id());
    return ToGrpcStatus(returned);
  }

  // Later writes fail.
  void CloseWriter() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }

  // Sends the exit frame after every write in progress, waits for it to be
  // written and closes the writer.
  bool CloseWithExit(const driver::v1::ExitResult& result)
      ABSL_LOCKS_EXCLUDED(writer_mu_, mu_) {
    absl::MutexLock writer_lock(&writer_mu_);
    {
      absl::MutexLock lock(&mu_);
      finish_after_exit_ = true;
    }
    if (!Enqueue([&](Slot& slot) { *slot.response.mutable_exit() = result; })) {
      return false;
    }
    absl::MutexLock lock(&mu_);
    open_ = false;
    mu_.Await(absl::Condition(this, &ExecCall::NoWriteInFlight));
    return !write_failed_;
  }

  // Logs and finishes the call, once every write completed and no read is
  // being started; no read is started after.
  void FinishCall(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      open_ = false;
      finished_ = true;
      mu_.Await(absl::Condition(this, &ExecCall::NoWriteInFlight));
      if (finish_taken_) return;  // OnWriteDone finished it
      finish_taken_ = true;
      mu_.Await(absl::Condition(this, &ExecCall::NoReadStarting));
    }
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
  const ExecEnd on_end_;
  RawExecStreamingDriver* const raw_;
  ExecStreamingDriver* const high_level_;

  CancelToken token_;
  StdinPipe in_;
  ResizeSlot resizes_;
  RequestQueue queue_;
  OutputWriter out_;
  OutputWriter err_;
  std::atomic<bool> caller_cancelled_{false};

  // Reads are serialized by gRPC: request_, got_setup_ and setup_ (written
  // before the call's thread starts) need no lock.
  ExecTaskStreamingRequest request_;
  bool got_setup_ = false;
  ExecSetup setup_;

  absl::Mutex writer_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one writer at a time
  absl::Mutex mu_;
  // The write window: queued_ frames from slots_[head_] on, the first of
  // them being written while write_in_flight_.
  Slot slots_[kWindowFrames];
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  // The high level's exit frame is queued: OnWriteDone finishes the call
  // once it is written.
  bool finish_after_exit_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_taken_ ABSL_GUARDED_BY(mu_) = false;  // Finish called or due
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  int starting_reads_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int refs_ ABSL_GUARDED_BY(mu_) = 1;  // the reactor; +1 for the thread
};

}  // namespace

bool SupportsExecStreaming(Driver& driver) {
  return dynamic_cast<RawExecStreamingDriver*>(&driver) != nullptr ||
         dynamic_cast<ExecStreamingDriver*>(&driver) != nullptr;
}

ExecReactor* NewExecTaskStreamingReactor(Driver& driver,
                                         grpc::CallbackServerContext* context,
                                         ExecEnd on_end) {
  return new ExecCall(driver, context, std::move(on_end));
}

}  // namespace berth::plugin::internal
