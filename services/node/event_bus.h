// Fan-out of the node's events to every Events stream.

#ifndef SERVICES_NODE_EVENT_BUS_H_
#define SERVICES_NODE_EVENT_BUS_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/proto_time.h"
#include "berth/node/v1/node.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace berth::node {

// The time now, to the nanosecond (protobuf's TimeUtil::GetCurrentTime()
// gives whole seconds with Debian's protobuf 3.21, which ties the order of
// tasks created within a second).
inline google::protobuf::Timestamp NowProto() {
  return base::ToProtoTimestamp(absl::Now());
}

// Thread-safe.
class EventBus {
 public:
  // One subscriber's queue. A subscriber that falls more than kMaxQueued
  // events behind loses the oldest and is told how many in the next event's
  // annotations ("dropped").
  class Subscription {
   public:
    ~Subscription();
    // The next event, or nullopt when `deadline` passes first.
    std::optional<v1::EventsResponse> Next(absl::Time deadline)
        ABSL_LOCKS_EXCLUDED(mu_);

   private:
    friend class EventBus;
    explicit Subscription(EventBus* bus) : bus_(bus) {}
    void Push(const v1::EventsResponse& event) ABSL_LOCKS_EXCLUDED(mu_);

    EventBus* const bus_;
    absl::Mutex mu_;
    std::deque<v1::EventsResponse> queue_ ABSL_GUARDED_BY(mu_);
    uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  };

  static constexpr size_t kMaxQueued = 1024;

  std::unique_ptr<Subscription> Subscribe() ABSL_LOCKS_EXCLUDED(mu_);
  // Stamps the time and hands the event to every subscriber.
  void Publish(v1::EventType type, const std::string& task_id,
               const std::string& message) ABSL_LOCKS_EXCLUDED(mu_);
  // The same with machine-readable details (EventsResponse.annotations).
  void Publish(v1::EventType type, const std::string& task_id,
               const std::string& message,
               const std::map<std::string, std::string>& annotations)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Unsubscribe(Subscription* subscription) ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::set<Subscription*> subscribers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::node

#endif  // SERVICES_NODE_EVENT_BUS_H_
