// The streaming side of berth-stats: a bounded queue per subscriber
// (StreamTaskStats call) and one sampler thread per distinct interval that
// samples for all of its subscribers and only ever enqueues. A subscriber
// that stops reading fills its own queue, loses its oldest samples (counted)
// and never slows the sampler or the other subscribers.

#ifndef SERVICES_STATS_SAMPLER_H_
#define SERVICES_STATS_SAMPLER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.pb.h"

namespace berth {
namespace stats {

// A sample shared by every subscriber it goes to.
using SharedSample = std::shared_ptr<const berth::stats::v1::TaskResourceUsage>;

// The queue of one StreamTaskStats call. Thread-safe.
class Subscriber {
 public:
  // `task_ids` empty means every task, including those registered later.
  // The queue keeps the newest `capacity` samples, or the newest two ticks'
  // worth when one tick brings more than half of `capacity` (so that a
  // subscriber of many tasks that keeps up never loses samples).
  Subscriber(absl::flat_hash_set<std::string> task_ids, size_t capacity);

  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  bool all_tasks() const { return all_tasks_; }

  // Whether the samples of `task_id` go to this subscriber (false once it
  // has ended).
  bool Wants(absl::string_view task_id) const ABSL_LOCKS_EXCLUDED(mu_);

  // The tasks it still waits for (empty for all tasks).
  std::vector<std::string> task_ids() const ABSL_LOCKS_EXCLUDED(mu_);

  // Appends one tick's samples, dropping (and counting) the oldest beyond
  // the capacity. Ignored after End.
  void Push(std::vector<SharedSample> samples) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the stream with `status` after the queued samples. The first End
  // wins.
  void End(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  // `task_id` has gone (its cgroup or process): ends the stream with
  // `status` if it includes that task.
  void TaskGone(absl::string_view task_id, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);

  // `task_id` was unregistered: a subscriber of chosen tasks stops waiting
  // for it, and ends OK when none is left.
  void TaskUnregistered(absl::string_view task_id) ABSL_LOCKS_EXCLUDED(mu_);

  // What Next returns.
  enum class Next { kSamples, kEnded, kTimeout };

  // Waits up to `timeout` for samples or the end. kSamples: moves every
  // queued sample (at most `max`) into `samples` and sets `dropped` to the
  // count of samples lost so far. kEnded: the queue is empty and the stream
  // ended with `end`.
  Next Take(absl::Duration timeout, size_t max,
            std::vector<SharedSample>* samples, uint64_t* dropped,
            absl::Status* end) ABSL_LOCKS_EXCLUDED(mu_);

  // Samples lost so far.
  uint64_t dropped() const ABSL_LOCKS_EXCLUDED(mu_);
  // Samples waiting to be written.
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether End was called.
  bool ended() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const bool all_tasks_;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<std::string> task_ids_ ABSL_GUARDED_BY(mu_);
  std::deque<SharedSample> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
};

// One thread that calls `tick` with its current subscribers at once, then
// every `interval` (at a fixed rate; ticks that would be late are skipped),
// until it is destroyed. Thread-safe.
class Sampler {
 public:
  using Tick =
      std::function<void(const std::vector<std::shared_ptr<Subscriber>>&)>;

  // Starts the thread with `first` as its only subscriber.
  Sampler(absl::Duration interval, Tick tick,
          std::shared_ptr<Subscriber> first);
  // Stops the thread, waiting for a tick in progress.
  ~Sampler();

  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  absl::Duration interval() const { return interval_; }

  void Add(std::shared_ptr<Subscriber> subscriber) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes `subscriber`; returns how many are left.
  size_t Remove(const Subscriber* subscriber) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::shared_ptr<Subscriber>> subscribers() const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Ticks done so far.
  uint64_t ticks() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const absl::Duration interval_;
  const Tick tick_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Subscriber>> subscribers_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t ticks_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace stats
}  // namespace berth

#endif  // SERVICES_STATS_SAMPLER_H_
