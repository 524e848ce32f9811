#include "services/common/server_flags.h"

#include <cstdint>
#include <limits>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "services/common/grpc_server.h"

ABSL_FLAG(int64_t, max_message_bytes, berth::kDefaultMaxMessageBytes,
          "The largest gRPC message, in bytes, this service takes or sends "
          "on its socket (default 4 MiB); a larger one fails its call with "
          "RESOURCE_EXHAUSTED.");

namespace berth {

absl::Status ApplyServerFlags(UnixGrpcServer::Options* options) {
  constexpr int64_t kMin = 1024;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (max_message_bytes < kMin || max_message_bytes > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_bytes=", max_message_bytes,
                     ": must be between ", kMin, " and ", kMax));
  }
  options->max_message_bytes = max_message_bytes;
  return absl::OkStatus();
}

}  // namespace berth
