#include "services/images/oci/digest.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/sha256.h"

namespace berth::images {
namespace {

constexpr absl::string_view kSha256Prefix = "sha256:";
constexpr size_t kSha256HexLength = 64;

// At most this much of a refused digest is quoted in an error.
constexpr size_t kQuoteLimit = 100;

std::string Quote(absl::string_view text) {
  if (text.size() > kQuoteLimit) {
    return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kQuoteLimit)),
                        "...\" (", text.size(), " bytes)");
  }
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

bool IsLowerHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

}  // namespace

absl::Status ValidateDigest(absl::string_view digest, absl::string_view what) {
  const size_t colon = digest.find(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " ", Quote(digest),
                     ": want \"sha256:\" and 64 lowercase hex characters"));
  }
  if (!absl::StartsWith(digest, kSha256Prefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid ", what, " ", Quote(digest), ": unsupported algorithm \"",
        absl::CHexEscape(
            digest.substr(0, std::min<size_t>(colon, kQuoteLimit))),
        "\" (only sha256 is accepted)"));
  }
  const absl::string_view hex = digest.substr(kSha256Prefix.size());
  if (hex.size() != kSha256HexLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " ", Quote(digest), ": ", hex.size(),
                     " hex characters, want ", kSha256HexLength));
  }
  for (char c : hex) {
    if (!IsLowerHex(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid ", what, " ", Quote(digest), ": not lowercase hex"));
    }
  }
  return absl::OkStatus();
}

std::string DigestFromHex(absl::string_view hex) {
  return absl::StrCat(kSha256Prefix, hex);
}

absl::string_view DigestHex(absl::string_view digest) {
  if (!absl::StartsWith(digest, kSha256Prefix)) return digest;
  return digest.substr(kSha256Prefix.size());
}

std::string DigestOf(absl::string_view data) {
  return DigestFromHex(Sha256Hex(data));
}

}  // namespace berth::images
