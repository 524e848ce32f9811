#include "services/proxy/token.h"

#include <errno.h>
#include <sys/random.h>

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace proxy {

absl::StatusOr<std::string> NewToken() {
  uint8_t bytes[kTokenLength / 2];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("getrandom for a token: ", std::strerror(errno)));
    }
    filled += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::string TokenPrefix(absl::string_view token) {
  return std::string(token.substr(0, kTokenPrefixLength));
}

}  // namespace proxy
}  // namespace berth
