// What `bazel build --config=clang` must refuse: each function below breaks
// one lock annotation, and check_thread_safety.sh asserts that clang-14, with
// the flags of .bazelrc, fails naming each. g++ compiles this file silently.
// Tagged manual in BUILD.bazel so that //... does not build it; see it fail
// with `bazel build --config=clang //tools/thread_safety:unguarded`.
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace berth::thread_safety {

class Counter {
 public:
  // A write without the lock.
  void AddUnlocked(int n) { value_ += n; }

  // A call that requires the lock, without it.
  void AddViaHelper(int n) { AddLocked(n); }

  // A call that takes the lock, with it held (self-deadlock).
  void AddTwice(int n) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    Add(n);
  }

  void Add(int n) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    AddLocked(n);
  }

 private:
  void AddLocked(int n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { value_ += n; }

  absl::Mutex mu_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
};

void Use() {
  Counter counter;
  counter.AddUnlocked(1);
  counter.AddViaHelper(1);
  counter.AddTwice(1);
}

}  // namespace berth::thread_safety
