#include "services/node/cli/task_spec_flags.h"

#include <cmath>
#include <cstdint>
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
#include "berth/network/v1/network.pb.h"
#include "berth/node/v1/node.pb.h"
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
  if (!(bytes >= 1) || bytes > 9.0e18) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a size above zero"));
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
  if (millicores < 1 || millicores > 1.0e9) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" must be at least 0.001 CPUs"));
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

const std::vector<FlagSpec>& RunFlagSpecs() {
  static const std::vector<FlagSpec>* const kSpecs = new std::vector<FlagSpec>{
      {"name", 0, "NAME", "Name of the task (unique on the node)"},
      {"driver", 0, "DRIVER", "Driver plugin that runs it (default exec)"},
      {"net", 0, "MODE", "Network: none, host, bridge or cni:NAME"},
      {"publish", 'p', "PORTS",
       "[IP:]HOST:CONTAINER[/tcp|udp]: forward a host port into the task "
       "(repeatable)",
       true},
      {"cpu", 0, "CPUS", "CPU limit in cores, e.g. 0.5"},
      {"memory", 'm', "SIZE", "Memory limit, e.g. 64m or 1g"},
      {"pids", 0, "N", "Limit on processes and threads"},
      {"log-max-size", 0, "SIZE",
       "Rotate each output file at this size, e.g. 10m (driver default: 10 "
       "MiB)"},
      {"log-max-files", 0, "N", "Rotated files kept per stream"},
      {"env", 'e', "K=V",
       "Environment variable (repeatable; -e K passes K from here)", true},
      {"restart", 0, "POLICY", "no, on-failure[:N] or always (default no)"},
      {"user", 'u', "USER",
       "User to run as: NAME or UID, optionally :GROUP or :GID"},
      {"volume", 'v', "SRC:DST[:ro|rw]",
       "Bind the absolute host path SRC at DST (repeatable; no named volumes)",
       true},
      {"tmpfs", 0, "DST", "An empty tmpfs at DST (repeatable)", true},
      {"read-only", 0, "", "Mount the task's root read-only"},
      {"cap-add", 0, "CAP",
       "Add a capability to the default set, e.g. NET_ADMIN; ALL "
       "(repeatable)",
       true},
      {"cap-drop", 0, "CAP",
       "Drop a capability from the default set; ALL (repeatable)", true},
      {"privileged", 0, "",
       "Every capability and device, no seccomp filter (own root and "
       "namespaces kept)"},
      {"security-opt", 0, "OPT",
       "no-new-privileges[=true|false], seccomp=unconfined or seccomp=PATH "
       "(a JSON profile) (repeatable)",
       true},
      {"userns", 0, "MODE",
       "auto: a user namespace of the task's own; host: the host's"},
      {"workdir", 'w', "DIR", "Working directory inside the task directory"},
      {"entrypoint", 0, "CMD",
       "Replace the image's Entrypoint with CMD ('': clear it)"},
      {"pull", 0, "POLICY",
       "Pull the image: missing (default), always or never"},
      {"quiet", 'q', "", "Do not print the image's pull progress"},
      {"detach", 'd', "", "Print the task id and return at once"},
      {"interactive", 'i', "", "Keep the task's stdin open and pass this one"},
      {"tty", 't', "",
       "Give the task a terminal (with -i: this terminal in raw mode, "
       "resized with it)"},
      DetachKeysFlagSpec(),
      {"rm", 0, "", "Remove the task when it ends (not with -d)"},
      {"json-spec", 0, "FILE",
       "A TaskSpec in protobuf JSON ('-': stdin); flags replace its fields"},
      {"help", 'h', "", "Print this help"},
  };
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

  if (flags.Has("cpu")) {
    absl::StatusOr<uint64_t> millicores =
        ParseCpuMillicores(flags.Value("cpu"));
    if (!millicores.ok()) return Prefixed("--cpu", millicores.status());
    spec.mutable_resources()->set_cpu_millicores(*millicores);
  }
  if (flags.Has("memory")) {
    absl::StatusOr<uint64_t> bytes = ParseMemoryBytes(flags.Value("memory"));
    if (!bytes.ok()) return Prefixed("--memory", bytes.status());
    spec.mutable_resources()->set_memory_bytes(*bytes);
  }
  if (flags.Has("pids")) {
    uint64_t pids = 0;
    if (!absl::SimpleAtoi(flags.Value("pids"), &pids) || pids == 0) {
      return FlagError("--pids", flags.Value("pids"),
                       "must be a whole number above zero");
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
    if (!absl::SimpleAtoi(flags.Value("log-max-files"), &files) || files == 0) {
      return FlagError("--log-max-files", flags.Value("log-max-files"),
                       "must be a whole number above zero");
    }
    spec.mutable_logs()->set_max_files(files);
  }

  if (flags.Has("net")) {
    absl::Status net =
        ParseNetworkMode(flags.Value("net"), spec.mutable_network());
    if (!net.ok()) return Prefixed("--net", net);
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
  return spec;
}

}  // namespace berth::cli
