// What the tests of berth-netns share (testonly): counting what exists of a
// test's networks, and TCP probes between the test's own namespaces.

#ifndef SERVICES_NETNS_HOOK_TEST_SUPPORT_H_
#define SERVICES_NETNS_HOOK_TEST_SUPPORT_H_

#include <sys/types.h>

#include <ostream>
#include <string>

#include "services/netns_hook/network_hooks.h"

namespace berth::netns_hook::testing {

// What exists of the networks of one set of options: namespaces named with
// its prefix, veths on its bridge, IP leases kept under its state directory,
// and iptables rules naming its prefix.
struct Footprint {
  int namespaces = 0;
  int veths = 0;
  int leases = 0;
  int rules = 0;
  bool operator==(const Footprint& o) const {
    return namespaces == o.namespaces && veths == o.veths &&
           leases == o.leases && rules == o.rules;
  }
};
std::ostream& operator<<(std::ostream& os, const Footprint& f);

Footprint Count(const LinuxNetworkHooksOptions& options);

// For a failure message: the namespaces, veths and iptables rules Count
// counts, one per line.
std::string Describe(const LinuxNetworkHooksOptions& options);

// Options of a test's own: directories below `temp_dir`, a prefix, bridge,
// network name and /24 subnet (10.211.N.0/24) made from `tag`, and
// `plugin_dir` searched before /usr/lib/cni. `gateway` gets the bridge's
// address.
LinuxNetworkHooksOptions TestOptions(const std::string& temp_dir,
                                     const std::string& tag, int subnet,
                                     const std::string& plugin_dir,
                                     std::string* gateway);

// Writes an executable shell script `body` as plugin `type` in `dir`.
void WritePlugin(const std::string& dir, const std::string& type,
                 const std::string& body);

// A TCP listener on ip:port inside the namespace at `path`, in a child
// process that accepts one connection and exits 0 once it read "ping".
// Returns its pid once it listens, -1 on failure.
pid_t ListenIn(const std::string& path, const std::string& ip, int port);

// Connects to ip:port from the calling process's namespace and sends "ping".
bool Ping(const std::string& ip, int port);

// Whether the listener of ListenIn got its "ping" (waits for it).
bool ListenerGotPing(pid_t pid);

// The standard output of a shell command.
std::string Output(const std::string& command);

}  // namespace berth::netns_hook::testing

#endif  // SERVICES_NETNS_HOOK_TEST_SUPPORT_H_
