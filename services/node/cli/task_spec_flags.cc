#include "services/node/cli/task_spec_flags.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "base/host_name.h"
#include "base/rlimits.h"
#include "berth/network/v1/network.pb.h"
#include "berth/node/v1/node.pb.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/struct.pb.h"
#include "services/images/oci/reference.h"
#include "services/node/task_isolation.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;
namespace netpb = ::berth::network::v1;
namespace nodepb = ::berth::node::v1;

absl::Status FlagError(absl::string_view flag, absl::string_view value,
                       absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " \"", value, "\": ", why));
}

absl::StatusOr<uint32_t> ParsePort(absl::string_view text,
                                   absl::string_view what) {
  uint32_t port = 0;
  if (!absl::SimpleAtoi(text, &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", text, "\" is not a port (1-65535)"));
  }
  return port;
}

// A status of a parse helper, prefixed with the flag's name.
absl::Status Prefixed(absl::string_view flag, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", status.message()));
}

}  // namespace

absl::StatusOr<uint64_t> ParseMemoryBytes(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  size_t unit_start = 0;
  while (unit_start < lower.size() &&
         (absl::ascii_isdigit(lower[unit_start]) || lower[unit_start] == '.')) {
    ++unit_start;
  }
  absl::string_view number = absl::string_view(lower).substr(0, unit_start);
  absl::string_view unit = absl::string_view(lower).substr(unit_start);
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a size: use a number and b, k, m or g"));
  }
  uint64_t multiplier = 0;
  if (unit.empty() || unit == "b") {
    multiplier = 1;
  } else {
    const char prefix = unit[0];
    const absl::string_view rest = unit.substr(1);
    if (!rest.empty() && rest != "b" && rest != "ib")
      multiplier = 0;
    else if (prefix == 'k')
      multiplier = uint64_t{1} << 10;
    else if (prefix == 'm')
      multiplier = uint64_t{1} << 20;
    else if (prefix == 'g')
      multiplier = uint64_t{1} << 30;
    else if (prefix == 't')
      multiplier = uint64_t{1} << 40;
  }
  if (multiplier == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" has an unknown unit \"", unit, "\": use b, k, m or g"));
  }
  const double bytes = std::round(value * static_cast<double>(multiplier));
  if (!(bytes >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a size above zero"));
  }
  // 2^63: what the node and the kernel take ends below (and a double this
  // large cast to uint64_t would be undefined past 2^64).
  if (!(bytes < 9223372036854775808.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is too large: at most 8 EiB (2^63 bytes) less one"));
  }
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<uint64_t> ParseCpuMillicores(absl::string_view text) {
  double cpus = 0;
  if (!absl::SimpleAtod(text, &cpus) || !std::isfinite(cpus)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a number of CPUs (e.g. 0.5 or 2)"));
  }
  const double millicores = std::round(cpus * 1000);
  if (millicores < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" must be at least 0.001 CPUs"));
  }
  // The node's bound (a million CPUs): beyond it drivers' cpu.max quotas
  // would wrap.
  if (millicores > 1.0e9) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is too many CPUs: at most 1000000"));
  }
  return static_cast<uint64_t>(millicores);
}

absl::StatusOr<nodepb::RestartPolicy> ParseRestartPolicy(
    absl::string_view text) {
  nodepb::RestartPolicy policy;
  if (text == "no" || text == "never") {
    policy.set_mode(nodepb::RESTART_MODE_NEVER);
  } else if (text == "always") {
    policy.set_mode(nodepb::RESTART_MODE_ALWAYS);
  } else if (text == "on-failure") {
    policy.set_mode(nodepb::RESTART_MODE_ON_FAILURE);
  } else if (absl::ConsumePrefix(&text, "on-failure:")) {
    uint32_t attempts = 0;
    if (!absl::SimpleAtoi(text, &attempts)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "on-failure:", text, ": the attempts must be a whole number"));
    }
    policy.set_mode(nodepb::RESTART_MODE_ON_FAILURE);
    policy.set_attempts(attempts);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" must be no, on-failure[:N] or always"));
  }
  return policy;
}

absl::Status ParseNetworkMode(absl::string_view text,
                              nodepb::NetworkSpec* network) {
  if (text == "none") {
    network->set_mode(netpb::NETWORK_MODE_NONE);
  } else if (text == "host") {
    network->set_mode(netpb::NETWORK_MODE_HOST);
  } else if (text == "bridge") {
    network->set_mode(netpb::NETWORK_MODE_BRIDGE);
  } else if (absl::ConsumePrefix(&text, "cni:") && !text.empty()) {
    network->set_mode(netpb::NETWORK_MODE_CNI);
    network->set_cni_network(std::string(text));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" must be none, host, bridge or cni:NAME"));
  }
  return absl::OkStatus();
}

absl::StatusOr<netpb::PortMapping> ParsePortMapping(absl::string_view text) {
  netpb::PortMapping mapping;
  absl::string_view ports = text;
  const size_t slash = text.rfind('/');
  if (slash != absl::string_view::npos) {
    const absl::string_view protocol = text.substr(slash + 1);
    ports = text.substr(0, slash);
    if (protocol == "tcp") {
      mapping.set_protocol(netpb::PROTOCOL_TCP);
    } else if (protocol == "udp") {
      mapping.set_protocol(netpb::PROTOCOL_UDP);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", text, "\": protocol \"", protocol, "\" must be tcp or udp"));
    }
  } else {
    mapping.set_protocol(netpb::PROTOCOL_TCP);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(ports, ':');
  if (parts.size() != 2 && parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text,
                     "\" must be HOST_PORT:CONTAINER_PORT[/tcp|udp] or "
                     "HOST_IP:HOST_PORT:CONTAINER_PORT[/tcp|udp]"));
  }
  if (parts.size() == 3) {
    if (parts[0].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", text, "\": the host address is empty"));
    }
    mapping.set_host_ip(std::string(parts[0]));
    parts.erase(parts.begin());
  }
  absl::StatusOr<uint32_t> host_port = ParsePort(parts[0], "host port");
  if (!host_port.ok()) return host_port.status();
  absl::StatusOr<uint32_t> container_port =
      ParsePort(parts[1], "container port");
  if (!container_port.ok()) return container_port.status();
  mapping.set_host_port(*host_port);
  mapping.set_container_port(*container_port);
  return mapping;
}

absl::StatusOr<driverpb::Mount> ParseVolume(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 2 && parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" must be SRC:DST[:ro|rw]"));
  }
  if (!absl::StartsWith(parts[0], "/")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\": the source \"", parts[0],
        "\" is not an absolute host path (named volumes are not supported)"));
  }
  if (!absl::StartsWith(parts[1], "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": the destination \"", parts[1],
                     "\" is not an absolute path"));
  }
  driverpb::Mount mount;
  mount.set_type(driverpb::MOUNT_TYPE_BIND);
  mount.set_source(std::string(parts[0]));
  mount.set_destination(std::string(parts[1]));
  if (parts.size() == 3) {
    if (parts[2] == "ro") {
      mount.set_read_only(true);
    } else if (parts[2] != "rw") {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", text, "\": the mode \"", parts[2], "\" must be ro or rw"));
    }
  }
  return mount;
}

absl::StatusOr<driverpb::Mount> ParseTmpfs(absl::string_view text) {
  if (absl::StrContains(text, ':')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\": tmpfs options are not supported: give only DST"));
  }
  if (!absl::StartsWith(text, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not an absolute path"));
  }
  driverpb::Mount mount;
  mount.set_type(driverpb::MOUNT_TYPE_TMPFS);
  mount.set_destination(std::string(text));
  return mount;
}

absl::Status CheckUser(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  for (absl::string_view part : parts) {
    if (part.empty() || parts.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", text, "\" must be NAME, UID, NAME:GROUP or UID:GID"));
    }
  }
  return absl::OkStatus();
}

absl::Status ApplySecurityOpt(absl::string_view text,
                              const FileReader& read_file,
                              driverpb::Isolation* isolation) {
  // Docker's older spelling separates with ':' ("no-new-privileges:true").
  const size_t separator = text.find_first_of("=:");
  const absl::string_view key = text.substr(0, separator);
  const absl::string_view value = separator == absl::string_view::npos
                                      ? absl::string_view()
                                      : text.substr(separator + 1);
  if (key == "no-new-privileges") {
    if (separator == absl::string_view::npos || value == "true") {
      isolation->set_allow_privilege_escalation(false);
    } else if (value == "false") {
      isolation->set_allow_privilege_escalation(true);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", text, "\": no-new-privileges takes true or false"));
    }
    return absl::OkStatus();
  }
  if (key == "seccomp" && !value.empty()) {
    driverpb::SeccompProfile& seccomp = *isolation->mutable_seccomp();
    seccomp.Clear();
    if (value == "unconfined") {
      seccomp.set_type(driverpb::SECCOMP_PROFILE_TYPE_UNCONFINED);
      return absl::OkStatus();
    }
    absl::StatusOr<std::string> profile = read_file(std::string(value));
    if (!profile.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", text, "\": ", profile.status().message()));
    }
    seccomp.set_type(driverpb::SECCOMP_PROFILE_TYPE_CUSTOM);
    seccomp.set_custom_profile_json(*std::move(profile));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text,
                   "\" must be no-new-privileges[=true|false], "
                   "seccomp=unconfined or seccomp=PATH"));
}

const FlagSpec& DetachKeysFlagSpec() {
  static const FlagSpec* const kSpec = new FlagSpec{
      "detach-keys", 0, "KEYS",
      "Keys that detach from the task and leave it running: ctrl-X and "
      "single characters, comma-separated (default ctrl-p,ctrl-q)"};
  return *kSpec;
}

namespace {

absl::StatusOr<uint64_t> ParseRlimitValue(absl::string_view text,
                                          absl::string_view which) {
  if (text == "unlimited" || text == "-1") {
    return std::numeric_limits<uint64_t>::max();
  }
  uint64_t value = 0;
  if (text.empty() || !absl::ascii_isdigit(text[0]) ||
      !absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", which, " limit \"", text,
                     "\" is not a whole number, unlimited or -1"));
  }
  return value;
}

std::string RlimitValueText(uint64_t value) {
  return value == std::numeric_limits<uint64_t>::max() ? "unlimited"
                                                       : absl::StrCat(value);
}

bool HasSpace(absl::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isspace(c); });
}

// The lines of a K=V file: a UTF-8 byte order mark dropped, "\r\n" ends,
// leading white space trimmed, blank lines and # comments skipped. Calls
// `line` with each line's number and text.
absl::Status ForEachFileLine(
    absl::string_view content,
    const std::function<absl::Status(size_t, absl::string_view)>& line) {
  absl::ConsumePrefix(&content, "\xEF\xBB\xBF");
  size_t number = 0;
  for (absl::string_view text : absl::StrSplit(content, '\n')) {
    ++number;
    absl::ConsumeSuffix(&text, "\r");
    text = absl::StripLeadingAsciiWhitespace(text);
    if (text.empty() || text[0] == '#') continue;
    if (absl::Status s = line(number, text); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<driverpb::Rlimit> ParseUlimit(absl::string_view text) {
  const size_t equals = text.find('=');
  if (equals == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "must be NAME=SOFT[:HARD], e.g. nofile=1024:4096");
  }
  const base::RlimitName* type = base::FindRlimit(text.substr(0, equals));
  if (type == nullptr) {
    std::string names;
    for (const base::RlimitName& entry : base::RlimitNames()) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", entry.short_name);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown limit \"", text.substr(0, equals), "\": use one of ", names));
  }
  const absl::string_view values = text.substr(equals + 1);
  const size_t colon = values.find(':');
  absl::StatusOr<uint64_t> soft =
      ParseRlimitValue(values.substr(0, colon), "soft");
  if (!soft.ok()) return soft.status();
  uint64_t hard = *soft;
  if (colon != absl::string_view::npos) {
    absl::StatusOr<uint64_t> parsed =
        ParseRlimitValue(values.substr(colon + 1), "hard");
    if (!parsed.ok()) return parsed.status();
    hard = *parsed;
  }
  if (*soft > hard) {
    return absl::InvalidArgumentError(
        absl::StrCat("soft limit ", RlimitValueText(*soft),
                     " is above the hard limit ", RlimitValueText(hard)));
  }
  driverpb::Rlimit limit;
  limit.set_type(type->type);
  limit.set_soft(*soft);
  limit.set_hard(hard);
  return limit;
}

bool IsIpAddress(absl::string_view text) {
  const std::string address(text);
  unsigned char buffer[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, address.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, address.c_str(), buffer) == 1;
}

absl::StatusOr<nodepb::HostEntry> ParseExtraHost(absl::string_view text) {
  size_t separator = text.find('=');
  if (separator == absl::string_view::npos) separator = text.find(':');
  if (separator == absl::string_view::npos) {
    return absl::InvalidArgumentError("must be NAME:IP or NAME=IP");
  }
  const absl::string_view name = text.substr(0, separator);
  absl::string_view ip = text.substr(separator + 1);
  if (!base::IsHostName(name, 253)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", name, "\" is not a host name (letters, digits, '-' and '.')"));
  }
  // docker's bracketed IPv6: "db=[::1]".
  if (absl::StartsWith(ip, "[") && absl::EndsWith(ip, "]")) {
    ip = ip.substr(1, ip.size() - 2);
  }
  if (ip == "host-gateway") {
    return absl::InvalidArgumentError(
        "host-gateway is not supported: give the host's address");
  }
  if (!IsIpAddress(ip)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", ip, "\" is not an IPv4 or IPv6 address"));
  }
  nodepb::HostEntry entry;
  entry.set_hostname(std::string(name));
  entry.set_ip(std::string(ip));
  return entry;
}

absl::StatusOr<absl::Duration> ParseGoDuration(absl::string_view text) {
  absl::Duration duration;
  if (text.empty() || !absl::ParseDuration(text, &duration) ||
      duration == absl::InfiniteDuration() ||
      duration == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "is not a duration: a number and a unit (ms, s, m, h), e.g. 30s, "
        "1m30s or 500ms");
  }
  if (duration < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("is negative");
  }
  if (duration != absl::ZeroDuration() && duration < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("must be 0 or at least 1ms");
  }
  return duration;
}

absl::StatusOr<std::string> CanonicalSignal(absl::string_view text) {
  int number = 0;
  if (absl::SimpleAtoi(text, &number) && !text.empty() &&
      absl::ascii_isdigit(text[0])) {
    if (number < 1 || number > SIGRTMAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("is not a signal (1 to ", SIGRTMAX, ")"));
    }
    const char* name = sigabbrev_np(number);
    return name == nullptr ? absl::StrCat(number) : absl::StrCat("SIG", name);
  }
  std::string name = absl::AsciiStrToUpper(text);
  absl::string_view bare = name;
  absl::ConsumePrefix(&bare, "SIG");
  for (int signal = 1; signal < NSIG; ++signal) {
    const char* abbrev = sigabbrev_np(signal);
    if (abbrev != nullptr && !bare.empty() && bare == abbrev) {
      return absl::StrCat("SIG", abbrev);
    }
  }
  return absl::InvalidArgumentError(
      "is not a signal: a name (SIGTERM, TERM) or a number");
}

absl::Status ParseEnvFile(
    absl::string_view content, const EnvLookup& env,
    std::vector<std::pair<std::string, std::string>>* vars) {
  return ForEachFileLine(
      content, [&](size_t, absl::string_view line) -> absl::Status {
        const size_t equals = line.find('=');
        const absl::string_view name = line.substr(0, equals);
        if (name.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("no variable name in \"", line, "\""));
        }
        if (HasSpace(name)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the variable name \"", name, "\" holds white space"));
        }
        if (equals != absl::string_view::npos) {
          vars->emplace_back(std::string(name),
                             std::string(line.substr(equals + 1)));
        } else if (std::optional<std::string> value = env(std::string(name))) {
          vars->emplace_back(std::string(name), *std::move(value));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::pair<std::string, std::string>> ParseLabel(
    absl::string_view text) {
  const size_t equals = text.find('=');
  const absl::string_view key = text.substr(0, equals);
  if (key.empty()) {
    return absl::InvalidArgumentError("the label's key is empty");
  }
  return std::make_pair(std::string(key),
                        equals == absl::string_view::npos
                            ? std::string()
                            : std::string(text.substr(equals + 1)));
}

absl::Status ParseLabelFile(
    absl::string_view content,
    std::vector<std::pair<std::string, std::string>>* labels) {
  return ForEachFileLine(
      content, [&](size_t, absl::string_view line) -> absl::Status {
        absl::StatusOr<std::pair<std::string, std::string>> label =
            ParseLabel(line);
        if (!label.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("\"", line, "\": ", label.status().message()));
        }
        labels->push_back(*std::move(label));
        return absl::OkStatus();
      });
}

namespace {

// `specs`, each listed under `group` in the help.
std::vector<FlagSpec> InGroup(const char* group, std::vector<FlagSpec> specs) {
  for (FlagSpec& spec : specs) spec.group = group;
  return specs;
}

}  // namespace

const std::vector<FlagSpec>& RunFlagSpecs() {
  static const std::vector<FlagSpec>* const kSpecs = [] {
    std::vector<FlagSpec> specs;
    const std::vector<std::vector<FlagSpec>> groups = {
        InGroup(
            "Options",
            {
                {"name", 0, "NAME", "Name of the task (unique on the node)"},
                {"detach", 'd', "", "Print the task id and return at once"},
                {"rm", 0, "", "Remove the task when it ends (not with -d)"},
                {"driver", 0, "DRIVER",
                 "Driver plugin that runs it (default exec)"},
                {"restart", 0, "POLICY",
                 "no, on-failure[:N] or always (default no)"},
                {"workdir", 'w', "DIR",
                 "Working directory inside the task directory"},
                {"env", 'e', "K=V",
                 "Environment variable (repeatable; -e K passes K from here)",
                 true},
                {"env-file", 0, "FILE",
                 "Environment variables from FILE: K=V lines, K alone passes "
                 "K from here, # comments (repeatable; -e wins)",
                 true},
                {"label", 'l', "K=V",
                 "Label of the task (repeatable; K alone: empty value)", true},
                {"label-file", 0, "FILE",
                 "Labels from FILE: K=V lines, # comments (repeatable; "
                 "--label wins)",
                 true},
                {"stop-signal", 0, "SIGNAL",
                 "Signal that stops the task, e.g. SIGQUIT (default: the "
                 "image's, else SIGTERM)"},
                {"stop-timeout", 0, "SECONDS",
                 "Time between the stop signal and SIGKILL when berth stop "
                 "gives none (default 5)"},
                {"init", 0, "",
                 "Accepted for docker's sake, no effect: berth-task-init is "
                 "always the task's PID 1 (reaps orphans, forwards signals)"},
                {"log-max-size", 0, "SIZE",
                 "Rotate each output file at this size, e.g. 10m (driver "
                 "default: 10 MiB)"},
                {"log-max-files", 0, "N", "Rotated files kept per stream"},
                {"json-spec", 0, "FILE",
                 "A TaskSpec in protobuf JSON ('-': stdin); flags replace its "
                 "fields"},
                {"help", 'h', "", "Print this help"},
            }),
        InGroup("Terminal",
                {
                    {"interactive", 'i', "",
                     "Keep the task's stdin open and pass this one"},
                    {"tty", 't', "",
                     "Give the task a terminal (with -i: this terminal in raw "
                     "mode, resized with it)"},
                    DetachKeysFlagSpec(),
                }),
        InGroup(
            "Image",
            {
                {"pull", 0, "POLICY",
                 "Pull the image: missing (default), always or never"},
                {"quiet", 'q', "", "Do not print the image's pull progress"},
                {"entrypoint", 0, "CMD",
                 "Replace the image's Entrypoint with CMD ('': clear it)"},
            }),
        InGroup("Resources",
                {
                    {"cpus",
                     0,
                     "CPUS",
                     "CPU limit in cores, e.g. 0.5",
                     false,
                     {"cpu"}},
                    {"memory", 'm', "SIZE", "Memory limit, e.g. 64m or 1g"},
                    {"pids-limit",
                     0,
                     "N",
                     "Limit on processes and threads",
                     false,
                     {"pids"}},
                    {"ulimit", 0, "NAME=SOFT[:HARD]",
                     "Resource limit of the task's program, e.g. "
                     "nofile=1024:4096 (unlimited or -1: none) (repeatable)",
                     true},
                }),
        InGroup(
            "Network",
            {
                {"network",
                 0,
                 "MODE",
                 "Network: none, host, bridge or cni:NAME",
                 false,
                 {"net"}},
                {"publish", 'p', "PORTS",
                 "[IP:]HOST:CONTAINER[/tcp|udp]: forward a host port into the "
                 "task (repeatable)",
                 true},
                {"hostname", 0, "NAME",
                 "Host name inside the task (default: its name, else its id; "
                 "no -h, which is --help here)"},
                {"dns", 0, "IP", "Name server (repeatable)", true},
                {"dns-search", 0, "DOMAIN", "DNS search domain (repeatable)",
                 true},
                {"dns-option", 0, "OPT",
                 "resolv.conf option, e.g. ndots:2 (repeatable)", true},
                {"add-host", 0, "NAME:IP",
                 "A line of the task's /etc/hosts; NAME=IP too, IPv6 as "
                 "NAME:::1 or NAME=[::1] (repeatable)",
                 true},
            }),
        InGroup(
            "Mounts",
            {
                {"volume", 'v', "SRC:DST[:ro|rw]",
                 "Bind the absolute host path SRC at DST (repeatable; no "
                 "named volumes)",
                 true},
                {"tmpfs", 0, "DST", "An empty tmpfs at DST (repeatable)", true},
                {"read-only", 0, "", "Mount the task's root read-only"},
            }),
        InGroup(
            "Security",
            {
                {"user", 'u', "USER",
                 "User to run as: NAME or UID, optionally :GROUP or :GID"},
                {"cap-add", 0, "CAP",
                 "Add a capability to the default set, e.g. NET_ADMIN; ALL "
                 "(repeatable)",
                 true},
                {"cap-drop", 0, "CAP",
                 "Drop a capability from the default set; ALL (repeatable)",
                 true},
                {"privileged", 0, "",
                 "Every capability and device, no seccomp filter (own root "
                 "and namespaces kept)"},
                {"security-opt", 0, "OPT",
                 "no-new-privileges[=true|false], seccomp=unconfined or "
                 "seccomp=PATH (a JSON profile) (repeatable)",
                 true},
                {"userns", 0, "MODE",
                 "auto: a user namespace of the task's own; host: the host's"},
            }),
        InGroup(
            "Health",
            {
                {"health-cmd", 0, "CMD",
                 "Command that checks the task works, run with /bin/sh -c in "
                 "the task (exit 0: healthy)"},
                {"health-interval", 0, "DURATION",
                 "Time between checks, e.g. 30s or 1m30s (default 30s)"},
                {"health-timeout", 0, "DURATION",
                 "Time a check may take (default 30s)"},
                {"health-start-period", 0, "DURATION",
                 "Time after a start when failures do not count (default 0s)"},
                {"health-retries", 0, "N",
                 "Failures in a row that make the task unhealthy (default 3)"},
                {"health-on-failure", 0, "ACTION",
                 "When unhealthy: none (default), kill, restart or stop"},
                {"no-healthcheck", 0, "", "Turn off the image's HEALTHCHECK"},
            }),
    };
    for (const std::vector<FlagSpec>& group : groups) {
      specs.insert(specs.end(), group.begin(), group.end());
    }
    return new std::vector<FlagSpec>(std::move(specs));
  }();
  return *kSpecs;
}

absl::StatusOr<RunTarget> RunTargetFromArgs(const ParsedArgs& args) {
  RunTarget target;
  const std::vector<std::string>& positional = args.positional;
  if (positional.empty()) return target;
  if (args.positional_before_dash_dash == 0u) {
    target.command = positional;
    return target;
  }
  target.image = positional[0];
  if (target.image.empty()) {
    return absl::InvalidArgumentError("the IMAGE (first argument) is empty");
  }
  if (target.image[0] == '/' || target.image[0] == '.') {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", target.image,
        "\" is not an image reference: to run a host command without an "
        "image, put it after --: berth run [FLAGS] -- COMMAND [ARGS...]"));
  }
  if (absl::StatusOr<images::Reference> reference =
          images::ParseReference(target.image);
      !reference.ok()) {
    return reference.status();
  }
  size_t first = 1;
  // `berth run busybox -- ls -l`: nobody means a program called "--".
  if (positional.size() > 1 && positional[1] == "--") first = 2;
  target.command.assign(positional.begin() + first, positional.end());
  return target;
}

absl::Status ApplyRunImage(const ParsedArgs& flags, const std::string& image,
                           nodepb::TaskSpec* spec) {
  if (!image.empty()) spec->mutable_image()->set_reference(image);
  if (spec->has_healthcheck() && spec->healthcheck().test().empty() &&
      spec->image().reference().empty()) {
    // --health-* settings without --health-cmd change an image's
    // HEALTHCHECK: there is none.
    for (const char* flag :
         {"health-interval", "health-timeout", "health-start-period",
          "health-retries", "health-on-failure"}) {
      if (flags.Has(flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag,
            " without --health-cmd changes an image's HEALTHCHECK, and this "
            "task has no image: give --health-cmd"));
      }
    }
  }
  if (!flags.Has("entrypoint")) return absl::OkStatus();
  if (spec->image().reference().empty()) {
    return absl::InvalidArgumentError(
        "--entrypoint replaces an image's Entrypoint, and this task has no "
        "image: berth run [FLAGS] --entrypoint CMD IMAGE [ARGS...]");
  }
  nodepb::TaskImage& task_image = *spec->mutable_image();
  task_image.set_override_entrypoint(true);
  task_image.clear_entrypoint();
  if (const std::string entrypoint = flags.Value("entrypoint");
      !entrypoint.empty()) {
    task_image.add_entrypoint(entrypoint);
  }
  return absl::OkStatus();
}

absl::StatusOr<PullPolicy> ParsePullPolicy(absl::string_view text) {
  if (text == "missing") return PullPolicy::kMissing;
  if (text == "always") return PullPolicy::kAlways;
  if (text == "never") return PullPolicy::kNever;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" must be missing, always or never"));
}

namespace {

absl::Status CapabilitiesFromFlag(
    const ParsedArgs& flags, absl::string_view flag,
    google::protobuf::RepeatedPtrField<std::string>* names) {
  if (!flags.Has(flag)) return absl::OkStatus();
  names->Clear();
  for (const std::string& text : flags.Values(flag)) {
    absl::StatusOr<std::string> name = node::CanonicalCapability(text);
    if (!name.ok()) return Prefixed(absl::StrCat("--", flag), name.status());
    names->Add(*std::move(name));
  }
  return absl::OkStatus();
}

// The isolation flags over the spec's isolation and userns.
absl::Status IsolationFromRunFlags(const ParsedArgs& flags,
                                   const FileReader& read_file,
                                   nodepb::TaskSpec* spec) {
  driverpb::Isolation& isolation = *spec->mutable_isolation();
  if (flags.Has("volume") || flags.Has("tmpfs")) {
    isolation.clear_mounts();
    for (const std::string& text : flags.Values("volume")) {
      absl::StatusOr<driverpb::Mount> mount = ParseVolume(text);
      if (!mount.ok()) return Prefixed("--volume", mount.status());
      *isolation.add_mounts() = *std::move(mount);
    }
    for (const std::string& text : flags.Values("tmpfs")) {
      absl::StatusOr<driverpb::Mount> mount = ParseTmpfs(text);
      if (!mount.ok()) return Prefixed("--tmpfs", mount.status());
      *isolation.add_mounts() = *std::move(mount);
    }
  }
  if (flags.Has("read-only")) isolation.set_readonly_rootfs(true);
  if (absl::Status s =
          CapabilitiesFromFlag(flags, "cap-add", isolation.mutable_cap_add());
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CapabilitiesFromFlag(flags, "cap-drop", isolation.mutable_cap_drop());
      !s.ok()) {
    return s;
  }
  if (flags.Has("privileged")) isolation.set_privileged(true);
  for (const std::string& text : flags.Values("security-opt")) {
    if (absl::Status s = ApplySecurityOpt(text, read_file, &isolation);
        !s.ok()) {
      return Prefixed("--security-opt", s);
    }
  }
  if (flags.Has("userns")) {
    const std::string mode = flags.Value("userns");
    if (mode != "auto" && mode != "host") {
      return FlagError("--userns", mode, "must be auto or host");
    }
    spec->set_userns(mode);
  }
  // Asked nothing: no isolation message at all.
  if (isolation.ByteSizeLong() == 0) spec->clear_isolation();
  return absl::OkStatus();
}

// --label-file, then --label, over the spec's labels.
absl::Status LabelsFromRunFlags(const ParsedArgs& flags,
                                const FileReader& read_file,
                                nodepb::TaskSpec* spec) {
  std::vector<std::pair<std::string, std::string>> labels;
  for (const std::string& path : flags.Values("label-file")) {
    absl::StatusOr<std::string> content = read_file(path);
    if (!content.ok()) {
      return FlagError("--label-file", path, content.status().message());
    }
    if (absl::Status s = ParseLabelFile(*content, &labels); !s.ok()) {
      return FlagError("--label-file", path, s.message());
    }
  }
  for (const std::string& text : flags.Values("label")) {
    absl::StatusOr<std::pair<std::string, std::string>> label =
        ParseLabel(text);
    if (!label.ok()) {
      return FlagError("--label", text, label.status().message());
    }
    labels.push_back(*std::move(label));
  }
  for (auto& [key, value] : labels) {
    (*spec->mutable_labels())[key] = std::move(value);
  }
  return absl::OkStatus();
}

// --hostname, --dns, --dns-search, --dns-option and --add-host: each given
// replaces the base's.
absl::Status NamesFromRunFlags(const ParsedArgs& flags,
                               nodepb::TaskSpec* spec) {
  if (flags.Has("hostname")) {
    const std::string hostname = flags.Value("hostname");
    if (!hostname.empty() && !base::IsHostName(hostname, 63)) {
      return FlagError("--hostname", hostname,
                       "is not a host name: at most 63 letters, digits, '-' "
                       "and '.', starting and ending with a letter or digit");
    }
    spec->set_hostname(hostname);
  }
  if (flags.Has("dns")) {
    network::v1::DnsConfig& dns = *spec->mutable_network()->mutable_dns();
    dns.clear_servers();
    for (const std::string& server : flags.Values("dns")) {
      if (!IsIpAddress(server)) {
        return FlagError("--dns", server, "is not an IPv4 or IPv6 address");
      }
      dns.add_servers(server);
    }
  }
  if (flags.Has("dns-search")) {
    network::v1::DnsConfig& dns = *spec->mutable_network()->mutable_dns();
    dns.clear_searches();
    for (const std::string& domain : flags.Values("dns-search")) {
      // docker's "." means no search domain.
      if (domain != "." && !base::IsHostName(domain, 253)) {
        return FlagError("--dns-search", domain,
                         "is not a domain name (letters, digits, '-' and "
                         "'.')");
      }
      dns.add_searches(domain);
    }
  }
  if (flags.Has("dns-option")) {
    network::v1::DnsConfig& dns = *spec->mutable_network()->mutable_dns();
    dns.clear_options();
    for (const std::string& option : flags.Values("dns-option")) {
      if (option.empty() || HasSpace(option)) {
        return FlagError("--dns-option", option,
                         "is not a resolv.conf option (one word, e.g. "
                         "ndots:2)");
      }
      dns.add_options(option);
    }
  }
  if (flags.Has("add-host")) {
    spec->clear_extra_hosts();
    for (const std::string& text : flags.Values("add-host")) {
      absl::StatusOr<nodepb::HostEntry> entry = ParseExtraHost(text);
      if (!entry.ok()) {
        return FlagError("--add-host", text, entry.status().message());
      }
      *spec->add_extra_hosts() = *std::move(entry);
    }
  }
  return absl::OkStatus();
}

// --ulimit: replaces the base's; a limit given twice keeps the last.
absl::Status UlimitsFromRunFlags(const ParsedArgs& flags,
                                 nodepb::TaskSpec* spec) {
  if (!flags.Has("ulimit")) return absl::OkStatus();
  spec->clear_ulimits();
  for (const std::string& text : flags.Values("ulimit")) {
    absl::StatusOr<driverpb::Rlimit> limit = ParseUlimit(text);
    if (!limit.ok()) {
      return FlagError("--ulimit", text, limit.status().message());
    }
    bool replaced = false;
    for (driverpb::Rlimit& known : *spec->mutable_ulimits()) {
      if (known.type() == limit->type()) {
        known = *limit;
        replaced = true;
      }
    }
    if (!replaced) *spec->add_ulimits() = *std::move(limit);
  }
  return absl::OkStatus();
}

absl::Status StopFromRunFlags(const ParsedArgs& flags, nodepb::TaskSpec* spec) {
  if (flags.Has("stop-signal")) {
    absl::StatusOr<std::string> signal =
        CanonicalSignal(flags.Value("stop-signal"));
    if (!signal.ok()) {
      return FlagError("--stop-signal", flags.Value("stop-signal"),
                       signal.status().message());
    }
    spec->set_stop_signal(*signal);
  }
  if (flags.Has("stop-timeout")) {
    const std::string text = flags.Value("stop-timeout");
    uint32_t seconds = 0;
    if (text.empty() || !absl::ascii_isdigit(text[0]) ||
        !absl::SimpleAtoi(text, &seconds)) {
      return FlagError("--stop-timeout", text,
                       "must be a whole number of seconds");
    }
    if (seconds > 86400) {
      return FlagError("--stop-timeout", text,
                       "is above the most the node allows, 86400 (24h)");
    }
    spec->mutable_stop_timeout()->set_seconds(seconds);
  }
  return absl::OkStatus();
}

// The --health-* flags over the base's check; --no-healthcheck alone.
absl::Status HealthFromRunFlags(const ParsedArgs& flags,
                                nodepb::TaskSpec* spec) {
  static constexpr const char* kHealthFlags[] = {
      "health-cmd",     "health-interval",     "health-timeout",
      "health-retries", "health-start-period", "health-on-failure"};
  std::vector<std::string> given;
  for (const char* flag : kHealthFlags) {
    if (flags.Has(flag)) given.push_back(flag);
  }
  if (flags.Has("no-healthcheck")) {
    if (!given.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--no-healthcheck cannot be used with --", given.front()));
    }
    spec->mutable_healthcheck()->Clear();
    spec->mutable_healthcheck()->add_test("NONE");
    return absl::OkStatus();
  }
  if (given.empty()) return absl::OkStatus();
  nodepb::HealthCheck& check = *spec->mutable_healthcheck();
  if (flags.Has("health-cmd")) {
    const std::string command = flags.Value("health-cmd");
    if (command.empty()) {
      return FlagError("--health-cmd", command, "is empty");
    }
    check.clear_test();
    check.add_test("CMD-SHELL");
    check.add_test(command);
  }
  // Without a test (no --health-cmd, none in the base), the settings change
  // the image's HEALTHCHECK on the node, as docker merges them; a task
  // without an image is refused in ApplyRunImage. A base check that is off
  // has nothing to change.
  if (!check.test().empty() && check.test(0) == "NONE") {
    return absl::InvalidArgumentError(
        absl::StrCat("--", given.front(),
                     " needs --health-cmd: the --json-spec's health check is "
                     "[\"NONE\"] (off)"));
  }
  const std::pair<const char*, google::protobuf::Duration*> durations[] = {
      {"health-interval", check.mutable_interval()},
      {"health-timeout", check.mutable_timeout()},
      {"health-start-period", check.mutable_start_period()},
  };
  for (const auto& [flag, field] : durations) {
    if (!flags.Has(flag)) continue;
    const std::string text = flags.Value(flag);
    absl::StatusOr<absl::Duration> duration = ParseGoDuration(text);
    if (!duration.ok()) {
      return FlagError(absl::StrCat("--", flag), text,
                       duration.status().message());
    }
    if (*duration > absl::Hours(24)) {
      return FlagError(absl::StrCat("--", flag), text,
                       "is above the most the node allows, 24h");
    }
    const int64_t nanos = absl::ToInt64Nanoseconds(*duration);
    field->set_seconds(nanos / 1000000000);
    field->set_nanos(static_cast<int32_t>(nanos % 1000000000));
  }
  if (flags.Has("health-retries")) {
    const std::string text = flags.Value("health-retries");
    uint32_t retries = 0;
    if (text.empty() || !absl::ascii_isdigit(text[0]) ||
        !absl::SimpleAtoi(text, &retries)) {
      return FlagError("--health-retries", text,
                       "must be a whole number (0: the default, 3)");
    }
    check.set_retries(retries);
  }
  if (flags.Has("health-on-failure")) {
    const std::string text = flags.Value("health-on-failure");
    if (text == "none") {
      check.set_on_failure(nodepb::HEALTH_FAILURE_ACTION_NONE);
    } else if (text == "kill") {
      check.set_on_failure(nodepb::HEALTH_FAILURE_ACTION_KILL);
    } else if (text == "restart") {
      check.set_on_failure(nodepb::HEALTH_FAILURE_ACTION_RESTART);
    } else if (text == "stop") {
      check.set_on_failure(nodepb::HEALTH_FAILURE_ACTION_STOP);
    } else {
      return FlagError("--health-on-failure", text,
                       "must be none, kill, restart or stop");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nodepb::TaskSpec> TaskSpecFromRunFlags(
    const ParsedArgs& flags, const std::vector<std::string>& command,
    nodepb::TaskSpec base, const EnvLookup& env, const FileReader& read_file) {
  nodepb::TaskSpec spec = std::move(base);
  if (flags.Has("name")) spec.set_name(flags.Value("name"));
  if (flags.Has("driver")) spec.set_driver(flags.Value("driver"));
  if (spec.driver().empty()) spec.set_driver(kDefaultDriver);

  google::protobuf::Struct& config = *spec.mutable_driver_config();
  if (!command.empty()) {
    (*config.mutable_fields())["command"].set_string_value(command[0]);
    google::protobuf::ListValue& args =
        *(*config.mutable_fields())["args"].mutable_list_value();
    args.clear_values();
    for (size_t i = 1; i < command.size(); ++i) {
      args.add_values()->set_string_value(command[i]);
    }
  }
  if (flags.Has("workdir")) {
    (*config.mutable_fields())["work_dir"].set_string_value(
        flags.Value("workdir"));
  }

  for (const std::string& path : flags.Values("env-file")) {
    absl::StatusOr<std::string> content = read_file(path);
    if (!content.ok()) {
      return FlagError("--env-file", path, content.status().message());
    }
    std::vector<std::pair<std::string, std::string>> vars;
    if (absl::Status s = ParseEnvFile(*content, env, &vars); !s.ok()) {
      return FlagError("--env-file", path, s.message());
    }
    for (auto& [name, value] : vars) {
      (*spec.mutable_env())[name] = std::move(value);
    }
  }
  for (const std::string& entry : flags.Values("env")) {
    const size_t equals = entry.find('=');
    const std::string name = entry.substr(0, equals);
    if (name.empty()) {
      return FlagError("--env", entry, "the variable name is empty");
    }
    if (equals != std::string::npos) {
      (*spec.mutable_env())[name] = entry.substr(equals + 1);
    } else if (std::optional<std::string> value = env(name)) {
      (*spec.mutable_env())[name] = *value;
    }
  }

  if (flags.Has("cpus")) {
    absl::StatusOr<uint64_t> millicores =
        ParseCpuMillicores(flags.Value("cpus"));
    if (!millicores.ok()) {
      return Prefixed(flags.FlagName("cpus"), millicores.status());
    }
    spec.mutable_resources()->set_cpu_millicores(*millicores);
  }
  if (flags.Has("memory")) {
    absl::StatusOr<uint64_t> bytes = ParseMemoryBytes(flags.Value("memory"));
    if (!bytes.ok()) return Prefixed("--memory", bytes.status());
    spec.mutable_resources()->set_memory_bytes(*bytes);
  }
  if (flags.Has("pids-limit")) {
    uint64_t pids = 0;
    if (!absl::SimpleAtoi(flags.Value("pids-limit"), &pids) || pids == 0 ||
        pids > 4194304) {
      return FlagError(flags.FlagName("pids-limit"), flags.Value("pids-limit"),
                       "must be a whole number from 1 to 4194304 (the "
                       "kernel's most pids)");
    }
    spec.mutable_resources()->set_pids_limit(pids);
  }
  if (flags.Has("log-max-size")) {
    absl::StatusOr<uint64_t> bytes =
        ParseMemoryBytes(flags.Value("log-max-size"));
    if (!bytes.ok()) return Prefixed("--log-max-size", bytes.status());
    spec.mutable_logs()->set_max_file_bytes(*bytes);
  }
  if (flags.Has("log-max-files")) {
    uint32_t files = 0;
    if (!absl::SimpleAtoi(flags.Value("log-max-files"), &files) || files == 0 ||
        files > 1024) {
      return FlagError("--log-max-files", flags.Value("log-max-files"),
                       "must be a whole number from 1 to 1024");
    }
    spec.mutable_logs()->set_max_files(files);
  }

  if (flags.Has("network")) {
    absl::Status net =
        ParseNetworkMode(flags.Value("network"), spec.mutable_network());
    if (!net.ok()) return Prefixed(flags.FlagName("network"), net);
    if (spec.network().mode() != netpb::NETWORK_MODE_CNI) {
      spec.mutable_network()->clear_cni_network();
    }
  }
  if (flags.Has("publish")) {
    spec.mutable_network()->clear_port_mappings();
    for (const std::string& text : flags.Values("publish")) {
      absl::StatusOr<netpb::PortMapping> mapping = ParsePortMapping(text);
      if (!mapping.ok()) return Prefixed("--publish", mapping.status());
      *spec.mutable_network()->add_port_mappings() = *std::move(mapping);
    }
  }

  if (flags.Has("restart")) {
    absl::StatusOr<nodepb::RestartPolicy> restart =
        ParseRestartPolicy(flags.Value("restart"));
    if (!restart.ok()) return Prefixed("--restart", restart.status());
    *spec.mutable_restart() = *std::move(restart);
  }
  if (flags.Has("user")) {
    if (absl::Status s = CheckUser(flags.Value("user")); !s.ok()) {
      return Prefixed("--user", s);
    }
    spec.set_user(flags.Value("user"));
  }
  if (flags.Has("interactive")) spec.set_stdin_open(true);
  if (flags.Has("tty")) spec.set_tty(true);
  if (absl::Status s = IsolationFromRunFlags(flags, read_file, &spec);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = LabelsFromRunFlags(flags, read_file, &spec); !s.ok()) {
    return s;
  }
  if (absl::Status s = NamesFromRunFlags(flags, &spec); !s.ok()) return s;
  if (absl::Status s = UlimitsFromRunFlags(flags, &spec); !s.ok()) return s;
  if (absl::Status s = StopFromRunFlags(flags, &spec); !s.ok()) return s;
  if (absl::Status s = HealthFromRunFlags(flags, &spec); !s.ok()) return s;
  return spec;
}

}  // namespace berth::cli
