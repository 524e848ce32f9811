// berth-netns: serves berth.network.v1.NetworkService on
// <runtime_dir>/netns.sock until SIGTERM or SIGINT, then exits 0.

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "services/common/grpc_server.h"
#include "services/common/server_flags.h"
#include "services/common/service_main.h"
#include "services/netns_hook/network_hooks.h"
#include "services/netns_hook/network_service.h"

ABSL_FLAG(std::string, runtime_dir, std::string(berth::kDefaultRuntimeDir),
          "Directory of berth's sockets; serves on <runtime_dir>/netns.sock.");
ABSL_FLAG(std::string, state_dir, "/var/lib/berth",
          "berth's state directory: records in <state_dir>/netns/allocations, "
          "the default network's IP leases in <state_dir>/netns/ipam.");
ABSL_FLAG(std::string, netns_dir, "/var/run/netns",
          "Where network namespaces are mounted (ip netns's directory).");
ABSL_FLAG(std::string, namespace_prefix, "berth-",
          "Namespaces are <netns_dir>/<prefix><allocation>, and the CNI "
          "container ids the same; what carries the prefix and belongs to no "
          "allocation is removed at start.");
ABSL_FLAG(std::string, cni_config_dir, "/etc/berth/cni",
          "CNI network configurations (.conflist, .conf); the default bridge "
          "network is written here on first start.");
ABSL_FLAG(std::string, cni_path, "/usr/lib/cni:/opt/cni/bin",
          "Directories of CNI plugins, searched in order (':'-separated).");
ABSL_FLAG(std::string, bridge_network, "berth",
          "Name of the CNI network of NETWORK_MODE_BRIDGE.");
ABSL_FLAG(std::string, bridge_name, "berth0",
          "The host bridge of the default bridge network.");
ABSL_FLAG(std::string, bridge_subnet, "172.26.64.0/20",
          "The subnet of the default bridge network (host-local IPAM).");
ABSL_FLAG(absl::Duration, plugin_timeout, absl::Seconds(30),
          "How long one CNI plugin may run before it is killed.");

namespace {

constexpr char kUsage[] =
    "berth-netns: network namespaces for allocations (none, host, bridge "
    "through CNI), made before their tasks start and removed after\n"
    "usage: berth-netns [--runtime_dir=/run/berth] "
    "[--state_dir=/var/lib/berth] "
    "[--netns_dir=/var/run/netns] [--cni_config_dir=/etc/berth/cni] "
    "[--cni_path=/usr/lib/cni:/opt/cni/bin] [--bridge_subnet=172.26.64.0/20]";
constexpr char kVersion[] = "0.1.0";
constexpr absl::Duration kGrace = absl::Seconds(10);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::InitService(argc, argv, kUsage, kVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  berth::netns_hook::LinuxNetworkHooksOptions options;
  options.state_dir = absl::StrCat(absl::GetFlag(FLAGS_state_dir), "/netns");
  options.netns_dir = absl::GetFlag(FLAGS_netns_dir);
  options.prefix = absl::GetFlag(FLAGS_namespace_prefix);
  options.cni_config_dir = absl::GetFlag(FLAGS_cni_config_dir);
  options.cni_plugin_dirs =
      absl::StrSplit(absl::GetFlag(FLAGS_cni_path), ':', absl::SkipEmpty());
  options.bridge_network = absl::GetFlag(FLAGS_bridge_network);
  options.bridge_name = absl::GetFlag(FLAGS_bridge_name);
  options.bridge_subnet = absl::GetFlag(FLAGS_bridge_subnet);
  options.plugin_timeout = absl::GetFlag(FLAGS_plugin_timeout);
  absl::StatusOr<std::unique_ptr<berth::netns_hook::LinuxNetworkHooks>> hooks =
      berth::netns_hook::LinuxNetworkHooks::Start(options);
  if (!hooks.ok()) {
    LOG(ERROR) << hooks.status().message();
    return 1;
  }
  berth::netns_hook::NetworkServiceImpl service(hooks->get());
  berth::UnixGrpcServer::Options server_options;
  server_options.socket_path =
      absl::StrCat(absl::GetFlag(FLAGS_runtime_dir), "/netns.sock");
  server_options.services = {&service};
  if (absl::Status flags = berth::ApplyServerFlags(&server_options);
      !flags.ok()) {
    LOG(ERROR) << flags.message();
    return 2;
  }
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> server =
      berth::UnixGrpcServer::Start(server_options);
  if (!server.ok()) {
    LOG(ERROR) << server.status().message();
    return 1;
  }
  LOG(INFO) << "serving on " << server_options.socket_path << " (namespaces in "
            << options.netns_dir << ", CNI networks in "
            << options.cni_config_dir << ")";
  berth::WaitForShutdownSignal();
  (*server)->Shutdown(kGrace);
  LOG(INFO) << "stopped";
  return 0;
}
