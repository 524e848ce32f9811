#include "plugins/sdk/driver.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/sdk/proto_time.h"

namespace berth::plugin {
namespace {

// How often a blocked stream looks at its cancellation token.
constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(50);

absl::Status Unimplemented(absl::string_view what, const Driver& driver) {
  return absl::UnimplementedError(absl::StrCat("driver ", driver.Info().name,
                                               " does not implement ", what));
}

}  // namespace

Driver::Driver() {
  absl::MutexLock lock(&fingerprint_mu_);
  fingerprint_.set_health(driver::v1::HEALTH_STATE_HEALTHY);
}

Driver::~Driver() {
  absl::MutexLock lock(&events_mu_);
  LOG_IF(ERROR, !subscriptions_.empty())
      << "a driver is destroyed while " << subscriptions_.size()
      << " TaskEvents subscriptions are open";
}

v1::ConfigSchema Driver::PluginConfigSchema() const { return {}; }

absl::Status Driver::SetConfig(const google::protobuf::Struct&,
                               const v1::NodeContext&) {
  return absl::OkStatus();
}

absl::StatusOr<driver::v1::TaskHandle> Driver::HandleOf(const std::string&) {
  return Unimplemented("HandleOf", *this);
}

absl::StatusOr<driver::v1::TaskStatus> Driver::RecoverTask(
    const driver::v1::TaskHandle&) {
  return Unimplemented("RecoverTask", *this);
}

absl::Status Driver::SignalTask(const std::string&, int) {
  return Unimplemented("SignalTask", *this);
}

absl::StatusOr<stats::v1::TaskResourceUsage> Driver::TaskStats(
    const std::string&) {
  return Unimplemented("TaskStats", *this);
}

absl::Status Driver::AttachTask(AttachTaskStream*) {
  return Unimplemented("AttachTask", *this);
}

absl::StatusOr<driver::v1::ExecTaskResponse> Driver::ExecTask(
    const std::string&, const std::vector<std::string>&, absl::Duration,
    const CancelToken&) {
  return Unimplemented("ExecTask", *this);
}

absl::StatusOr<driver::v1::CreateNetworkResponse> Driver::CreateNetwork(
    const driver::v1::CreateNetworkRequest&) {
  return Unimplemented("CreateNetwork", *this);
}

absl::Status Driver::DestroyNetwork(const std::string&) {
  return Unimplemented("DestroyNetwork", *this);
}

void Driver::PublishFingerprint(driver::v1::FingerprintResponse fingerprint) {
  absl::MutexLock lock(&fingerprint_mu_);
  fingerprint_ = std::move(fingerprint);
  ++fingerprint_version_;
}

driver::v1::FingerprintResponse Driver::CurrentFingerprint(
    uint64_t* version) const {
  absl::MutexLock lock(&fingerprint_mu_);
  if (version != nullptr) *version = fingerprint_version_;
  return fingerprint_;
}

bool Driver::WaitForFingerprint(uint64_t* version,
                                driver::v1::FingerprintResponse* fingerprint,
                                const CancelToken& cancel) const {
  absl::MutexLock lock(&fingerprint_mu_);
  auto changed = [this, version]() ABSL_SHARED_LOCKS_REQUIRED(fingerprint_mu_) {
    return fingerprint_version_ != *version;
  };
  while (!changed()) {
    if (cancel.IsCancelled()) return false;
    fingerprint_mu_.AwaitWithTimeout(absl::Condition(&changed),
                                     kCancelPollInterval);
  }
  *version = fingerprint_version_;
  *fingerprint = fingerprint_;
  return true;
}

void Driver::PublishTaskEvent(driver::v1::TaskEventsResponse event) {
  if (!event.has_timestamp()) {
    *event.mutable_timestamp() = ToProtoTimestamp(absl::Now());
  }
  absl::MutexLock lock(&events_mu_);
  for (TaskEventSubscription* subscription : subscriptions_) {
    subscription->Push(event);
  }
}

size_t Driver::TaskEventSubscriberCount() const {
  absl::MutexLock lock(&events_mu_);
  return subscriptions_.size();
}

std::unique_ptr<TaskEventSubscription> Driver::SubscribeTaskEvents(
    size_t capacity) {
  std::unique_ptr<TaskEventSubscription> subscription(
      new TaskEventSubscription(this, std::max<size_t>(capacity, 1)));
  absl::MutexLock lock(&events_mu_);
  subscriptions_.push_back(subscription.get());
  return subscription;
}

TaskEventSubscription::TaskEventSubscription(Driver* driver, size_t capacity)
    : driver_(driver), capacity_(capacity) {}

TaskEventSubscription::~TaskEventSubscription() {
  absl::MutexLock lock(&driver_->events_mu_);
  auto& subscriptions = driver_->subscriptions_;
  subscriptions.erase(
      std::remove(subscriptions.begin(), subscriptions.end(), this),
      subscriptions.end());
}

void TaskEventSubscription::Push(const driver::v1::TaskEventsResponse& event) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= capacity_) {
    queue_.pop_front();
    if (dropped_++ == 0) {
      LOG(WARNING) << "a TaskEvents stream reads too slowly: dropping its "
                      "oldest events (capacity "
                   << capacity_ << ")";
    }
  }
  queue_.push_back(event);
}

bool TaskEventSubscription::Next(driver::v1::TaskEventsResponse* event,
                                 const CancelToken& cancel) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]()
                   ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty(); };
  while (!ready()) {
    if (cancel.IsCancelled()) return false;
    mu_.AwaitWithTimeout(absl::Condition(&ready), kCancelPollInterval);
  }
  *event = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

uint64_t TaskEventSubscription::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace berth::plugin
