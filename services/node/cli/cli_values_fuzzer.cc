// Fuzzes the parsers of `berth run`'s flag values: sizes (-m), CPUs
// (--cpus), ports (-p), --detach-keys (and the matcher over typed bytes),
// --ulimit, --add-host, env files, labels and label files, durations
// (--health-*), signals (--stop-signal), restart policies, network modes,
// pull policies, volumes, tmpfs, users and --security-opt. The first byte
// chooses the parser (its value modulo kParsers, in the order of the switch
// below); the rest is the value. Where a parser's result goes on to the
// node, the node's own check must accept it too.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/network/v1/network.pb.h"
#include "berth/node/v1/node.pb.h"
#include "services/node/cli/detach_keys.h"
#include "services/node/cli/task_spec_flags.h"
#include "services/node/task_isolation.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

namespace driverpb = ::berth::driver::v1;
namespace netpb = ::berth::network::v1;
namespace nodepb = ::berth::node::v1;
using namespace ::berth::cli;  // NOLINT: the parsers under test

void Check(bool condition) {
  if (!condition) std::abort();
}

void CheckRejected(const absl::Status& status) {
  Check(absl::IsInvalidArgument(status));
  Check(!status.message().empty());
}

std::optional<std::string> FakeEnv(const std::string& name) {
  if (!name.empty() && name[0] == 'A') return "from-env";
  return std::nullopt;
}

// The typed bytes after the detach keys, fed in pieces whose sizes come
// from the bytes themselves.
void FuzzDetachKeys(absl::string_view text) {
  const size_t nul = text.find('\0');
  const absl::string_view spec = text.substr(0, nul);
  const absl::string_view typed =
      nul == absl::string_view::npos ? "" : text.substr(nul + 1);
  absl::StatusOr<std::string> keys = ParseDetachKeys(spec);
  if (!keys.ok()) {
    CheckRejected(keys.status());
    return;
  }
  Check(keys->size() <= spec.size());
  DetachMatcher matcher(*keys);
  std::string sent;
  size_t at = 0;
  while (at < typed.size() && !matcher.detached()) {
    const size_t piece =
        1 + static_cast<unsigned char>(typed[at]) % 7;  // 1..7 bytes
    sent += matcher.Feed(typed.substr(at, piece));
    at += piece;
  }
  if (matcher.detached()) {
    // What went to the task, then the sequence: the start of what was typed.
    Check(!keys->empty());
    Check(absl::StartsWith(typed, sent + *keys));
    Check(matcher.Feed("x").empty());
  } else {
    Check(sent + matcher.TakeHeld() == typed);
  }
}

void FuzzFileLines(absl::string_view text, bool env) {
  std::vector<std::pair<std::string, std::string>> pairs;
  const absl::Status status =
      env ? ParseEnvFile(text, FakeEnv, &pairs) : ParseLabelFile(text, &pairs);
  if (!status.ok()) {
    CheckRejected(status);
    Check(absl::StartsWith(status.message(), "line "));
    return;
  }
  for (const auto& [key, value] : pairs) {
    Check(!key.empty());
    Check(key.find('=') == std::string::npos);
    Check(key.find('\n') == std::string::npos);
    Check(value.find('\n') == std::string::npos);
    if (env) {
      for (char c : key) Check(!absl::ascii_isspace(c));
    }
  }
}

constexpr int kParsers = 17;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view text = berth::fuzz::AsText(data, size).substr(1);
  switch (data[0] % kParsers) {
    case 0: {
      absl::StatusOr<uint64_t> bytes = ParseMemoryBytes(text);
      if (!bytes.ok()) return CheckRejected(bytes.status()), 0;
      Check(*bytes >= 1 && *bytes <= uint64_t{9000000000000000000u});
      break;
    }
    case 1: {
      absl::StatusOr<uint64_t> millicores = ParseCpuMillicores(text);
      if (!millicores.ok()) return CheckRejected(millicores.status()), 0;
      Check(*millicores >= 1 && *millicores <= 1000000000);
      break;
    }
    case 2: {
      absl::StatusOr<netpb::PortMapping> port = ParsePortMapping(text);
      if (!port.ok()) return CheckRejected(port.status()), 0;
      Check(port->host_port() >= 1 && port->host_port() <= 65535);
      Check(port->container_port() >= 1 && port->container_port() <= 65535);
      Check(port->protocol() == netpb::PROTOCOL_TCP ||
            port->protocol() == netpb::PROTOCOL_UDP);
      break;
    }
    case 3:
      FuzzDetachKeys(text);
      break;
    case 4: {
      absl::StatusOr<driverpb::Rlimit> limit = ParseUlimit(text);
      if (!limit.ok()) return CheckRejected(limit.status()), 0;
      Check(limit->soft() <= limit->hard());
      absl::StatusOr<std::string> type =
          berth::node::CanonicalRlimitType(limit->type());
      Check(type.ok() && *type == limit->type());
      break;
    }
    case 5: {
      absl::StatusOr<nodepb::HostEntry> entry = ParseExtraHost(text);
      if (!entry.ok()) return CheckRejected(entry.status()), 0;
      Check(!entry->hostname().empty() && !entry->ip().empty());
      Check(IsIpAddress(entry->ip()));
      break;
    }
    case 6:
      FuzzFileLines(text, /*env=*/true);
      break;
    case 7:
      FuzzFileLines(text, /*env=*/false);
      break;
    case 8: {
      absl::StatusOr<std::pair<std::string, std::string>> label =
          ParseLabel(text);
      if (!label.ok()) return CheckRejected(label.status()), 0;
      Check(!label->first.empty() &&
            label->first.find('=') == std::string::npos);
      break;
    }
    case 9: {
      absl::StatusOr<absl::Duration> duration = ParseGoDuration(text);
      if (!duration.ok()) return CheckRejected(duration.status()), 0;
      Check(*duration >= absl::ZeroDuration() &&
            *duration != absl::InfiniteDuration());
      Check(*duration == absl::ZeroDuration() ||
            *duration >= absl::Milliseconds(1));
      break;
    }
    case 10: {
      absl::StatusOr<std::string> signal = CanonicalSignal(text);
      if (!signal.ok()) return CheckRejected(signal.status()), 0;
      // What the CLI accepts, the node does (spec.stop_signal).
      Check(berth::node::ParseSignalName(*signal).has_value());
      break;
    }
    case 11: {
      absl::StatusOr<nodepb::RestartPolicy> policy = ParseRestartPolicy(text);
      if (!policy.ok()) return CheckRejected(policy.status()), 0;
      Check(policy->mode() != nodepb::RESTART_MODE_UNSPECIFIED);
      break;
    }
    case 12: {
      nodepb::NetworkSpec network;
      const absl::Status status = ParseNetworkMode(text, &network);
      if (!status.ok()) return CheckRejected(status), 0;
      Check((network.mode() == netpb::NETWORK_MODE_CNI) ==
            !network.cni_network().empty());
      absl::StatusOr<PullPolicy> pull = ParsePullPolicy(text);
      if (!pull.ok()) CheckRejected(pull.status());
      break;
    }
    case 13: {
      absl::StatusOr<driverpb::Mount> volume = ParseVolume(text);
      if (volume.ok()) {
        Check(absl::StartsWith(volume->source(), "/"));
        Check(absl::StartsWith(volume->destination(), "/"));
      } else {
        CheckRejected(volume.status());
      }
      absl::StatusOr<driverpb::Mount> tmpfs = ParseTmpfs(text);
      if (tmpfs.ok()) {
        Check(absl::StartsWith(tmpfs->destination(), "/"));
      } else {
        CheckRejected(tmpfs.status());
      }
      break;
    }
    case 14: {
      const absl::Status status = CheckUser(text);
      if (!status.ok()) return CheckRejected(status), 0;
      // The node splits it the same way (it also refuses control
      // characters, which the CLI leaves to it).
      bool control = false;
      for (char c : text) control = control || absl::ascii_iscntrl(c);
      if (!control) Check(berth::node::ParseTaskUser(text).ok());
      break;
    }
    case 15: {
      // The value up to a NUL; what follows is the profile file's content.
      const size_t nul = text.find('\0');
      const absl::string_view value = text.substr(0, nul);
      const std::string profile(
          nul == absl::string_view::npos ? "" : text.substr(nul + 1));
      driverpb::Isolation isolation;
      const absl::Status status = ApplySecurityOpt(
          value,
          [&](const std::string& path) -> absl::StatusOr<std::string> {
            if (path == "/profile.json") return profile;
            return absl::NotFoundError(absl::StrCat("no file ", path));
          },
          &isolation);
      if (!status.ok()) return CheckRejected(status), 0;
      if (isolation.seccomp().type() == driverpb::SECCOMP_PROFILE_TYPE_CUSTOM) {
        Check(isolation.seccomp().custom_profile_json() == profile);
      }
      break;
    }
    default: {
      const bool ip = IsIpAddress(text);
      if (ip) Check(!text.empty());
      break;
    }
  }
  return 0;
}
