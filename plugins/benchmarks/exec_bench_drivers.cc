#include "plugins/benchmarks/exec_bench_drivers.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "berth/driver/v1/driver.pb.h"
#include "grpcpp/support/status.h"
#include "plugins/sdk/exec.h"

namespace berth::plugin::benchmarks {
namespace {

using driver::v1::ExecTaskStreamingRequest;
using driver::v1::ExecTaskStreamingResponse;

absl::Status UnknownTask(const std::string& task_id) {
  return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
}

absl::Status NotHere(absl::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat("the exec benchmark driver does not ", what));
}

// PlainExecService's sending: `bytes` of stdout in frames of
// kMaxExecFrameBytes, then the exit frame.
grpc::Status WriteStdoutAndExit(
    uint64_t bytes,
    grpc::ServerReaderWriter<ExecTaskStreamingResponse,
                             ExecTaskStreamingRequest>* stream) {
  ExecTaskStreamingResponse response;
  response.mutable_stdout()->assign(kMaxExecFrameBytes, 'x');
  for (uint64_t left = bytes; left > 0;) {
    const size_t size = std::min<uint64_t>(left, kMaxExecFrameBytes);
    if (size < kMaxExecFrameBytes) response.mutable_stdout()->resize(size);
    if (!stream->Write(response)) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the exec stream is gone");
    }
    left -= size;
  }
  *response.mutable_exit() = ToExitResult(ExitStatus{});
  if (!stream->Write(response)) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the exec stream is gone before the exit frame");
  }
  return grpc::Status::OK;
}

// One ExecTaskStreaming call of CallbackExecService. A read is pending from
// the start to the caller's half-close; the writes follow each other from
// OnWriteDone. The call finishes once both are done.
class ExecReactor : public grpc::ServerBidiReactor<ExecTaskStreamingRequest,
                                                   ExecTaskStreamingResponse> {
 public:
  ExecReactor() { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // half-closed or cancelled
      absl::MutexLock lock(&mu_);
      reads_done_ = true;
      MaybeFinish();
      return;
    }
    if (!setup_seen_) {
      setup_seen_ = true;
      absl::Status started = StartWriting();
      if (!started.ok()) {
        absl::MutexLock lock(&mu_);
        FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                std::string(started.message())));
        return;
      }
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      absl::MutexLock lock(&mu_);
      FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "the exec stream is gone"));
      return;
    }
    NextWrite();
  }

  void OnDone() override { delete this; }

 private:
  absl::Status StartWriting() {
    if (request_.setup().task_id() != kExecTaskId) {
      return absl::NotFoundError(
          absl::StrCat("task ", request_.setup().task_id(), " not found"));
    }
    const std::vector<std::string> command(request_.setup().command().begin(),
                                           request_.setup().command().end());
    absl::StatusOr<uint64_t> bytes = ParseWriteCommand(command);
    if (!bytes.ok()) return bytes.status();
    left_ = *bytes;
    response_.mutable_stdout()->assign(kMaxExecFrameBytes, 'x');
    NextWrite();
    return absl::OkStatus();
  }

  // Writes are sequential: only one runs at a time.
  void NextWrite() {
    if (left_ > 0) {
      const size_t size = std::min<uint64_t>(left_, kMaxExecFrameBytes);
      if (size < kMaxExecFrameBytes) response_.mutable_stdout()->resize(size);
      left_ -= size;
      StartWrite(&response_);
      return;
    }
    if (!exit_sent_) {
      exit_sent_ = true;
      *response_.mutable_exit() = ToExitResult(ExitStatus{});
      StartWrite(&response_);
      return;
    }
    absl::MutexLock lock(&mu_);
    writes_done_ = true;
    MaybeFinish();
  }

  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reads_done_ && writes_done_) FinishOnce(grpc::Status::OK);
  }

  void FinishOnce(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  ExecTaskStreamingRequest request_;    // the reading side only
  bool setup_seen_ = false;             // the reading side only
  ExecTaskStreamingResponse response_;  // the writing side only
  uint64_t left_ = 0;                   // the writing side only
  bool exit_sent_ = false;              // the writing side only
  absl::Mutex mu_;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerBidiReactor<ExecTaskStreamingRequest, ExecTaskStreamingResponse>*
CallbackExecService::ExecTaskStreaming(grpc::CallbackServerContext*) {
  return new ExecReactor();
}

std::vector<std::string> WriteCommand(uint64_t bytes) {
  return {"write", absl::StrCat(bytes)};
}

absl::StatusOr<uint64_t> ParseWriteCommand(
    const std::vector<std::string>& command) {
  uint64_t bytes = 0;
  if (command.size() != 2 || command[0] != "write" ||
      !absl::SimpleAtoi(command[1], &bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup.command must be {\"write\", \"<bytes>\"}, not {\"",
                     absl::StrJoin(command, "\", \""), "\"}"));
  }
  return bytes;
}

DriverInfo BenchDriverBase::Info() const {
  return {"exec-bench", "0.1.0", "sends stdout for exec_stream_benchmark"};
}

v1::ConfigSchema BenchDriverBase::TaskConfigSchema() const { return {}; }

driver::v1::DriverCapabilities BenchDriverBase::Capabilities() const {
  driver::v1::DriverCapabilities capabilities;
  capabilities.set_exec_streaming(true);  // the SDK decides
  return capabilities;
}

absl::StatusOr<driver::v1::StartTaskResponse> BenchDriverBase::StartTask(
    const driver::v1::TaskConfig&) {
  return NotHere("start tasks");
}

absl::StatusOr<driver::v1::ExitResult> BenchDriverBase::WaitTask(
    const std::string&, const CancelToken&) {
  return NotHere("wait for tasks");
}

absl::Status BenchDriverBase::StopTask(const std::string&, absl::Duration,
                                       int) {
  return NotHere("stop tasks");
}

absl::Status BenchDriverBase::DestroyTask(const std::string&, bool) {
  return NotHere("destroy tasks");
}

absl::StatusOr<driver::v1::TaskStatus> BenchDriverBase::InspectTask(
    const std::string& task_id) {
  if (task_id != kExecTaskId) return UnknownTask(task_id);
  driver::v1::TaskStatus status;
  status.set_id(task_id);
  status.set_state(driver::v1::TASK_STATE_RUNNING);
  return status;
}

HighLevelWriterDriver::HighLevelWriterDriver()
    : block_(kHighLevelWriteBytes, 'x') {}

absl::StatusOr<ExitStatus> HighLevelWriterDriver::ExecTaskStreaming(
    const ExecOptions& options) {
  absl::StatusOr<uint64_t> bytes = ParseWriteCommand(options.command);
  if (!bytes.ok()) return bytes.status();
  for (uint64_t left = *bytes; left > 0;) {
    const size_t size = std::min<uint64_t>(left, block_.size());
    if (!options.out->Write(absl::string_view(block_.data(), size))) {
      return absl::UnavailableError(
          absl::StrCat("task ", options.task_id, ": the exec stream is gone"));
    }
    left -= size;
  }
  return ExitStatus{};
}

absl::Status RawSenderDriver::ExecTaskStreamingRaw(ExecTaskStream* stream) {
  const std::vector<std::string> command(stream->setup().command().begin(),
                                         stream->setup().command().end());
  absl::StatusOr<uint64_t> bytes = ParseWriteCommand(command);
  if (!bytes.ok()) return bytes.status();
  ExecTaskStreamingResponse response;
  response.mutable_stdout()->assign(kMaxExecFrameBytes, 'x');
  for (uint64_t left = *bytes; left > 0;) {
    const size_t size = std::min<uint64_t>(left, kMaxExecFrameBytes);
    if (size < kMaxExecFrameBytes) response.mutable_stdout()->resize(size);
    if (!stream->Send(response)) {
      return absl::UnavailableError(absl::StrCat(
          "task ", stream->setup().task_id(), ": the exec stream is gone"));
    }
    left -= size;
  }
  *response.mutable_exit() = ToExitResult(ExitStatus{});
  if (!stream->Send(response)) {
    return absl::UnavailableError(
        absl::StrCat("task ", stream->setup().task_id(),
                     ": the exec stream is gone before the exit frame"));
  }
  return absl::OkStatus();
}

grpc::Status PlainExecService::ExecTaskStreaming(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<ExecTaskStreamingResponse,
                             ExecTaskStreamingRequest>* stream) {
  ExecTaskStreamingRequest request;
  if (!stream->Read(&request) || !request.has_setup()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first request must carry setup");
  }
  if (request.setup().task_id() != kExecTaskId) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("task ", request.setup().task_id(), " not found"));
  }
  const std::vector<std::string> command(request.setup().command().begin(),
                                         request.setup().command().end());
  absl::StatusOr<uint64_t> bytes = ParseWriteCommand(command);
  if (!bytes.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        std::string(bytes.status().message()));
  }
  // As the SDK does: the call ends once the caller half-closes (read here
  // after the exit frame, or all along by a thread of its own).
  std::thread reader;
  if (reader_thread_) {
    reader = std::thread([stream] {
      ExecTaskStreamingRequest ignored;
      while (stream->Read(&ignored)) {
      }
    });
  }
  const grpc::Status written = WriteStdoutAndExit(*bytes, stream);
  if (reader.joinable()) {
    if (!written.ok()) context->TryCancel();
    reader.join();
  } else if (written.ok()) {
    while (stream->Read(&request)) {
    }
  }
  if (!written.ok()) return written;
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }
  return grpc::Status::OK;
}

}  // namespace berth::plugin::benchmarks
