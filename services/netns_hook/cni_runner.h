// Running CNI plugins (https://www.cni.dev/docs/spec/, versions 0.1.0 to
// 1.0.0) the way a container runtime does: the plugins of a network
// configuration list (cni_config.h) executed in order for ADD and CHECK and
// in reverse order for DEL, each with its own configuration on stdin and the
// CNI_* variables in its environment, and the result of ADD parsed into the
// addresses of the interface in the namespace.
//
// Every plugin runs as a child process started with posix_spawn (never a fork
// that does work in a multithreaded process): its stdin, stdout and stderr
// are pipes, it gets no other file descriptor of ours and no environment of
// ours but PATH, and it is killed (SIGKILL, with its process group) and
// reaped when it outlives the runner's timeout.

#ifndef SERVICES_NETNS_HOOK_CNI_RUNNER_H_
#define SERVICES_NETNS_HOOK_CNI_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "services/netns_hook/cni_config.h"

namespace berth {
namespace netns_hook {

// Runs the plugins of CNI networks. Holds no mutable state: one runner may be
// used by many threads at once (the runtime must only not run two operations
// for the same container at the same time, per the spec).
class CniRunner {
 public:
  // `plugin_dirs` are searched in this order for a plugin's "type"; CNI_PATH
  // is them joined by ':'. `timeout` bounds each plugin execution, after
  // which the plugin (and its process group) is SIGKILLed.
  CniRunner(std::vector<std::string> plugin_dirs, absl::Duration timeout);

  // ADD through the list in order: each plugin gets the previous one's result
  // as prevResult (the first none); the last one's result is returned. A
  // failure stops there: FAILED_PRECONDITION naming the plugin (type), the
  // command, the network and the plugin's error (its error JSON's msg,
  // details and code, else its exit status and stderr), DEADLINE_EXCEEDED
  // for a plugin killed at the timeout, FAILED_PRECONDITION naming the
  // directories searched for a missing plugin. The plugins before the
  // failing one are NOT undone: the caller calls Del. INVALID_ARGUMENT naming
  // the field for a runtime the spec does not allow (nothing is run).
  absl::StatusOr<CniResult> Add(const CniNetwork& network,
                                const CniRuntime& runtime) const;

  // CHECK in order, every plugin with `prev_result` (the cached ADD result);
  // stops at the first failure, reported as for Add. Runs nothing and
  // succeeds when the list says "disableCheck": true; UNIMPLEMENTED, running
  // nothing, for a list of a cniVersion before 0.4.0 (which has no CHECK).
  absl::Status Check(const CniNetwork& network, const CniRuntime& runtime,
                     const nlohmann::json& prev_result) const;

  // DEL in reverse order, every plugin with `prev_result` as prevResult when
  // it is given (the cached ADD result; never given to lists of a cniVersion
  // before 0.4.0). Keeps going past a failing or missing plugin, so that as
  // much as can be is removed, logs each failure and returns the first. DEL
  // of what does not exist succeeds (the plugins see to that, per the spec).
  absl::Status Del(const CniNetwork& network, const CniRuntime& runtime,
                   const nlohmann::json* prev_result) const;

  // The executable for a plugin type: the first of plugin_dirs/type that is
  // an executable regular file. FAILED_PRECONDITION `CNI plugin "x" not
  // found in /usr/lib/cni, /opt/cni/bin` when there is none;
  // INVALID_ARGUMENT for a type that is empty or holds '/'.
  absl::StatusOr<std::string> FindPlugin(const std::string& type) const;

  const std::vector<std::string>& plugin_dirs() const { return plugin_dirs_; }
  absl::Duration timeout() const { return timeout_; }

 private:
  // Runs plugins[index] of `network` for `command` ("ADD", "CHECK", "DEL");
  // returns what it printed on stdout.
  absl::StatusOr<std::string> RunPlugin(
      const char* command, const CniNetwork& network, int index,
      const CniRuntime& runtime, const nlohmann::json* prev_result) const;

  const std::vector<std::string> plugin_dirs_;
  const absl::Duration timeout_;
};

// PATH as plugins get it: they run iptables, ip and the like from it.
inline constexpr char kCniPluginPathEnv[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

}  // namespace netns_hook
}  // namespace berth

#endif  // SERVICES_NETNS_HOOK_CNI_RUNNER_H_
