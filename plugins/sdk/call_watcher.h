// Internal to the SDK: turns gRPC's cancellation of a synchronous call into a
// CancelToken.

#ifndef PLUGINS_SDK_CALL_WATCHER_H_
#define PLUGINS_SDK_CALL_WATCHER_H_

#include <list>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "plugins/sdk/cancel.h"

namespace berth::plugin::internal {

// Cancels the token of each registered call once gRPC says the call is
// cancelled (its caller cancelled or went away, or the server's shutdown
// grace ran out). gRPC's sync API has no cancellation callback, so one thread
// polls ServerContext::IsCancelled() of the registered calls while there are
// any: a new call 10 ms after it came, then ever less often as it lasts, up
// to every 200 ms. berth-node holds a WaitTask open per running task, so a
// driver has as many long calls as tasks; polling each of a thousand every
// 10 ms would keep a core busy for nothing.
class CallWatcher {
 public:
  CallWatcher();
  ~CallWatcher();
  CallWatcher(const CallWatcher&) = delete;
  CallWatcher& operator=(const CallWatcher&) = delete;

  // Watches `context` for `token` while it lives. Destroy it before the
  // handler returns (the context dies then).
  class Registration {
   public:
    Registration(CallWatcher& watcher, grpc::ServerContext* context,
                 CancelToken* token);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    struct Entry {
      grpc::ServerContext* context;
      CancelToken* token;
      // When to look next, and how long after that.
      absl::Time next_check;
      absl::Duration interval;
    };
    friend class CallWatcher;
    CallWatcher& watcher_;
    std::list<Entry>::iterator entry_;
  };

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::list<Registration::Entry> entries_ ABSL_GUARDED_BY(mu_);
  // A call came since the loop last planned its next look.
  bool added_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace berth::plugin::internal

#endif  // PLUGINS_SDK_CALL_WATCHER_H_
