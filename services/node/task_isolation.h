// How a TaskSpec's isolation (berth.driver.v1.Isolation, userns, user)
// becomes a driver's TaskConfig: checked before anything is stored (no task
// may see berth's own sockets and state, name a capability that does not
// exist, or smuggle a NUL byte to a driver), checked against what the
// driver claims (DriverCapabilities.isolation), and copied into the
// TaskConfig with the user namespace the node chose.

#ifndef SERVICES_NODE_TASK_ISOLATION_H_
#define SERVICES_NODE_TASK_ISOLATION_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/node/v1/node.pb.h"

namespace berth::node {

// berth's own directories. A bind mount whose source is one of them, inside
// one, or holds one (/, /run, /var/lib) is refused: a task reaching
// node.sock or state.db would control the node.
struct ProtectedDirs {
  // --runtime_dir (default /run/berth).
  std::string runtime_dir;
  // berth's --state_dir (default /var/lib/berth), not <state_dir>/node.
  std::string state_dir;
};

// TaskSpec.user split: "NAME", "UID", "NAME:GROUP" or "UID:GID".
struct TaskUser {
  std::string user;
  std::string group;  // empty: the user's own
};

// INVALID_ARGUMENT naming spec.user for an empty part ("alice:", ":g"),
// more than one ':', or a control character.
absl::StatusOr<TaskUser> ParseTaskUser(absl::string_view text);

// Capability names as Isolation takes them: "NET_ADMIN", "cap_net_admin"
// and "ALL" are valid, case ignored. Returns the canonical name without
// "CAP_" ("NET_ADMIN", "ALL"), or INVALID_ARGUMENT.
absl::StatusOr<std::string> CanonicalCapability(absl::string_view name);

// The checks of spec.user, spec.userns and spec.isolation, and of NUL bytes
// in every string a driver passes on (user, env, driver_config, mount
// paths), before anything is stored. INVALID_ARGUMENT naming the field,
// e.g. "spec.isolation.mounts[0].source: /run/berth/node.sock is inside
// berth's runtime directory /run/berth". Mount sources must exist: they
// are resolved (realpath) before being compared with `dirs`.
absl::Status ValidateTaskIsolation(const v1::TaskSpec& spec,
                                   const ProtectedDirs& dirs);

// The checks of the spec's other settings, before anything is stored:
// labels (keys not empty, no "=", no NUL; at most kMaxLabels, each key and
// value bounded), hostname (at most 63 letters, digits, "-" and "."; not
// starting or ending with "-" or "."), extra_hosts (a valid host name and
// an IPv4 or IPv6 literal), network.dns (servers IP literals, searches and
// options single words without spaces or control characters), ulimits (a known
// RLIMIT_* type, soft <= hard, each type once), stop_signal (a signal's name or
// number), stop_timeout (0 to 24 hours); the health check is health_checker.h's
// ValidateHealthCheck. INVALID_ARGUMENT naming the field and quoting the
// value.
absl::Status ValidateTaskSettings(const v1::TaskSpec& spec);

// At most this many labels, keys of at most kMaxLabelKey bytes, values of at
// most kMaxLabelValue.
inline constexpr int kMaxLabels = 256;
inline constexpr size_t kMaxLabelKey = 256;
inline constexpr size_t kMaxLabelValue = 4096;

// The canonical name of a resource limit type: "RLIMIT_NOFILE" for
// "RLIMIT_NOFILE", "rlimit_nofile" or "nofile"; INVALID_ARGUMENT for a type
// that is not one of getrlimit(2)'s.
absl::StatusOr<std::string> CanonicalRlimitType(absl::string_view type);

// The number of the signal `name` names: "SIGTERM", "TERM", "sigterm" or
// "15" (1 to SIGRTMAX); nullopt for none.
std::optional<int> ParseSignalName(absl::string_view name);

// The host name of the task: spec.hostname, else its name made one (at
// most 63 characters of it, '_' and other characters a host name cannot
// hold as '-', without a trailing '-' or '.').
std::string TaskHostname(const v1::TaskSpec& spec);

// FAILED_PRECONDITION naming the field and the driver when the spec asks
// for isolation `caps` does not claim (mounts, readonly_rootfs → mounts;
// cap_add, cap_drop → capabilities; a seccomp profile other than
// unconfined → seccomp; userns "auto" → user_namespaces; image →
// image_rootfs; stdin_open, tty → attach; ulimits → rlimits). Asking for less
// isolation (privileged, allow_privilege_escalation, seccomp unconfined)
// needs no claim, so a spec asking nothing runs on every driver.
absl::Status CheckIsolationSupported(
    const v1::TaskSpec& spec, const std::string& driver,
    const driver::v1::DriverCapabilities& caps);

// The TaskConfig's isolation: the spec's, its mount sources resolved
// (realpath) and its capability names canonical, with `user_namespace`
// (the mapping the node allocated for userns "auto"; null for none).
// Validates the spec again first (ValidateTaskIsolation: a path may have
// changed since RunTask, e.g. before a restart).
absl::StatusOr<driver::v1::Isolation> BuildTaskIsolation(
    const v1::TaskSpec& spec, const ProtectedDirs& dirs,
    const driver::v1::UserNamespace* user_namespace);

// What StartRun calls once the driver is up: sets config's user, group,
// isolation (BuildTaskIsolation), stdin_open, tty, rlimits (the spec's
// ulimits, types canonical) and hostname (TaskHostname) from `spec`, after
// checking the spec
// against the driver's capabilities again (a relaunched driver may claim
// less; one that was down at RunTask was not asked). `caps` not ok: a spec
// that needs a claim fails with its status (not run unconfined).
absl::Status ApplyTaskIsolation(
    const v1::TaskSpec& spec,
    const absl::StatusOr<driver::v1::DriverCapabilities>& caps,
    const ProtectedDirs& dirs, const driver::v1::UserNamespace* user_namespace,
    driver::v1::TaskConfig* config);

}  // namespace berth::node

#endif  // SERVICES_NODE_TASK_ISOLATION_H_
