// Whether a plugin is still there, shared by the process that watches it and
// the clients that call it.

#ifndef PLUGINS_HOST_PLUGIN_LIFETIME_H_
#define PLUGINS_HOST_PLUGIN_LIFETIME_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace berth::plugin::host {

// The life of one plugin as its host sees it: alive until MarkGone, once,
// when the plugin exits, closes its socket or is stopped. Calls in flight
// register their ClientContext and are cancelled (TryCancel) when the plugin
// goes, so that no call outlives the plugin blocked on a dead socket.
//
// Thread-safe.
class PluginLifetime {
 public:
  explicit PluginLifetime(std::string name);
  PluginLifetime(const PluginLifetime&) = delete;
  PluginLifetime& operator=(const PluginLifetime&) = delete;

  // The plugin's name.
  const std::string& name() const { return name_; }

  // Whether the plugin is gone.
  bool gone() const ABSL_LOCKS_EXCLUDED(mu_);

  // Why the plugin is gone, e.g. "pid 42 was killed by signal 9 (Killed)";
  // empty while it is not.
  std::string reason() const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `timeout` for the plugin to go; returns gone().
  bool WaitGone(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

  // The plugin is gone, for `reason`. The first call wins; it cancels every
  // registered call. Later calls do nothing.
  void MarkGone(absl::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels `context` when the plugin goes, until Unregister. Returns false,
  // and registers nothing, when the plugin is already gone. `context` must
  // stay alive until Unregister has returned.
  bool Register(grpc::ClientContext* context) ABSL_LOCKS_EXCLUDED(mu_);
  void Unregister(grpc::ClientContext* context) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string name_;
  mutable absl::Mutex mu_;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  std::string reason_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::plugin::host

#endif  // PLUGINS_HOST_PLUGIN_LIFETIME_H_
