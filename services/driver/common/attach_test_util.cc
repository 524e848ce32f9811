#include "services/driver/common/attach_test_util.h"

#include <utility>

#include "absl/strings/match.h"
#include "services/common/test_util.h"

namespace berth::driver_common {

namespace dv1 = ::berth::driver::v1;

dv1::AttachSetup MakeAttachSetup(const std::string& task_id, bool want_stdin,
                                 uint32_t rows, uint32_t columns) {
  dv1::AttachSetup setup;
  setup.set_task_id(task_id);
  setup.set_stdin(want_stdin);
  if (rows != 0) {
    setup.mutable_terminal_size()->set_rows(rows);
    setup.mutable_terminal_size()->set_columns(columns);
  }
  return setup;
}

FakeAttachStream::FakeAttachStream(dv1::AttachSetup setup)
    : setup_(std::move(setup)) {}

const dv1::AttachSetup& FakeAttachStream::setup() const { return setup_; }

bool FakeAttachStream::Recv(dv1::AttachTaskRequest* request) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](FakeAttachStream* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
        return !s->requests_.empty() || s->closed_;
      },
      this));
  if (closed_) return false;
  *request = std::move(requests_.front());
  requests_.pop_front();
  return true;
}

void FakeAttachStream::CloseRecv() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool FakeAttachStream::Send(const dv1::AttachTaskResponse& response) {
  absl::MutexLock lock(&mu_);
  responses_.push_back(response);
  return true;
}

const plugin::CancelToken& FakeAttachStream::cancel() const { return cancel_; }

void FakeAttachStream::Push(const dv1::AttachTaskRequest& request) {
  absl::MutexLock lock(&mu_);
  requests_.push_back(request);
}

void FakeAttachStream::Stdin(const std::string& data) {
  dv1::AttachTaskRequest request;
  request.set_stdin(data);
  Push(request);
}

void FakeAttachStream::CloseStdin() {
  dv1::AttachTaskRequest request;
  request.mutable_stdin_close();
  Push(request);
}

void FakeAttachStream::Resize(uint32_t rows, uint32_t columns) {
  dv1::AttachTaskRequest request;
  request.mutable_resize()->set_rows(rows);
  request.mutable_resize()->set_columns(columns);
  Push(request);
}

void FakeAttachStream::Cancel() { cancel_.Cancel(); }

void FakeAttachStream::Leave() {
  Cancel();
  CloseRecv();
}

std::vector<dv1::AttachTaskResponse> FakeAttachStream::responses() const {
  absl::MutexLock lock(&mu_);
  return responses_;
}

std::string FakeAttachStream::Stdout() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& response : responses_) out += response.stdout();
  return out;
}

std::string FakeAttachStream::Stderr() const {
  absl::MutexLock lock(&mu_);
  std::string err;
  for (const auto& response : responses_) err += response.stderr();
  return err;
}

std::string FakeAttachStream::Output() const {
  absl::MutexLock lock(&mu_);
  std::string output;
  for (const auto& response : responses_) {
    output += response.stdout();
    output += response.stderr();
  }
  return output;
}

bool FakeAttachStream::WaitForStdout(const std::string& text,
                                     absl::Duration timeout) const {
  return berth::testing::WaitFor(
      [&] { return absl::StrContains(Stdout(), text); }, timeout);
}

bool FakeAttachStream::WaitForOutput(const std::string& text,
                                     absl::Duration timeout) const {
  return berth::testing::WaitFor(
      [&] { return absl::StrContains(Output(), text); }, timeout);
}

}  // namespace berth::driver_common
