// berth-driver-exec: the exec task driver plugin (exec_driver.h), served
// with the plugin SDK. Started by a host (berth-node, the conformance suite,
// a test) with the plugin handshake's environment; see
// plugins/sdk/handshake.h.

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "glog/logging.h"
#include "plugins/sdk/handshake.h"
#include "plugins/sdk/serve.h"
#include "services/driver/common/companion_binary.h"
#include "services/driver/common/task_spec.h"
#include "services/driver/exec/exec_driver.h"

ABSL_FLAG(std::string, init_path, "",
          "berth-task-init, the per-task init. Default: berth-task-init next "
          "to this binary, else in its Bazel runfiles.");
ABSL_FLAG(std::string, cgroup_root, "/sys/fs/cgroup",
          "Where the cgroup file systems are mounted.");
ABSL_FLAG(std::string, cgroup_parent, "/berth",
          "Parent cgroup of the tasks' cgroups (<parent>/<task id> on every "
          "hierarchy).");
ABSL_FLAG(std::string, state_dir, "",
          "Task directories (<dir>/tasks/<id>) until SetConfig names the "
          "node's state directory (then <state dir>/exec). Default: <parent "
          "of $BERTH_PLUGIN_SOCKET_DIR>/exec-state.");
ABSL_FLAG(
    std::vector<std::string>, root_dirs,
    std::vector<std::string>(std::begin(berth::driver_common::kDefaultHostDirs),
                             std::end(berth::driver_common::kDefaultHostDirs)),
    "Host directories bound read-only into the root of each task "
    "without an image (comma-separated); one missing on the host is "
    "skipped, one that is a symbolic link (/bin -> usr/bin) becomes "
    "the same link.");
ABSL_FLAG(std::string, stats_socket, "",
          "berth-stats' socket until SetConfig names one; empty: tasks are "
          "measured in-process.");

namespace {

constexpr char kUsage[] =
    "berth-driver-exec: the berth task driver that runs tasks as processes "
    "in their own pid, mount, ipc and uts namespaces and cgroup\n"
    "usage: started by a host (berth-node) with BERTH_PLUGIN_MAGIC_COOKIE and "
    "BERTH_PLUGIN_SOCKET_DIR in its environment [--init_path=PATH] "
    "[--cgroup_root=DIR] [--cgroup_parent=/berth] [--state_dir=DIR] "
    "[--stats_socket=PATH] [--root_dirs=/bin,/sbin,/lib,/lib32,/lib64,/usr,"
    "/etc]";

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::plugin::InitPlugin(
      argc, argv, kUsage, berth::exec_driver::kDriverVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  berth::exec_driver::ExecDriverOptions options;
  options.init_path = berth::driver_common::FindCompanionBinary(
      absl::GetFlag(FLAGS_init_path), argv[0], "berth-task-init",
      "services/driver/exec/init/berth-task-init");
  options.cgroup_root = absl::GetFlag(FLAGS_cgroup_root);
  options.cgroup_parent = absl::GetFlag(FLAGS_cgroup_parent);
  options.state_dir = absl::GetFlag(FLAGS_state_dir);
  if (options.state_dir.empty())
    options.state_dir = berth::plugin::DefaultStateDirNextToSockets("exec");
  options.stats_socket = absl::GetFlag(FLAGS_stats_socket);
  options.root_host_dirs = absl::GetFlag(FLAGS_root_dirs);
  berth::exec_driver::ExecDriver driver(options);
  return berth::plugin::Serve(driver);
}
