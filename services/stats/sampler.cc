#include "services/stats/sampler.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/stats/collector.h"

namespace berth {
namespace stats {

Subscriber::Subscriber(absl::flat_hash_set<std::string> task_ids,
                       size_t capacity)
    : all_tasks_(task_ids.empty()),
      capacity_(std::max<size_t>(capacity, 1)),
      task_ids_(std::move(task_ids)) {}

bool Subscriber::Wants(absl::string_view task_id) const {
  absl::MutexLock lock(&mu_);
  if (ended_) return false;
  return all_tasks_ || task_ids_.contains(task_id);
}

std::vector<std::string> Subscriber::task_ids() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids(task_ids_.begin(), task_ids_.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

void Subscriber::Push(std::vector<SharedSample> samples) {
  if (samples.empty()) return;
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  const size_t limit = std::max(capacity_, 2 * samples.size());
  for (SharedSample& sample : samples) queue_.push_back(std::move(sample));
  while (queue_.size() > limit) {
    queue_.pop_front();
    ++dropped_;
  }
}

void Subscriber::End(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  ended_ = true;
  end_ = std::move(status);
}

void Subscriber::TaskGone(absl::string_view task_id,
                          const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (ended_ || !(all_tasks_ || task_ids_.contains(task_id))) return;
  ended_ = true;
  end_ = status;
}

void Subscriber::TaskUnregistered(absl::string_view task_id) {
  absl::MutexLock lock(&mu_);
  if (ended_ || all_tasks_) return;
  if (task_ids_.erase(task_id) > 0 && task_ids_.empty()) {
    ended_ = true;
    end_ = absl::OkStatus();
  }
}

Subscriber::Next Subscriber::Take(absl::Duration timeout, size_t max,
                                  std::vector<SharedSample>* samples,
                                  uint64_t* dropped, absl::Status* end) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || ended_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!queue_.empty()) {
    const size_t n = std::min(std::max<size_t>(max, 1), queue_.size());
    for (size_t i = 0; i < n; ++i) {
      samples->push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    *dropped = dropped_;
    return Next::kSamples;
  }
  if (ended_) {
    *end = end_;
    return Next::kEnded;
  }
  return Next::kTimeout;
}

uint64_t Subscriber::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

size_t Subscriber::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

bool Subscriber::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

Sampler::Sampler(absl::Duration interval, Tick tick,
                 std::shared_ptr<Subscriber> first)
    : interval_(interval), tick_(std::move(tick)) {
  subscribers_.push_back(std::move(first));
  thread_ = std::thread([this] { Run(); });
}

Sampler::~Sampler() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Sampler::Add(std::shared_ptr<Subscriber> subscriber) {
  absl::MutexLock lock(&mu_);
  subscribers_.push_back(std::move(subscriber));
}

size_t Sampler::Remove(const Subscriber* subscriber) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(
      std::remove_if(subscribers_.begin(), subscribers_.end(),
                     [subscriber](const std::shared_ptr<Subscriber>& s) {
                       return s.get() == subscriber;
                     }),
      subscribers_.end());
  return subscribers_.size();
}

std::vector<std::shared_ptr<Subscriber>> Sampler::subscribers() const {
  absl::MutexLock lock(&mu_);
  return subscribers_;
}

uint64_t Sampler::ticks() const {
  absl::MutexLock lock(&mu_);
  return ticks_;
}

void Sampler::Run() {
  // Named so that its CPU time can be told apart (/proc/PID/task/TID/stat).
  pthread_setname_np(pthread_self(), "berth-sampler");
  const int64_t interval_ns = absl::ToInt64Nanoseconds(interval_);
  int64_t next_ns = MonotonicNanos();
  while (true) {
    std::vector<std::shared_ptr<Subscriber>> subscribers;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      subscribers = subscribers_;
    }
    if (!subscribers.empty()) tick_(subscribers);
    subscribers.clear();
    const int64_t now_ns = MonotonicNanos();
    next_ns += interval_ns;
    if (next_ns <= now_ns) {
      // Late: skip the ticks that are already due, keep the phase.
      next_ns += ((now_ns - next_ns) / interval_ns + 1) * interval_ns;
    }
    absl::MutexLock lock(&mu_);
    ++ticks_;
    mu_.AwaitWithTimeout(absl::Condition(&stop_),
                         absl::Nanoseconds(next_ns - MonotonicNanos()));
    if (stop_) return;
  }
}

}  // namespace stats
}  // namespace berth
