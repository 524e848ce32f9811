// Conversion between absl::Status (used inside berth) and grpc::Status (used
// only where an RPC returns or a client call comes back).

#ifndef SERVICES_COMMON_STATUS_H_
#define SERVICES_COMMON_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace berth {

// The same code and message as a grpc::Status. The codes map 1:1 (both are
// the canonical google.rpc.Code); a code outside the canonical range becomes
// UNKNOWN. Payloads are not carried.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The same code and message as an absl::Status. Error details are not carried.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace berth

#endif  // SERVICES_COMMON_STATUS_H_
