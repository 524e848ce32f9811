// One thread that runs callbacks at given times: every wait of berth-proxy
// (for a shim, for a token's expiry) is an entry here, never a parked thread.

#ifndef SERVICES_PROXY_TIMER_H_
#define SERVICES_PROXY_TIMER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/proxy/clock.h"

namespace berth {
namespace proxy {

// Thread-safe. Callbacks run on the timer's thread, one at a time, without
// the timer's lock held: they may Schedule and Cancel.
class Timer {
 public:
  // Times are those of `clock`, which must outlive the timer.
  explicit Timer(Clock* clock = Clock::Real());
  // Stops the thread; callbacks not yet run are dropped.
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs `callback` at `when` (at once if it has passed). Returns an id for
  // Cancel, never 0.
  uint64_t Schedule(absl::Time when, std::function<void()> callback)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the callback `id` if it has not started. Unknown ids are ignored.
  void Cancel(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  Clock* const clock_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // (when, id) -> callback.
  std::map<std::pair<absl::Time, uint64_t>, std::function<void()>> entries_
      ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace proxy
}  // namespace berth

#endif  // SERVICES_PROXY_TIMER_H_
