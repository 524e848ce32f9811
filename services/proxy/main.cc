// berth-proxy: serves berth.proxy.v1.ProxyService on <runtime_dir>/proxy.sock
// until SIGTERM or SIGINT, then exits 0.

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "services/common/grpc_server.h"
#include "services/common/server_flags.h"
#include "services/common/service_main.h"
#include "services/proxy/proxy_service.h"

ABSL_FLAG(std::string, runtime_dir, std::string(berth::kDefaultRuntimeDir),
          "Directory of berth's sockets; serves on <runtime_dir>/proxy.sock.");
ABSL_FLAG(std::string, state_dir, "/var/lib/berth",
          "berth's state directory: sandboxes and the tokens of started "
          "processes are kept in <state_dir>/proxy, so that shims reconnect "
          "to their processes after a restart of the proxy.");
ABSL_FLAG(absl::Duration, shim_timeout, absl::Seconds(30),
          "How long NewContainer and ExecCmd wait for the shim holding their "
          "token when the call gives no shim_timeout.");
ABSL_FLAG(absl::Duration, token_ttl, absl::Seconds(60),
          "How long an unclaimed token lives when AllocateToken gives no ttl.");
ABSL_FLAG(absl::Duration, agent_ping_timeout, absl::Seconds(2),
          "Deadline of the Ping with which RegisterSandbox checks an agent.");
ABSL_FLAG(absl::Duration, agent_call_timeout, absl::Seconds(10),
          "Deadline of every unary call to an agent.");

namespace {

constexpr char kUsage[] =
    "berth-proxy: the stdio of sandboxed processes between their shims and "
    "their sandboxes' agents; a process starts only once its shim is "
    "connected\n"
    "usage: berth-proxy [--runtime_dir=/run/berth] "
    "[--state_dir=/var/lib/berth] [--shim_timeout=30s] "
    "[--token_ttl=60s]";
constexpr char kVersion[] = "0.1.0";
constexpr absl::Duration kGrace = absl::Seconds(5);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::InitService(argc, argv, kUsage, kVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  berth::proxy::ProxyOptions options;
  options.default_shim_timeout = absl::GetFlag(FLAGS_shim_timeout);
  options.default_token_ttl = absl::GetFlag(FLAGS_token_ttl);
  options.ping_timeout = absl::GetFlag(FLAGS_agent_ping_timeout);
  options.agent_call_timeout = absl::GetFlag(FLAGS_agent_call_timeout);
  if (options.default_shim_timeout <= absl::ZeroDuration() ||
      options.default_token_ttl <= absl::ZeroDuration()) {
    LOG(ERROR) << "--shim_timeout and --token_ttl must be positive";
    return 2;
  }
  options.state_dir = absl::StrCat(absl::GetFlag(FLAGS_state_dir), "/proxy");
  berth::proxy::ProxyServiceImpl service(options);
  if (absl::Status restored = service.Restore(); !restored.ok()) {
    LOG(ERROR) << restored.message();
    return 1;
  }
  berth::UnixGrpcServer::Options server_options;
  server_options.socket_path =
      absl::StrCat(absl::GetFlag(FLAGS_runtime_dir), "/proxy.sock");
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
  LOG(INFO) << "serving on " << server_options.socket_path;
  berth::WaitForShutdownSignal();
  service.Stop();
  (*server)->Shutdown(kGrace);
  LOG(INFO) << "stopped";
  return 0;
}
