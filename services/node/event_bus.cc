#include "services/node/event_bus.h"

#include "absl/strings/str_cat.h"

namespace berth::node {

EventBus::Subscription::~Subscription() { bus_->Unsubscribe(this); }

std::optional<v1::EventsResponse> EventBus::Subscription::Next(
    absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty();
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return std::nullopt;
  }
  v1::EventsResponse event = std::move(queue_.front());
  queue_.pop_front();
  if (dropped_ > 0) {
    (*event.mutable_annotations())["dropped"] = absl::StrCat(dropped_);
    dropped_ = 0;
  }
  return event;
}

void EventBus::Subscription::Push(const v1::EventsResponse& event) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= kMaxQueued) {
    queue_.pop_front();
    ++dropped_;
  }
  queue_.push_back(event);
}

std::unique_ptr<EventBus::Subscription> EventBus::Subscribe() {
  std::unique_ptr<Subscription> subscription(new Subscription(this));
  absl::MutexLock lock(&mu_);
  subscribers_.insert(subscription.get());
  return subscription;
}

void EventBus::Unsubscribe(Subscription* subscription) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(subscription);
}

void EventBus::Publish(v1::EventType type, const std::string& task_id,
                       const std::string& message) {
  Publish(type, task_id, message, {});
}

void EventBus::Publish(v1::EventType type, const std::string& task_id,
                       const std::string& message,
                       const std::map<std::string, std::string>& annotations) {
  v1::EventsResponse event;
  event.mutable_annotations()->insert(annotations.begin(), annotations.end());
  *event.mutable_timestamp() = NowProto();
  event.set_type(type);
  event.set_task_id(task_id);
  event.set_message(message);
  absl::MutexLock lock(&mu_);
  for (Subscription* subscriber : subscribers_) subscriber->Push(event);
}

}  // namespace berth::node
