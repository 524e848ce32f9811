// berth-driver-sandbox: the sandbox task driver plugin (sandbox_driver.h),
// served with the plugin SDK.

#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "plugins/sdk/handshake.h"
#include "plugins/sdk/serve.h"
#include "services/driver/common/companion_binary.h"
#include "services/driver/sandbox/sandbox_driver.h"

ABSL_FLAG(std::string, agent_path, "",
          "berth-agent. Default: next to this binary, else in its runfiles.");
ABSL_FLAG(std::string, agent_boot_path, "",
          "berth-agent-boot, which starts berth-agent in a task's own root. "
          "Default: next to berth-agent.");
ABSL_FLAG(std::string, shim_path, "",
          "berth-shim. Default: next to this binary, else in its runfiles.");
ABSL_FLAG(std::string, init_path, "",
          "berth-task-init. Default: next to this binary, else in its "
          "runfiles.");
ABSL_FLAG(std::string, proxy_socket, "",
          "berth-proxy's socket until SetConfig names one.");
ABSL_FLAG(std::string, cgroup_root, "/sys/fs/cgroup",
          "Where the cgroup file systems are mounted.");
ABSL_FLAG(std::string, cgroup_parent, "/berth-sandbox",
          "Parent of the tasks' cgroups (<parent>/<task id>).");
ABSL_FLAG(std::string, stats_socket, "",
          "berth-stats' socket until SetConfig names one; none: TaskStats "
          "measures the task's cgroup in-process.");
ABSL_FLAG(std::string, state_dir, "",
          "Task directories (<dir>/tasks/<id>) until SetConfig names the "
          "node's state directory. Default: <parent of "
          "$BERTH_PLUGIN_SOCKET_DIR>/sandbox-state.");

namespace {

constexpr char kUsage[] =
    "berth-driver-sandbox: the berth task driver that runs each task in a "
    "sandbox (berth-agent, berth-proxy, berth-shim)\n"
    "usage: started by a host (berth-node) with BERTH_PLUGIN_MAGIC_COOKIE and "
    "BERTH_PLUGIN_SOCKET_DIR in its environment [--proxy_socket=PATH] "
    "[--agent_path=PATH] [--agent_boot_path=PATH] [--shim_path=PATH] "
    "[--init_path=PATH] "
    "[--state_dir=DIR] [--cgroup_root=DIR] [--cgroup_parent=/berth-sandbox] "
    "[--stats_socket=PATH]";

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::plugin::InitPlugin(
      argc, argv, kUsage, berth::sandbox_driver::kDriverVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  // Writes to a shim's stdin after it has gone fail with EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  berth::sandbox_driver::SandboxDriverOptions options;
  options.agent_path = berth::driver_common::FindCompanionBinary(
      absl::GetFlag(FLAGS_agent_path), argv[0], "berth-agent",
      "services/agent/berth-agent");
  options.agent_boot_path = absl::GetFlag(FLAGS_agent_boot_path);
  options.shim_path = berth::driver_common::FindCompanionBinary(
      absl::GetFlag(FLAGS_shim_path), argv[0], "berth-shim",
      "services/shim/berth-shim");
  options.init_path = berth::driver_common::FindCompanionBinary(
      absl::GetFlag(FLAGS_init_path), argv[0], "berth-task-init",
      "services/driver/exec/init/berth-task-init");
  options.proxy_socket = absl::GetFlag(FLAGS_proxy_socket);
  options.cgroup_root = absl::GetFlag(FLAGS_cgroup_root);
  options.cgroup_parent = absl::GetFlag(FLAGS_cgroup_parent);
  options.stats_socket = absl::GetFlag(FLAGS_stats_socket);
  options.state_dir = absl::GetFlag(FLAGS_state_dir);
  if (options.state_dir.empty()) {
    options.state_dir = berth::plugin::DefaultStateDirNextToSockets("sandbox");
  }
  berth::sandbox_driver::SandboxDriver driver(options);
  return berth::plugin::Serve(driver);
}
