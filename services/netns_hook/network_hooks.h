// The network hooks of an allocation (a group of tasks sharing a network):
// Prerun makes its network namespace before its tasks start, Postrun removes
// it after they end. NetworkHooks is what the node calls (through
// berth.network.v1.NetworkService); LinuxNetworkHooks is the implementation
// for Linux: namespaces bind-mounted in a directory like `ip netns`, and
// bridge networking through CNI plugins. Another platform implements
// NetworkHooks its own way behind the same service.

#ifndef SERVICES_NETNS_HOOK_NETWORK_HOOKS_H_
#define SERVICES_NETNS_HOOK_NETWORK_HOOKS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/network/v1/network.pb.h"
#include "services/netns_hook/allocation_store.h"
#include "services/netns_hook/cni_config.h"
#include "services/netns_hook/cni_runner.h"
#include "services/netns_hook/netns.h"

namespace berth::netns_hook {

class NetworkHooks {
 public:
  virtual ~NetworkHooks() = default;

  // Makes (or, for an allocation that has it, returns) the allocation's
  // network. Idempotent. On failure nothing of it is left.
  virtual absl::StatusOr<network::v1::PrerunResponse> Prerun(
      const network::v1::PrerunRequest& request) = 0;

  // Removes what Prerun made. OK for an unknown allocation.
  virtual absl::Status Postrun(const std::string& allocation_id) = 0;

  // Every allocation's network.
  virtual absl::StatusOr<std::vector<network::v1::NetworkStatus>> List() = 0;
};

struct LinuxNetworkHooksOptions {
  // Records (<state>/allocations) and the default network's IP leases
  // (<state>/ipam).
  std::string state_dir = "/var/lib/berth/netns";
  // Where namespaces are mounted, and the prefix of their names (and of the
  // CNI container ids): <netns_dir>/<prefix><allocation>.
  std::string netns_dir = "/var/run/netns";
  std::string prefix = "berth-";
  // CNI network configurations (.conflist, .conf) and plugin directories.
  std::string cni_config_dir = "/etc/berth/cni";
  std::vector<std::string> cni_plugin_dirs = {"/usr/lib/cni", "/opt/cni/bin"};
  absl::Duration plugin_timeout = absl::Seconds(30);
  // The network of NETWORK_MODE_BRIDGE: written to
  // <cni_config_dir>/<bridge_network>.conflist at start if no configuration
  // names it: bridge (this bridge, gateway, IP masquerade, hairpin) with
  // host-local IPAM on this subnet, portmap and firewall (iptables).
  std::string bridge_network = "berth";
  std::string bridge_name = "berth0";
  std::string bridge_subnet = "172.26.64.0/20";
  // The interface inside the namespace.
  std::string interface_name = "eth0";
};

class LinuxNetworkHooks : public NetworkHooks {
 public:
  // Prepares the directories, writes the default bridge network if missing,
  // then reconciles: removes what belongs to no live allocation (namespaces,
  // CNI attachments with their veths, IP leases and firewall rules, records
  // of a Prerun or Postrun a crash interrupted), with one log line each.
  static absl::StatusOr<std::unique_ptr<LinuxNetworkHooks>> Start(
      LinuxNetworkHooksOptions options);

  absl::StatusOr<network::v1::PrerunResponse> Prerun(
      const network::v1::PrerunRequest& request) override;
  absl::Status Postrun(const std::string& allocation_id) override;
  absl::StatusOr<std::vector<network::v1::NetworkStatus>> List() override;

  // What Start's reconciliation removed (for tests and the log): one line per
  // thing, e.g. "namespace berth-a1 of no allocation".
  const std::vector<std::string>& reconciled() const { return reconciled_; }

  // The default bridge network's configuration (JSON), as Start writes it.
  static std::string DefaultBridgeConflist(
      const LinuxNetworkHooksOptions& options);

 private:
  explicit LinuxNetworkHooks(LinuxNetworkHooksOptions options);

  absl::Status Reconcile();
  // Removes whatever exists of `record`'s network and then the record.
  absl::Status TearDown(AllocationRecord record);
  absl::Mutex* LockFor(const std::string& allocation_id)
      ABSL_LOCKS_EXCLUDED(locks_mu_);
  std::string ContainerId(const std::string& allocation_id) const {
    return options_.prefix + allocation_id;
  }
  network::v1::NetworkStatus StatusOf(const AllocationRecord& record) const;
  CniRuntime RuntimeOf(const AllocationRecord& record) const;

  const LinuxNetworkHooksOptions options_;
  const AllocationStore store_;
  const NamespaceDir namespaces_;
  const CniRunner cni_;
  std::vector<std::string> reconciled_;

  absl::Mutex locks_mu_;
  std::map<std::string, std::unique_ptr<absl::Mutex>> locks_
      ABSL_GUARDED_BY(locks_mu_);
};

}  // namespace berth::netns_hook

#endif  // SERVICES_NETNS_HOOK_NETWORK_HOOKS_H_
