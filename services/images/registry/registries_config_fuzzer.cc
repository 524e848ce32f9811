// Fuzzes RegistriesConfig::Parse, the registries configuration file
// (/etc/berth/registries.json). What it accepts must hold: host keys
// non-empty without "://"; mirrors http(s) base URLs that parse again to
// themselves; absolute CA files; no password without a user name; no ':'
// in a user name.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "services/images/registry/registry_client.h"
#include "services/images/registry/url.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

using berth::fuzz::Require;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace berth::images;
  const absl::string_view json = berth::fuzz::AsText(data, size);
  absl::StatusOr<RegistriesConfig> config = RegistriesConfig::Parse(json);
  if (!config.ok()) return 0;
  for (const auto& [name, host] : config->hosts) {
    Require(!name.empty() && !absl::StrContains(name, "://"),
            "a bad host key accepted");
    Require(host.ca_file.empty() || host.ca_file[0] == '/',
            "a relative ca_file accepted");
    Require(!host.username.empty() || host.password.empty(),
            "a password without a username accepted");
    Require(!absl::StrContains(host.username, ":"),
            "a user name with ':' accepted");
    for (const std::string& mirror : host.mirrors) {
      absl::StatusOr<HttpUrl> url =
          ParseHttpUrl(mirror, "mirror", /*base_only=*/true);
      Require(url.ok(), "an accepted mirror does not parse again");
      Require(url->String() == mirror,
              "an accepted mirror parses again to another URL");
    }
  }
  return 0;
}
