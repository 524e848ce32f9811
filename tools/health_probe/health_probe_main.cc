// berth-health-probe: whether a berth service answers on its Unix socket, for
// scripts (tools/dev judges a service alive by this, not by a pid: the pid of
// a killed service may be a zombie or belong to another process by now).
//
//   berth-health-probe --socket=/run/berth/node.sock [--service=NAME]
//                      [--timeout=2s] [--peer_pid]
//
// Calls grpc.health.v1.Health/Check for --service ("" by default: the
// server as a whole; "plugin" for a driver plugin) within --timeout. Exits 0
// when it is SERVING, 1 when the socket does not answer or answers anything
// else (the reason on stderr), 2 for bad arguments. With --peer_pid it
// prints, on stdout, the pid of the process listening on the socket
// (SO_PEERCRED of a connection to it), whether or not it answers: that is
// the process to stop when it does not.
#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/common/unix_socket.h"

ABSL_FLAG(std::string, socket, "", "The service's Unix socket (required).");
ABSL_FLAG(std::string, service, "",
          "The health service name to check (\"\": the server).");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(2),
          "How long the service has to answer.");
ABSL_FLAG(bool, peer_pid, false,
          "Print the pid of the process listening on the socket.");

namespace {

// The pid of the process that listens on `path`, or -1 (reason in *why).
pid_t PeerPid(const std::string& path, std::string* why) {
  // A full backlog leaves no connection to ask.
  absl::StatusOr<berth::base::UniqueFd> fd = berth::ConnectUnixSocket(path);
  if (!fd.ok()) {
    *why = std::string(fd.status().message());
    return -1;
  }
  ucred cred = {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd->get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    *why = absl::StrCat("SO_PEERCRED on ", path, ": ", std::strerror(errno));
    return -1;
  }
  if (cred.pid <= 0) {
    *why = absl::StrCat("no peer pid for ", path);
    return -1;
  }
  return cred.pid;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "exits 0 if the berth service on --socket answers its health check\n"
      "usage: berth-health-probe --socket=PATH [--service=NAME] "
      "[--timeout=2s] [--peer_pid]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string path = absl::GetFlag(FLAGS_socket);
  if (args.size() > 1 || path.empty()) {
    std::fprintf(stderr, "berth-health-probe: --socket=PATH is required%s%s\n",
                 args.size() > 1 ? "; unexpected argument " : "",
                 args.size() > 1 ? args[1] : "");
    return 2;
  }
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  if (absl::GetFlag(FLAGS_peer_pid)) {
    std::string why;
    const pid_t pid = PeerPid(path, &why);
    if (pid > 0) {
      std::printf("%d\n", static_cast<int>(pid));
    } else {
      std::fprintf(stderr, "berth-health-probe: %s\n", why.c_str());
    }
  }
  // A subchannel pool of its own: never a connection another channel of
  // this process made (there is none, but the probe stays honest if reused).
  grpc::ChannelArguments channel_args;
  channel_args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      absl::StrCat("unix:", path), grpc::InsecureChannelCredentials(),
      channel_args);
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    std::fprintf(stderr, "berth-health-probe: cannot connect to %s within %s\n",
                 path.c_str(), absl::FormatDuration(timeout).c_str());
    return 1;
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(absl::GetFlag(FLAGS_service));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = grpc::health::v1::Health::NewStub(channel)->Check(
      &context, request, &response);
  if (!status.ok()) {
    std::fprintf(stderr,
                 "berth-health-probe: %s does not answer its health check "
                 "within %s: %s\n",
                 path.c_str(), absl::FormatDuration(timeout).c_str(),
                 status.error_message().c_str());
    return 1;
  }
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    std::fprintf(stderr, "berth-health-probe: %s: service \"%s\" is %s\n",
                 path.c_str(), request.service().c_str(),
                 grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                     response.status())
                     .c_str());
    return 1;
  }
  return 0;
}
