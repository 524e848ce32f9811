#include "services/node/task_isolation.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/host_name.h"
#include "base/path.h"
#include "base/proto_time.h"
#include "base/rlimits.h"
#include "nlohmann/json.hpp"

namespace berth::node {
namespace {

namespace driverpb = ::berth::driver::v1;

// Every capability of Linux 6.x, by number (capability(7)).
constexpr const char* kCapabilities[] = {
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
};

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status NulError(absl::string_view field) {
  return Invalid(field,
                 "holds a NUL byte, which no argument, variable or path can");
}

bool HasControl(absl::string_view text) {
  for (char c : text) {
    if (absl::ascii_iscntrl(c)) return true;
  }
  return false;
}

// A NUL byte in any string (or key) of `value`; as the drivers check it
// (services/driver/common/task_spec.cc), but before the task is stored.
absl::Status CheckNoNul(const google::protobuf::Value& value,
                        const std::string& field) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kStringValue:
      if (absl::StrContains(value.string_value(), '\0')) {
        return NulError(field);
      }
      return absl::OkStatus();
    case google::protobuf::Value::kListValue:
      for (int i = 0; i < value.list_value().values_size(); ++i) {
        if (absl::Status s = CheckNoNul(value.list_value().values(i),
                                        absl::StrCat(field, "[", i, "]"));
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    case google::protobuf::Value::kStructValue:
      for (const auto& [key, child] : value.struct_value().fields()) {
        const std::string child_field =
            absl::StrCat(field, ".", absl::CHexEscape(key));
        if (absl::StrContains(key, '\0')) return NulError(child_field);
        if (absl::Status s = CheckNoNul(child, child_field); !s.ok()) return s;
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

absl::Status CheckSpecStrings(const v1::TaskSpec& spec) {
  if (absl::StrContains(spec.user(), '\0')) return NulError("spec.user");
  for (const auto& [key, value] : spec.env()) {
    const std::string field =
        absl::StrCat("spec.env[\"", absl::CHexEscape(key), "\"]");
    if (absl::StrContains(key, '\0') || absl::StrContains(value, '\0')) {
      return NulError(field);
    }
    if (key.empty() || absl::StrContains(key, '=')) {
      return Invalid(field, "a variable's name is not empty and holds no '='");
    }
  }
  google::protobuf::Value config;
  *config.mutable_struct_value() = spec.driver_config();
  return CheckNoNul(config, "spec.driver_config");
}

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) {
    return absl::Status(
        errno == ENOENT ? absl::StatusCode::kNotFound
                        : absl::StatusCode::kInvalidArgument,
        absl::StrCat("cannot resolve ", path, ": ", std::strerror(errno)));
  }
  std::string result = resolved;
  free(resolved);
  return result;
}

// `inner` is `outer` or below it.
bool IsWithin(const std::string& inner, const std::string& outer) {
  if (outer == "/") return true;
  return inner == outer || absl::StartsWith(inner, absl::StrCat(outer, "/"));
}

// The resolved bind source, refused when it is, is inside or holds one of
// berth's directories.
absl::StatusOr<std::string> CheckBindSource(const std::string& field,
                                            const std::string& source,
                                            const ProtectedDirs& dirs) {
  if (source.empty()) return Invalid(field, "a bind mount needs a source");
  if (source[0] != '/') {
    return Invalid(field,
                   absl::StrCat("\"", source,
                                "\" is not an absolute path (named volumes "
                                "are not supported: give a host directory)"));
  }
  if (HasControl(source)) {
    return Invalid(field, absl::StrCat("\"", absl::CHexEscape(source),
                                       "\" holds a control character"));
  }
  absl::StatusOr<std::string> resolved = RealPath(source);
  if (!resolved.ok()) return Invalid(field, resolved.status().message());
  const std::pair<const char*, const std::string*> protected_dirs[] = {
      {"runtime directory", &dirs.runtime_dir},
      {"state directory", &dirs.state_dir},
  };
  for (const auto& [what, dir] : protected_dirs) {
    if (dir->empty()) continue;
    absl::StatusOr<std::string> real_dir = RealPath(*dir);
    const std::string berth_dir =
        real_dir.ok() ? *real_dir : base::LexicallyNormal(*dir);
    const std::string shown = *resolved == source
                                  ? source
                                  : absl::StrCat(source, " (", *resolved, ")");
    if (IsWithin(*resolved, berth_dir)) {
      return Invalid(field, absl::StrCat(shown, " is inside berth's ", what,
                                         " ", berth_dir));
    }
    if (IsWithin(berth_dir, *resolved)) {
      return Invalid(
          field, absl::StrCat(shown, " holds berth's ", what, " ", berth_dir));
    }
  }
  return *std::move(resolved);
}

absl::Status CheckDestination(const std::string& field,
                              const std::string& destination) {
  if (destination.empty() || destination[0] != '/') {
    return Invalid(field, absl::StrCat("\"", absl::CHexEscape(destination),
                                       "\" is not an absolute path"));
  }
  if (HasControl(destination)) {
    return Invalid(field, absl::StrCat("\"", absl::CHexEscape(destination),
                                       "\" holds a control character"));
  }
  if (destination == "/") return Invalid(field, "cannot mount over /");
  for (absl::string_view part : absl::StrSplit(destination.substr(1), '/')) {
    if (part == "..") {
      return Invalid(
          field, absl::StrCat("\"", destination, "\" has a \"..\" component"));
    }
  }
  if (base::LexicallyNormal(destination) != destination) {
    return Invalid(
        field, absl::StrCat("\"", destination, "\" is not normalized (write ",
                            base::LexicallyNormal(destination), ")"));
  }
  return absl::OkStatus();
}

// Checks the mounts; the resolved bind sources go to `sources` (one per
// mount, empty for tmpfs) when it is given.
absl::Status CheckMounts(const driverpb::Isolation& isolation,
                         const ProtectedDirs& dirs,
                         std::vector<std::string>* sources) {
  for (int i = 0; i < isolation.mounts_size(); ++i) {
    const driverpb::Mount& mount = isolation.mounts(i);
    const std::string field = absl::StrCat("spec.isolation.mounts[", i, "]");
    std::string resolved;
    switch (mount.type()) {
      case driverpb::MOUNT_TYPE_BIND: {
        absl::StatusOr<std::string> source = CheckBindSource(
            absl::StrCat(field, ".source"), mount.source(), dirs);
        if (!source.ok()) return source.status();
        resolved = *std::move(source);
        break;
      }
      case driverpb::MOUNT_TYPE_TMPFS:
        if (!mount.source().empty()) {
          return Invalid(absl::StrCat(field, ".source"),
                         "a tmpfs mount has no source");
        }
        break;
      case driverpb::MOUNT_TYPE_UNSPECIFIED:
        return Invalid(absl::StrCat(field, ".type"),
                       "is required (MOUNT_TYPE_BIND or MOUNT_TYPE_TMPFS)");
      default:
        return Invalid(absl::StrCat(field, ".type"),
                       absl::StrCat("unknown mount type ", mount.type()));
    }
    if (absl::Status s = CheckDestination(absl::StrCat(field, ".destination"),
                                          mount.destination());
        !s.ok()) {
      return s;
    }
    if (sources != nullptr) sources->push_back(std::move(resolved));
  }
  return absl::OkStatus();
}

absl::Status CheckCapabilities(
    const google::protobuf::RepeatedPtrField<std::string>& names,
    absl::string_view field) {
  for (int i = 0; i < names.size(); ++i) {
    absl::StatusOr<std::string> name = CanonicalCapability(names[i]);
    if (!name.ok()) {
      return Invalid(absl::StrCat(field, "[", i, "]"), name.status().message());
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSeccomp(const driverpb::SeccompProfile& seccomp) {
  switch (seccomp.type()) {
    case driverpb::SECCOMP_PROFILE_TYPE_UNSPECIFIED:
    case driverpb::SECCOMP_PROFILE_TYPE_RUNTIME_DEFAULT:
    case driverpb::SECCOMP_PROFILE_TYPE_UNCONFINED:
      if (!seccomp.custom_profile_json().empty()) {
        return Invalid("spec.isolation.seccomp.custom_profile_json",
                       "is only for SECCOMP_PROFILE_TYPE_CUSTOM");
      }
      return absl::OkStatus();
    case driverpb::SECCOMP_PROFILE_TYPE_CUSTOM:
      break;
    default:
      return Invalid("spec.isolation.seccomp.type",
                     absl::StrCat("unknown profile type ", seccomp.type()));
  }
  const std::string& json = seccomp.custom_profile_json();
  constexpr absl::string_view kField =
      "spec.isolation.seccomp.custom_profile_json";
  if (json.empty()) {
    return Invalid(kField, "is required for SECCOMP_PROFILE_TYPE_CUSTOM");
  }
  if (absl::StrContains(json, '\0')) return NulError(kField);
  const nlohmann::json parsed =
      nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Invalid(kField, "is not valid JSON");
  if (!parsed.is_object()) {
    return Invalid(kField, "is not a JSON object (a seccomp profile)");
  }
  return absl::OkStatus();
}

bool ValidIp(const std::string& ip) {
  unsigned char buffer[16];
  // inet_pton reads up to a NUL: "1.2.3.4\0\n..." must not pass as it.
  if (absl::StrContains(ip, '\0')) return false;
  return inet_pton(AF_INET, ip.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, ip.c_str(), buffer) == 1;
}

std::string Quoted(absl::string_view text) {
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

absl::Status CheckLabels(const v1::TaskSpec& spec) {
  if (spec.labels_size() > kMaxLabels) {
    return Invalid(
        "spec.labels",
        absl::StrCat(spec.labels_size(), " labels; at most ", kMaxLabels));
  }
  for (const auto& [key, value] : spec.labels()) {
    const std::string field = absl::StrCat("spec.labels[", Quoted(key), "]");
    if (key.empty()) return Invalid(field, "a label's key is not empty");
    if (absl::StrContains(key, '\0') || absl::StrContains(value, '\0')) {
      return NulError(field);
    }
    if (absl::StrContains(key, '=')) {
      return Invalid(field, "a label's key holds no '='");
    }
    if (HasControl(key)) {
      return Invalid(field, "a label's key holds no control character");
    }
    if (key.size() > kMaxLabelKey) {
      return Invalid(field, absl::StrCat("a label's key is at most ",
                                         kMaxLabelKey, " bytes"));
    }
    if (value.size() > kMaxLabelValue) {
      return Invalid(field, absl::StrCat("a label's value is at most ",
                                         kMaxLabelValue, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckExtraHosts(const v1::TaskSpec& spec) {
  for (int i = 0; i < spec.extra_hosts_size(); ++i) {
    const v1::HostEntry& entry = spec.extra_hosts(i);
    const std::string field = absl::StrCat("spec.extra_hosts[", i, "]");
    if (!base::IsHostName(entry.hostname(), 253)) {
      return Invalid(absl::StrCat(field, ".hostname"),
                     absl::StrCat(Quoted(entry.hostname()),
                                  " is not a valid host name (letters, "
                                  "digits, '-' and '.')"));
    }
    if (!ValidIp(entry.ip())) {
      return Invalid(
          absl::StrCat(field, ".ip"),
          absl::StrCat(Quoted(entry.ip()), " is not an IPv4 or IPv6 address"));
    }
  }
  return absl::OkStatus();
}

// spec.network.dns: each server an IP literal, each search domain and
// option one word of resolv.conf (no space or control character: a newline
// would add lines of its own to the task's /etc/resolv.conf).
absl::Status CheckDns(const v1::TaskSpec& spec) {
  constexpr int kMaxEach = 64;
  constexpr size_t kMaxWord = 253;
  const network::v1::DnsConfig& dns = spec.network().dns();
  const std::pair<const char*, int> counts[] = {
      {"servers", dns.servers_size()},
      {"searches", dns.searches_size()},
      {"options", dns.options_size()}};
  for (const auto& [name, count] : counts) {
    if (count > kMaxEach) {
      return Invalid(absl::StrCat("spec.network.dns.", name),
                     absl::StrCat(count, " entries; at most ", kMaxEach));
    }
  }
  for (int i = 0; i < dns.servers_size(); ++i) {
    if (!ValidIp(dns.servers(i))) {
      return Invalid(absl::StrCat("spec.network.dns.servers[", i, "]"),
                     absl::StrCat(Quoted(dns.servers(i)),
                                  " is not an IPv4 or IPv6 address"));
    }
  }
  const std::pair<const char*,
                  const google::protobuf::RepeatedPtrField<std::string>*>
      words[] = {{"searches", &dns.searches()}, {"options", &dns.options()}};
  for (const auto& [name, list] : words) {
    for (int i = 0; i < list->size(); ++i) {
      const std::string& word = list->Get(i);
      const bool bad_char = std::any_of(word.begin(), word.end(), [](char c) {
        return absl::ascii_isspace(static_cast<unsigned char>(c)) ||
               absl::ascii_iscntrl(static_cast<unsigned char>(c));
      });
      if (word.empty() || word.size() > kMaxWord || bad_char) {
        return Invalid(
            absl::StrCat("spec.network.dns.", name, "[", i, "]"),
            absl::StrCat(Quoted(word),
                         " is not one word of 1 to 253 bytes without spaces "
                         "or control characters"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckUlimits(const v1::TaskSpec& spec) {
  std::vector<std::string> seen;
  for (int i = 0; i < spec.ulimits_size(); ++i) {
    const driverpb::Rlimit& limit = spec.ulimits(i);
    const std::string field = absl::StrCat("spec.ulimits[", i, "]");
    absl::StatusOr<std::string> type = CanonicalRlimitType(limit.type());
    if (!type.ok()) {
      return Invalid(absl::StrCat(field, ".type"), type.status().message());
    }
    if (std::find(seen.begin(), seen.end(), *type) != seen.end()) {
      return Invalid(field, absl::StrCat(*type, " is given more than once"));
    }
    seen.push_back(*type);
    if (limit.soft() > limit.hard()) {
      return Invalid(field,
                     absl::StrCat(*type, ": the soft limit ", limit.soft(),
                                  " is above the hard limit ", limit.hard()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNotNegative(const google::protobuf::Duration& duration,
                              absl::string_view field) {
  if (base::FromProtoDuration(duration) < absl::ZeroDuration()) {
    return Invalid(
        field,
        absl::StrCat(absl::FormatDuration(base::FromProtoDuration(duration)),
                     " is negative"));
  }
  return absl::OkStatus();
}

absl::Status Unsupported(absl::string_view field, const std::string& driver,
                         absl::string_view what, absl::string_view claim) {
  return absl::FailedPreconditionError(
      absl::StrCat(field, ": driver ", driver, " does not support ", what,
                   " (its capabilities claim no isolation.", claim, ")"));
}

}  // namespace

absl::StatusOr<TaskUser> ParseTaskUser(absl::string_view text) {
  if (absl::StrContains(text, '\0')) return NulError("spec.user");
  if (HasControl(text)) {
    return Invalid("spec.user", absl::StrCat("\"", absl::CHexEscape(text),
                                             "\" holds a control character"));
  }
  TaskUser user;
  if (text.empty()) return user;
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2 || parts[0].empty() ||
      (parts.size() == 2 && parts[1].empty())) {
    return Invalid("spec.user",
                   absl::StrCat("\"", text,
                                "\" must be NAME, UID, NAME:GROUP or UID:GID"));
  }
  user.user = parts[0];
  if (parts.size() == 2) user.group = parts[1];
  return user;
}

absl::StatusOr<std::string> CanonicalCapability(absl::string_view name) {
  std::string upper = absl::AsciiStrToUpper(name);
  absl::string_view bare = upper;
  absl::ConsumePrefix(&bare, "CAP_");
  if (bare == "ALL") return std::string(bare);
  for (const char* known : kCapabilities) {
    if (bare == known) return std::string(bare);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", absl::CHexEscape(name),
      "\" is not a capability (e.g. NET_ADMIN or CAP_NET_ADMIN; ALL)"));
}

std::optional<int> ParseSignalName(absl::string_view name) {
  int number;
  if (absl::SimpleAtoi(name, &number)) {
    if (number >= 1 && number <= SIGRTMAX) return number;
    return std::nullopt;
  }
  std::string upper = absl::AsciiStrToUpper(name);
  absl::string_view bare = upper;
  absl::ConsumePrefix(&bare, "SIG");
  for (int i = 1; i < NSIG; ++i) {
    const char* abbrev = sigabbrev_np(i);
    if (abbrev != nullptr && bare == abbrev) return i;
  }
  return std::nullopt;
}

absl::StatusOr<std::string> CanonicalRlimitType(absl::string_view type) {
  if (const base::RlimitName* found = base::FindRlimit(type)) {
    return std::string(found->type);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(type),
                   " is not a resource limit (e.g. RLIMIT_NOFILE or nofile; "
                   "see getrlimit(2))"));
}

std::string TaskHostname(const v1::TaskSpec& spec) {
  if (!spec.hostname().empty()) return spec.hostname();
  // A name may hold '_', which a host name may not.
  std::string hostname = spec.name().substr(0, 63);
  for (char& c : hostname) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.') c = '-';
  }
  while (!hostname.empty() && !absl::ascii_isalnum(hostname.back())) {
    hostname.pop_back();
  }
  return base::IsHostName(hostname, 63) ? hostname : "task";
}

absl::Status ValidateTaskSettings(const v1::TaskSpec& spec) {
  if (absl::Status s = CheckLabels(spec); !s.ok()) return s;
  if (!spec.hostname().empty() && !base::IsHostName(spec.hostname(), 63)) {
    return Invalid("spec.hostname",
                   absl::StrCat(Quoted(spec.hostname()),
                                " is not a valid host name (at most 63 "
                                "letters, digits, '-' and '.'; starting and "
                                "ending with a letter or digit)"));
  }
  if (absl::Status s = CheckExtraHosts(spec); !s.ok()) return s;
  if (absl::Status s = CheckDns(spec); !s.ok()) return s;
  if (absl::Status s = CheckUlimits(spec); !s.ok()) return s;
  if (!spec.stop_signal().empty()) {
    if (!ParseSignalName(spec.stop_signal()).has_value()) {
      return Invalid("spec.stop_signal",
                     absl::StrCat(Quoted(spec.stop_signal()),
                                  " is not a signal (e.g. SIGTERM, TERM or "
                                  "15)"));
    }
  }
  if (spec.has_stop_timeout()) {
    if (absl::Status s =
            CheckNotNegative(spec.stop_timeout(), "spec.stop_timeout");
        !s.ok()) {
      return s;
    }
    if (base::FromProtoDuration(spec.stop_timeout()) > absl::Hours(24)) {
      return Invalid("spec.stop_timeout",
                     absl::StrCat(absl::FormatDuration(base::FromProtoDuration(
                                      spec.stop_timeout())),
                                  " is more than 24h"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTaskIsolation(const v1::TaskSpec& spec,
                                   const ProtectedDirs& dirs) {
  if (absl::Status s = CheckSpecStrings(spec); !s.ok()) return s;
  if (absl::StatusOr<TaskUser> user = ParseTaskUser(spec.user()); !user.ok()) {
    return user.status();
  }
  if (spec.userns() != "" && spec.userns() != "host" &&
      spec.userns() != "auto") {
    return Invalid("spec.userns",
                   absl::StrCat("\"", absl::CHexEscape(spec.userns()),
                                "\" must be empty, \"host\" or \"auto\""));
  }
  const driverpb::Isolation& isolation = spec.isolation();
  if (!isolation.rootfs().empty()) {
    // The node fills it with the task's snapshot (spec.image); a path of
    // the client's choosing is never a task's root.
    return Invalid("spec.isolation.rootfs",
                   "is the node's to fill: set spec.image (e.g. berth run "
                   "busybox ...) for a root from an image, or leave both "
                   "empty for a root made of the host's system directories");
  }
  if (isolation.rootfs_idmapped()) {
    return Invalid("spec.isolation.rootfs_idmapped",
                   "is the node's to set (for an image task in a user "
                   "namespace: set spec.image and spec.userns)");
  }
  if (isolation.user_namespace().uid_mappings_size() > 0 ||
      isolation.user_namespace().gid_mappings_size() > 0) {
    return Invalid("spec.isolation.user_namespace",
                   "must be empty: the node chooses the mappings (set "
                   "spec.userns instead)");
  }
  if (absl::Status s = CheckMounts(isolation, dirs, nullptr); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckCapabilities(isolation.cap_add(), "spec.isolation.cap_add");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckCapabilities(isolation.cap_drop(), "spec.isolation.cap_drop");
      !s.ok()) {
    return s;
  }
  return CheckSeccomp(isolation.seccomp());
}

absl::Status CheckIsolationSupported(const v1::TaskSpec& spec,
                                     const std::string& driver,
                                     const driverpb::DriverCapabilities& caps) {
  const driverpb::Isolation& isolation = spec.isolation();
  const driverpb::IsolationCapabilities& claims = caps.isolation();
  if (!claims.mounts()) {
    if (isolation.mounts_size() > 0) {
      return Unsupported("spec.isolation.mounts", driver, "mounts", "mounts");
    }
    if (isolation.readonly_rootfs()) {
      return Unsupported("spec.isolation.readonly_rootfs", driver,
                         "a read-only root", "mounts");
    }
  }
  if (!claims.capabilities()) {
    if (isolation.cap_add_size() > 0) {
      return Unsupported("spec.isolation.cap_add", driver,
                         "choosing capabilities", "capabilities");
    }
    if (isolation.cap_drop_size() > 0) {
      return Unsupported("spec.isolation.cap_drop", driver,
                         "choosing capabilities", "capabilities");
    }
  }
  const driverpb::SeccompProfileType seccomp = isolation.seccomp().type();
  if (!claims.seccomp() &&
      seccomp != driverpb::SECCOMP_PROFILE_TYPE_UNSPECIFIED &&
      seccomp != driverpb::SECCOMP_PROFILE_TYPE_UNCONFINED) {
    return Unsupported("spec.isolation.seccomp", driver, "seccomp profiles",
                       "seccomp");
  }
  if (!claims.image_rootfs() && spec.has_image()) {
    return Unsupported("spec.image", driver, "running tasks from images",
                       "image_rootfs");
  }
  if (!claims.user_namespaces() && spec.userns() == "auto") {
    return Unsupported("spec.userns", driver, "user namespaces",
                       "user_namespaces");
  }
  if (!caps.attach() && (spec.stdin_open() || spec.tty())) {
    return absl::FailedPreconditionError(absl::StrCat(
        spec.tty() ? "spec.tty" : "spec.stdin_open", ": driver ", driver,
        " does not support interactive tasks (its capabilities claim no "
        "attach)"));
  }
  if (!caps.rlimits() && spec.ulimits_size() > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("spec.ulimits: driver ", driver,
                     " does not support resource limits (its capabilities "
                     "claim no rlimits)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<driverpb::Isolation> BuildTaskIsolation(
    const v1::TaskSpec& spec, const ProtectedDirs& dirs,
    const driverpb::UserNamespace* user_namespace) {
  if (absl::Status s = ValidateTaskIsolation(spec, dirs); !s.ok()) return s;
  driverpb::Isolation isolation = spec.isolation();
  std::vector<std::string> sources;
  if (absl::Status s = CheckMounts(isolation, dirs, &sources); !s.ok()) {
    return s;
  }
  for (int i = 0; i < isolation.mounts_size(); ++i) {
    if (isolation.mounts(i).type() == driverpb::MOUNT_TYPE_BIND) {
      isolation.mutable_mounts(i)->set_source(sources[i]);
    }
  }
  for (std::string& name : *isolation.mutable_cap_add()) {
    name = *CanonicalCapability(name);
  }
  for (std::string& name : *isolation.mutable_cap_drop()) {
    name = *CanonicalCapability(name);
  }
  isolation.clear_user_namespace();
  if (user_namespace != nullptr) {
    *isolation.mutable_user_namespace() = *user_namespace;
  }
  return isolation;
}

absl::Status ApplyTaskIsolation(
    const v1::TaskSpec& spec,
    const absl::StatusOr<driverpb::DriverCapabilities>& caps,
    const ProtectedDirs& dirs, const driverpb::UserNamespace* user_namespace,
    driverpb::TaskConfig* config) {
  // Checked with no claims at all: what a spec asking nothing passes.
  const absl::Status unclaimed =
      CheckIsolationSupported(spec, spec.driver(), {});
  if (!caps.ok() && !unclaimed.ok()) {
    const absl::string_view why = unclaimed.message();
    return absl::Status(
        caps.status().code(),
        absl::StrCat(why.substr(0, why.find(':')),
                     ": cannot check that driver ", spec.driver(),
                     " supports it: ", caps.status().message()));
  }
  if (caps.ok()) {
    if (absl::Status s = CheckIsolationSupported(spec, spec.driver(), *caps);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<TaskUser> user = ParseTaskUser(spec.user());
  if (!user.ok()) return user.status();
  absl::StatusOr<driverpb::Isolation> isolation =
      BuildTaskIsolation(spec, dirs, user_namespace);
  if (!isolation.ok()) return isolation.status();
  config->set_user(user->user);
  config->set_group(user->group);
  *config->mutable_isolation() = *std::move(isolation);
  config->set_stdin_open(spec.stdin_open());
  config->set_tty(spec.tty());
  config->clear_rlimits();
  for (const driverpb::Rlimit& limit : spec.ulimits()) {
    absl::StatusOr<std::string> type = CanonicalRlimitType(limit.type());
    if (!type.ok()) return type.status();
    driverpb::Rlimit* out = config->add_rlimits();
    *out = limit;
    out->set_type(*type);
  }
  config->set_hostname(TaskHostname(spec));
  return absl::OkStatus();
}

}  // namespace berth::node
