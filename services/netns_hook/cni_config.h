// The data of CNI (https://www.cni.dev/docs/spec/, versions 0.1.0 to 1.0.0)
// as a runtime handles it, apart from running plugins (cni_runner.h): network
// configuration lists (.conflist) loaded by name from a directory and
// checked, what the runtime gives each plugin (CniRuntime) checked against
// the spec, the configuration each plugin gets on stdin, a failed plugin's
// error and the result of ADD read into the addresses of the interface in
// the namespace. Nothing here runs a process or keeps state.

#ifndef SERVICES_NETNS_HOOK_CNI_CONFIG_H_
#define SERVICES_NETNS_HOOK_CNI_CONFIG_H_

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// --- What the runner checks and gives plugins (cni_runner.cc).

// Checks a list ({"name", "cniVersion", "plugins": [...]}) for what the
// runner relies on; INVALID_ARGUMENT "<origin>: <fault>".
absl::Status CheckConflist(const nlohmann::json& list,
                           const std::string& origin);

// What names a network in errors about its list: its file, else its name.
std::string NetworkOrigin(const CniNetwork& network);

// Whether the list says "disableCheck": true (or "true").
bool ChecksDisabled(const nlohmann::json& list);

// Whether `cni_version` (already checked) is at least 0.4.0: CHECK, and
// prevResult on DEL, came with it.
bool HasCheckAndDelPrevResult(const std::string& cni_version);

// Checks `runtime` against the spec (and, when `needs_netns`, that it names
// a namespace); INVALID_ARGUMENT "CNI runtime: <field> ...".
absl::Status CheckRuntime(const CniRuntime& runtime, bool needs_netns);

// The stdin of plugins[index]: its own object with the list's "name" and
// "cniVersion", "prevResult" when given, and "runtimeConfig" with the
// arguments of exactly the capabilities it declares (when there are any).
nlohmann::json PluginConfig(const CniNetwork& network, size_t index,
                            const CniRuntime& runtime,
                            const nlohmann::json* prev_result);

// The CNI error a failed plugin printed ({"code", "msg", "details"}), as
// "msg; details (CNI error code N)"; empty when stdout holds none.
std::string CniErrorOf(const std::string& stdout_text);

// Where host-local (the IPAM plugin) keeps `network`'s leases: for each
// plugin whose "ipam" is an object with "type": "host-local", its "dataDir"
// (default /var/lib/cni/networks) joined with the network's name, once each.
// What host-local itself could not read (an "ipam" that is not an object, a
// "type" or "dataDir" that is not a string, an empty or relative "dataDir")
// holds no lease and is skipped: a configuration list berth-netns reads
// while reconciling never stops it.
std::vector<std::string> HostLocalLeaseDirs(const CniNetwork& network);

// `value` serialized without ever throwing (invalid UTF-8 is replaced).
std::string DumpJson(const nlohmann::json& value);

}  // namespace netns_hook
}  // namespace berth

#endif  // SERVICES_NETNS_HOOK_CNI_CONFIG_H_
