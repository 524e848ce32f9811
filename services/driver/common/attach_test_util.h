// For drivers' tests: an AttachTask call's stream (plugin::AttachTaskStream)
// driven by the test, which pushes the caller's requests and reads what the
// driver sent.

#ifndef SERVICES_DRIVER_COMMON_ATTACH_TEST_UTIL_H_
#define SERVICES_DRIVER_COMMON_ATTACH_TEST_UTIL_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "plugins/sdk/attach.h"
#include "plugins/sdk/cancel.h"

namespace berth::driver_common {

// The setup of an attach to `task_id`; a terminal size only when `rows` is
// not 0.
driver::v1::AttachSetup MakeAttachSetup(const std::string& task_id,
                                        bool want_stdin, uint32_t rows = 0,
                                        uint32_t columns = 0);

// Thread-safe. Recv blocks until the test pushes a request, and returns
// false once CloseRecv was called; Send keeps every response.
class FakeAttachStream : public plugin::AttachTaskStream {
 public:
  explicit FakeAttachStream(driver::v1::AttachSetup setup);

  const driver::v1::AttachSetup& setup() const override;
  bool Recv(driver::v1::AttachTaskRequest* request) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void CloseRecv() override ABSL_LOCKS_EXCLUDED(mu_);
  bool Send(const driver::v1::AttachTaskResponse& response) override
      ABSL_LOCKS_EXCLUDED(mu_);
  const plugin::CancelToken& cancel() const override;

  // The caller's requests.
  void Push(const driver::v1::AttachTaskRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Stdin(const std::string& data);
  void CloseStdin();
  void Resize(uint32_t rows, uint32_t columns);
  // The caller cancels the call.
  void Cancel();
  // The caller goes away: Cancel, and Recv returns false.
  void Leave();

  // What the driver sent: the responses, their stdout, their stderr, and
  // both in the order sent.
  std::vector<driver::v1::AttachTaskResponse> responses() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::string Stdout() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string Stderr() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string Output() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether Stdout (or Output) contains `text` within `timeout`.
  bool WaitForStdout(const std::string& text,
                     absl::Duration timeout = absl::Seconds(20)) const;
  bool WaitForOutput(const std::string& text,
                     absl::Duration timeout = absl::Seconds(30)) const;

 private:
  const driver::v1::AttachSetup setup_;
  plugin::CancelToken cancel_;
  mutable absl::Mutex mu_;
  std::deque<driver::v1::AttachTaskRequest> requests_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<driver::v1::AttachTaskResponse> responses_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_ATTACH_TEST_UTIL_H_
