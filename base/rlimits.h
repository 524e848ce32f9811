// getrlimit(2)'s resource limits by name: the one table of them that the
// CLI (--ulimit), the node (spec.ulimits) and the drivers (TaskConfig.rlimits)
// read.

#ifndef BASE_RLIMITS_H_
#define BASE_RLIMITS_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace berth::base {

struct RlimitName {
  // getrlimit(2)'s name: "RLIMIT_NOFILE".
  const char* type;
  // docker's --ulimit name: "nofile".
  const char* short_name;
  // RLIMIT_NOFILE.
  int resource;
};

// Every limit, sorted by short name (the order error messages list them in).
absl::Span<const RlimitName> RlimitNames();

// The limit whose type is exactly `type` ("RLIMIT_NOFILE"); null otherwise.
const RlimitName* FindRlimitByType(absl::string_view type);

// The limit `name` names in any case, with or without "RLIMIT_": "nofile",
// "NOFILE", "rlimit_nofile" and "RLIMIT_NOFILE" are all RLIMIT_NOFILE; null
// for anything else ("RLIMIT_" and "" included).
const RlimitName* FindRlimit(absl::string_view name);

}  // namespace berth::base

#endif  // BASE_RLIMITS_H_
