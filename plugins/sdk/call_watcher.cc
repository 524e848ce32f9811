#include "plugins/sdk/call_watcher.h"

#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace berth::plugin::internal {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(10);

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
  auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
  while (true) {
    mu_.Await(absl::Condition(&stop_or_work));
    if (stop_) return;
    for (Registration::Entry& entry : entries_) {
      if (!entry.token->IsCancelled() && entry.context->IsCancelled()) {
        entry.token->Cancel();
      }
    }
    mu_.AwaitWithTimeout(absl::Condition(&stop), kPollInterval);
  }
}

CallWatcher::Registration::Registration(CallWatcher& watcher,
                                        grpc::ServerContext* context,
                                        CancelToken* token)
    : watcher_(watcher) {
  absl::MutexLock lock(&watcher_.mu_);
  entry_ = watcher_.entries_.insert(watcher_.entries_.end(), {context, token});
}

CallWatcher::Registration::~Registration() {
  absl::MutexLock lock(&watcher_.mu_);
  watcher_.entries_.erase(entry_);
}

}  // namespace berth::plugin::internal
