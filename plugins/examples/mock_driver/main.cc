// mock_driver: the mock task driver plugin (mock_driver.h), served with the
// plugin SDK. Started by a host (berth-node, the conformance suite, a test)
// with the plugin handshake's environment; see plugins/sdk/handshake.h.

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/examples/mock_driver/mock_driver.h"
#include "plugins/sdk/handshake.h"
#include "plugins/sdk/serve.h"

ABSL_FLAG(std::string, state_dir, "",
          "Where task exit files and output go until SetConfig names the "
          "node's state directory (then <state dir>/mock). Default: "
          "<parent of $BERTH_PLUGIN_SOCKET_DIR>/mock-state.");

ABSL_FLAG(bool, must_create_network, false,
          "Say in the capabilities that the host must call CreateNetwork, "
          "and serve it (a record per allocation under the state directory; "
          "tasks still run on the host's network).");

ABSL_FLAG(bool, join_networks, false,
          "List NETWORK_ISOLATION_MODE_GROUP and run a GROUP task in the "
          "network namespace the node made for it (setns).");

ABSL_FLAG(bool, attach, false,
          "Claim attach and serve AttachTask as an echo of the caller's stdin "
          "(for tests), until the task exits.");

ABSL_FLAG(bool, no_exec, false,
          "Claim no exec and refuse ExecTask (for tests of what needs it).");

ABSL_FLAG(absl::Duration, recover_delay, absl::ZeroDuration(),
          "Wait this long in RecoverTask before recovering the task (for "
          "tests of a slow recovery).");

ABSL_FLAG(bool, keep_handles, false,
          "Keep each started task's handle in <state dir>/<id>.handle; "
          "InspectTask of a task this instance does not know recovers it "
          "from there (a driver that finds its tasks after a restart).");
ABSL_FLAG(std::string, die_after_start, "",
          "When this file exists, StartTask removes it and kills the mock "
          "(SIGKILL) once the task runs, before replying (for tests of a "
          "start whose reply is lost).");
ABSL_FLAG(absl::Duration, start_reply_delay, absl::ZeroDuration(),
          "StartTask waits this long once the task runs before it replies.");
ABSL_FLAG(bool, no_handle_of, false,
          "InspectTask gives no handle (HandleOf is UNIMPLEMENTED), as a "
          "driver built before Driver::HandleOf.");

namespace {

constexpr char kUsage[] =
    "the mock berth task driver: runs a configurable command as a plain host "
    "process, for tests\n"
    "usage: started by a host with BERTH_PLUGIN_MAGIC_COOKIE and "
    "BERTH_PLUGIN_SOCKET_DIR in its environment [--state_dir=DIR] "
    "[--must_create_network] [--join_networks] [--attach] [--no_exec] "
    "[--recover_delay=DURATION] [--keep_handles] [--die_after_start=FILE] "
    "[--start_reply_delay=DURATION] [--no_handle_of]";

// <parent of the socket directory>/mock-state; empty without one.

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::plugin::InitPlugin(
      argc, argv, kUsage, berth::mock::kDriverVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  berth::mock::MockDriverOptions options;
  options.default_state_dir = absl::GetFlag(FLAGS_state_dir);
  options.must_create_network = absl::GetFlag(FLAGS_must_create_network);
  options.join_networks = absl::GetFlag(FLAGS_join_networks);
  options.attach = absl::GetFlag(FLAGS_attach);
  options.no_exec = absl::GetFlag(FLAGS_no_exec);
  options.recover_delay = absl::GetFlag(FLAGS_recover_delay);
  options.keep_handles = absl::GetFlag(FLAGS_keep_handles);
  options.die_after_start = absl::GetFlag(FLAGS_die_after_start);
  options.start_reply_delay = absl::GetFlag(FLAGS_start_reply_delay);
  options.no_handle_of = absl::GetFlag(FLAGS_no_handle_of);
  if (options.default_state_dir.empty()) {
    options.default_state_dir =
        berth::plugin::DefaultStateDirNextToSockets("mock");
  }
  berth::mock::MockDriver driver(options);
  return berth::plugin::Serve(driver);
}
