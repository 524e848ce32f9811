// http(s) URLs as the registry client uses them (mirrors, token realms,
// redirects), parsed by libcurl's URL API.

#ifndef SERVICES_IMAGES_REGISTRY_URL_H_
#define SERVICES_IMAGES_REGISTRY_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::images {

struct HttpUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // lower case; an IPv6 address in brackets
  int port = 0;        // the explicit port, or the scheme's default
  std::string path;    // "" or "/..." without a trailing slash
  std::string query;   // without '?'

  // scheme://host[:port] (the port only when it is not the default).
  std::string Origin() const;
  // host[:port] as above.
  std::string HostPort() const;
  // Origin() + path (+ "?" + query).
  std::string String() const;
  // Same scheme, host and port.
  bool SameOrigin(const HttpUrl& other) const;
};

// Parses an absolute http:// or https:// URL. INVALID_ARGUMENT naming
// `what` and the text for another scheme, user information, a fragment, or
// anything libcurl cannot parse. With `base_only`, a query is refused too
// (a mirror or endpoint is scheme://host[:port][/path]).
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view text,
                                     absl::string_view what,
                                     bool base_only = false);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_REGISTRY_URL_H_
