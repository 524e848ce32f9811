#include "plugins/host/plugin_lifetime.h"

#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"

namespace berth::plugin::host {

PluginLifetime::PluginLifetime(std::string name) : name_(std::move(name)) {}

bool PluginLifetime::gone() const {
  absl::MutexLock lock(&mu_);
  return gone_;
}

std::string PluginLifetime::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

bool PluginLifetime::WaitGone(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&gone_), timeout);
  return gone_;
}

void PluginLifetime::MarkGone(absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  if (gone_) return;
  gone_ = true;
  reason_ = std::string(reason);
  VLOG(1) << "plugin " << name_ << " is gone: " << reason_ << "; cancelling "
          << calls_.size() << " call(s) in flight";
  // TryCancel does not block and calls nothing of ours back; holding mu_
  // keeps each context alive until its call has unregistered.
  for (grpc::ClientContext* context : calls_) context->TryCancel();
  calls_.clear();
}

bool PluginLifetime::Register(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  if (gone_) return false;
  calls_.insert(context);
  return true;
}

void PluginLifetime::Unregister(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  calls_.erase(context);
}

}  // namespace berth::plugin::host
