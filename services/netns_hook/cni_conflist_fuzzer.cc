// Fuzzes CNI configuration lists as berth-netns reads them from its
// configuration directory: NetworkFromJson (a .conflist, or a .conf of one
// plugin), what each plugin is given on stdin (PluginConfig, with port
// mappings, capability arguments and a prevResult) and what the reconcile
// at every start takes of the list (HostLocalLeaseDirs: an "ipam" that is
// not an object once made berth-netns crash-loop).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "berth/network/v1/network.pb.h"
#include "nlohmann/json.hpp"
#include "services/netns_hook/cni_config.h"
#include "tools/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace nh = berth::netns_hook;
  using nlohmann::json;
  const absl::string_view text = berth::fuzz::AsText(data, size);
  const json config = json::parse(text.begin(), text.end(), nullptr,
                                  /*allow_exceptions=*/false);
  if (config.is_discarded()) return 0;
  absl::StatusOr<nh::CniNetwork> network =
      nh::NetworkFromJson(config, "fuzz.conflist");
  if (!network.ok()) {
    if (!absl::StartsWith(network.status().message(), "fuzz.conflist: ")) {
      std::abort();
    }
    return 0;
  }
  (void)nh::ChecksDisabled(network->conflist);
  (void)nh::HasCheckAndDelPrevResult(network->cni_version);
  for (const std::string& dir : nh::HostLocalLeaseDirs(*network)) {
    if (!absl::StartsWith(dir, "/") ||
        !absl::EndsWith(dir, "/" + network->name)) {
      std::abort();
    }
  }
  nh::CniRuntime runtime;
  runtime.container_id = "berth-fuzz";
  runtime.netns_path = "/var/run/netns/berth-fuzz";
  berth::network::v1::PortMapping mapping;
  mapping.set_host_port(8080);
  mapping.set_container_port(80);
  runtime.port_mappings.push_back(mapping);
  runtime.capability_args["dns"] = {{"nameservers", {"10.0.0.53"}}};
  const json prev = {{"cniVersion", network->cni_version},
                     {"ips", {{{"address", "10.1.0.2/24"}}}}};
  const size_t plugins = network->conflist["plugins"].size();
  for (size_t i = 0; i < plugins; ++i) {
    const json stdin_config =
        nh::PluginConfig(*network, i, runtime, i == 0 ? nullptr : &prev);
    if (stdin_config["name"] != network->name) std::abort();
    (void)nh::DumpJson(stdin_config);
  }
  return 0;
}
