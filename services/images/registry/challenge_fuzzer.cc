// Fuzzes the WWW-Authenticate parser (a registry's 401 answer: a hostile
// registry chooses every byte) and, as the client does with a Bearer
// challenge, the parsing of its realm as a URL. The input is split into
// headers at newlines for ParseWwwAuthenticateHeaders. An accepted
// challenge has a lower-case, non-empty scheme and lower-case parameter
// names.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "services/images/registry/challenge.h"
#include "services/images/registry/url.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

using berth::fuzz::Require;

void Check(const std::vector<berth::images::AuthChallenge>& challenges) {
  Require(!challenges.empty(), "an accepted header has no challenge");
  for (const berth::images::AuthChallenge& challenge : challenges) {
    Require(!challenge.scheme.empty(), "a challenge without a scheme");
    Require(absl::AsciiStrToLower(challenge.scheme) == challenge.scheme,
            "a scheme not in lower case");
    for (const auto& [name, value] : challenge.params) {
      Require(!name.empty(), "a parameter without a name");
      Require(absl::AsciiStrToLower(name) == name,
              "a parameter name not in lower case");
      Require(challenge.Param(name) == value, "Param() misses a parameter");
    }
    if (challenge.scheme == "bearer") {
      absl::StatusOr<berth::images::HttpUrl> realm =
          berth::images::ParseHttpUrl(challenge.Param("realm"), "token realm");
      if (realm.ok()) {
        Require(realm->scheme == "http" || realm->scheme == "https",
                "a realm of another scheme accepted");
        Require(!realm->host.empty(), "a realm without a host accepted");
        Require(realm->port > 0 && realm->port <= 65535,
                "a realm's port out of range");
        (void)realm->String();
        (void)realm->SameOrigin(*realm);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text = berth::fuzz::AsText(data, size);
  absl::StatusOr<std::vector<berth::images::AuthChallenge>> one =
      berth::images::ParseWwwAuthenticate(text);
  if (one.ok()) Check(*one);
  const std::vector<std::string> headers = absl::StrSplit(text, '\n');
  absl::StatusOr<std::vector<berth::images::AuthChallenge>> all =
      berth::images::ParseWwwAuthenticateHeaders(headers);
  if (all.ok()) Check(*all);
  return 0;
}
