// Fuzzes ReattachConfig::Parse: what berth-node reads back from its state to
// find a running plugin again after a restart (a torn or edited state must
// be refused with the field named). A config that parses serializes to text
// that parses to the same config.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "plugins/host/reattach_config.h"
#include "tools/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using berth::plugin::host::ReattachConfig;
  const std::string text(berth::fuzz::AsText(data, size));
  absl::StatusOr<ReattachConfig> parsed = ReattachConfig::Parse(text);
  if (!parsed.ok()) {
    if (!absl::StartsWith(parsed.status().message(),
                          "bad plugin reattach config: ")) {
      std::abort();
    }
    return 0;
  }
  if (parsed->name.empty() || !absl::StartsWith(parsed->socket_path, "/") ||
      parsed->pid <= 0) {
    std::abort();
  }
  const std::string serialized = parsed->Serialize();
  absl::StatusOr<ReattachConfig> again = ReattachConfig::Parse(serialized);
  if (!again.ok() || *again != *parsed) std::abort();
  if (again->Serialize() != serialized) std::abort();
  return 0;
}
