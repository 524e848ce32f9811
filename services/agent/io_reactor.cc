#include "services/agent/io_reactor.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "services/agent/deadline.h"
#include "services/agent/output_window.h"
#include "services/common/status.h"

namespace berth::agent {

IoReactor::IoReactor(grpc::CallbackServerContext* context, FindProcess find)
    : find_(std::move(find)) {
  if (!HasDeadline(*context)) {
    pre_finished_ = true;
    Finish(NoDeadline());
    return;
  }
  StartRead(&request_);
}

void IoReactor::OnReadDone(bool ok) {
  std::shared_ptr<Process> process;
  {
    absl::MutexLock lock(&mu_);
    process = process_;
    if (process == nullptr) {
      if (!ok || cancelled_) {
        pre_finished_ = true;
        Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                            "the stream ended before it attached"));
        return;
      }
    }
  }
  if (process == nullptr) {
    Attach();
    return;
  }
  // After the attach: a failed read is a half-close or a cancel (OnCancel).
  if (!ok) return;
  absl::MutexLock lock(&process->mu);
  if (finished_) return;
  switch (request_.frame_case()) {
    case v1::ProcessIoRequest::kStdin:
      if (process->stdin_closed || process->stdin_close_requested) break;
      if (process->stdin_pending.empty()) {
        process->stdin_pending.swap(*request_.mutable_stdin());
      } else {
        process->stdin_pending.append(request_.stdin());
      }
      process->Wake();
      // Read on once the process took it: stdin's back-pressure.
      read_paused_ = true;
      return;
    case v1::ProcessIoRequest::kStdinClose:
      process->stdin_close_requested = true;
      process->Wake();
      break;
    case v1::ProcessIoRequest::kAck: {
      const v1::OutputAck& ack = request_.ack();
      absl::Status status = process->out.Ack(ack.stdout_offset());
      if (status.ok()) status = process->err.Ack(ack.stderr_offset());
      if (!status.ok()) {
        FinishAttached(*process, ToGrpcStatus(status));
        return;
      }
      process->Wake();  // there may be room to read again
      Acked(*process, ack.stdout_offset(), ack.stderr_offset());
      break;
    }
    case v1::ProcessIoRequest::kAttach:
      FinishAttached(*process,
                     grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "attach: only the first request attaches"));
      return;
    default:
      FinishAttached(*process,
                     grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "frame: a request carries nothing"));
      return;
  }
  StartRead(&request_);
}

void IoReactor::Attach() {
  absl::MutexLock lock(&mu_);
  const auto fail = [this](const absl::Status& status) {
    pre_finished_ = true;
    Finish(ToGrpcStatus(status));
  };
  if (cancelled_) {
    return fail(absl::CancelledError("cancelled before it attached"));
  }
  if (request_.frame_case() != v1::ProcessIoRequest::kAttach) {
    return fail(absl::InvalidArgumentError(
        "attach: the first request must attach to a process"));
  }
  const v1::ProcessIoAttach& attach = request_.attach();
  absl::StatusOr<std::shared_ptr<Process>> found =
      find_(attach.container_id(), attach.process_id());
  if (!found.ok()) return fail(found.status());
  std::shared_ptr<Process> process = *std::move(found);
  absl::MutexLock process_lock(&process->mu);
  absl::Status status = process->out.CheckResume(attach.stdout_offset());
  if (status.ok()) status = process->err.CheckResume(attach.stderr_offset());
  if (!status.ok()) {
    return fail(absl::OutOfRangeError(
        absl::StrCat(process->name(), ": ", status.message())));
  }
  // What comes before the offsets was delivered.
  (void)process->out.Ack(attach.stdout_offset());
  (void)process->err.Ack(attach.stderr_offset());
  if (process->reactor != nullptr) {
    process->reactor->FinishAttached(
        *process, grpc::Status(grpc::StatusCode::ABORTED,
                               absl::StrCat("another ProcessIo attached to ",
                                            process->name())));
  }
  process_ = process;
  process->reactor = this;
  out_sent_ = attach.stdout_offset();
  err_sent_ = attach.stderr_offset();
  VLOG(1) << "ProcessIo attached to " << process->name() << " at stdout "
          << out_sent_ << ", stderr " << err_sent_;
  process->Wake();
  MaybeWrite(*process);
  StartRead(&request_);
}

void IoReactor::MaybeWrite(Process& p) {
  if (finished_ || writing_) return;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool is_err = err_next_ != (attempt == 1);
    OutputWindow& window = is_err ? p.err : p.out;
    uint64_t& sent = is_err ? err_sent_ : out_sent_;
    response_.Clear();
    v1::OutputChunk* chunk = is_err ? response_.mutable_stderr_chunk()
                                    : response_.mutable_stdout_chunk();
    const size_t n =
        window.CopyFrom(sent, kMaxOutputFrameBytes, chunk->mutable_data());
    if (n == 0) continue;
    chunk->set_offset(sent);
    sent += n;
    err_next_ = !is_err;
    writing_ = true;
    StartWrite(&response_);
    return;
  }
  response_.Clear();
  if (p.exited && p.out.closed() && p.err.closed() &&
      out_sent_ == p.out.end_offset() && err_sent_ == p.err.end_offset()) {
    *response_.mutable_exit() = p.exit;
    finished_ = true;
    p.reactor = nullptr;
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }
}

void IoReactor::FinishAttached(Process& p, const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  if (p.reactor == this) p.reactor = nullptr;
  if (writing_) {
    pending_finish_ = status;
  } else {
    Finish(status);
  }
}

void IoReactor::Acked(Process& p, uint64_t stdout_offset,
                      uint64_t stderr_offset) {
  if (finished_) return;
  out_sent_ = std::max(out_sent_, stdout_offset);
  err_sent_ = std::max(err_sent_, stderr_offset);
  MaybeWrite(p);
}

void IoReactor::ResumeReading() {
  if (!read_paused_ || finished_) return;
  read_paused_ = false;
  StartRead(&request_);
}

void IoReactor::OnWriteDone(bool ok) {
  std::shared_ptr<Process> process;
  {
    absl::MutexLock lock(&mu_);
    process = process_;
  }
  absl::MutexLock lock(&process->mu);
  writing_ = false;
  if (pending_finish_.has_value()) {
    Finish(*pending_finish_);
    pending_finish_.reset();
    return;
  }
  if (finished_) return;
  if (!ok) {
    FinishAttached(*process, grpc::Status(grpc::StatusCode::CANCELLED,
                                          "the stream broke"));
    return;
  }
  MaybeWrite(*process);
}

void IoReactor::OnCancel() {
  std::shared_ptr<Process> process;
  {
    absl::MutexLock lock(&mu_);
    process = process_;
    if (process == nullptr) {
      cancelled_ = true;  // the pending read fails and finishes
      return;
    }
  }
  absl::MutexLock lock(&process->mu);
  FinishAttached(*process,
                 grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
}

void IoReactor::OnDone() {
  std::shared_ptr<Process> process;
  {
    absl::MutexLock lock(&mu_);
    process = process_;
  }
  if (process != nullptr) {
    absl::MutexLock lock(&process->mu);
    if (process->reactor == this) process->reactor = nullptr;
  }
  delete this;
}

}  // namespace berth::agent
