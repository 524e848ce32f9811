// Tokens of berth-proxy: 128 random bits from getrandom(2), hex encoded. A
// token is a secret; logs and errors only ever show its prefix.

#ifndef SERVICES_PROXY_TOKEN_H_
#define SERVICES_PROXY_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {
namespace proxy {

// Length of a token: 128 bits as hex.
inline constexpr int kTokenLength = 32;
// How much of a token logs and errors show.
inline constexpr int kTokenPrefixLength = 8;

// A new token: 16 bytes from getrandom(2), as 32 lowercase hex digits.
absl::StatusOr<std::string> NewToken();

// The first kTokenPrefixLength characters of `token`, the only part of it
// that is ever logged or returned in an error.
std::string TokenPrefix(absl::string_view token);

}  // namespace proxy
}  // namespace berth

#endif  // SERVICES_PROXY_TOKEN_H_
