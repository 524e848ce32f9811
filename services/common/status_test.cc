#include "services/common/status.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(StatusTest, EveryCodeRoundTripsWithItsMessage) {
  for (int code = 1; code <= 16; ++code) {
    SCOPED_TRACE(code);
    const std::string message = absl::StrCat("message for code ", code);
    const absl::Status original(static_cast<absl::StatusCode>(code), message);

    const grpc::Status converted = ToGrpcStatus(original);
    EXPECT_EQ(static_cast<int>(converted.error_code()), code);
    EXPECT_EQ(converted.error_message(), message);
    EXPECT_EQ(FromGrpcStatus(converted), original);

    const grpc::Status grpc_original(static_cast<grpc::StatusCode>(code),
                                     message);
    const grpc::Status back = ToGrpcStatus(FromGrpcStatus(grpc_original));
    EXPECT_EQ(back.error_code(), grpc_original.error_code());
    EXPECT_EQ(back.error_message(), message);
  }
}

TEST(StatusTest, NamedCodesMatch) {
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("task t1")).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("gone")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(
      FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "late"))
          .code(),
      absl::StatusCode::kDeadlineExceeded);
}

TEST(StatusTest, OkIsOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(StatusTest, CodeOutsideTheCanonicalRangeIsUnknown) {
  const absl::Status odd(static_cast<absl::StatusCode>(42), "odd");
  EXPECT_EQ(ToGrpcStatus(odd).error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(ToGrpcStatus(odd).error_message(), "odd");
  EXPECT_EQ(
      FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(42), "odd")),
      absl::UnknownError("odd"));
}

}  // namespace
}  // namespace berth
