// The `berth` command line: parses the arguments, talks to berth-node over
// berth.node.v1.NodeService and writes to the given file descriptors. main()
// only builds a CliEnvironment and calls RunCli.

#ifndef SERVICES_NODE_CLI_COMMANDS_H_
#define SERVICES_NODE_CLI_COMMANDS_H_

#include <unistd.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace berth::cli {

// berth's version, printed by --version.
inline constexpr char kVersion[] = "0.1.0";

// Exit codes besides a task's or a command's own.
inline constexpr int kExitOk = 0;
// The node answered with an error, or cannot be reached.
inline constexpr int kExitError = 1;
// The command line is wrong.
inline constexpr int kExitUsage = 2;
// `berth run`: the task could not be started.
inline constexpr int kExitTaskFailed = 125;

// The process's own environment variables, for CliEnvironment::getenv.
std::optional<std::string> ProcessEnv(const std::string& name);

// What the command line reads, writes and asks its surroundings.
struct CliEnvironment {
  int stdin_fd = STDIN_FILENO;
  int stdout_fd = STDOUT_FILENO;
  int stderr_fd = STDERR_FILENO;
  // The caller's environment variables (BERTH_NODE_SOCKET,
  // BERTH_RUNTIME_DIR, and those `run -e K` takes).
  std::function<std::optional<std::string>(const std::string&)> getenv =
      ProcessEnv;
  std::function<absl::Time()> now = [] { return absl::Now(); };
  // How long to wait for a connection to berth-node.
  absl::Duration connect_timeout = absl::Seconds(2);
  // Deadline of calls that return one answer (StopTask adds its timeout).
  absl::Duration call_timeout = absl::Seconds(30);
  // `stats` without --no-stream: time between redraws of the table.
  absl::Duration stats_refresh = absl::Seconds(1);
  // `run` without -d: when the output ended before the task did, the time
  // before following it again.
  absl::Duration log_refollow_delay = absl::Milliseconds(100);
};

// Runs `berth` with `args` (argv without argv[0]) and returns the exit code.
int RunCli(const std::vector<std::string>& args, const CliEnvironment& env);

// Where berth-node's socket is: `socket_flag` if not empty, else
// $BERTH_NODE_SOCKET, else $BERTH_RUNTIME_DIR/node.sock, else
// /run/berth/node.sock.
std::string ResolveNodeSocket(const std::string& socket_flag,
                              const CliEnvironment& env);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_COMMANDS_H_
