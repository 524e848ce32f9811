// Running CNI plugins (https://www.cni.dev/docs/spec/, versions 0.1.0 to
// 1.0.0) the way a container runtime does: a network configuration list
// (.conflist) loaded by name from a directory, its plugins executed in order
// for ADD and CHECK and in reverse order for DEL, each with its own
// configuration on stdin and the CNI_* variables in its environment, and the
// result of ADD parsed into the addresses of the interface in the namespace.
//
// Every plugin runs as a child process started with posix_spawn (never a fork
// that does work in a multithreaded process): its stdin, stdout and stderr
// are pipes, it gets no other file descriptor of ours and no environment of
// ours but PATH, and it is killed (SIGKILL, with its process group) and
// reaped when it outlives the runner's timeout.

#ifndef SERVICES_NETNS_HOOK_CNI_H_
#define SERVICES_NETNS_HOOK_CNI_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/network/v1/network.pb.h"
#include "nlohmann/json.hpp"

namespace berth {
namespace netns_hook {

// A CNI network configuration list (a .conflist file, or a .conf file of one
// plugin, which is given as a list of that one plugin).
struct CniNetwork {
  std::string name;         // its "name"
  std::string cni_version;  // its "cniVersion"
  nlohmann::json conflist;  // the whole list: {"cniVersion", "name",
                            // "plugins": [...], "disableCheck"?, ...}
  std::string path;         // the file it came from
};

// The network named `name` among the files of `config_dir` whose names end
// in .conflist, .conf or .json; the first one in file-name order when several
// carry the name. NOT_FOUND naming the directory and the network names found
// in it when none has that name (or the directory does not exist);
// INVALID_ARGUMENT naming the file and what is wrong when the file of that
// name is not a valid configuration, or when no file has that name but one
// could not be read as one (it may be the one meant).
absl::StatusOr<CniNetwork> LoadNetwork(const std::string& config_dir,
                                       const std::string& name);

// A network from a configuration list in memory (what LoadNetwork does with
// a file's content); INVALID_ARGUMENT naming `origin` and the fault.
absl::StatusOr<CniNetwork> NetworkFromJson(const nlohmann::json& config,
                                           const std::string& origin);

// What the runtime gives each plugin besides its configuration: the
// environment (CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS) and the
// capability arguments, which go into "runtimeConfig" of exactly the plugins
// whose "capabilities" declare them.
struct CniRuntime {
  // CNI_CONTAINERID (berth: the allocation's id). Required: a letter or digit
  // followed by letters, digits, '_', '.' and '-'.
  std::string container_id;
  // CNI_NETNS, the path of the namespace file. May be empty for DEL (the
  // namespace is gone; plugins clean up what they can).
  std::string netns_path;
  // CNI_IFNAME, the interface to make in the namespace (at most 15 bytes, no
  // '/', ':' or white space).
  std::string ifname = "eth0";
  // runtimeConfig.portMappings ([{"hostPort", "containerPort", "protocol",
  // "hostIP"?}]), for plugins whose capabilities has "portMappings": true
  // (portmap). Not given at all when empty.
  std::vector<berth::network::v1::PortMapping> port_mappings;
  // Other capability arguments by capability name (e.g. "dns", "bandwidth",
  // "ips", "mac"), given as they are to the plugins that declare them. Must
  // not hold "portMappings" when port_mappings is set.
  std::map<std::string, nlohmann::json> capability_args;
  // CNI_ARGS as K=V;K=V (optional). Keys and values must not hold ';', keys
  // not '='.
  std::vector<std::pair<std::string, std::string>> args;
};

// An address a result gives the interface inside the namespace.
struct CniAddress {
  std::string cidr;     // "10.199.0.5/24"
  std::string gateway;  // "10.199.0.1"; empty when the result names none
};

// The result of an ADD.
struct CniResult {
  // The result as the last plugin printed it: what the caller keeps for DEL
  // and CHECK (their prevResult).
  nlohmann::json raw;
  // The interface in the namespace: the result's interface with a "sandbox"
  // named `ifname`, else its first one with a "sandbox" (the loopback plugin
  // always reports "lo"), else `ifname`.
  std::string interface_name;
  // The addresses of that interface: ips[] whose "interface" is its index
  // or that carry no index; every ips[] when the result lists no interfaces;
  // ip4 and ip6 of a 0.1.0/0.2.0 result.
  std::vector<CniAddress> addresses;
};

// Reads a CNI result (any version 0.1.0 to 1.0.0) for the interface
// `ifname` asked for. INVALID_ARGUMENT naming the field at fault (e.g.
// "ips[1].address") when the result is malformed.
absl::StatusOr<CniResult> ParseResult(const nlohmann::json& result,
                                      const std::string& ifname);

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

#endif  // SERVICES_NETNS_HOOK_CNI_H_
