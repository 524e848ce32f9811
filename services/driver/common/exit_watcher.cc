#include "services/driver/common/exit_watcher.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace berth::driver_common {

ExitWatcher::ExitWatcher() {
  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  PCHECK(epoll_fd_.valid() && wake_fd_.valid()) << "epoll_create1/eventfd";
  struct epoll_event event = {};
  event.events = EPOLLIN;
  event.data.fd = wake_fd_.get();
  PCHECK(epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &event) ==
         0);
  thread_ = std::thread([this] { Run(); });
}

ExitWatcher::~ExitWatcher() {
  const uint64_t one = 1;
  (void)!write(wake_fd_.get(), &one, sizeof(one));
  thread_.join();
}

absl::Status ExitWatcher::Watch(int pidfd, std::function<void()> on_exit) {
  absl::MutexLock lock(&mu_);
  struct epoll_event event = {};
  event.events = EPOLLIN;
  event.data.fd = pidfd;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, pidfd, &event) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("watching pidfd ", pidfd));
  }
  callbacks_[pidfd] = std::move(on_exit);
  return absl::OkStatus();
}

void ExitWatcher::Forget(int pidfd) {
  absl::MutexLock lock(&mu_);
  if (callbacks_.erase(pidfd) > 0) {
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, pidfd, nullptr);
  }
}

void ExitWatcher::Run() {
  struct epoll_event events[64];
  while (true) {
    const int n = epoll_wait(epoll_fd_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "epoll_wait";
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_.get()) return;
      std::function<void()> callback;
      {
        absl::MutexLock lock(&mu_);
        auto it = callbacks_.find(fd);
        if (it == callbacks_.end()) continue;
        callback = std::move(it->second);
        callbacks_.erase(it);
        epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
      }
      callback();
    }
  }
}

}  // namespace berth::driver_common
