// The flags every berth service that serves a socket takes, defined once
// here (a service's main links :server_flags), and how they reach its
// UnixGrpcServer::Options.
//
//   --max_message_bytes (default 4194304, 4 MiB): the largest message the
//     service takes or sends; a larger one fails its call with
//     RESOURCE_EXHAUSTED.

#ifndef SERVICES_COMMON_SERVER_FLAGS_H_
#define SERVICES_COMMON_SERVER_FLAGS_H_

#include <cstdint>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "services/common/grpc_server.h"

ABSL_DECLARE_FLAG(int64_t, max_message_bytes);

namespace berth {

// Sets what the shared flags say in `options`; INVALID_ARGUMENT naming the
// flag for a value out of range (at least 1 KiB, at most 2 GiB - 1).
absl::Status ApplyServerFlags(UnixGrpcServer::Options* options);

}  // namespace berth

#endif  // SERVICES_COMMON_SERVER_FLAGS_H_
