// One thread that waits for many processes to exit, through their pidfds
// (epoll), and calls back once per process. The exec driver watches every
// task's init with it rather than parking a thread per task; the sandbox
// driver every task's shim.

#ifndef SERVICES_DRIVER_COMMON_EXIT_WATCHER_H_
#define SERVICES_DRIVER_COMMON_EXIT_WATCHER_H_

#include <functional>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/unique_fd.h"

namespace berth::driver_common {

class ExitWatcher {
 public:
  ExitWatcher();
  // Stops the thread; callbacks not yet called are dropped.
  ~ExitWatcher();
  ExitWatcher(const ExitWatcher&) = delete;
  ExitWatcher& operator=(const ExitWatcher&) = delete;

  // Calls `on_exit` once, from the watcher's thread, when the process of
  // `pidfd` has exited (at once if it already has). The caller keeps owning
  // `pidfd` and must keep it open until the callback ran or Forget returned.
  absl::Status Watch(int pidfd, std::function<void()> on_exit)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Drops the watch of `pidfd`, if still there. A callback already running
  // may still be running when this returns.
  void Forget(int pidfd) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();

  // Closed after the destructor has joined the thread.
  base::UniqueFd epoll_fd_;
  base::UniqueFd wake_fd_;
  absl::Mutex mu_;
  std::map<int, std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_EXIT_WATCHER_H_
