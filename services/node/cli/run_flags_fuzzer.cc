// Fuzzes `berth run`'s command line as berth reads it: the arguments (the
// input split at NUL bytes) through ParseArgs with run's flags, then
// RunTargetFromArgs, TaskSpecFromRunFlags (over a base spec: when the first
// byte is odd, the first argument is a --json-spec's JSON instead) and
// ApplyRunImage, the health test form of --health-cmd included; then the
// node's checks of what the CLI built (ValidateTaskSettings,
// ValidateTaskIsolation), for coverage: the node is the authority and may
// refuse what the CLI passes on.
//
// Files the flags name: /env (an env file), /labels (a label file),
// /profile.json (a seccomp profile); any other path is missing.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "berth/node/v1/node.pb.h"
#include "google/protobuf/util/json_util.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/detach_keys.h"
#include "services/node/cli/task_spec_flags.h"
#include "services/node/task_isolation.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

namespace nodepb = ::berth::node::v1;
using ::berth::cli::ParsedArgs;

void Check(bool condition) {
  if (!condition) std::abort();
}

absl::StatusOr<std::string> FakeFile(const std::string& path) {
  if (path == "/env") return std::string("A\nB=2\n  # comment\nC=x=y\r\n");
  if (path == "/labels") return std::string("k=v\nempty\n#\n");
  if (path == "/profile.json") {
    return std::string(
        R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],)"
        R"("action":"SCMP_ACT_ALLOW"}]})");
  }
  return absl::NotFoundError(absl::StrCat("cannot open ", path));
}

std::optional<std::string> FakeEnv(const std::string& name) {
  if (name == "A" || name == "HOME") return "from-env";
  return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool json_base = (data[0] & 1) != 0;
  std::vector<std::string> args =
      absl::StrSplit(berth::fuzz::AsText(data, size).substr(1), '\0');
  if (args.size() > 256) return 0;  // a command line, not a file
  nodepb::TaskSpec base;
  if (json_base && !args.empty()) {
    google::protobuf::util::JsonParseOptions options;
    if (!google::protobuf::util::JsonStringToMessage(args.front(), &base,
                                                     options)
             .ok()) {
      base.Clear();
    }
    args.erase(args.begin());
  }

  absl::StatusOr<ParsedArgs> parsed =
      berth::cli::ParseArgs(berth::cli::RunFlagSpecs(), args,
                            berth::cli::PositionalMode::kStopAtFirst);
  if (!parsed.ok()) {
    Check(absl::IsInvalidArgument(parsed.status()));
    return 0;
  }
  absl::StatusOr<berth::cli::RunTarget> target =
      berth::cli::RunTargetFromArgs(*parsed);
  if (!target.ok()) {
    Check(absl::IsInvalidArgument(target.status()));
    return 0;
  }
  if (parsed->Has("detach-keys")) {
    (void)berth::cli::ParseDetachKeys(parsed->Value("detach-keys"));
  }
  absl::StatusOr<nodepb::TaskSpec> spec = berth::cli::TaskSpecFromRunFlags(
      *parsed, target->command, base, FakeEnv, FakeFile);
  if (!spec.ok()) {
    Check(absl::IsInvalidArgument(spec.status()));
    Check(!spec.status().message().empty());
    return 0;
  }
  // What the flags set, as the node will read it.
  Check(!spec->driver().empty());
  for (const auto& port : spec->network().port_mappings()) {
    if (!parsed->Has("publish")) break;  // the base's, unchecked here
    Check(port.host_port() >= 1 && port.host_port() <= 65535);
    Check(port.container_port() >= 1 && port.container_port() <= 65535);
  }
  if (parsed->Has("cpus")) Check(spec->resources().cpu_millicores() >= 1);
  if (parsed->Has("memory")) Check(spec->resources().memory_bytes() >= 1);
  if (parsed->Has("health-cmd")) {
    Check(spec->healthcheck().test_size() == 2 &&
          spec->healthcheck().test(0) == "CMD-SHELL" &&
          spec->healthcheck().test(1) == parsed->Value("health-cmd"));
  }
  if (parsed->Has("no-healthcheck")) {
    Check(spec->healthcheck().test_size() == 1 &&
          spec->healthcheck().test(0) == "NONE");
  }
  for (const auto& limit : spec->ulimits()) {
    if (!parsed->Has("ulimit")) break;
    Check(limit.soft() <= limit.hard());
  }
  const absl::Status image =
      berth::cli::ApplyRunImage(*parsed, target->image, &*spec);
  if (!image.ok()) {
    Check(absl::IsInvalidArgument(image));
    return 0;
  }
  if (!target->image.empty()) Check(spec->image().reference() == target->image);
  (void)berth::node::ValidateTaskSettings(*spec);
  (void)berth::node::ValidateTaskIsolation(
      *spec, berth::node::ProtectedDirs{"/run/berth", "/var/lib/berth"});
  return 0;
}
