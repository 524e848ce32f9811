// Fuzzes what berth-netns reads of a CNI plugin's stdout: the result of ADD
// (ParseResult, any version 0.1.0 to 1.0.0) and a failed plugin's error
// (CniErrorOf). Plugins are binaries berth-netns runs, configured by an
// administrator: their output is not trusted. A result that parses names
// addresses with a prefix length; a refusal names the field at fault.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "nlohmann/json.hpp"
#include "services/netns_hook/cni_config.h"
#include "tools/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using berth::netns_hook::CniErrorOf;
  using berth::netns_hook::CniResult;
  using berth::netns_hook::DumpJson;
  using berth::netns_hook::ParseResult;
  const std::string text(berth::fuzz::AsText(data, size));
  (void)CniErrorOf(text);
  const nlohmann::json result =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (result.is_discarded()) return 0;
  for (const char* ifname : {"eth0", "lo"}) {
    absl::StatusOr<CniResult> parsed = ParseResult(result, ifname);
    if (!parsed.ok()) {
      if (!absl::StartsWith(parsed.status().message(), "CNI result: ")) {
        std::abort();
      }
      continue;
    }
    if (parsed->interface_name.empty()) std::abort();
    for (const auto& address : parsed->addresses) {
      if (!absl::StrContains(address.cidr, '/')) std::abort();
    }
    (void)DumpJson(parsed->raw);
  }
  return 0;
}
