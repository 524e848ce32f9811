// DriverService.AttachTask as the SDK serves it on Driver::AttachTask.

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/sdk/attach.h"
#include "plugins/sdk/fake_driver.h"
#include "plugins/sdk/plugin_server.h"
#include "plugins/sdk/testing.h"

namespace berth::plugin {
namespace {

namespace dv1 = ::berth::driver::v1;
using ::berth::plugin::testing::ShortTempDir;

// Says hello, then answers each stdin in upper case until stdin_close (then
// returns OK); task "quick" returns at once after a "bye"; "wait" waits for
// its cancellation.
class EchoDriver : public testing::FakeDriver {
 public:
  absl::Status AttachTask(AttachTaskStream* stream) override {
    const std::string& id = stream->setup().task_id();
    dv1::AttachTaskResponse response;
    if (id == "quick") {
      response.set_stdout("bye");
      stream->Send(response);
      return absl::OkStatus();
    }
    if (id == "wait") {
      waiting_.store(true);
      stream->cancel().WaitFor(absl::Seconds(30));
      saw_cancel_.store(stream->cancel().IsCancelled());
      return absl::OkStatus();
    }
    response.set_stdout(absl::StrCat("hello ", id, " ",
                                     stream->setup().terminal_size().rows()));
    if (!stream->Send(response)) return absl::CancelledError("gone");
    dv1::AttachTaskRequest request;
    while (stream->Recv(&request)) {
      if (request.has_stdin_close()) return absl::OkStatus();
      if (request.has_resize()) {
        response.set_stderr(absl::StrCat("size ", request.resize().columns()));
      } else {
        response.set_stdout(absl::AsciiStrToUpper(request.stdin()));
      }
      if (!stream->Send(response)) return absl::CancelledError("gone");
    }
    return absl::FailedPreconditionError("the caller left without closing");
  }

  std::atomic<bool> waiting_{false};
  std::atomic<bool> saw_cancel_{false};
};

class AttachAdapterTest : public ::testing::Test {
 protected:
  void Serve(Driver& driver) {
    absl::StatusOr<std::unique_ptr<PluginServer>> server =
        PluginServer::Start(driver, {dir_.Join("d.sock"), absl::Seconds(2)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        testing::Dial(server_->socket_path());
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = dv1::DriverService::NewStub(*channel);
  }

  static dv1::AttachTaskRequest Setup(const std::string& id) {
    dv1::AttachTaskRequest request;
    request.mutable_setup()->set_task_id(id);
    request.mutable_setup()->mutable_terminal_size()->set_rows(24);
    return request;
  }

  ShortTempDir dir_;
  std::unique_ptr<PluginServer> server_;
  std::unique_ptr<dv1::DriverService::Stub> stub_;
};

TEST_F(AttachAdapterTest, RelaysBothWaysUntilTheDriverReturns) {
  EchoDriver driver;
  Serve(driver);
  grpc::ClientContext context;
  auto call = stub_->AttachTask(&context);
  ASSERT_TRUE(call->Write(Setup("web")));
  dv1::AttachTaskResponse response;
  ASSERT_TRUE(call->Read(&response));
  EXPECT_EQ(response.stdout(), "hello web 24");
  dv1::AttachTaskRequest request;
  request.set_stdin("abc");
  ASSERT_TRUE(call->Write(request));
  ASSERT_TRUE(call->Read(&response));
  EXPECT_EQ(response.stdout(), "ABC");
  request.mutable_resize()->set_columns(132);
  ASSERT_TRUE(call->Write(request));
  ASSERT_TRUE(call->Read(&response));
  EXPECT_EQ(response.stderr(), "size 132");
  request.mutable_stdin_close();
  ASSERT_TRUE(call->Write(request));
  EXPECT_FALSE(call->Read(&response));
  const grpc::Status status = call->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// The call ends when the driver returns, though the caller still has its
// side open (a read of its requests pending in the SDK).
TEST_F(AttachAdapterTest, EndsWhenTheDriverReturnsWithTheCallerStillOpen) {
  EchoDriver driver;
  Serve(driver);
  grpc::ClientContext context;
  auto call = stub_->AttachTask(&context);
  ASSERT_TRUE(call->Write(Setup("quick")));
  dv1::AttachTaskResponse response;
  ASSERT_TRUE(call->Read(&response));
  EXPECT_EQ(response.stdout(), "bye");
  EXPECT_FALSE(call->Read(&response));
  const grpc::Status status = call->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(AttachAdapterTest, CancelReachesTheDriver) {
  EchoDriver driver;
  Serve(driver);
  grpc::ClientContext context;
  auto call = stub_->AttachTask(&context);
  ASSERT_TRUE(call->Write(Setup("wait")));
  ASSERT_TRUE(testing::WaitFor([&] { return driver.waiting_.load(); }));
  context.TryCancel();
  dv1::AttachTaskResponse response;
  EXPECT_FALSE(call->Read(&response));
  EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(testing::WaitFor([&] { return driver.saw_cancel_.load(); }));
}

TEST_F(AttachAdapterTest, SetupWithoutATaskIsInvalid) {
  EchoDriver driver;
  Serve(driver);
  grpc::ClientContext context;
  auto call = stub_->AttachTask(&context);
  dv1::AttachTaskRequest request;
  request.set_stdin("x");
  ASSERT_TRUE(call->Write(request));
  dv1::AttachTaskResponse response;
  EXPECT_FALSE(call->Read(&response));
  const grpc::Status status = call->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "the first request of AttachTask must be a setup");
}

TEST_F(AttachAdapterTest, ADriverWithoutAttachAnswersUnimplemented) {
  testing::FakeDriver driver;
  Serve(driver);
  grpc::ClientContext context;
  auto call = stub_->AttachTask(&context);
  ASSERT_TRUE(call->Write(Setup("web")));
  dv1::AttachTaskResponse response;
  EXPECT_FALSE(call->Read(&response));
  const grpc::Status status = call->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(status.error_message(),
            "driver fake does not implement AttachTask");
}

}  // namespace
}  // namespace berth::plugin
