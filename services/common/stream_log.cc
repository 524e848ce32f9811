#include "services/common/stream_log.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "glog/logging.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "services/common/status.h"

namespace berth {

void LogStreamEnd(absl::string_view rpc_name, const grpc::Status& status,
                  bool caller_cancelled) {
  if (caller_cancelled || status.error_code() == grpc::StatusCode::CANCELLED) {
    VLOG(1) << rpc_name << " cancelled by caller";
    return;
  }
  if (status.ok()) {
    VLOG(1) << rpc_name << " finished";
    return;
  }
  LOG(WARNING) << rpc_name << " failed: "
               << absl::StatusCodeToString(FromGrpcStatus(status).code())
               << ": " << status.error_message();
}

void LogStreamEnd(absl::string_view rpc_name, const grpc::Status& status,
                  grpc::ServerContext* context) {
  LogStreamEnd(rpc_name, status, context != nullptr && context->IsCancelled());
}

}  // namespace berth
