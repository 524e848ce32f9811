#include "services/images/registry/url.h"

#include <curl/curl.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace berth::images {
namespace {

struct UrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};

// A part of `url`, or "" when it is missing.
std::string Part(CURLU* url, CURLUPart part, unsigned int flags = 0) {
  char* value = nullptr;
  if (curl_url_get(url, part, &value, flags) != CURLUE_OK || value == nullptr) {
    return "";
  }
  std::string result(value);
  curl_free(value);
  return result;
}

int DefaultPort(absl::string_view scheme) {
  return scheme == "https" ? 443 : 80;
}

}  // namespace

std::string HttpUrl::HostPort() const {
  if (port == DefaultPort(scheme)) return host;
  return absl::StrCat(host, ":", port);
}

std::string HttpUrl::Origin() const {
  return absl::StrCat(scheme, "://", HostPort());
}

std::string HttpUrl::String() const {
  std::string result = absl::StrCat(Origin(), path);
  if (!query.empty()) absl::StrAppend(&result, "?", query);
  return result;
}

bool HttpUrl::SameOrigin(const HttpUrl& other) const {
  return scheme == other.scheme && host == other.host && port == other.port;
}

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view text,
                                     absl::string_view what, bool base_only) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", text, "\": ", why));
  };
  std::unique_ptr<CURLU, UrlDeleter> url(curl_url());
  if (url == nullptr) return absl::ResourceExhaustedError("curl_url failed");
  // Only absolute URLs: no default scheme is guessed.
  CURLUcode code =
      curl_url_set(url.get(), CURLUPART_URL, std::string(text).c_str(), 0);
  if (code != CURLUE_OK) {
    return invalid(absl::StrCat("not a URL (", curl_url_strerror(code), ")"));
  }
  HttpUrl result;
  result.scheme = absl::AsciiStrToLower(Part(url.get(), CURLUPART_SCHEME));
  if (result.scheme != "http" && result.scheme != "https") {
    return invalid("only http:// and https:// are allowed");
  }
  if (!Part(url.get(), CURLUPART_USER).empty() ||
      !Part(url.get(), CURLUPART_PASSWORD).empty()) {
    return invalid("user information in a URL is not allowed");
  }
  if (!Part(url.get(), CURLUPART_FRAGMENT).empty()) {
    return invalid("a fragment is not allowed");
  }
  result.host = absl::AsciiStrToLower(Part(url.get(), CURLUPART_HOST));
  if (result.host.empty()) return invalid("no host");
  std::string port = Part(url.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if (!absl::SimpleAtoi(port, &result.port) || result.port <= 0 ||
      result.port > 65535) {
    return invalid("bad port");
  }
  result.query = Part(url.get(), CURLUPART_QUERY);
  if (base_only && !result.query.empty()) {
    return invalid("a query is not allowed");
  }
  std::string path = Part(url.get(), CURLUPART_PATH);
  if (base_only) {
    while (!path.empty() && path.back() == '/') path.pop_back();
  } else if (path == "/") {
    path.clear();
  }
  result.path = path;
  return result;
}

}  // namespace berth::images
