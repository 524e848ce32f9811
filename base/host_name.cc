#include "base/host_name.h"

#include "absl/strings/ascii.h"

namespace berth::base {

HostNameFault CheckHostName(absl::string_view name, size_t max_size,
                            char* bad_character) {
  if (name.empty() || name.size() > max_size) return HostNameFault::kLength;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.') {
      if (bad_character != nullptr) *bad_character = c;
      return HostNameFault::kCharacter;
    }
  }
  if (!absl::ascii_isalnum(name.front()) || !absl::ascii_isalnum(name.back())) {
    return HostNameFault::kEdge;
  }
  return HostNameFault::kNone;
}

}  // namespace berth::base
