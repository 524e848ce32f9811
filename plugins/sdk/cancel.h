// Cancellation of a call a driver serves.

#ifndef PLUGINS_SDK_CANCEL_H_
#define PLUGINS_SDK_CANCEL_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"

namespace berth::plugin {

// Says that a call a driver serves should stop: its caller cancelled it (or
// went away), the plugin shut down past its grace period, or, for the SDK's
// own streams, what the stream was about ended. Once cancelled it stays
// cancelled. Thread-safe.
//
// A driver method that blocks (WaitTask, ExecTaskStreaming, ...) gets one and
// returns soon after it is cancelled; the SDK then answers CANCELLED, which
// is not logged as an error. Three ways to wait for it:
//   token.IsCancelled()                  poll;
//   token.WaitFor(absl::Seconds(1))      sleep that ends early on cancel;
//   poll({..., {token.fd(), POLLIN}})    alongside the driver's own fds.
class CancelToken {
 public:
  CancelToken() = default;
  ~CancelToken();
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  bool IsCancelled() const {
    return cancelled_.load(std::memory_order_acquire);
  }

  // Blocks until cancelled or `deadline`; returns IsCancelled().
  bool WaitUntil(absl::Time deadline) const ABSL_LOCKS_EXCLUDED(mu_);
  bool WaitFor(absl::Duration timeout) const {
    return WaitUntil(absl::Now() + timeout);
  }

  // A file descriptor that polls readable (POLLIN) once the token is
  // cancelled, for waiting in poll(2) together with other fds. Owned by the
  // token (do not read or close it); made on first use. -1 if the kernel
  // refused an eventfd (logged).
  int fd() const ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels the token and wakes every waiter. The SDK calls it; a driver may
  // use tokens of its own too.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  mutable base::UniqueFd event_fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_CANCEL_H_
