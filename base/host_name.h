// Host names as berth takes them (--hostname, --add-host, spec.hostname,
// spec.extra_hosts, TaskConfig.hostname): RFC 1123's spelling.

#ifndef BASE_HOST_NAME_H_
#define BASE_HOST_NAME_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace berth::base {

// What is wrong with a host name, the first fault found.
enum class HostNameFault {
  kNone,
  // Empty, or longer than the most allowed.
  kLength,
  // A character other than a letter, a digit, '-' or '.'.
  kCharacter,
  // Starting or ending with '-' or '.'.
  kEdge,
};

// Checks `name` as a host name: 1 to `max_size` letters, digits, '-' and
// '.', starting and ending with a letter or a digit (63 for a name given to
// sethostname(2), 253 for a whole domain name). With kCharacter, sets
// `*bad_character` (if not null) to the first character not allowed.
HostNameFault CheckHostName(absl::string_view name, size_t max_size,
                            char* bad_character = nullptr);

// Whether CheckHostName finds nothing wrong with `name`.
inline bool IsHostName(absl::string_view name, size_t max_size) {
  return CheckHostName(name, max_size) == HostNameFault::kNone;
}

}  // namespace berth::base

#endif  // BASE_HOST_NAME_H_
