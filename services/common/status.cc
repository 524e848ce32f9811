#include "services/common/status.h"

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace berth {
namespace {

// Both enums are google.rpc.Code: OK = 0 ... UNAUTHENTICATED = 16.
constexpr int kLastCanonicalCode = 16;

static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) ==
                  kLastCanonicalCode,
              "absl::StatusCode is not google.rpc.Code");
static_assert(static_cast<int>(grpc::StatusCode::UNAUTHENTICATED) ==
                  kLastCanonicalCode,
              "grpc::StatusCode is not google.rpc.Code");
static_assert(static_cast<int>(absl::StatusCode::kNotFound) ==
                  static_cast<int>(grpc::StatusCode::NOT_FOUND),
              "absl::StatusCode and grpc::StatusCode differ");
static_assert(static_cast<int>(absl::StatusCode::kDataLoss) ==
                  static_cast<int>(grpc::StatusCode::DATA_LOSS),
              "absl::StatusCode and grpc::StatusCode differ");

bool IsCanonical(int code) { return code >= 0 && code <= kLastCanonicalCode; }

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  return grpc::Status(IsCanonical(code) ? static_cast<grpc::StatusCode>(code)
                                        : grpc::StatusCode::UNKNOWN,
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  return absl::Status(IsCanonical(code) ? static_cast<absl::StatusCode>(code)
                                        : absl::StatusCode::kUnknown,
                      status.error_message());
}

}  // namespace berth
