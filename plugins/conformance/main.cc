// berth-driver-conformance: the driver conformance suite (suite.h) from the
// command line. See --help.

#include <cstdint>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/conformance/cli.h"
#include "plugins/conformance/context.h"
#include "plugins/conformance/suite.h"
#include "services/common/service_main.h"

ABSL_FLAG(std::string, plugin, "",
          "Path of the driver plugin's executable (required).");
ABSL_FLAG(std::string, task_config, "{}",
          "Driver-specific task configuration, a JSON object; the suite "
          "merges \"command\" and \"args\" into it for every task.");
ABSL_FLAG(std::string, socket_dir, "",
          "Directory the plugin puts its socket in. Default: a directory in "
          "the suite's temporary directory /tmp/berth-XXXXXX (removed at the "
          "end).");
ABSL_FLAG(absl::Duration, start_timeout, absl::Seconds(10),
          "How long the plugin has to print its handshake line and be "
          "healthy.");
ABSL_FLAG(std::string, filter, "",
          "Run only the checks whose name contains this.");
ABSL_FLAG(uint32_t, userns_base, 3400000,
          "First host id the isolation_user_namespaces check maps a task's "
          "root to (65536 ids from it, which no one on the host should use).");
ABSL_FLAG(bool, plugin_logs, false,
          "Show the plugin's stderr and the suite's own progress on stderr "
          "(otherwise only warnings and errors).");

namespace {

constexpr char kVersion[] = "0.1.0";

}  // namespace

int main(int argc, char** argv) {
  namespace conformance = berth::conformance;
  // Before InitService, whose flag parser exits 1 on an unknown flag: 1 is
  // what a failed check exits with.
  const absl::Status names = conformance::CheckFlagNames(argc, argv);
  if (!names.ok()) {
    std::cerr << "berth-driver-conformance: " << names.message()
              << "; see --help\n";
    return conformance::kExitUsage;
  }
  const std::string usage = conformance::UsageText();
  std::vector<char*> args = berth::InitService(argc, argv, usage, kVersion);
  if (args.size() > 1) {
    std::cerr << "berth-driver-conformance: unexpected argument " << args[1]
              << "; see --help\n";
    return conformance::kExitUsage;
  }
  conformance::SuiteOptions options;
  options.plugin = absl::GetFlag(FLAGS_plugin);
  options.task_config_json = absl::GetFlag(FLAGS_task_config);
  options.socket_dir = absl::GetFlag(FLAGS_socket_dir);
  options.start_timeout = absl::GetFlag(FLAGS_start_timeout);
  options.filter = absl::GetFlag(FLAGS_filter);
  options.userns_base = absl::GetFlag(FLAGS_userns_base);
  const absl::Status valid = conformance::ValidateOptions(options);
  if (!valid.ok()) {
    std::cerr << "berth-driver-conformance: " << valid.message()
              << "; see --help\n";
    return conformance::kExitUsage;
  }
  if (!absl::GetFlag(FLAGS_plugin_logs)) FLAGS_minloglevel = google::WARNING;

  // SIGINT/SIGTERM (blocked by InitService) cancel the running check; the
  // suite then cleans up and ends. Never deleted: the thread may outlive
  // main's locals.
  static auto* const interruption = new conformance::Interruption;
  std::thread([] {
    berth::WaitForShutdownSignal();
    interruption->Interrupt();
  }).detach();

  conformance::Suite suite(options, &std::cout, interruption);
  return suite.Run();
}
