#include "services/common/dial.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "services/common/unix_socket.h"

namespace berth {

grpc::ChannelArguments UnixChannelArguments() {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  arguments.SetMaxSendMessageSize(kChannelMaxMessageBytes);
  arguments.SetMaxReceiveMessageSize(kChannelMaxMessageBytes);
  return arguments;
}

std::string WhyNotConnected(const std::string& socket_path) {
  absl::StatusOr<SocketPathState> state = ProbeSocketPath(socket_path);
  if (!state.ok()) return std::string(state.status().message());
  switch (*state) {
    case SocketPathState::kAbsent:
      return "no such socket";
    case SocketPathState::kNotSocket:
      return "not a socket";
    case SocketPathState::kStale:
      return "connection refused (a stale socket: nobody listens on it)";
    case SocketPathState::kLive:
      return "the socket accepts connections but no gRPC connection was made";
  }
  return "unknown";
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> DialUnix(
    const std::string& socket_path, absl::Duration timeout) {
  if (absl::Status length = CheckSocketPathLength(socket_path); !length.ok()) {
    return length;
  }
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      absl::StrCat("unix:", socket_path), grpc::InsecureChannelCredentials(),
      UnixChannelArguments());
  if (channel->WaitForConnected(absl::ToChronoTime(
          absl::Now() + std::max(timeout, absl::ZeroDuration())))) {
    return channel;
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot connect to ", socket_path, " within ",
      absl::FormatDuration(timeout), ": ", WhyNotConnected(socket_path)));
}

}  // namespace berth
