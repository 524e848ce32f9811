#include "base/rlimits.h"

#include <sys/resource.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace berth::base {
namespace {

constexpr RlimitName kRlimitNames[] = {
    {"RLIMIT_AS", "as", RLIMIT_AS},
    {"RLIMIT_CORE", "core", RLIMIT_CORE},
    {"RLIMIT_CPU", "cpu", RLIMIT_CPU},
    {"RLIMIT_DATA", "data", RLIMIT_DATA},
    {"RLIMIT_FSIZE", "fsize", RLIMIT_FSIZE},
    {"RLIMIT_LOCKS", "locks", RLIMIT_LOCKS},
    {"RLIMIT_MEMLOCK", "memlock", RLIMIT_MEMLOCK},
    {"RLIMIT_MSGQUEUE", "msgqueue", RLIMIT_MSGQUEUE},
    {"RLIMIT_NICE", "nice", RLIMIT_NICE},
    {"RLIMIT_NOFILE", "nofile", RLIMIT_NOFILE},
    {"RLIMIT_NPROC", "nproc", RLIMIT_NPROC},
    {"RLIMIT_RSS", "rss", RLIMIT_RSS},
    {"RLIMIT_RTPRIO", "rtprio", RLIMIT_RTPRIO},
    {"RLIMIT_RTTIME", "rttime", RLIMIT_RTTIME},
    {"RLIMIT_SIGPENDING", "sigpending", RLIMIT_SIGPENDING},
    {"RLIMIT_STACK", "stack", RLIMIT_STACK},
};

}  // namespace

absl::Span<const RlimitName> RlimitNames() { return kRlimitNames; }

const RlimitName* FindRlimitByType(absl::string_view type) {
  for (const RlimitName& name : kRlimitNames) {
    if (type == name.type) return &name;
  }
  return nullptr;
}

const RlimitName* FindRlimit(absl::string_view name) {
  if (absl::StartsWithIgnoreCase(name, "rlimit_")) name.remove_prefix(7);
  for (const RlimitName& entry : kRlimitNames) {
    if (absl::EqualsIgnoreCase(name, entry.short_name)) return &entry;
  }
  return nullptr;
}

}  // namespace berth::base
