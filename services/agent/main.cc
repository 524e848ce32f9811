// berth-agent: the sandbox agent. Started by berth-driver-sandbox as PID 1
// of a sandbox's pid, mount, uts and ipc namespaces (joining its network
// namespace); serves agent/v1 (agent_service.h) on --socket until SIGTERM,
// SIGINT or DestroySandbox, then exits 0.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "services/agent/agent_service.h"
#include "services/agent/boot.h"
#include "services/common/grpc_server.h"
#include "services/common/service_main.h"

ABSL_FLAG(std::string, socket, "",
          "Unix socket to serve agent/v1 on (required).");
ABSL_FLAG(std::string, sandbox_id, "",
          "The sandbox this agent runs; for logs.");
ABSL_FLAG(uint64_t, output_window_bytes, 1 << 20,
          "Unacknowledged output kept per output stream of a process; when "
          "it is full the agent stops reading that process's pipe.");

ABSL_FLAG(bool, container_namespaces, false,
          "Start each container's processes in pid and mount namespaces of "
          "their own, without the agent (they can neither signal nor ptrace "
          "it); needs CAP_SYS_ADMIN.");
ABSL_FLAG(std::string, hide_dir, "",
          "With --container_namespaces: a mount point (the directory of "
          "--socket) unmounted from the containers' view.");
ABSL_FLAG(int32_t, enter_root_fd, -1,
          "A descriptor of the directory to make this agent's root before "
          "anything else (berth-agent-boot passes the task's root this way, "
          "having started the agent in a root of its own libraries); "
          "-1: keep the root.");

namespace {

// The uid the host's root has in this process's user namespace if it is not
// mapped there (the kernel's overflow uid, normally 65534); nullopt in the
// host's namespace (an identity map of every uid).
std::optional<uid_t> HostRootAsSeenHere() {
  std::ifstream uid_map("/proc/self/uid_map");
  uid_t inside = 0, outside = 0, count = 0;
  if (uid_map >> inside >> outside >> count && inside == 0 && outside == 0 &&
      count == 4294967295u) {
    return std::nullopt;
  }
  uid_t overflow = 0;
  if (std::ifstream("/proc/sys/kernel/overflowuid") >> overflow) {
    return overflow;
  }
  return 65534;
}

constexpr char kUsage[] =
    "berth-agent: the agent inside a berth sandbox; starts its processes and "
    "carries their I/O\n"
    "usage: berth-agent --socket=PATH [--sandbox_id=ID] "
    "[--output_window_bytes=N] [--container_namespaces [--hide_dir=DIR]] "
    "[--enter_root_fd=N]";

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args =
      berth::InitService(argc, argv, kUsage, berth::agent::kAgentVersion);
  // First: until then the root is berth-agent-boot's, which holds nothing
  // but the agent's loader, libraries and /proc (no /etc); nothing has
  // been logged yet (the first log line reads the time zone, which must be
  // the task root's as before).
  if (const int root_fd = absl::GetFlag(FLAGS_enter_root_fd); root_fd >= 0) {
    if (!berth::agent::EnterRootFromDescriptor(root_fd)) {
      PLOG(ERROR) << "entering the root open as descriptor " << root_fd
                  << " (--enter_root_fd)";
      return 1;
    }
  }
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  const std::string socket = absl::GetFlag(FLAGS_socket);
  if (socket.empty()) {
    LOG(ERROR) << "--socket is required; see --help";
    return 2;
  }
  const uint64_t window = absl::GetFlag(FLAGS_output_window_bytes);
  if (window == 0) {
    LOG(ERROR) << "--output_window_bytes must be positive";
    return 2;
  }
  berth::agent::AgentOptions options;
  options.sandbox_id = absl::GetFlag(FLAGS_sandbox_id);
  options.output_window_bytes = window;
  options.container_namespaces = absl::GetFlag(FLAGS_container_namespaces);
  options.hide_dir = absl::GetFlag(FLAGS_hide_dir);
  if (!options.hide_dir.empty() && !options.container_namespaces) {
    LOG(ERROR) << "--hide_dir needs --container_namespaces";
    return 2;
  }
  // Called once DestroySandbox has answered: ends WaitForShutdownSignal.
  static std::atomic<bool> destroyed{false};
  options.on_destroyed = [] {
    destroyed = true;
    kill(getpid(), SIGTERM);
  };
  berth::agent::AgentServiceImpl service(options);

  berth::UnixGrpcServer::Options server_options;
  server_options.socket_path = socket;
  server_options.services = {&service};
  // Its callers are berth-proxy and the driver, root on the host. In a user
  // namespace that does not map the host's root they call as the overflow
  // uid: allowed too. The socket's directory (the host's <task_dir>/.berth,
  // 0700, the agent's) keeps anyone else on the host away from it.
  if (std::optional<uid_t> overflow = HostRootAsSeenHere();
      overflow.has_value()) {
    server_options.access.uids.push_back(*overflow);
  }
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> server =
      berth::UnixGrpcServer::Start(server_options);
  if (!server.ok()) {
    LOG(ERROR) << server.status();
    return 1;
  }
  LOG(INFO) << "berth-agent " << berth::agent::kAgentVersion << " of sandbox "
            << options.sandbox_id << " serving on " << socket << " (pid "
            << getpid() << ")";
  berth::WaitForShutdownSignal();
  // After DestroySandbox there is nothing left to finish: no grace. (A grace
  // would be spent in full while a client's idle connection, sent GOAWAY,
  // is not closed by its side: gRPC waits for it until the deadline.)
  (*server)->Shutdown(destroyed ? absl::ZeroDuration() : absl::Seconds(5));
  return 0;
}
