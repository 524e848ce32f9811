// The agent service, served on a temporary socket in this process, driven by
// a gRPC client (its calls block the test's thread; the server has its own).

#include "services/agent/agent_service.h"

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/agent/v1/agent.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "services/agent/output_window.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"

namespace berth::agent {
namespace {

using v1::ProcessIoRequest;
using v1::ProcessIoResponse;

constexpr char kPath[] = "PATH=/usr/local/bin:/usr/bin:/bin";

std::unique_ptr<grpc::ClientContext> Context(
    absl::Duration timeout = absl::Seconds(60)) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

v1::ProcessSpec Spec(std::vector<std::string> args) {
  v1::ProcessSpec spec;
  for (const std::string& arg : args) spec.add_args(arg);
  spec.add_env(kPath);
  return spec;
}

// A deterministic pattern of `size` bytes (not periodic in 32 KiB).
std::string Pattern(size_t size) {
  std::string data(size, '\0');
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    data[i] = static_cast<char>(x);
  }
  return data;
}

uint64_t Checksum(const std::string& data) {  // FNV-1a
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct IoResult {
  grpc::Status status;
  std::string out;
  std::string err;
  bool has_exit = false;
  v1::ProcessExit exit;
  bool offsets_consistent = true;
};

class AgentServiceTest : public ::testing::Test {
 protected:
  void StartAgent(size_t window = 1 << 20) {
    AgentOptions options;
    options.sandbox_id = "test-sandbox";
    options.output_window_bytes = window;
    options.on_destroyed = [this] { destroyed_ = true; };
    service_ = std::make_unique<AgentServiceImpl>(options);
    UnixGrpcServer::Options server_options;
    server_options.socket_path = dir_.Join("agent.sock");
    server_options.services = {service_.get()};
    auto server = UnixGrpcServer::Start(server_options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::AgentService::NewStub(
        grpc::CreateChannel("unix:" + server_options.socket_path,
                            grpc::InsecureChannelCredentials()));
  }

  void SetUp() override { StartAgent(); }

  void TearDown() override {
    stub_.reset();  // an open channel in this process holds Shutdown
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(2));
    server_.reset();
    service_.reset();
  }

  grpc::Status NewContainer(const std::string& container,
                            const std::string& process,
                            const v1::ProcessSpec& spec, int* pid = nullptr) {
    v1::NewContainerRequest request;
    request.set_container_id(container);
    request.set_process_id(process);
    *request.mutable_process() = spec;
    v1::NewContainerResponse response;
    grpc::Status status =
        stub_->NewContainer(Context().get(), request, &response);
    if (pid != nullptr) *pid = response.pid();
    return status;
  }

  grpc::Status ExecCmd(const std::string& container, const std::string& process,
                       const v1::ProcessSpec& spec, int* pid = nullptr) {
    v1::ExecCmdRequest request;
    request.set_container_id(container);
    request.set_process_id(process);
    *request.mutable_process() = spec;
    v1::ExecCmdResponse response;
    grpc::Status status = stub_->ExecCmd(Context().get(), request, &response);
    if (pid != nullptr) *pid = response.pid();
    return status;
  }

  grpc::Status Wait(const std::string& container, const std::string& process,
                    v1::ProcessExit* exit,
                    absl::Duration timeout = absl::Seconds(60)) {
    v1::WaitProcessRequest request;
    request.set_container_id(container);
    request.set_process_id(process);
    v1::WaitProcessResponse response;
    grpc::Status status =
        stub_->WaitProcess(Context(timeout).get(), request, &response);
    *exit = response.exit();
    return status;
  }

  grpc::Status Signal(const std::string& container, const std::string& process,
                      int sig) {
    v1::SignalRequest request;
    request.set_container_id(container);
    request.set_process_id(process);
    request.set_signal(sig);
    v1::SignalResponse response;
    return stub_->Signal(Context().get(), request, &response);
  }

  // A ProcessIo stream of c1's `process`, attached from offset 0; nullptr
  // when the attach could not be written.
  std::unique_ptr<grpc::ClientReaderWriter<ProcessIoRequest, ProcessIoResponse>>
  Attach(grpc::ClientContext* context, const std::string& process) {
    auto stream = stub_->ProcessIo(context);
    ProcessIoRequest request;
    request.mutable_attach()->set_container_id("c1");
    request.mutable_attach()->set_process_id(process);
    if (!stream->Write(request)) return nullptr;
    return stream;
  }

  // Attaches at the offsets, sends `input` (then closes stdin when
  // `close_stdin`), acknowledges as it goes and reads until the exit, or
  // until `stop_after` bytes of stdout when that is not 0 (then cancels).
  IoResult Io(const std::string& container, const std::string& process,
              uint64_t out_offset = 0, uint64_t err_offset = 0,
              const std::string& input = "", bool close_stdin = false,
              size_t stop_after = 0) {
    IoResult result;
    auto context = Context();
    auto stream = stub_->ProcessIo(context.get());
    ProcessIoRequest request;
    request.mutable_attach()->set_container_id(container);
    request.mutable_attach()->set_process_id(process);
    request.mutable_attach()->set_stdout_offset(out_offset);
    request.mutable_attach()->set_stderr_offset(err_offset);
    stream->Write(request);
    if (!input.empty()) {
      request.Clear();
      request.set_stdin(input);
      stream->Write(request);
    }
    if (close_stdin) {
      request.Clear();
      request.mutable_stdin_close();
      stream->Write(request);
    }
    uint64_t out_at = out_offset, err_at = err_offset, acked = 0;
    ProcessIoResponse response;
    while (stream->Read(&response)) {
      if (response.has_stdout_chunk()) {
        if (response.stdout_chunk().offset() != out_at) {
          result.offsets_consistent = false;
        }
        if (response.stdout_chunk().data().size() >
            berth::agent::kMaxOutputFrameBytes) {
          result.offsets_consistent = false;
        }
        out_at += response.stdout_chunk().data().size();
        result.out += response.stdout_chunk().data();
      } else if (response.has_stderr_chunk()) {
        if (response.stderr_chunk().offset() != err_at) {
          result.offsets_consistent = false;
        }
        err_at += response.stderr_chunk().data().size();
        result.err += response.stderr_chunk().data();
      } else if (response.has_exit()) {
        result.has_exit = true;
        result.exit = response.exit();
      }
      if (stop_after != 0 && result.out.size() >= stop_after) {
        // Acknowledge half of what arrived, then go away.
        request.Clear();
        request.mutable_ack()->set_stdout_offset(out_offset +
                                                 result.out.size() / 2);
        request.mutable_ack()->set_stderr_offset(err_at);
        stream->Write(request);
        context->TryCancel();
        while (stream->Read(&response)) {
        }
        result.status = stream->Finish();
        return result;
      }
      if (out_at + err_at - acked >= 16 * 1024) {
        request.Clear();
        request.mutable_ack()->set_stdout_offset(out_at);
        request.mutable_ack()->set_stderr_offset(err_at);
        stream->Write(request);
        acked = out_at + err_at;
      }
    }
    stream->WritesDone();
    result.status = stream->Finish();
    return result;
  }

  std::string WriteDataFile(const std::string& name, const std::string& data) {
    const std::string path = dir_.Join(name);
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }

  testing::ShortTempDir dir_;
  std::atomic<bool> destroyed_{false};
  std::unique_ptr<AgentServiceImpl> service_;
  std::unique_ptr<UnixGrpcServer> server_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
};

TEST_F(AgentServiceTest, PingAnswersVersionAndUptime) {
  v1::PingResponse response;
  ASSERT_TRUE(stub_->Ping(Context().get(), {}, &response).ok());
  EXPECT_EQ(response.agent_version(), kAgentVersion);
  EXPECT_GE(response.uptime().seconds(), 0);
}

TEST_F(AgentServiceTest, CallsWithoutADeadlineAreRefused) {
  grpc::ClientContext context;  // no deadline
  v1::PingResponse response;
  grpc::Status status = stub_->Ping(&context, {}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "a deadline is required");

  grpc::ClientContext wait_context;
  v1::WaitProcessResponse wait_response;
  status = stub_->WaitProcess(&wait_context, {}, &wait_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext new_context;
  v1::NewContainerRequest new_request;
  new_request.set_container_id("c");
  new_request.set_process_id("p");
  *new_request.mutable_process() = Spec({"true"});
  v1::NewContainerResponse new_response;
  status = stub_->NewContainer(&new_context, new_request, &new_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "a deadline is required");
  // Nothing was started.
  v1::ProcessExit exit;
  EXPECT_EQ(Wait("c", "p", &exit).error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext io_context;
  auto stream = stub_->ProcessIo(&io_context);
  ProcessIoResponse io_response;
  EXPECT_FALSE(stream->Read(&io_response));
  status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "a deadline is required");
}

TEST_F(AgentServiceTest, StartsAContainerAndReportsItsOutputAndExit) {
  int pid = 0;
  ASSERT_TRUE(NewContainer("c1", "init",
                           Spec({"sh", "-c", "echo out; echo err >&2; exit 3"}),
                           &pid)
                  .ok());
  EXPECT_GT(pid, 0);
  IoResult io = Io("c1", "init");
  ASSERT_TRUE(io.status.ok()) << io.status.error_message();
  EXPECT_EQ(io.out, "out\n");
  EXPECT_EQ(io.err, "err\n");
  ASSERT_TRUE(io.has_exit);
  EXPECT_EQ(io.exit.exit_code(), 3);
  EXPECT_EQ(io.exit.signal(), 0);
  EXPECT_TRUE(io.offsets_consistent);
  // WaitProcess answers at once for an exited process.
  v1::ProcessExit exit;
  ASSERT_TRUE(Wait("c1", "init", &exit).ok());
  EXPECT_EQ(exit.exit_code(), 3);
  EXPECT_GT(exit.exited_at().seconds(), 0);
}

TEST_F(AgentServiceTest, EnvAndCwdReachTheProcess) {
  v1::ProcessSpec spec = Spec({"sh", "-c", "echo $GREETING; pwd"});
  spec.add_env("GREETING=hello");
  spec.set_cwd("/");
  ASSERT_TRUE(NewContainer("c1", "init", spec).ok());
  IoResult io = Io("c1", "init");
  EXPECT_EQ(io.out, "hello\n/\n");
  EXPECT_EQ(io.exit.exit_code(), 0);
}

TEST_F(AgentServiceTest, ErrorsNameTheFieldOrId) {
  grpc::Status status = NewContainer("c1", "init", v1::ProcessSpec());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "process.args"))
      << status.error_message();

  status = NewContainer("c1", "init", Spec({"no-such-program-berth"}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(
      absl::StrContains(status.error_message(), "no-such-program-berth"))
      << status.error_message();

  v1::ProcessSpec bad_cwd = Spec({"true"});
  bad_cwd.set_cwd("/no/such/dir");
  status = NewContainer("c1", "init", bad_cwd);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "process.cwd"))
      << status.error_message();

  // The failures left nothing: the id is still free.
  ASSERT_TRUE(NewContainer("c1", "init", Spec({"sleep", "100"})).ok());
  status = NewContainer("c1", "other", Spec({"true"}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "c1"));
  status = ExecCmd("c1", "init", Spec({"true"}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "init"));

  status = ExecCmd("nope", "p", Spec({"true"}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "nope"));
  status = Signal("c1", "ghost", SIGTERM);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "ghost"));
  v1::ProcessExit exit;
  status = Wait("nope", "init", &exit);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "nope"));
  IoResult io = Io("c1", "ghost");
  EXPECT_EQ(io.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(io.status.error_message(), "ghost"));
  ASSERT_TRUE(Signal("c1", "init", SIGKILL).ok());
}

TEST_F(AgentServiceTest, SignalsReachAnyProcessAndWaitReportsThem) {
  ASSERT_TRUE(NewContainer("c1", "init", Spec({"sleep", "1000"})).ok());
  ASSERT_TRUE(ExecCmd("c1", "second", Spec({"sleep", "1000"})).ok());
  ASSERT_TRUE(Signal("c1", "second", SIGTERM).ok());
  v1::ProcessExit exit;
  ASSERT_TRUE(Wait("c1", "second", &exit).ok());
  EXPECT_EQ(exit.signal(), SIGTERM);
  EXPECT_EQ(exit.exit_code(), 0);
  // The first process is untouched: a wait for it runs into its deadline.
  grpc::Status status = Wait("c1", "init", &exit, absl::Milliseconds(300));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(Signal("c1", "init", SIGKILL).ok());
  ASSERT_TRUE(Wait("c1", "init", &exit).ok());
  EXPECT_EQ(exit.signal(), SIGKILL);
  // An exited process takes no more signals.
  EXPECT_EQ(Signal("c1", "init", SIGTERM).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(AgentServiceTest, InspectContainerNamesTheMainProcessAndItsEnd) {
  v1::InspectContainerRequest request;
  request.set_container_id("c1");
  v1::InspectContainerResponse response;
  // Never started: NOT_FOUND naming it.
  grpc::Status status =
      stub_->InspectContainer(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "\"c1\""))
      << status.error_message();

  ASSERT_TRUE(NewContainer("c1", "main-7", Spec({"sleep", "1000"})).ok());
  ASSERT_TRUE(ExecCmd("c1", "second", Spec({"true"})).ok());
  response.Clear();
  status = stub_->InspectContainer(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.main_process_id(), "main-7");
  EXPECT_FALSE(response.exited());

  ASSERT_TRUE(Signal("c1", "main-7", SIGKILL).ok());
  v1::ProcessExit exit;
  ASSERT_TRUE(Wait("c1", "main-7", &exit).ok());
  response.Clear();
  status = stub_->InspectContainer(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.main_process_id(), "main-7");
  EXPECT_TRUE(response.exited());

  request.clear_container_id();
  EXPECT_EQ(
      stub_->InspectContainer(Context().get(), request, &response).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(AgentServiceTest, TerminalProcessGetsItsSizeAndResizes) {
  v1::ProcessSpec spec =
      Spec({"sh", "-c", "stty size; read line; stty size; test -t 0"});
  spec.set_terminal(true);
  spec.mutable_terminal_size()->set_rows(24);
  spec.mutable_terminal_size()->set_columns(80);
  ASSERT_TRUE(NewContainer("c1", "tty", spec).ok());

  auto context = Context();
  auto stream = Attach(context.get(), "tty");
  ASSERT_NE(stream, nullptr);
  ProcessIoRequest request;
  std::string out;
  ProcessIoResponse response;
  while (!absl::StrContains(out, "24 80") && stream->Read(&response)) {
    EXPECT_FALSE(response.has_stderr_chunk());
    out += response.stdout_chunk().data();
  }
  ASSERT_TRUE(absl::StrContains(out, "24 80")) << out;
  v1::ResizeRequest resize;
  resize.set_container_id("c1");
  resize.set_process_id("tty");
  resize.mutable_size()->set_rows(40);
  resize.mutable_size()->set_columns(100);
  v1::ResizeResponse resize_response;
  ASSERT_TRUE(stub_->Resize(Context().get(), resize, &resize_response).ok());
  request.Clear();
  request.set_stdin("go\n");
  ASSERT_TRUE(stream->Write(request));
  v1::ProcessExit exit;
  bool has_exit = false;
  while (stream->Read(&response)) {
    out += response.stdout_chunk().data();
    if (response.has_exit()) {
      exit = response.exit();
      has_exit = true;
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(absl::StrContains(out, "40 100")) << out;
  ASSERT_TRUE(has_exit);
  EXPECT_EQ(exit.exit_code(), 0);  // stdin was a terminal

  // A process without a terminal cannot be resized.
  ASSERT_TRUE(ExecCmd("c1", "plain", Spec({"true"})).ok());
  grpc::Status status = stub_->Resize(
      Context().get(),
      [&] {
        v1::ResizeRequest r = resize;
        r.set_process_id("plain");
        return r;
      }(),
      &resize_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(AgentServiceTest, StdinAndItsCloseReachTheProcess) {
  ASSERT_TRUE(NewContainer("c1", "cat", Spec({"cat"})).ok());
  const std::string input = Pattern(300 * 1024);  // more than a pipe holds
  IoResult io = Io("c1", "cat", 0, 0, input, /*close_stdin=*/true);
  ASSERT_TRUE(io.status.ok()) << io.status.error_message();
  EXPECT_EQ(io.out.size(), input.size());
  EXPECT_EQ(Checksum(io.out), Checksum(input));
  ASSERT_TRUE(io.has_exit);
  EXPECT_EQ(io.exit.exit_code(), 0);
}

TEST_F(AgentServiceTest, StdinToAProcessThatClosedItIsDropped) {
  // The write to a pipe nobody reads fails (EPIPE), without a SIGPIPE that
  // would end the agent.
  ASSERT_TRUE(
      NewContainer("c1", "p",
                   Spec({"sh", "-c", "exec 0<&-; sleep 0.3; echo done"}))
          .ok());
  IoResult io = Io("c1", "p", 0, 0, Pattern(200 * 1024), /*close_stdin=*/true);
  ASSERT_TRUE(io.status.ok()) << io.status.error_message();
  EXPECT_EQ(io.out, "done\n");
  EXPECT_EQ(io.exit.exit_code(), 0);
}

TEST_F(AgentServiceTest, TenMegabytesOfOutputArriveWhole) {
  const std::string data = Pattern(10 * 1024 * 1024);
  const std::string path = WriteDataFile("data", data);
  ASSERT_TRUE(NewContainer("c1", "cat", Spec({"cat", path})).ok());
  IoResult io = Io("c1", "cat");
  ASSERT_TRUE(io.status.ok()) << io.status.error_message();
  EXPECT_TRUE(io.offsets_consistent);
  EXPECT_EQ(io.out.size(), data.size());
  EXPECT_EQ(Checksum(io.out), Checksum(data));
  EXPECT_EQ(io.exit.exit_code(), 0);
}

TEST_F(AgentServiceTest, ReattachWithOffsetsGetsTheRestExactlyOnce) {
  const std::string data = Pattern(4 * 1024 * 1024);
  const std::string path = WriteDataFile("data", data);
  ASSERT_TRUE(NewContainer("c1", "cat",
                           Spec({"sh", "-c",
                                 absl::StrCat("cat ", path, "; echo e >&2")}))
                  .ok());
  IoResult first = Io("c1", "cat", 0, 0, "", false, /*stop_after=*/600 * 1024);
  EXPECT_EQ(first.status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_GE(first.out.size(), 600u * 1024);
  EXPECT_TRUE(first.offsets_consistent);

  // An offset before what it acknowledged was dropped: OUT_OF_RANGE.
  IoResult too_old = Io("c1", "cat", 0, 0);
  EXPECT_EQ(too_old.status.error_code(), grpc::StatusCode::OUT_OF_RANGE)
      << too_old.status.error_message();
  // One beyond what was read is OUT_OF_RANGE too.
  IoResult too_new = Io("c1", "cat", data.size() + 1, 0);
  EXPECT_EQ(too_new.status.error_code(), grpc::StatusCode::OUT_OF_RANGE);

  IoResult rest = Io("c1", "cat", first.out.size(), first.err.size());
  ASSERT_TRUE(rest.status.ok()) << rest.status.error_message();
  EXPECT_TRUE(rest.offsets_consistent);
  const std::string all = first.out + rest.out;
  EXPECT_EQ(all.size(), data.size());
  EXPECT_EQ(Checksum(all), Checksum(data));
  EXPECT_EQ(first.err + rest.err, "e\n");
  ASSERT_TRUE(rest.has_exit);
  EXPECT_EQ(rest.exit.exit_code(), 0);
}

TEST_F(AgentServiceTest, ANewAttachReplacesTheOldStream) {
  ASSERT_TRUE(NewContainer("c1", "cat", Spec({"cat"})).ok());
  auto old_context = Context();
  auto old_stream = Attach(old_context.get(), "cat");
  ASSERT_NE(old_stream, nullptr);
  ProcessIoRequest request;
  request.set_stdin("one\n");
  ASSERT_TRUE(old_stream->Write(request));
  ProcessIoResponse response;
  ASSERT_TRUE(old_stream->Read(&response));
  EXPECT_EQ(response.stdout_chunk().data(), "one\n");

  IoResult io = Io("c1", "cat", 4, 0, "two\n", /*close_stdin=*/true);
  ASSERT_TRUE(io.status.ok()) << io.status.error_message();
  EXPECT_EQ(io.out, "two\n");
  EXPECT_EQ(io.exit.exit_code(), 0);
  while (old_stream->Read(&response)) {
  }
  EXPECT_EQ(old_stream->Finish().error_code(), grpc::StatusCode::ABORTED);
}

TEST_F(AgentServiceTest, AFullWindowBlocksTheProcessAndKeepsItsOutput) {
  TearDown();
  StartAgent(/*window=*/64 * 1024);
  std::string expected;
  for (int i = 1; i <= 300000; ++i) absl::StrAppend(&expected, i, "\n");
  ASSERT_TRUE(NewContainer("c1", "seq", Spec({"seq", "1", "300000"})).ok());
  // Nobody reads: the window (64 KiB) and the pipe fill, and seq blocks.
  v1::ProcessExit exit;
  grpc::Status status = Wait("c1", "seq", &exit, absl::Seconds(1));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  IoResult io = Io("c1", "seq");
  ASSERT_TRUE(io.status.ok()) << io.status.error_message();
  EXPECT_TRUE(io.offsets_consistent);
  EXPECT_EQ(io.out.size(), expected.size());
  EXPECT_EQ(Checksum(io.out), Checksum(expected));
  EXPECT_EQ(io.exit.exit_code(), 0);
}

TEST_F(AgentServiceTest, AFullWindowStallsOnlyItsOwnProcess) {
  TearDown();
  StartAgent(/*window=*/64 * 1024);
  const std::string data = Pattern(3 * 1024 * 1024);
  const std::string path = WriteDataFile("data", data);
  ASSERT_TRUE(NewContainer("c1", "stalled", Spec({"cat", path})).ok());
  ASSERT_TRUE(ExecCmd("c1", "flowing", Spec({"cat", path})).ok());
  // Nobody reads "stalled"; "flowing" goes through whole meanwhile.
  IoResult flowing = Io("c1", "flowing");
  ASSERT_TRUE(flowing.status.ok()) << flowing.status.error_message();
  EXPECT_EQ(Checksum(flowing.out), Checksum(data));
  v1::ProcessExit exit;
  EXPECT_EQ(Wait("c1", "stalled", &exit, absl::Milliseconds(300)).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  IoResult stalled = Io("c1", "stalled");
  ASSERT_TRUE(stalled.status.ok()) << stalled.status.error_message();
  EXPECT_EQ(stalled.out.size(), data.size());
  EXPECT_EQ(Checksum(stalled.out), Checksum(data));
}

TEST_F(AgentServiceTest, AnExitedProcessWithoutAReaderKeepsItsOutput) {
  ASSERT_TRUE(NewContainer("c1", "echo", Spec({"echo", "kept"})).ok());
  v1::ProcessExit exit;
  ASSERT_TRUE(Wait("c1", "echo", &exit).ok());
  IoResult io = Io("c1", "echo");
  EXPECT_EQ(io.out, "kept\n");
  EXPECT_TRUE(io.has_exit);
}

TEST_F(AgentServiceTest, OrphansAreReapedAndDoNotHoldTheExitBack) {
  // The shell exits at once; its background sleep keeps stdout open and is
  // handed to the agent (subreaper here, PID 1 in a sandbox).
  ASSERT_TRUE(
      NewContainer("c1", "sh", Spec({"sh", "-c", "sleep 1000 & echo $!"}))
          .ok());
  IoResult io = Io("c1", "sh");
  ASSERT_TRUE(io.status.ok()) << io.status.error_message();
  ASSERT_TRUE(io.has_exit);
  EXPECT_EQ(io.exit.exit_code(), 0);
  pid_t orphan = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(io.out), &orphan))
      << io.out;
  ASSERT_EQ(kill(orphan, 0), 0);
  ASSERT_EQ(kill(orphan, SIGKILL), 0);
  // Reaped: a zombie would still take signal 0.
  EXPECT_TRUE(testing::WaitFor([&] { return kill(orphan, 0) != 0; }));
}

TEST_F(AgentServiceTest, AnAckBeyondTheOutputIsOutOfRange) {
  ASSERT_TRUE(NewContainer("c1", "cat", Spec({"cat"})).ok());
  auto context = Context();
  auto stream = Attach(context.get(), "cat");
  ASSERT_NE(stream, nullptr);
  ProcessIoRequest request;
  request.mutable_ack()->set_stdout_offset(1000);
  ASSERT_TRUE(stream->Write(request));
  ProcessIoResponse response;
  while (stream->Read(&response)) {
  }
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "stdout"))
      << status.error_message();
  ASSERT_TRUE(Signal("c1", "cat", SIGKILL).ok());
}

grpc::Status AckOutput(v1::AgentService::Stub* stub, const std::string& process,
                       uint64_t out, uint64_t err) {
  v1::AckOutputRequest request;
  request.set_container_id("c1");
  request.set_process_id(process);
  request.set_stdout_offset(out);
  request.set_stderr_offset(err);
  v1::AckOutputResponse response;
  return stub->AckOutput(Context().get(), request, &response);
}

TEST_F(AgentServiceTest, AckOutputErrorsNameTheProcessAndStream) {
  ASSERT_TRUE(NewContainer("c1", "cat", Spec({"cat"})).ok());
  grpc::Status status = AckOutput(stub_.get(), "cat", 1000, 0);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "stdout"))
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "\"cat\""))
      << status.error_message();
  status = AckOutput(stub_.get(), "nope", 0, 0);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "nope"));
  v1::AckOutputRequest request;
  v1::AckOutputResponse response;
  grpc::ClientContext no_deadline;
  EXPECT_EQ(stub_->AckOutput(&no_deadline, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Signal("c1", "cat", SIGKILL).ok());
}

// cat with stdin flowing faster than it can echo, through a 64 KiB window:
// the stream stops being read while a stdin frame waits for cat, so only an
// out-of-band AckOutput makes room for cat's output (an ack on the stream
// would wait behind that stdin, and cat for the room: a deadlock).
TEST_F(AgentServiceTest, AckOutputMakesRoomWhileStdinWaits) {
  TearDown();
  StartAgent(/*window=*/64 * 1024);
  const std::string data = Pattern(4 * 1024 * 1024);
  ASSERT_TRUE(NewContainer("c1", "cat", Spec({"cat"})).ok());
  auto context = Context();
  auto stream = Attach(context.get(), "cat");
  ASSERT_NE(stream, nullptr);
  std::thread writer([&] {
    ProcessIoRequest frame;
    for (size_t at = 0; at < data.size(); at += 32 * 1024) {
      frame.set_stdin(data.substr(at, 32 * 1024));
      if (!stream->Write(frame)) return;
    }
    frame.Clear();
    frame.mutable_stdin_close();
    stream->Write(frame);
    stream->WritesDone();
  });
  std::string out;
  bool exited = false;
  uint64_t acked = 0;
  ProcessIoResponse response;
  while (stream->Read(&response)) {
    if (response.has_stdout_chunk()) out += response.stdout_chunk().data();
    if (response.has_exit()) exited = true;
    if (out.size() - acked >= 16 * 1024) {
      const grpc::Status acked_status =
          AckOutput(stub_.get(), "cat", out.size(), 0);
      EXPECT_TRUE(acked_status.ok()) << acked_status.error_message();
      acked = out.size();
    }
  }
  writer.join();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(exited);
  EXPECT_EQ(out.size(), data.size());
  EXPECT_EQ(Checksum(out), Checksum(data));
}

TEST_F(AgentServiceTest, DestroySandboxKillsEveryProcess) {
  int pid1 = 0, pid2 = 0;
  ASSERT_TRUE(NewContainer("c1", "init", Spec({"sleep", "1000"}), &pid1).ok());
  // Ignores SIGTERM (and so does its sleep): only SIGKILL ends it.
  ASSERT_TRUE(
      ExecCmd("c1", "stubborn",
              Spec({"sh", "-c", "trap '' TERM; echo ready; sleep 1000"}), &pid2)
          .ok());
  // Once it says it is ready, it ignores SIGTERM.
  auto context = Context();
  auto stream = Attach(context.get(), "stubborn");
  ASSERT_NE(stream, nullptr);
  ProcessIoResponse ready;
  ASSERT_TRUE(stream->Read(&ready));
  EXPECT_EQ(ready.stdout_chunk().data(), "ready\n");
  v1::DestroySandboxRequest request;
  request.mutable_timeout()->set_nanos(300 * 1000 * 1000);
  v1::DestroySandboxResponse response;
  ASSERT_TRUE(stub_->DestroySandbox(Context().get(), request, &response).ok());
  EXPECT_TRUE(testing::WaitFor([&] { return destroyed_.load(); }));
  v1::ProcessExit exit;
  ASSERT_TRUE(Wait("c1", "init", &exit).ok());
  EXPECT_EQ(exit.signal(), SIGTERM);
  ASSERT_TRUE(Wait("c1", "stubborn", &exit).ok());
  EXPECT_EQ(exit.signal(), SIGKILL);
  // The stream of a killed process ends with its exit.
  ProcessIoResponse last;
  while (stream->Read(&last)) {
    if (last.has_exit()) {
      EXPECT_EQ(last.exit().signal(), SIGKILL);
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(kill(pid1, 0), -1);
  EXPECT_EQ(kill(pid2, 0), -1);
  // No new process in a destroyed sandbox.
  EXPECT_EQ(ExecCmd("c1", "late", Spec({"true"})).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

}  // namespace
}  // namespace berth::agent
