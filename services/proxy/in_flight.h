// Counts work in flight (calls to agents, with the contexts and channel
// references they hold), so that a shutdown can wait until the last of it
// has been released, not merely until its callback ran.

#ifndef SERVICES_PROXY_IN_FLIGHT_H_
#define SERVICES_PROXY_IN_FLIGHT_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace berth {
namespace proxy {

// Thread-safe. Tickets may be released on any thread, with any other lock
// held: the counter's own lock is taken for nothing else.
class InFlight {
 public:
  // One unit of work; leaves the count when destroyed. Movable.
  class Ticket {
   public:
    Ticket() = default;
    explicit Ticket(InFlight* owner) : owner_(owner) {}
    Ticket(Ticket&& other) noexcept : owner_(other.owner_) {
      other.owner_ = nullptr;
    }
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { Release(); }

   private:
    void Release();
    InFlight* owner_ = nullptr;
  };

  InFlight() = default;
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

  Ticket Enter();
  // Blocks until every ticket handed out has been released.
  void AwaitNone();
  int count();

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace proxy
}  // namespace berth

#endif  // SERVICES_PROXY_IN_FLIGHT_H_
