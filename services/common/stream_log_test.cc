#include "services/common/stream_log.h"

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"
#include "services/common/test_service.grpc.pb.h"
#include "services/common/test_util.h"

namespace berth {
namespace {

using ::berth::testing::CapturingLogSink;
using ::berth::testing::ShortTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kRpc[] = "berth.common.test.TestService/Stream";

TEST(LogStreamEndTest, CancelledByCallerLogsNothingAtWarning) {
  CapturingLogSink log(google::GLOG_WARNING);
  // However the handler saw it end.
  LogStreamEnd(kRpc, grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"),
               /*caller_cancelled=*/false);
  LogStreamEnd(kRpc, grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"),
               /*caller_cancelled=*/true);
  LogStreamEnd(kRpc, grpc::Status(grpc::StatusCode::INTERNAL, "write failed"),
               /*caller_cancelled=*/true);
  LogStreamEnd(kRpc, grpc::Status::OK, /*caller_cancelled=*/true);
  LogStreamEnd(kRpc, grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"),
               static_cast<grpc::ServerContext*>(nullptr));
  EXPECT_THAT(log.entries(), IsEmpty());
}

TEST(LogStreamEndTest, OkLogsNothingAtWarning) {
  CapturingLogSink log(google::GLOG_WARNING);
  LogStreamEnd(kRpc, grpc::Status::OK, /*caller_cancelled=*/false);
  EXPECT_THAT(log.entries(), IsEmpty());
}

TEST(LogStreamEndTest, FailureLogsOneWarningNamingTheRpc) {
  CapturingLogSink log(google::GLOG_WARNING);
  LogStreamEnd(kRpc, grpc::Status(grpc::StatusCode::INTERNAL, "disk on fire"),
               /*caller_cancelled=*/false);
  ASSERT_EQ(log.entries().size(), 1);
  EXPECT_EQ(log.entries()[0].severity, google::GLOG_WARNING);
  EXPECT_THAT(
      log.entries()[0].message,
      AllOf(HasSubstr(kRpc), HasSubstr("INTERNAL"), HasSubstr("disk on fire")));
}

// Stream sends one message, waits for cancellation if asked, and returns the
// requested code; it logs its end with LogStreamEnd(..., context).
class StreamService final : public common::test::TestService::Service {
 public:
  grpc::Status Stream(
      grpc::ServerContext* context, const common::test::StreamRequest* request,
      grpc::ServerWriter<common::test::StreamResponse>* writer) override {
    writer->Write(common::test::StreamResponse());
    if (request->wait_for_cancel()) {
      // A sync handler has no cancellation callback: poll.
      while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
    }
    grpc::Status status(static_cast<grpc::StatusCode>(request->code()),
                        "handler says so");
    LogStreamEnd(kRpc, status, context);
    handled_.Notify();
    return status;
  }

  bool WaitHandled() {
    return handled_.WaitForNotificationWithTimeout(absl::Seconds(30));
  }

 private:
  absl::Notification handled_;
};

class LogStreamEndOverGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start({dir_.Join("s.sock"), {&service_}, true});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(dir_.Join("s.sock"), absl::Seconds(30));
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = common::test::TestService::NewStub(*channel);
  }

  ShortTempDir dir_;
  StreamService service_;
  std::unique_ptr<UnixGrpcServer> server_;
  std::unique_ptr<common::test::TestService::Stub> stub_;
};

TEST_F(LogStreamEndOverGrpcTest, StreamCancelledByCallerIsNoWarning) {
  CapturingLogSink log(google::GLOG_WARNING);
  grpc::ClientContext context;
  common::test::StreamRequest request;
  request.set_wait_for_cancel(true);
  // What a handler might return when its writes fail after the cancel.
  request.set_code(static_cast<int>(grpc::StatusCode::INTERNAL));
  auto reader = stub_->Stream(&context, request);
  common::test::StreamResponse response;
  ASSERT_TRUE(reader->Read(&response));
  context.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(service_.WaitHandled());
  EXPECT_THAT(log.entries(), IsEmpty());
}

TEST_F(LogStreamEndOverGrpcTest, StreamFailureIsOneWarning) {
  CapturingLogSink log(google::GLOG_WARNING);
  grpc::ClientContext context;
  common::test::StreamRequest request;
  request.set_code(static_cast<int>(grpc::StatusCode::INTERNAL));
  auto reader = stub_->Stream(&context, request);
  common::test::StreamResponse response;
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INTERNAL);
  ASSERT_TRUE(service_.WaitHandled());
  ASSERT_EQ(log.entries().size(), 1);
  EXPECT_THAT(log.entries()[0].message,
              AllOf(HasSubstr(kRpc), HasSubstr("INTERNAL")));
}

}  // namespace
}  // namespace berth
