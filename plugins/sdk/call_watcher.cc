#include "plugins/sdk/call_watcher.h"

#include <algorithm>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace berth::plugin::internal {
namespace {

// A call is first looked at this long after it came; then the interval
// doubles up to the longest.
constexpr absl::Duration kFirstPollInterval = absl::Milliseconds(10);
constexpr absl::Duration kLongestPollInterval = absl::Milliseconds(200);

}  // namespace

CallWatcher::CallWatcher() : thread_([this] { Loop(); }) {}

CallWatcher::~CallWatcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CallWatcher::Loop() {
  absl::MutexLock lock(&mu_);
  auto stop_or_work = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stop_ || !entries_.empty();
  };
  auto stop_or_added = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stop_ || added_;
  };
  while (true) {
    mu_.Await(absl::Condition(&stop_or_work));
    if (stop_) return;
    added_ = false;
    const absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    for (Registration::Entry& entry : entries_) {
      if (entry.next_check <= now) {
        if (!entry.token->IsCancelled() && entry.context->IsCancelled()) {
          entry.token->Cancel();
        }
        entry.interval = std::min(entry.interval * 2, kLongestPollInterval);
        entry.next_check = now + entry.interval;
      }
      next = std::min(next, entry.next_check);
    }
    mu_.AwaitWithDeadline(absl::Condition(&stop_or_added), next);
  }
}

CallWatcher::Registration::Registration(CallWatcher& watcher,
                                        grpc::ServerContext* context,
                                        CancelToken* token)
    : watcher_(watcher) {
  absl::MutexLock lock(&watcher_.mu_);
  entry_ = watcher_.entries_.insert(
      watcher_.entries_.end(),
      {context, token, absl::Now() + kFirstPollInterval, kFirstPollInterval});
  watcher_.added_ = true;
}

CallWatcher::Registration::~Registration() {
  absl::MutexLock lock(&watcher_.mu_);
  watcher_.entries_.erase(entry_);
}

}  // namespace berth::plugin::internal
