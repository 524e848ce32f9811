// The WWW-Authenticate header of an HTTP 401 (RFC 9110 section 11.6.1), as a
// registry sends it:
//   Bearer realm="https://auth.docker.io/token",service="registry.docker.io",
//     scope="repository:library/busybox:pull"
//   Basic realm="Registry Realm"
// A header may hold several challenges separated by commas, and a response
// several headers; parameter values are tokens or quoted strings (with
// backslash escapes, and commas inside the quotes).

#ifndef SERVICES_IMAGES_REGISTRY_CHALLENGE_H_
#define SERVICES_IMAGES_REGISTRY_CHALLENGE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::images {

struct AuthChallenge {
  // Lower case: "bearer", "basic".
  std::string scheme;
  // Parameter names in lower case ("realm", "service", "scope"); values as
  // sent, unquoted and unescaped.
  std::map<std::string, std::string> params;
  // The token68 form ("Negotiate abc=="), when the challenge has one instead
  // of parameters.
  std::string token68;

  // The parameter's value, or "" when it is missing.
  std::string Param(absl::string_view name) const;
};

// Parses one WWW-Authenticate header value into its challenges, in order.
// INVALID_ARGUMENT, quoting the header, when it does not follow the grammar
// (an unterminated quoted string, a parameter without a name, ...).
absl::StatusOr<std::vector<AuthChallenge>> ParseWwwAuthenticate(
    absl::string_view header);

// The challenges of every header of a response, in order; headers that do
// not parse are skipped (and named in the error if none parsed).
absl::StatusOr<std::vector<AuthChallenge>> ParseWwwAuthenticateHeaders(
    const std::vector<std::string>& headers);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_REGISTRY_CHALLENGE_H_
