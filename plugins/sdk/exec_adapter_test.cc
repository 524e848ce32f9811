// The exec-stream adapters, through a real gRPC server on a Unix socket.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/sdk/exec.h"
#include "plugins/sdk/fake_driver.h"
#include "plugins/sdk/plugin_server.h"
#include "plugins/sdk/testing.h"

namespace berth::plugin {
namespace {

using ::berth::driver::v1::DriverService;
using ::berth::driver::v1::ExecTaskStreamingRequest;
using ::berth::driver::v1::ExecTaskStreamingResponse;
using ::berth::plugin::testing::CapturingLogSink;
using ::berth::plugin::testing::ShortTempDir;
using ::testing::HasSubstr;

uint64_t Fnv1a(uint64_t hash, absl::string_view data) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}
constexpr uint64_t kFnvOffset = 14695981039346656037ULL;

// What came back on one ExecTaskStreaming call.
struct ExecResult {
  std::string out;
  std::string err;
  bool has_exit = false;
  driver::v1::ExitResult exit;
  int frames_after_exit = 0;
  size_t largest_frame = 0;
  uint64_t out_hash = kFnvOffset;
  bool keep_out = true;
  grpc::Status status;
};

using ExecStream = grpc::ClientReaderWriter<ExecTaskStreamingRequest,
                                            ExecTaskStreamingResponse>;

ExecTaskStreamingRequest SetupFrame(const std::string& task_id,
                                    std::vector<std::string> command,
                                    bool tty = false) {
  ExecTaskStreamingRequest request;
  request.mutable_setup()->set_task_id(task_id);
  for (std::string& word : command) request.mutable_setup()->add_command(word);
  request.mutable_setup()->set_tty(tty);
  return request;
}

ExecTaskStreamingRequest Stdin(absl::string_view data) {
  ExecTaskStreamingRequest request;
  request.set_stdin(std::string(data));
  return request;
}

ExecTaskStreamingRequest StdinClose() {
  ExecTaskStreamingRequest request;
  request.mutable_stdin_close();
  return request;
}

ExecTaskStreamingRequest Resize(uint32_t rows, uint32_t columns) {
  ExecTaskStreamingRequest request;
  request.mutable_resize()->set_rows(rows);
  request.mutable_resize()->set_columns(columns);
  return request;
}

// Reads every response, then half-closes and finishes the call.
void ReadAll(ExecStream* stream, ExecResult* result) {
  ExecTaskStreamingResponse response;
  while (stream->Read(&response)) {
    if (result->has_exit) ++result->frames_after_exit;
    switch (response.frame_case()) {
      case ExecTaskStreamingResponse::kStdout:
        result->largest_frame =
            std::max(result->largest_frame, response.stdout().size());
        result->out_hash = Fnv1a(result->out_hash, response.stdout());
        if (result->keep_out) result->out += response.stdout();
        break;
      case ExecTaskStreamingResponse::kStderr:
        result->largest_frame =
            std::max(result->largest_frame, response.stderr().size());
        result->err += response.stderr();
        break;
      case ExecTaskStreamingResponse::kExit:
        result->has_exit = true;
        result->exit = response.exit();
        break;
      default:
        break;
    }
  }
}

class ExecAdapterTest : public ::testing::Test {
 protected:
  void StartServer(Driver& driver) {
    absl::StatusOr<std::unique_ptr<PluginServer>> server =
        PluginServer::Start(driver, {dir_.Join("fake.sock"), absl::Seconds(2)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        testing::Dial(server_->socket_path());
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = DriverService::NewStub(*channel);
    // One running task, "t1".
    driver::v1::StartTaskRequest start;
    start.mutable_task()->set_id("t1");
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                    R"({"command": "x"})",
                    start.mutable_task()->mutable_driver_config())
                    .ok());
    grpc::ClientContext context;
    driver::v1::StartTaskResponse started;
    ASSERT_TRUE(stub_->StartTask(&context, start, &started).ok());
  }

  // Runs one exec: sends `requests` (then half-closes) from a thread while
  // reading the responses.
  ExecResult Exec(const std::vector<ExecTaskStreamingRequest>& requests,
                  bool keep_out = true) {
    ExecResult result;
    result.keep_out = keep_out;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    std::unique_ptr<ExecStream> stream = stub_->ExecTaskStreaming(&context);
    std::thread writer([&] {
      for (const ExecTaskStreamingRequest& request : requests) {
        if (!stream->Write(request)) break;
      }
      stream->WritesDone();
    });
    ReadAll(stream.get(), &result);
    writer.join();
    result.status = stream->Finish();
    return result;
  }

  ShortTempDir dir_;
  std::unique_ptr<PluginServer> server_;
  std::unique_ptr<DriverService::Stub> stub_;
};

TEST_F(ExecAdapterTest, EchoesStdinToStdout) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  ExecResult result = Exec({SetupFrame("t1", {"echo"}), Stdin("hello "),
                            Stdin("world"), StdinClose()});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.out, "hello world");
  EXPECT_EQ(result.err, "");
  ASSERT_TRUE(result.has_exit);
  EXPECT_EQ(result.exit.exit_code(), 0);
  EXPECT_TRUE(result.exit.has_exited_at());
  EXPECT_EQ(result.frames_after_exit, 0);
}

TEST_F(ExecAdapterTest, HalfCloseEndsStdin) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  // No stdin_close: the half-close after the last request ends stdin.
  ExecResult result = Exec({SetupFrame("t1", {"echo"}), Stdin("abc")});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.out, "abc");
  EXPECT_TRUE(result.has_exit);
}

TEST_F(ExecAdapterTest, StdoutStderrAndExitCode) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  ExecResult result = Exec({SetupFrame("t1", {"mixed"})});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.out, "out");
  EXPECT_EQ(result.err, "err");
  ASSERT_TRUE(result.has_exit);
  EXPECT_EQ(result.exit.exit_code(), 43);
  EXPECT_EQ(result.exit.signal(), 0);
}

TEST_F(ExecAdapterTest, LargeTransferKeepsEveryByte) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  constexpr size_t kTotal = 32 << 20;
  std::vector<ExecTaskStreamingRequest> requests = {SetupFrame("t1", {"echo"})};
  uint64_t sent_hash = kFnvOffset;
  uint64_t state = 12345;
  for (size_t sent = 0; sent < kTotal; sent += kMaxExecFrameBytes) {
    std::string chunk(std::min(kMaxExecFrameBytes, kTotal - sent), '\0');
    for (char& c : chunk) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      c = static_cast<char>(state >> 56);
    }
    sent_hash = Fnv1a(sent_hash, chunk);
    requests.push_back(Stdin(chunk));
  }
  requests.push_back(StdinClose());

  ExecResult result = Exec(requests, /*keep_out=*/false);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.out_hash, sent_hash);
  EXPECT_LE(result.largest_frame, kMaxExecFrameBytes);
  ASSERT_TRUE(result.has_exit);
  EXPECT_EQ(result.frames_after_exit, 0);
}

TEST_F(ExecAdapterTest, LargeWriteIsSplitIntoFramesOfAtMost32KiB) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  ExecResult result = Exec({SetupFrame("t1", {"big", "100000"})});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.out, std::string(100000, 'x'));
  EXPECT_EQ(result.largest_frame, kMaxExecFrameBytes);
}

TEST_F(ExecAdapterTest, ResizeStormNeverBlocksStdinAndTheLastWins) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  // The driver takes no resize until stdin ends: thousands of resizes must
  // neither hold stdin up nor queue; only the last is kept.
  std::vector<ExecTaskStreamingRequest> requests = {
      SetupFrame("t1", {"resize-last"}, /*tty=*/true)};
  std::string sent;
  for (int i = 1; i <= 5000; ++i) {
    requests.push_back(Resize(i, 1000 + i));
    if (i % 10 == 0) {
      const std::string line = absl::StrCat("line ", i, "\n");
      sent += line;
      requests.push_back(Stdin(line));
    }
  }
  requests.push_back(Resize(33, 111));
  requests.push_back(StdinClose());

  ExecResult result = Exec(requests);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.out, sent);
  EXPECT_EQ(result.err, "33x111 empty");
  EXPECT_TRUE(result.has_exit);
}

TEST_F(ExecAdapterTest, ExitFrameComesAfterAllOutput) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  constexpr int kLines = 300;
  ExecResult result =
      Exec({SetupFrame("t1", {"concurrent", absl::StrCat(kLines)})});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_TRUE(result.has_exit);
  EXPECT_EQ(result.exit.exit_code(), 7);
  EXPECT_EQ(result.frames_after_exit, 0);
  EXPECT_LE(result.largest_frame, kMaxExecFrameBytes);
  for (const auto& [name, output] :
       {std::pair<std::string, std::string>{"out", result.out},
        {"err", result.err}}) {
    std::vector<std::string> lines =
        absl::StrSplit(output, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), kLines) << name;
    for (int i = 0; i < kLines; ++i) {
      EXPECT_EQ(lines[i], absl::StrCat(name, " ", i, " ",
                                       std::string((i * 997) % 40000, '.')))
          << name << " line " << i;
    }
  }
}

TEST_F(ExecAdapterTest, DriverWithNeitherInterfaceIsUnimplemented) {
  testing::FakeDriver driver;  // no exec interface
  StartServer(driver);
  grpc::ClientContext context;
  driver::v1::GetCapabilitiesResponse capabilities;
  ASSERT_TRUE(stub_->GetCapabilities(&context, {}, &capabilities).ok());
  EXPECT_FALSE(capabilities.capabilities().exec_streaming());
  EXPECT_FALSE(capabilities.capabilities().exec_tty());

  ExecResult result = Exec({SetupFrame("t1", {"echo"}), StdinClose()});
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(result.status.error_message(), HasSubstr("ExecTaskStreaming"));
  EXPECT_FALSE(result.has_exit);
}

TEST_F(ExecAdapterTest, DriverWithAnInterfaceHasTheCapability) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  grpc::ClientContext context;
  driver::v1::GetCapabilitiesResponse capabilities;
  ASSERT_TRUE(stub_->GetCapabilities(&context, {}, &capabilities).ok());
  EXPECT_TRUE(capabilities.capabilities().exec_streaming());
  EXPECT_TRUE(capabilities.capabilities().exec_tty());
}

TEST_F(ExecAdapterTest, CallerCancellationReachesTheDriverAndIsNotAnError) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  // The end of the call is logged at VLOG(1): capture that too, to know when
  // the handler is done.
  const int verbosity = FLAGS_v;
  FLAGS_v = 1;
  CapturingLogSink log(google::GLOG_INFO);
  {
    grpc::ClientContext context;
    std::unique_ptr<ExecStream> stream = stub_->ExecTaskStreaming(&context);
    ASSERT_TRUE(stream->Write(SetupFrame("t1", {"wait-cancel"})));
    ASSERT_TRUE(driver.wait_cancel_started().WaitForNotificationWithTimeout(
        absl::Seconds(30)));
    context.TryCancel();
    ExecTaskStreamingResponse response;
    EXPECT_FALSE(stream->Read(&response));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(testing::WaitFor([&] { return driver.cancelled_execs() == 1; }));
  EXPECT_TRUE(testing::WaitFor([&] {
    for (const CapturingLogSink::Entry& entry : log.entries()) {
      if (absl::StrContains(entry.message,
                            "ExecTaskStreaming cancelled by caller")) {
        return true;
      }
    }
    return false;
  }));
  FLAGS_v = verbosity;
  for (const CapturingLogSink::Entry& entry : log.entries()) {
    EXPECT_LT(entry.severity, google::GLOG_WARNING) << entry.message;
  }
}

TEST_F(ExecAdapterTest, RawInterfaceGetsTheMessages) {
  testing::FakeRawExecDriver driver;
  StartServer(driver);
  grpc::ClientContext context;
  driver::v1::GetCapabilitiesResponse capabilities;
  ASSERT_TRUE(stub_->GetCapabilities(&context, {}, &capabilities).ok());
  EXPECT_TRUE(capabilities.capabilities().exec_streaming());

  ExecResult result =
      Exec({SetupFrame("t1", {"run", "this"}), Stdin("one "), Resize(10, 20),
            Stdin(std::string(70000, 'y')), StdinClose()});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.out, "setup: run this\none " + std::string(70000, 'y'));
  EXPECT_LE(result.largest_frame, kMaxExecFrameBytes) << "Send splits";
  ASSERT_TRUE(result.has_exit);
  EXPECT_EQ(result.exit.exit_code(), 5);
}

TEST_F(ExecAdapterTest, BadSetupIsInvalidArgument) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  ExecResult no_setup = Exec({Stdin("x")});
  EXPECT_EQ(no_setup.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_setup.status.error_message(), HasSubstr("setup"));

  ExecResult no_task = Exec({SetupFrame("", {"echo"})});
  EXPECT_EQ(no_task.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_task.status.error_message(), HasSubstr("setup.task_id"));

  ExecResult no_command = Exec({SetupFrame("t1", {})});
  EXPECT_EQ(no_command.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_command.status.error_message(), HasSubstr("setup.command"));
}

TEST_F(ExecAdapterTest, UnknownOrExitedTaskIsRefusedBeforeTheDriverRuns) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  ExecResult unknown = Exec({SetupFrame("nope", {"echo"})});
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.status.error_message(), HasSubstr("nope"));

  driver.Exit("t1", 0);
  ExecResult exited = Exec({SetupFrame("t1", {"echo"})});
  EXPECT_EQ(exited.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(exited.status.error_message(), HasSubstr("t1"));
}

TEST_F(ExecAdapterTest, DriverErrorIsTheCallsStatus) {
  testing::FakeExecDriver driver;
  StartServer(driver);
  ExecResult result = Exec({SetupFrame("t1", {"no-such-behaviour"})});
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(result.status.error_message(), HasSubstr("no-such-behaviour"));
  EXPECT_FALSE(result.has_exit);
}

}  // namespace
}  // namespace berth::plugin
