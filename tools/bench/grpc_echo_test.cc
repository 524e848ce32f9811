#include "tools/bench/grpc_echo.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/benchmarks/bench_util.h"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"

namespace berth::bench {
namespace {

using driver::v1::ExecTaskStreamingRequest;
using driver::v1::ExecTaskStreamingResponse;

// What came back on one call.
struct Echoed {
  std::string stdout_bytes;
  int stdout_frames = 0;
  int exit_frames = 0;
  bool exit_last = false;
  grpc::Status status;
};

class GrpcEchoTest : public testing::Test {
 protected:
  void SetUp() override {
    UnixGrpcServer::Options options;
    options.socket_path = dir_.Join("echo.sock");
    options.services = {&service_};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(options.socket_path, absl::Seconds(10));
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = driver::v1::DriverService::NewStub(*channel);
  }

  // Writes `requests` (on another thread, then WritesDone unless told not
  // to) while reading everything back.
  Echoed Call(const std::vector<ExecTaskStreamingRequest>& requests,
              bool writes_done = true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    auto stream = stub_->ExecTaskStreaming(&context);
    std::thread writer([&] {
      for (const ExecTaskStreamingRequest& request : requests) {
        if (!stream->Write(request)) return;
      }
      if (writes_done) stream->WritesDone();
    });
    Echoed echoed;
    ExecTaskStreamingResponse response;
    while (stream->Read(&response)) {
      echoed.exit_last = false;
      if (response.has_stdout()) {
        echoed.stdout_bytes += response.stdout();
        ++echoed.stdout_frames;
      } else if (response.has_exit()) {
        EXPECT_EQ(response.exit().exit_code(), 0);
        ++echoed.exit_frames;
        echoed.exit_last = true;
      }
    }
    writer.join();
    echoed.status = stream->Finish();
    return echoed;
  }

  static ExecTaskStreamingRequest SetupRequest() {
    ExecTaskStreamingRequest request;
    request.mutable_setup()->set_task_id("grpc-echo");
    request.mutable_setup()->add_command("cat");
    return request;
  }
  static ExecTaskStreamingRequest Stdin(std::string data) {
    ExecTaskStreamingRequest request;
    request.set_stdin(std::move(data));
    return request;
  }
  static ExecTaskStreamingRequest StdinClose() {
    ExecTaskStreamingRequest request;
    request.mutable_stdin_close();
    return request;
  }

  plugin::benchmarks::TempDir dir_;
  EchoService service_;
  std::unique_ptr<UnixGrpcServer> server_;
  std::unique_ptr<driver::v1::DriverService::Stub> stub_;
};

// More than the queue, in frames of every size up to 32 KiB: all of it back,
// in order, frame for frame, then one exit frame.
TEST_F(GrpcEchoTest, EchoesEveryFrameThenExits) {
  std::vector<ExecTaskStreamingRequest> requests = {SetupRequest()};
  std::string sent;
  int frames = 0;
  for (size_t size = 1; sent.size() < 4 * kEchoQueueBytes; size += 4099) {
    std::string data;
    for (size_t i = 0; i < size % (32 * 1024) + 1; ++i) {
      data.push_back(static_cast<char>((sent.size() + i) * 131 % 251));
    }
    sent += data;
    requests.push_back(Stdin(std::move(data)));
    ++frames;
    if (frames % 7 == 0) {  // ignored
      ExecTaskStreamingRequest resize;
      resize.mutable_resize()->set_rows(24);
      requests.push_back(resize);
    }
  }
  requests.push_back(StdinClose());
  requests.push_back(Stdin("after the close: ignored"));
  const Echoed echoed = Call(requests);
  EXPECT_TRUE(echoed.status.ok()) << echoed.status.error_message();
  EXPECT_EQ(echoed.stdout_bytes.size(), sent.size());
  EXPECT_TRUE(echoed.stdout_bytes == sent);
  EXPECT_EQ(echoed.stdout_frames, frames);
  EXPECT_EQ(echoed.exit_frames, 1);
  EXPECT_TRUE(echoed.exit_last);
}

// Without stdin_close, the half-close ends stdin.
TEST_F(GrpcEchoTest, HalfCloseEndsStdin) {
  const Echoed echoed = Call({SetupRequest(), Stdin("abc"), Stdin("def")});
  EXPECT_TRUE(echoed.status.ok()) << echoed.status.error_message();
  EXPECT_EQ(echoed.stdout_bytes, "abcdef");
  EXPECT_EQ(echoed.exit_frames, 1);
  EXPECT_TRUE(echoed.exit_last);
}

// stdin_close alone ends the call, before the caller half-closes.
TEST_F(GrpcEchoTest, StdinCloseEndsTheCall) {
  const Echoed echoed =
      Call({SetupRequest(), Stdin("abc"), StdinClose()}, /*writes_done=*/false);
  EXPECT_TRUE(echoed.status.ok()) << echoed.status.error_message();
  EXPECT_EQ(echoed.stdout_bytes, "abc");
  EXPECT_EQ(echoed.exit_frames, 1);
}

TEST_F(GrpcEchoTest, TheFirstRequestMustBeTheSetup) {
  const Echoed echoed = Call({Stdin("abc"), StdinClose()});
  EXPECT_EQ(echoed.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(echoed.status.error_message(),
            "ExecTaskStreaming: the first request must carry setup");
  EXPECT_EQ(echoed.stdout_frames + echoed.exit_frames, 0);
}

TEST_F(GrpcEchoTest, NoRequestAtAll) {
  const Echoed echoed = Call({});
  EXPECT_EQ(echoed.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A caller that goes away while the echo is held back by it (it never
// reads): the call ends, the server still serves, and it shuts down without
// waiting for the cancelled call.
TEST_F(GrpcEchoTest, CancelledWhileHeldBack) {
  grpc::ClientContext context;
  auto stream = stub_->ExecTaskStreaming(&context);
  std::thread writer([&] {
    if (!stream->Write(SetupRequest())) return;
    const ExecTaskStreamingRequest request = Stdin(std::string(32 * 1024, 'x'));
    // 4 MiB: past the echo's queue and gRPC's windows, so that a Write
    // blocks until the cancellation.
    for (int i = 0; i < 128; ++i) {
      if (!stream->Write(request)) return;
    }
  });
  absl::SleepFor(absl::Milliseconds(500));
  context.TryCancel();
  writer.join();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server still echoes.
  const Echoed echoed = Call({SetupRequest(), Stdin("abc")});
  EXPECT_TRUE(echoed.status.ok()) << echoed.status.error_message();
  EXPECT_EQ(echoed.stdout_bytes, "abc");
  // The cancelled call has ended by itself: Shutdown does not wait for its
  // grace period (it takes about a millisecond; the bound leaves room for
  // gRPC's pollers on a loaded machine, whose timeouts are 5 and 10 s).
  const absl::Time start = absl::Now();
  server_->Shutdown(absl::Seconds(60));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace berth::bench
