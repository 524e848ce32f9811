// What `bazel build --config=clang` accepts: every access to a field that
// ABSL_GUARDED_BY names a mutex for happens with that mutex held. The
// counterpart of unguarded.cc; check_thread_safety.sh compiles both.
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace berth::thread_safety {

class Counter {
 public:
  void Add(int n) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    AddLocked(n);
  }

  int value() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return value_;
  }

 private:
  void AddLocked(int n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { value_ += n; }

  mutable absl::Mutex mu_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
};

int Use() {
  Counter counter;
  counter.Add(1);
  return counter.value();
}

}  // namespace berth::thread_safety
