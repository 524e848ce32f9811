#include "plugins/sdk/cancel.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace berth::plugin {
namespace {

void Signal(int fd) {
  const uint64_t one = 1;
  // Only fails if the counter would overflow, which one write cannot do.
  (void)!write(fd, &one, sizeof(one));
}

}  // namespace

CancelToken::~CancelToken() = default;

bool CancelToken::WaitUntil(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto cancelled = [this] { return IsCancelled(); };
  mu_.AwaitWithDeadline(absl::Condition(&cancelled), deadline);
  return IsCancelled();
}

int CancelToken::fd() const {
  absl::MutexLock lock(&mu_);
  if (!event_fd_) {
    event_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!event_fd_) {
      PLOG(ERROR) << "cannot make an eventfd for a cancellation token";
      return -1;
    }
    if (IsCancelled()) Signal(event_fd_.get());
  }
  return event_fd_.get();
}

void CancelToken::Cancel() {
  absl::MutexLock lock(&mu_);
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  if (event_fd_) Signal(event_fd_.get());
}

}  // namespace berth::plugin
