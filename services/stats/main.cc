// berth-stats: serves berth.stats.v1.StatsService on <runtime_dir>/stats.sock
// until SIGTERM or SIGINT, then shuts down and exits 0.

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.pb.h"
#include "glog/logging.h"
#include "services/common/grpc_server.h"
#include "services/common/server_flags.h"
#include "services/common/service_main.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/stats/stats_service.h"

ABSL_FLAG(std::string, runtime_dir, std::string(berth::kDefaultRuntimeDir),
          "Directory of berth's sockets; serves on <runtime_dir>/stats.sock.");
ABSL_FLAG(std::string, cgroup_root, "/sys/fs/cgroup",
          "Where the cgroup hierarchies are mounted.");
ABSL_FLAG(std::string, proc_root, "/proc",
          "The proc file system: tasks registered by root_pid, the node's CPU "
          "and memory, and <proc_root>/self/mountinfo for the cgroup layout.");
ABSL_FLAG(std::string, cgroup_layout, "auto",
          "auto: detect the cgroup layout from the mount table; v1, v2, "
          "hybrid or none: take --cgroup_root as laid out that way without "
          "looking at mounts (v1: <root>/{cpu,cpuacct,memory}; v2: <root>; "
          "hybrid: both, v2 at <root>/unified), for test trees.");

namespace {

constexpr char kUsage[] =
    "berth-stats: resource usage of tasks (cgroup v1, cgroup v2, procfs), "
    "sampled and streamed\n"
    "usage: berth-stats [--runtime_dir=/run/berth] "
    "[--cgroup_root=/sys/fs/cgroup] [--proc_root=/proc]";
constexpr char kVersion[] = "0.1.0";
constexpr absl::Duration kGrace = absl::Seconds(5);

absl::StatusOr<berth::stats::CgroupMounts> Mounts() {
  const std::string root = absl::GetFlag(FLAGS_cgroup_root);
  const std::string layout = absl::GetFlag(FLAGS_cgroup_layout);
  namespace pb = berth::stats::v1;
  if (layout == "auto") {
    return berth::stats::DetectCgroupLayout(
        root, absl::StrCat(absl::GetFlag(FLAGS_proc_root), "/self/mountinfo"));
  }
  const std::pair<const char*, pb::CgroupLayout> kLayouts[] = {
      {"v1", pb::CGROUP_LAYOUT_V1},
      {"v2", pb::CGROUP_LAYOUT_V2},
      {"hybrid", pb::CGROUP_LAYOUT_HYBRID},
      {"none", pb::CGROUP_LAYOUT_NONE}};
  for (const auto& [name, value] : kLayouts) {
    if (layout == name) {
      return berth::stats::CgroupMountsForLayout(value, root);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--cgroup_layout must be auto, v1, v2, hybrid or none, got ", layout));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::InitService(argc, argv, kUsage, kVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  absl::StatusOr<berth::stats::CgroupMounts> mounts = Mounts();
  if (!mounts.ok()) {
    LOG(ERROR) << mounts.status().message();
    return 2;
  }
  LOG(INFO) << "cgroup layout "
            << berth::stats::v1::CgroupLayout_Name(mounts->layout) << " under "
            << absl::GetFlag(FLAGS_cgroup_root);

  berth::stats::StatsServiceOptions options;
  options.cgroups = *mounts;
  options.proc_root = absl::GetFlag(FLAGS_proc_root);
  berth::stats::StatsServiceImpl service(options);

  berth::UnixGrpcServer::Options server_options;
  server_options.socket_path =
      absl::StrCat(absl::GetFlag(FLAGS_runtime_dir), "/stats.sock");
  server_options.services = {&service};
  if (absl::Status flags = berth::ApplyServerFlags(&server_options);
      !flags.ok()) {
    LOG(ERROR) << flags.message();
    return 2;
  }
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> server =
      berth::UnixGrpcServer::Start(server_options);
  if (!server.ok()) {
    LOG(ERROR) << server.status().message();
    return 1;
  }
  LOG(INFO) << "serving on " << server_options.socket_path
            << " (one core: " << service.cpu_mhz() << " MHz)";

  berth::WaitForShutdownSignal();
  service.Shutdown();
  (*server)->Shutdown(kGrace);
  LOG(INFO) << "stopped";
  return 0;
}
