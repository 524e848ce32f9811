// Every agent/v1 call must carry a deadline (agent_service.h): one without
// is INVALID_ARGUMENT "a deadline is required".

#ifndef SERVICES_AGENT_DEADLINE_H_
#define SERVICES_AGENT_DEADLINE_H_

#include <chrono>

#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace berth::agent {

inline constexpr char kDeadlineRequired[] = "a deadline is required";

inline bool HasDeadline(const grpc::ServerContextBase& context) {
  return context.deadline() != std::chrono::system_clock::time_point::max();
}

inline absl::Time Deadline(const grpc::ServerContextBase& context) {
  return absl::FromChrono(context.deadline());
}

inline grpc::Status NoDeadline() {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, kDeadlineRequired);
}

}  // namespace berth::agent

#endif  // SERVICES_AGENT_DEADLINE_H_
