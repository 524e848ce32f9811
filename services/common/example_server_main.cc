// example_server: a berth service in miniature, for the tests of
// //services/common. Serves only grpc.health.v1.Health on --socket until
// SIGTERM or SIGINT, then shuts down gracefully and exits 0.

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "services/common/grpc_server.h"
#include "services/common/service_main.h"

ABSL_FLAG(std::string, socket, "",
          "Unix socket to serve on (required); its directory is created 0750.");
ABSL_FLAG(absl::Duration, grace, absl::Seconds(5),
          "How long calls in flight get to finish at shutdown.");

namespace {

constexpr char kUsage[] =
    "serves grpc.health.v1.Health on a Unix socket until SIGTERM or SIGINT\n"
    "usage: example_server --socket=PATH [--grace=5s] [--verbosity=N]";
constexpr char kVersion[] = "0.1.0";

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::InitService(argc, argv, kUsage, kVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  const std::string socket_path = absl::GetFlag(FLAGS_socket);
  if (socket_path.empty()) {
    LOG(ERROR) << "--socket is required; see --help";
    return 2;
  }

  berth::UnixGrpcServer::Options options;
  options.socket_path = socket_path;
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> server =
      berth::UnixGrpcServer::Start(options);
  if (!server.ok()) {
    LOG(ERROR) << server.status();
    return 1;
  }
  LOG(INFO) << "serving on " << socket_path;

  berth::WaitForShutdownSignal();
  (*server)->Shutdown(absl::GetFlag(FLAGS_grace));
  LOG(INFO) << "stopped";
  return 0;
}
