#include "services/proxy/timer.h"

namespace berth {
namespace proxy {

Timer::Timer(Clock* clock) : clock_(clock), thread_([this] { Run(); }) {}

Timer::~Timer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

uint64_t Timer::Schedule(absl::Time when, std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  uint64_t id = next_id_++;
  entries_.emplace(std::make_pair(when, id), std::move(callback));
  when_.emplace(id, when);
  return id;
}

void Timer::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = when_.find(id);
  if (it == when_.end()) return;
  entries_.erase(std::make_pair(it->second, id));
  when_.erase(it);
}

void Timer::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    // Wake at the earliest entry or when something changes.
    absl::Time wake = entries_.empty() ? absl::InfiniteFuture()
                                       : entries_.begin()->first.first;
    auto changed = [this, size = entries_.size(), wake]() {
      mu_.AssertHeld();
      return stop_ || entries_.size() != size ||
             (!entries_.empty() && entries_.begin()->first.first != wake);
    };
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&changed), wake);
    if (stop_) return;
    if (entries_.empty() || entries_.begin()->first.first > clock_->Now()) {
      continue;
    }
    auto it = entries_.begin();
    std::function<void()> callback = std::move(it->second);
    when_.erase(it->first.second);
    entries_.erase(it);
    mu_.Unlock();
    callback();
    mu_.Lock();
  }
}

}  // namespace proxy
}  // namespace berth
