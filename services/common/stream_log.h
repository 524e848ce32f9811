// How a server logs the end of a call, above all of a stream: a call that
// ends because its caller cancelled it is not an error and is not logged as
// one (CONTRIBUTING.md, "Code").

#ifndef SERVICES_COMMON_STREAM_LOG_H_
#define SERVICES_COMMON_STREAM_LOG_H_

#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace berth {

// Logs that the call `rpc_name` (e.g. "berth.driver.v1.DriverService/
// TaskStats") ended with `status`:
// - cancelled by its caller (`caller_cancelled`, or `status` is CANCELLED,
//   whatever else the handler saw): VLOG(1) "... cancelled by caller";
// - OK: VLOG(1);
// - any other failure: LOG(WARNING) naming the rpc, the code and the message.
void LogStreamEnd(absl::string_view rpc_name, const grpc::Status& status,
                  bool caller_cancelled);

// The same, with `caller_cancelled` from context->IsCancelled(). Call it in
// the handler, before it returns. `context` may be null (not cancelled).
void LogStreamEnd(absl::string_view rpc_name, const grpc::Status& status,
                  grpc::ServerContext* context);

}  // namespace berth

#endif  // SERVICES_COMMON_STREAM_LOG_H_
