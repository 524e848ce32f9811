// The flags of `berth run` turned into a berth.node.v1.TaskSpec: memory
// sizes ("64m"), CPUs ("0.5"), ports ("8080:80/tcp"), restart policies
// ("on-failure:3"), network modes ("cni:NAME"), environment ("K=V", env
// files), labels, names (hostname, DNS, /etc/hosts lines), ulimits, stop
// signal and timeout, health checks, -i/-t, and isolation: volumes
// ("/src:/dst:ro"), tmpfs, capabilities, security options, user
// namespaces.
// Every error names the flag and the value at fault.

#ifndef SERVICES_NODE_CLI_TASK_SPEC_FLAGS_H_
#define SERVICES_NODE_CLI_TASK_SPEC_FLAGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/network/v1/network.pb.h"
#include "berth/node/v1/node.pb.h"
#include "services/node/cli/cli_args.h"

namespace berth::cli {

// The driver `berth run` uses unless told otherwise.
inline constexpr char kDefaultDriver[] = "exec";

// "64m" → 67108864. A number (fractions allowed: "1.5g") with an optional
// binary unit b, k, m, g or t (also "kb"/"kib", ...; case ignored).
absl::StatusOr<uint64_t> ParseMemoryBytes(absl::string_view text);

// "0.5" → 500 thousandths of a core; at least 0.001.
absl::StatusOr<uint64_t> ParseCpuMillicores(absl::string_view text);

// "no" (or "never"), "on-failure", "on-failure:N", "always".
absl::StatusOr<node::v1::RestartPolicy> ParseRestartPolicy(
    absl::string_view text);

// "none", "host", "bridge" or "cni:NAME"; sets mode (and cni_network).
absl::Status ParseNetworkMode(absl::string_view text,
                              node::v1::NetworkSpec* network);

// "[HOST_IP:]HOST_PORT:CONTAINER_PORT[/tcp|/udp]".
absl::StatusOr<network::v1::PortMapping> ParsePortMapping(
    absl::string_view text);

// "SRC:DST[:ro|rw]" (-v): a bind mount of the absolute host path SRC at DST.
absl::StatusOr<driver::v1::Mount> ParseVolume(absl::string_view text);

// "DST" (--tmpfs): an empty tmpfs at DST.
absl::StatusOr<driver::v1::Mount> ParseTmpfs(absl::string_view text);

// "NAME|UID[:GROUP|GID]" (-u).
absl::Status CheckUser(absl::string_view text);

// Looks up a variable of the caller's environment.
using EnvLookup =
    std::function<std::optional<std::string>(const std::string& name)>;

// Reads a file the flags name (--security-opt seccomp=PATH).
using FileReader =
    std::function<absl::StatusOr<std::string>(const std::string& path)>;

// One --security-opt: "no-new-privileges[=true|false]",
// "seccomp=unconfined" or "seccomp=PATH" (the profile's JSON, read with
// `read_file`), applied to `isolation`.
absl::Status ApplySecurityOpt(absl::string_view text,
                              const FileReader& read_file,
                              driver::v1::Isolation* isolation);

// The parsers below return INVALID_ARGUMENT saying why, without the value
// (TaskSpecFromRunFlags names the flag and the value before it).

// "NAME=SOFT[:HARD]" (--ulimit): docker's names (nofile, nproc, core, ...;
// "rlimit_nofile" too) as getrlimit(2)'s ("RLIMIT_NOFILE"); "unlimited" or
// -1 is UINT64_MAX; without HARD, hard = soft; soft above hard is refused.
absl::StatusOr<driver::v1::Rlimit> ParseUlimit(absl::string_view text);

// Whether `text` is an IPv4 or IPv6 address.
bool IsIpAddress(absl::string_view text);

// "NAME:IP" or "NAME=IP" (--add-host), split at the first '=', else the
// first ':' (so "db:::1" is db at ::1); an IPv6 address may be bracketed
// ("db=[::1]").
absl::StatusOr<node::v1::HostEntry> ParseExtraHost(absl::string_view text);

// Go's durations (--health-*): "30s", "1m30s", "500ms", "0"; not negative,
// 0 or at least 1ms.
absl::StatusOr<absl::Duration> ParseGoDuration(absl::string_view text);

// "SIGQUIT", "QUIT", "sigquit" or "3" (--stop-signal) as "SIGQUIT"; a
// number without a name (a real-time signal) stays a number.
absl::StatusOr<std::string> CanonicalSignal(absl::string_view text);

// An --env-file's variables in order, docker's format: K=V lines (V as it
// is, up to the line's end), K alone takes K from `env` (left out when
// unset), leading white space trimmed, blank lines and # comments skipped.
// Errors name the line ("line 3: ...").
absl::Status ParseEnvFile(
    absl::string_view content, const EnvLookup& env,
    std::vector<std::pair<std::string, std::string>>* vars);

// "K=V" or "K" (an empty value) (--label); the key is not empty.
absl::StatusOr<std::pair<std::string, std::string>> ParseLabel(
    absl::string_view text);

// A --label-file's labels in order: ParseLabel's lines, blank lines and #
// comments skipped.
absl::Status ParseLabelFile(
    absl::string_view content,
    std::vector<std::pair<std::string, std::string>>* labels);

// The flags of `berth run` (see RunFlagSpecs) over `base` (a spec read from
// --json-spec, or empty): each flag given replaces what `base` says; a
// non-empty `command` sets driver_config.command and driver_config.args;
// -w sets driver_config.work_dir; the driver is kDefaultDriver when neither
// names one. "-e K" without "=" takes K from `env` (left out when unset).
// -v and --tmpfs replace the base's mounts (volumes first), --cap-add and
// --cap-drop its lists; `read_file` reads a seccomp profile, --env-file and
// --label-file. Variables of --env-file come before -e's, labels of
// --label-file before --label's (the later wins), over the base's. --dns,
// --dns-search, --dns-option, --add-host and --ulimit replace the base's
// lists (a limit given twice: the last); --health-* change the base's check;
// without a test (no --health-cmd, none in the base) they change the
// image's HEALTHCHECK on the node, as docker's do (refused over a base
// check of ["NONE"]); --no-healthcheck is ["NONE"] and takes no other
// --health-* flag. -i sets stdin_open, -t tty.
absl::StatusOr<node::v1::TaskSpec> TaskSpecFromRunFlags(
    const ParsedArgs& flags, const std::vector<std::string>& command,
    node::v1::TaskSpec base, const EnvLookup& env, const FileReader& read_file);

// What `berth run`'s positional arguments name: docker's grammar, the image
// first and then its command (`berth run busybox echo hi`; a "--" right
// after the image is dropped), or, when the arguments follow "--" at once
// (`berth run -- /bin/sh -c 'echo hi'`), a command and no image.
struct RunTarget {
  // The image reference as given; empty for none.
  std::string image;
  // The command and its arguments; empty for the image's own.
  std::vector<std::string> command;
};

// Splits `args.positional` of `berth run`. INVALID_ARGUMENT for an empty
// image, a path where the image goes ("/bin/sh": the hint says to put a
// host command after "--") or an image that is no reference (the parser's
// words: `invalid reference "Busybox": ...`).
absl::StatusOr<RunTarget> RunTargetFromArgs(const ParsedArgs& args);

// Sets spec.image from `image` (when not empty; the base's image otherwise
// stays) and --entrypoint: the image's Entrypoint replaced by the flag's
// value, cleared by an empty one (`--entrypoint ''`). INVALID_ARGUMENT when
// --entrypoint is given for a task without an image, or a --health-*
// setting without --health-cmd (nor a test in the base): there is no
// image's HEALTHCHECK to change.
absl::Status ApplyRunImage(const ParsedArgs& flags, const std::string& image,
                           node::v1::TaskSpec* spec);

// When `berth run` pulls its image (--pull).
enum class PullPolicy {
  // When it is not in the node's store (the default).
  kMissing,
  // Every time.
  kAlways,
  // Never: a missing image is an error.
  kNever,
};

// "missing", "always" or "never".
absl::StatusOr<PullPolicy> ParsePullPolicy(absl::string_view text);

// The flags of `berth run`.
const std::vector<FlagSpec>& RunFlagSpecs();

// --detach-keys, of `berth run` and `berth attach`: docker's format, a
// comma-separated sequence of "ctrl-X" and single characters (default
// "ctrl-p,ctrl-q").
const FlagSpec& DetachKeysFlagSpec();

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_TASK_SPEC_FLAGS_H_
