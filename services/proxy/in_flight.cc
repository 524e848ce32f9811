#include "services/proxy/in_flight.h"

namespace berth {
namespace proxy {

InFlight::Ticket& InFlight::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    other.owner_ = nullptr;
  }
  return *this;
}

void InFlight::Ticket::Release() {
  if (owner_ == nullptr) return;
  absl::MutexLock lock(&owner_->mu_);
  --owner_->count_;
  owner_ = nullptr;
}

InFlight::Ticket InFlight::Enter() {
  absl::MutexLock lock(&mu_);
  ++count_;
  return Ticket(this);
}

void InFlight::AwaitNone() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* count) { return *count == 0; }, &count_));
}

int InFlight::count() {
  absl::MutexLock lock(&mu_);
  return count_;
}

}  // namespace proxy
}  // namespace berth
