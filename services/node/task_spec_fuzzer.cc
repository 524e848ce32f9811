// Fuzzes a berth.node.v1.TaskSpec from a client through the node's checks:
// the input (after its first byte) is the spec in protobuf binary, as
// RunTask receives it, or (first byte odd) in protobuf JSON, as
// `berth run --json-spec` reads it. Then ValidateTaskSpec and
// ValidateTaskIsolation, as TaskManager::Run calls them; a spec they
// accept must hold what the node relies on later (driver set, names and
// host names valid, ports in range, a user that splits, a health check
// whose command can be made, stop settings in range), pass the checks
// again after a round trip, and go into a driver's TaskConfig
// (ApplyTaskIsolation against a driver that claims everything) without an
// error. A driver that claims nothing must refuse it cleanly or accept it.
//
// Mount sources are looked up (realpath) on this machine, read-only.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/proto_time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/node/v1/node.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"
#include "services/node/health_checker.h"
#include "services/node/task_isolation.h"
#include "services/node/task_manager.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

namespace driverpb = ::berth::driver::v1;
namespace nodepb = ::berth::node::v1;
namespace netpb = ::berth::network::v1;

void Check(bool condition) {
  if (!condition) std::abort();
}

bool ValidHostname(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.') return false;
  }
  return absl::ascii_isalnum(name.front()) && absl::ascii_isalnum(name.back());
}

const berth::node::ProtectedDirs& Dirs() {
  static const auto* const kDirs =
      new berth::node::ProtectedDirs{"/run/berth", "/var/lib/berth"};
  return *kDirs;
}

driverpb::DriverCapabilities Everything() {
  driverpb::DriverCapabilities caps;
  caps.set_send_signals(true);
  caps.set_exec(true);
  caps.set_attach(true);
  caps.set_rlimits(true);
  driverpb::IsolationCapabilities& isolation = *caps.mutable_isolation();
  isolation.set_own_root(true);
  isolation.set_image_rootfs(true);
  isolation.set_mounts(true);
  isolation.set_capabilities(true);
  isolation.set_no_new_privileges(true);
  isolation.set_seccomp(true);
  isolation.set_user_namespaces(true);
  isolation.set_masked_paths(true);
  isolation.set_rootfs_idmapped(true);
  return caps;
}

absl::Status Validate(const nodepb::TaskSpec& spec) {
  if (absl::Status s = berth::node::ValidateTaskSpec(spec); !s.ok()) return s;
  return berth::node::ValidateTaskIsolation(spec, Dirs());
}

void CheckAccepted(const nodepb::TaskSpec& spec) {
  Check(!spec.driver().empty());
  Check(spec.name().size() <= 128);
  if (!spec.hostname().empty()) Check(ValidHostname(spec.hostname()));
  Check(ValidHostname(berth::node::TaskHostname(spec)));
  const netpb::NetworkMode mode = spec.network().mode();
  Check((mode == netpb::NETWORK_MODE_CNI) ==
        !spec.network().cni_network().empty());
  for (const auto& port : spec.network().port_mappings()) {
    Check(port.host_port() >= 1 && port.host_port() <= 65535);
    Check(port.container_port() >= 1 && port.container_port() <= 65535);
  }
  const uint64_t millicores = spec.resources().cpu_millicores();
  Check(millicores == 0 || millicores >= 10);
  Check(spec.labels_size() <= berth::node::kMaxLabels);
  for (const auto& [key, value] : spec.labels()) {
    Check(!key.empty() && key.size() <= berth::node::kMaxLabelKey);
    Check(value.size() <= berth::node::kMaxLabelValue);
  }
  for (const auto& limit : spec.ulimits()) Check(limit.soft() <= limit.hard());
  if (spec.has_stop_timeout()) {
    const absl::Duration timeout =
        berth::base::FromProtoDuration(spec.stop_timeout());
    Check(timeout >= absl::ZeroDuration() && timeout <= absl::Hours(24));
  }
  if (!spec.stop_signal().empty()) {
    Check(berth::node::ParseSignalName(spec.stop_signal()).has_value());
  }
  Check(berth::node::ParseTaskUser(spec.user()).ok());
  if (std::optional<nodepb::HealthCheck> check =
          berth::node::HealthCheckInForce(spec.healthcheck())) {
    absl::StatusOr<std::vector<std::string>> command =
        berth::node::HealthCommand(*check);
    Check(command.ok() && !command->empty() && !command->front().empty());
    Check(berth::base::FromProtoDuration(check->interval()) >=
              absl::Milliseconds(1) &&
          berth::base::FromProtoDuration(check->timeout()) >=
              absl::Milliseconds(1));
  }

  // Through the wire and back: the same verdict.
  std::string bytes;
  Check(spec.SerializeToString(&bytes));
  nodepb::TaskSpec again;
  Check(again.ParseFromString(bytes));
  Check(Validate(again).ok());

  // Into a driver's TaskConfig.
  Check(berth::node::CheckIsolationSupported(spec, spec.driver(), Everything())
            .ok());
  driverpb::TaskConfig config;
  const absl::Status applied = berth::node::ApplyTaskIsolation(
      spec, Everything(), Dirs(), nullptr, &config);
  Check(applied.ok());
  Check(config.hostname() == berth::node::TaskHostname(spec));
  Check(config.rlimits_size() == spec.ulimits_size());
  const absl::Status nothing = berth::node::CheckIsolationSupported(
      spec, spec.driver(), driverpb::DriverCapabilities());
  if (!nothing.ok()) Check(absl::IsFailedPrecondition(nothing));
}

}  // namespace

// protobuf's complaints about invalid UTF-8 in a string field (the parse
// fails, which is the point) would be most of the output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view bytes = berth::fuzz::AsText(data, size).substr(1);
  nodepb::TaskSpec spec;
  if ((data[0] & 1) != 0) {
    google::protobuf::util::JsonParseOptions options;
    if (!google::protobuf::util::JsonStringToMessage(std::string(bytes), &spec,
                                                     options)
             .ok()) {
      return 0;
    }
  } else if (!spec.ParseFromArray(bytes.data(),
                                  static_cast<int>(bytes.size()))) {
    return 0;
  }
  // The output of a check as the node keeps it: bounded, and valid UTF-8
  // (which passes again unchanged).
  const std::string output = berth::node::HealthOutput(std::string(bytes), 64);
  Check(output.size() <= 64);
  Check(berth::node::HealthOutput(output, 64) == output);

  const absl::Status status = Validate(spec);
  if (!status.ok()) {
    Check(absl::IsInvalidArgument(status));
    Check(!status.message().empty());
    return 0;
  }
  CheckAccepted(spec);
  return 0;
}
