// Fuzzes the plugin handshake line: the first line a plugin prints on its
// stdout, which berth-node reads (plugins/host/plugin_process.cc) from a
// binary an administrator configured but whose output it does not trust. A
// line that parses formats back (FormatHandshake) to a line that parses to
// the same handshake; a refusal quotes the line.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "plugins/sdk/handshake.h"
#include "tools/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using berth::plugin::FormatHandshake;
  using berth::plugin::Handshake;
  using berth::plugin::ParseHandshake;
  const std::string line(berth::fuzz::AsText(data, size));
  absl::StatusOr<Handshake> parsed = ParseHandshake(line);
  if (!parsed.ok()) {
    if (!absl::StartsWith(parsed.status().message(),
                          "bad plugin handshake line \"")) {
      std::abort();
    }
    return 0;
  }
  if (parsed->network != "unix" || parsed->protocol != "grpc" ||
      !absl::StartsWith(parsed->address, "/")) {
    std::abort();
  }
  absl::StatusOr<Handshake> again = ParseHandshake(FormatHandshake(*parsed));
  if (!again.ok() || again->core_version != parsed->core_version ||
      again->app_version != parsed->app_version ||
      again->address != parsed->address) {
    std::abort();
  }
  return 0;
}
