// ProxyServiceImpl against a fake agent (fake_agent.h) on a Unix socket, with
// fake shims: gRPC clients of Connect, each on its own thread.

#include "services/proxy/proxy_service.h"

#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/unique_fd.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/proxy/fake_agent.h"
#include "services/proxy/fake_clock.h"

namespace berth {
namespace proxy {
namespace {

namespace pb = ::berth::proxy::v1;
using ::berth::proxy::testing::FakeClock;
using ::testing::HasSubstr;
using ::testing::Not;

google::protobuf::Duration ToProto(absl::Duration d) {
  google::protobuf::Duration out;
  out.set_seconds(absl::ToInt64Seconds(d));
  out.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(d - absl::Seconds(out.seconds()))));
  return out;
}

// A shim: Connect with a token, then collects everything that comes down.
// Reading can be held (Hold/Release) to play a shim that stopped reading.
class FakeShim {
 public:
  FakeShim(pb::ProxyService::Stub* stub, const std::string& token,
           bool hold = false)
      : held_(hold) {
    stream_ = stub->Connect(&context_);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    stream_->Write(hello);
    reader_ = std::thread([this] { Read(); });
  }
  ~FakeShim() {
    context_.TryCancel();
    Release();
    reader_.join();
  }

  void Send(const pb::ConnectRequest& request) {
    absl::MutexLock lock(&write_mu_);
    stream_->Write(request);
  }
  void SendStdin(const std::string& data) {
    pb::ConnectRequest request;
    request.set_stdin(data);
    Send(request);
  }
  void CloseStdin() {
    pb::ConnectRequest request;
    request.mutable_stdin_close();
    Send(request);
  }
  void SendSignal(int signal) {
    pb::ConnectRequest request;
    request.set_signal(signal);
    Send(request);
  }
  void Cancel() { context_.TryCancel(); }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }

  bool WaitConnected(absl::Duration timeout = absl::Seconds(30)) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() {
      mu_.AssertHeld();
      return connected_ || done_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    return connected_;
  }
  // Waits for the end of the stream; returns its status.
  grpc::Status WaitDone(absl::Duration timeout = absl::Seconds(60)) {
    absl::MutexLock lock(&mu_);
    auto done = [this]() {
      mu_.AssertHeld();
      return done_;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "test: the shim's stream did not end");
    }
    return status_;
  }
  bool connected() {
    absl::MutexLock lock(&mu_);
    return connected_;
  }
  std::string out() {
    absl::MutexLock lock(&mu_);
    return out_;
  }
  std::string err() {
    absl::MutexLock lock(&mu_);
    return err_;
  }
  // The frames in order: "connected", "stdout", "stderr", "exit".
  std::vector<std::string> frames() {
    absl::MutexLock lock(&mu_);
    return frames_;
  }
  bool offsets_ok() {
    absl::MutexLock lock(&mu_);
    return offsets_ok_;
  }
  berth::agent::v1::ProcessExit exit() {
    absl::MutexLock lock(&mu_);
    return exit_;
  }

 private:
  void Read() {
    pb::ConnectResponse response;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto go = [this]() {
          mu_.AssertHeld();
          return !held_;
        };
        mu_.Await(absl::Condition(&go));
      }
      if (!stream_->Read(&response)) break;
      absl::MutexLock lock(&mu_);
      switch (response.frame_case()) {
        case pb::ConnectResponse::kConnected:
          connected_ = true;
          frames_.push_back("connected");
          break;
        case pb::ConnectResponse::kStdout:
          if (response.stdout().offset() != out_.size()) offsets_ok_ = false;
          out_ += response.stdout().data();
          if (frames_.empty() || frames_.back() != "stdout") {
            frames_.push_back("stdout");
          }
          break;
        case pb::ConnectResponse::kStderr:
          if (response.stderr().offset() != err_.size()) offsets_ok_ = false;
          err_ += response.stderr().data();
          if (frames_.empty() || frames_.back() != "stderr") {
            frames_.push_back("stderr");
          }
          break;
        case pb::ConnectResponse::kExit:
          exit_ = response.exit();
          frames_.push_back("exit");
          break;
        default:
          break;
      }
    }
    grpc::Status status = stream_->Finish();
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<pb::ConnectRequest, pb::ConnectResponse>>
      stream_;
  absl::Mutex write_mu_;
  std::thread reader_;

  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_);
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool offsets_ok_ ABSL_GUARDED_BY(mu_) = true;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::string out_ ABSL_GUARDED_BY(mu_);
  std::string err_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> frames_ ABSL_GUARDED_BY(mu_);
  berth::agent::v1::ProcessExit exit_ ABSL_GUARDED_BY(mu_);
};

// A NewContainer call on its own thread.
class AsyncNewContainer {
 public:
  AsyncNewContainer(pb::ProxyService::Stub* stub,
                    const pb::NewContainerRequest& request) {
    thread_ = std::thread([this, stub, request] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      pb::NewContainerResponse response;
      grpc::Status status = stub->NewContainer(&context, request, &response);
      absl::MutexLock lock(&mu_);
      status_ = status;
      response_ = response;
      done_ = true;
    });
  }
  ~AsyncNewContainer() { thread_.join(); }
  bool done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  grpc::Status Wait(pb::NewContainerResponse* response = nullptr) {
    thread_.join();
    thread_ = std::thread([] {});
    absl::MutexLock lock(&mu_);
    if (response != nullptr) *response = response_;
    return status_;
  }

 private:
  std::thread thread_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  pb::NewContainerResponse response_ ABSL_GUARDED_BY(mu_);
};

class ProxyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    UnixGrpcServer::Options agent_options;
    agent_options.socket_path = dir_.Join("agent.sock");
    agent_options.services = {&agent_};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> agent_server =
        UnixGrpcServer::Start(agent_options);
    ASSERT_TRUE(agent_server.ok()) << agent_server.status();
    agent_server_ = std::move(*agent_server);

    StartProxy();
  }

  void StartProxy(const std::string& state_dir = "") {
    ProxyOptions options;
    options.default_shim_timeout = absl::Seconds(10);
    options.state_dir = state_dir;
    options.clock = clock_;
    options.die_during_start_for_test = die_during_start_;
    proxy_ = std::make_unique<ProxyServiceImpl>(options);
    absl::Status restored = proxy_->Restore();
    ASSERT_TRUE(restored.ok()) << restored;
    UnixGrpcServer::Options proxy_options;
    proxy_options.socket_path = dir_.Join("proxy.sock");
    proxy_options.services = {proxy_.get()};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> proxy_server =
        UnixGrpcServer::Start(proxy_options);
    ASSERT_TRUE(proxy_server.ok()) << proxy_server.status();
    proxy_server_ = std::move(*proxy_server);
    stub_ = pb::ProxyService::NewStub(grpc::CreateChannel(
        "unix:" + dir_.Join("proxy.sock"), grpc::InsecureChannelCredentials()));
  }

  void StopProxy() {
    // An open client channel holds a callback server's Shutdown for the
    // whole grace period (gRPC 1.51).
    stub_.reset();
    if (proxy_ != nullptr) proxy_->Stop();
    if (proxy_server_ != nullptr) proxy_server_->Shutdown(absl::Seconds(1));
    proxy_server_.reset();
    proxy_.reset();
  }

  void TearDown() override {
    StopProxy();
    if (agent_server_ != nullptr) agent_server_->Shutdown(absl::Seconds(1));
  }

  grpc::Status Register(const std::string& sandbox_id,
                        const std::string& address) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    pb::RegisterSandboxRequest request;
    request.set_sandbox_id(sandbox_id);
    request.set_agent_address(address);
    pb::RegisterSandboxResponse response;
    return stub_->RegisterSandbox(&context, request, &response);
  }

  void RegisterFakeAgent() {
    grpc::Status status = Register("sb1", "unix:" + dir_.Join("agent.sock"));
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  grpc::Status Allocate(const std::string& sandbox_id, std::string* token,
                        absl::Duration ttl = absl::ZeroDuration()) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    pb::AllocateTokenRequest request;
    request.set_sandbox_id(sandbox_id);
    if (ttl > absl::ZeroDuration()) *request.mutable_ttl() = ToProto(ttl);
    pb::AllocateTokenResponse response;
    grpc::Status status = stub_->AllocateToken(&context, request, &response);
    *token = response.token();
    return status;
  }

  std::string Token() {
    std::string token;
    grpc::Status status = Allocate("sb1", &token);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return token;
  }

  static pb::NewContainerRequest NewContainerRequest(
      const std::string& token, std::vector<std::string> args,
      absl::Duration shim_timeout = absl::ZeroDuration()) {
    pb::NewContainerRequest request;
    request.set_token(token);
    request.set_container_id("c1");
    for (const std::string& a : args) request.mutable_process()->add_args(a);
    if (shim_timeout > absl::ZeroDuration()) {
      *request.mutable_shim_timeout() = ToProto(shim_timeout);
    }
    return request;
  }

  grpc::Status NewContainer(const pb::NewContainerRequest& request,
                            pb::NewContainerResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    return stub_->NewContainer(&context, request, response);
  }

  // ExecCmd of `cat` in container c1 for `token` (whose shim is
  // connected); its process id into `process_id`.
  grpc::Status ExecCat(const std::string& token, std::string* process_id) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    pb::ExecCmdRequest request;
    request.set_token(token);
    request.set_container_id("c1");
    request.mutable_process()->add_args("cat");
    pb::ExecCmdResponse response;
    grpc::Status status = stub_->ExecCmd(&context, request, &response);
    *process_id = response.process_id();
    return status;
  }

  // Processes the agent started with these args.
  int StartedWith(const std::string& arg0) {
    int n = 0;
    for (const auto& [id, p] : agent_.processes()) {
      if (!p.args.empty() && p.args[0] == arg0) ++n;
    }
    return n;
  }

  // Session records in `state_dir`.
  static int SessionRecords(const std::string& state_dir) {
    int n = 0;
    if (DIR* d = opendir((state_dir + "/sessions").c_str())) {
      while (struct dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  }

  // A shim's resume (ShimHello.resume, offsets 0) after a restart of the
  // proxy: what came down, and the stream's status.
  struct Resumed {
    std::string out;
    std::string err;
    bool exit_last = false;
    berth::agent::v1::ProcessExit exit;
    grpc::Status status;
  };
  Resumed Resume(const std::string& token) {
    Resumed resumed;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    auto stream = stub_->Connect(&context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    hello.mutable_hello()->set_resume(true);
    stream->Write(hello);
    pb::ConnectResponse down;
    while (stream->Read(&down)) {
      resumed.exit_last = down.has_exit();
      if (down.has_exit()) resumed.exit = down.exit();
      if (down.has_stdout()) resumed.out += down.stdout().data();
      if (down.has_stderr()) resumed.err += down.stderr().data();
    }
    resumed.status = stream->Finish();
    return resumed;
  }

  // Given to the next StartProxy (ProxyOptions::die_during_start_for_test).
  std::function<bool(ProxyOptions::StartStep)> die_during_start_;
  // The proxy's clock; null: the real one.
  Clock* clock_ = nullptr;
  berth::testing::ShortTempDir dir_;
  testing::FakeAgent agent_;
  std::unique_ptr<UnixGrpcServer> agent_server_;
  std::unique_ptr<ProxyServiceImpl> proxy_;
  std::unique_ptr<UnixGrpcServer> proxy_server_;
  std::unique_ptr<pb::ProxyService::Stub> stub_;
};

// The proxy's timer on a clock that the test moves on: token lifetimes and
// waits for shims end when the test says, without waiting for them.
class ProxyServiceFakeTimeTest : public ProxyServiceTest {
 protected:
  void SetUp() override {
    clock_ = &fake_clock_;
    ProxyServiceTest::SetUp();
  }

  // Whether the proxy logged a line containing `text`.
  static bool Logged(const berth::testing::CapturingLogSink& logs,
                     absl::string_view text) {
    for (const std::string& message : logs.messages()) {
      if (absl::StrContains(message, text)) return true;
    }
    return false;
  }

  FakeClock fake_clock_;
};

TEST_F(ProxyServiceTest, TokensAreHexUniqueAndNeedARegisteredSandbox) {
  std::string token;
  grpc::Status status = Allocate("nope", &token);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("nope"));
  RegisterFakeAgent();
  std::string a = Token();
  std::string b = Token();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
}

TEST_F(ProxyServiceTest, TokenIsSingleUse) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim first(stub_.get(), token);
  ASSERT_TRUE(first.WaitConnected());
  FakeShim second(stub_.get(), token);
  grpc::Status status = second.WaitDone();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr(token.substr(0, 8)));
  EXPECT_THAT(status.error_message(), Not(HasSubstr(token)));
  EXPECT_FALSE(second.connected());
  EXPECT_TRUE(first.connected());
}

TEST_F(ProxyServiceTest, UnknownTokenIsDenied) {
  RegisterFakeAgent();
  FakeShim shim(stub_.get(), "00000000000000000000000000000000");
  EXPECT_EQ(shim.WaitDone().error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(ProxyServiceFakeTimeTest, UnclaimedTokenExpires) {
  RegisterFakeAgent();
  const absl::Time start = fake_clock_.Now();
  std::string token, lasting;
  ASSERT_TRUE(Allocate("sb1", &token, absl::Minutes(5)).ok());
  ASSERT_TRUE(Allocate("sb1", &lasting, absl::Minutes(10)).ok());
  // The timer waits for the first token's end, which then comes: Advance
  // returns once the timer has expired it.
  ASSERT_TRUE(fake_clock_.AwaitWaiter(start + absl::Minutes(5)));
  ASSERT_TRUE(fake_clock_.Advance(absl::Minutes(5)));
  FakeShim shim(stub_.get(), token);
  EXPECT_EQ(shim.WaitDone().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  pb::NewContainerResponse response;
  EXPECT_EQ(NewContainer(NewContainerRequest(token, {"emit"}), &response)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
  // The other token's time has not come.
  FakeShim other(stub_.get(), lasting);
  EXPECT_TRUE(other.WaitConnected());
}

TEST_F(ProxyServiceTest, RegisterSandboxFailsFastNamingTheAddress) {
  std::string address = "unix:" + dir_.Join("nobody.sock");
  grpc::Status status = Register("sb2", address);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr(dir_.Join("nobody.sock")));
  EXPECT_THAT(status.error_message(), HasSubstr("sb2"));
  std::string token;
  EXPECT_EQ(Allocate("sb2", &token).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ProxyServiceTest, RegisterSandboxTakesABarePath) {
  EXPECT_TRUE(Register("sb3", dir_.Join("agent.sock")).ok());
  grpc::ClientContext context;
  pb::UnregisterSandboxRequest request;
  request.set_sandbox_id("sb3");
  pb::UnregisterSandboxResponse response;
  EXPECT_TRUE(stub_->UnregisterSandbox(&context, request, &response).ok());
  std::string token;
  EXPECT_EQ(Allocate("sb3", &token).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ProxyServiceFakeTimeTest,
       ShimConnectingLateGetsAllOutputAndStartsTheProcess) {
  RegisterFakeAgent();
  std::string token = Token();
  berth::testing::CapturingLogSink logs(google::GLOG_INFO);
  const absl::Time start = fake_clock_.Now();
  AsyncNewContainer call(
      stub_.get(), NewContainerRequest(token, {"emit", "out:hello ", "err:oops",
                                               "out:world", "exit:3"}));
  // The call waits for its shim, which comes just before the 10 s are over.
  ASSERT_TRUE(fake_clock_.AwaitWaiter(start + absl::Seconds(10)));
  ASSERT_TRUE(fake_clock_.Advance(absl::Seconds(10) - absl::Milliseconds(1)));
  // Still waiting, and nothing started on the agent.
  EXPECT_FALSE(Logged(logs, "timeout waiting for shim"));
  EXPECT_FALSE(call.done());
  EXPECT_TRUE(agent_.processes().empty());
  absl::Time connected_at = absl::Now();
  FakeShim shim(stub_.get(), token);
  pb::NewContainerResponse response;
  grpc::Status status = call.Wait(&response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(shim.WaitDone().ok());
  EXPECT_EQ(shim.out(), "hello world");
  EXPECT_EQ(shim.err(), "oops");
  EXPECT_TRUE(shim.offsets_ok());
  EXPECT_EQ(shim.exit().exit_code(), 3);
  EXPECT_EQ(shim.frames().back(), "exit");
  EXPECT_EQ(shim.frames().front(), "connected");

  auto processes = agent_.processes();
  ASSERT_EQ(processes.size(), 1u);
  const auto& [process_id, process] = *processes.begin();
  EXPECT_EQ(process_id, response.process_id());
  EXPECT_EQ(process.container_id, "c1");
  EXPECT_FALSE(process.exec);
  EXPECT_GE(process.started_at, connected_at);
  EXPECT_THAT(process_id, Not(HasSubstr(token)));

  int waiting = 0;
  std::string expected =
      absl::StrCat("waiting for shim to register itself with token ",
                   token.substr(0, 8), " (timeout in 10 seconds)");
  for (const std::string& message : logs.messages()) {
    EXPECT_THAT(message, Not(HasSubstr(token)));
    if (absl::StrContains(message, "waiting for shim to register")) {
      EXPECT_EQ(message, expected);
      ++waiting;
    }
  }
  EXPECT_EQ(waiting, 1);
}

TEST_F(ProxyServiceFakeTimeTest, NoShimIsDeadlineExceededAndReleasesTheToken) {
  RegisterFakeAgent();
  std::string token = Token();
  berth::testing::CapturingLogSink logs(google::GLOG_INFO);
  const absl::Time start = fake_clock_.Now();
  AsyncNewContainer call(stub_.get(),
                         NewContainerRequest(token, {"emit", "out:never"},
                                             absl::Milliseconds(500)));
  ASSERT_TRUE(fake_clock_.AwaitWaiter(start + absl::Milliseconds(500)));
  ASSERT_TRUE(fake_clock_.Advance(absl::Milliseconds(500)));
  grpc::Status status = call.Wait();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(
      status.error_message(),
      absl::StrCat("timeout waiting for shim with token ", token.substr(0, 8)));
  EXPECT_TRUE(agent_.processes().empty());
  // Released: the shim that comes late is turned away.
  FakeShim shim(stub_.get(), token);
  EXPECT_EQ(shim.WaitDone().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(agent_.processes().empty());
  int waiting = 0;
  for (const std::string& message : logs.messages()) {
    EXPECT_THAT(message, Not(HasSubstr(token)));
    if (absl::StrContains(message, "waiting for shim to register")) {
      EXPECT_EQ(message,
                absl::StrCat("waiting for shim to register itself with token ",
                             token.substr(0, 8), " (timeout in 0.5 seconds)"));
      ++waiting;
    }
  }
  EXPECT_EQ(waiting, 1);
}

TEST_F(ProxyServiceTest, CallerGivingUpEndsTheWaitAndReleasesTheToken) {
  RegisterFakeAgent();
  std::string token = Token();
  berth::testing::CapturingLogSink logs(google::GLOG_INFO);
  {
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Milliseconds(300)));
    pb::NewContainerResponse response;
    EXPECT_EQ(stub_
                  ->NewContainer(&context,
                                 NewContainerRequest(token, {"emit", "out:x"}),
                                 &response)
                  .error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  ASSERT_TRUE(berth::testing::WaitFor([&] {
    for (const std::string& message : logs.messages()) {
      if (absl::StrContains(message, "cancelled by its caller")) return true;
    }
    return false;
  }));
  FakeShim shim(stub_.get(), token);
  EXPECT_EQ(shim.WaitDone().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(agent_.processes().empty());
}

TEST_F(ProxyServiceTest, OtherCallsAreServedWhileOneWaits) {
  RegisterFakeAgent();
  std::string waiting_token = Token();
  AsyncNewContainer waiting(
      stub_.get(), NewContainerRequest(waiting_token, {"emit", "out:first"}));
  // Several more, each through to its exit, while the first still waits.
  for (int i = 0; i < 3; ++i) {
    std::string token = Token();
    FakeShim shim(stub_.get(), token);
    pb::NewContainerResponse response;
    grpc::Status status = NewContainer(
        NewContainerRequest(token, {"emit", absl::StrCat("out:", i)}),
        &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(shim.WaitDone().ok());
    EXPECT_EQ(shim.out(), absl::StrCat(i));
  }
  EXPECT_FALSE(waiting.done());
  FakeShim shim(stub_.get(), waiting_token);
  EXPECT_TRUE(waiting.Wait().ok());
  EXPECT_TRUE(shim.WaitDone().ok());
  EXPECT_EQ(shim.out(), "first");
}

TEST_F(ProxyServiceTest, ExecCmdStdinAndAcksGoUp) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim shim(stub_.get(), token);
  ASSERT_TRUE(shim.WaitConnected());
  std::string id;
  ASSERT_TRUE(ExecCat(token, &id).ok());
  shim.SendStdin("abc");
  shim.SendStdin("def");
  ASSERT_TRUE(berth::testing::WaitFor([&] { return shim.out() == "abcdef"; }));
  pb::ConnectRequest ack;
  ack.mutable_ack()->set_stdout_offset(6);
  shim.Send(ack);
  // The ack goes to the agent as a call of its own, racing the stdin close
  // on the process's stream: wait for it before the process may end.
  ASSERT_TRUE(agent_.Await([&](const auto& processes) {
    return processes.count(id) != 0 && processes.at(id).acks.size() == 1;
  }));
  shim.CloseStdin();
  EXPECT_TRUE(shim.WaitDone().ok());
  EXPECT_EQ(shim.exit().exit_code(), 0);
  EXPECT_EQ(shim.frames().back(), "exit");
  auto processes = agent_.processes();
  ASSERT_EQ(processes.count(id), 1u);
  const auto& process = processes.at(id);
  EXPECT_TRUE(process.exec);
  EXPECT_EQ(process.stdin, "abcdef");
  // Out of band (AckOutput), never on the process's stream.
  ASSERT_EQ(process.acks.size(), 1u);
  EXPECT_EQ(process.acks[0].stdout_offset(), 6u);
  EXPECT_TRUE(process.stream_acks.empty());
}

// A shim's AckOutput (out of band of its stream) reaches the agent; a token
// without a process is NOT_FOUND naming its prefix.
TEST_F(ProxyServiceTest, ShimAckOutputReachesTheAgent) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim shim(stub_.get(), token);
  ASSERT_TRUE(shim.WaitConnected());
  {
    grpc::ClientContext context;
    pb::AckOutputRequest request;
    request.set_token(token);
    pb::AckOutputResponse response;
    const grpc::Status status = stub_->AckOutput(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(status.error_message(), HasSubstr(token.substr(0, 8)));
  }
  std::string id;
  ASSERT_TRUE(ExecCat(token, &id).ok());
  grpc::ClientContext ack_context;
  pb::AckOutputRequest ack;
  ack.set_token(token);
  ack.set_stdout_offset(5);
  ack.set_stderr_offset(7);
  pb::AckOutputResponse ack_response;
  ASSERT_TRUE(stub_->AckOutput(&ack_context, ack, &ack_response).ok());
  ASSERT_TRUE(agent_.Await([&](const auto& processes) {
    return processes.at(id).acks.size() == 1;
  }));
  const auto acked = agent_.processes().at(id).acks[0];
  EXPECT_EQ(acked.stdout_offset(), 5u);
  EXPECT_EQ(acked.stderr_offset(), 7u);
  shim.CloseStdin();
  EXPECT_TRUE(shim.WaitDone().ok());
}

// An AckOutput the agent failed is sent again, a little later (the agent's
// window may be full, so that no later ack would come).
TEST_F(ProxyServiceFakeTimeTest, AFailedAckIsSentAgain) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim shim(stub_.get(), token);
  ASSERT_TRUE(shim.WaitConnected());
  std::string id;
  ASSERT_TRUE(ExecCat(token, &id).ok());
  agent_.FailAcks(1);
  const absl::Time start = fake_clock_.Now();
  pb::ConnectRequest ack;
  ack.mutable_ack()->set_stdout_offset(9);
  shim.Send(ack);
  // The retry waits for its time.
  ASSERT_TRUE(fake_clock_.AwaitWaiter(start + absl::Seconds(1)));
  EXPECT_EQ(agent_.processes().at(id).acks.size(), 1u);
  ASSERT_TRUE(fake_clock_.Advance(absl::Seconds(1)));
  ASSERT_TRUE(agent_.Await([&](const auto& processes) {
    return processes.at(id).acks.size() == 2;
  }));
  const auto acks = agent_.processes().at(id).acks;
  EXPECT_EQ(acks[0].stdout_offset(), 9u);
  EXPECT_EQ(acks[1].stdout_offset(), 9u);
  shim.CloseStdin();
  EXPECT_TRUE(shim.WaitDone().ok());
}

// At most one AckOutput in flight per process; the acks that come meanwhile
// are coalesced into one with the latest offsets, sent once it completes.
TEST_F(ProxyServiceTest, AcksAreCoalescedOneInFlight) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim shim(stub_.get(), token);
  ASSERT_TRUE(shim.WaitConnected());
  std::string id;
  ASSERT_TRUE(ExecCat(token, &id).ok());
  agent_.HoldAcks(true);
  for (uint64_t offset : {1, 2, 3, 4}) {
    pb::ConnectRequest ack;
    ack.mutable_ack()->set_stdout_offset(offset);
    ack.mutable_ack()->set_stderr_offset(offset * 10);
    shim.Send(ack);
  }
  // The first is at the agent, held there.
  ASSERT_TRUE(agent_.Await([&](const auto& processes) {
    return processes.count(id) != 0 && processes.at(id).acks.size() == 1;
  }));
  // Stdin still flows while the ack is held (the shim's stream is read on).
  shim.SendStdin("abc");
  ASSERT_TRUE(berth::testing::WaitFor([&] { return shim.out() == "abc"; }));
  agent_.HoldAcks(false);
  ASSERT_TRUE(agent_.Await([&](const auto& processes) {
    return processes.at(id).acks.size() == 2;
  }));
  shim.CloseStdin();
  EXPECT_TRUE(shim.WaitDone().ok());
  const auto process = agent_.processes().at(id);
  ASSERT_EQ(process.acks.size(), 2u);
  EXPECT_EQ(process.acks[0].stdout_offset(), 1u);
  EXPECT_EQ(process.acks[0].stderr_offset(), 10u);
  EXPECT_EQ(process.acks[1].stdout_offset(), 4u);
  EXPECT_EQ(process.acks[1].stderr_offset(), 40u);
  EXPECT_EQ(process.max_acks_in_flight, 1);
  EXPECT_TRUE(process.stream_acks.empty());
}

TEST_F(ProxyServiceTest, SignalReachesTheProcessAndItsExitComesLast) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim shim(stub_.get(), token);
  pb::NewContainerResponse response;
  ASSERT_TRUE(
      NewContainer(NewContainerRequest(token, {"wait_signal"}), &response)
          .ok());
  shim.SendSignal(SIGTERM);
  EXPECT_TRUE(shim.WaitDone().ok());
  EXPECT_EQ(shim.exit().signal(), SIGTERM);
  EXPECT_EQ(shim.exit().exit_code(), 0);
  EXPECT_EQ(shim.frames().back(), "exit");
  EXPECT_EQ(agent_.processes().at(response.process_id()).signals,
            std::vector<int>{SIGTERM});
}

TEST_F(ProxyServiceTest, ResizesFromShimAndDriverReachTheProcess) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim shim(stub_.get(), token);
  pb::NewContainerResponse response;
  ASSERT_TRUE(
      NewContainer(NewContainerRequest(token, {"wait_signal"}), &response)
          .ok());
  pb::ConnectRequest resize;
  resize.mutable_resize()->set_rows(40);
  resize.mutable_resize()->set_columns(120);
  shim.Send(resize);
  ASSERT_TRUE(agent_.Await([&](const auto& processes) {
    return processes.at(response.process_id()).sizes.size() == 1;
  }));
  grpc::ClientContext context;
  pb::ResizeRequest request;
  request.set_token(token);
  request.mutable_size()->set_rows(50);
  request.mutable_size()->set_columns(100);
  pb::ResizeResponse resize_response;
  ASSERT_TRUE(stub_->Resize(&context, request, &resize_response).ok());
  auto sizes = agent_.processes().at(response.process_id()).sizes;
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_EQ(sizes[0].rows(), 40u);
  EXPECT_EQ(sizes[0].columns(), 120u);
  EXPECT_EQ(sizes[1].rows(), 50u);
  EXPECT_EQ(sizes[1].columns(), 100u);
  shim.SendSignal(SIGTERM);
  EXPECT_TRUE(shim.WaitDone().ok());
}

TEST_F(ProxyServiceTest, DriverSignalReachesTheProcess) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim shim(stub_.get(), token);
  pb::NewContainerResponse response;
  ASSERT_TRUE(
      NewContainer(NewContainerRequest(token, {"wait_signal"}), &response)
          .ok());
  grpc::ClientContext context;
  pb::SignalRequest request;
  request.set_token(token);
  request.set_signal(SIGKILL);
  pb::SignalResponse signal_response;
  ASSERT_TRUE(stub_->Signal(&context, request, &signal_response).ok());
  EXPECT_TRUE(shim.WaitDone().ok());
  EXPECT_EQ(shim.exit().signal(), SIGKILL);
}

TEST_F(ProxyServiceTest, ShimGoneSendsSighupAndKillsTheToken) {
  RegisterFakeAgent();
  std::string token = Token();
  auto shim = std::make_unique<FakeShim>(stub_.get(), token);
  pb::NewContainerResponse response;
  ASSERT_TRUE(
      NewContainer(NewContainerRequest(token, {"wait_signal"}), &response)
          .ok());
  shim->Cancel();
  EXPECT_TRUE(agent_.Await([&](const auto& processes) {
    auto it = processes.find(response.process_id());
    return it != processes.end() && !it->second.signals.empty();
  }));
  EXPECT_EQ(agent_.processes().at(response.process_id()).signals,
            std::vector<int>{SIGHUP});
  shim.reset();
  FakeShim again(stub_.get(), token);
  EXPECT_EQ(again.WaitDone().error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(ProxyServiceTest, AgentGoneEndsEveryShimOfTheSandbox) {
  RegisterFakeAgent();
  std::string token1 = Token();
  std::string token2 = Token();
  FakeShim shim1(stub_.get(), token1);
  FakeShim shim2(stub_.get(), token2);
  pb::NewContainerResponse response;
  ASSERT_TRUE(
      NewContainer(NewContainerRequest(token1, {"wait_signal"}), &response)
          .ok());
  ASSERT_TRUE(
      NewContainer(NewContainerRequest(token2, {"wait_signal"}), &response)
          .ok());
  agent_server_->Shutdown(absl::Milliseconds(100));
  for (FakeShim* shim : {&shim1, &shim2}) {
    grpc::Status status = shim->WaitDone();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(status.error_message(), HasSubstr("sandbox sb1"));
  }
  std::string token;
  EXPECT_EQ(Allocate("sb1", &token).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ProxyServiceTest, AgentGoneBeforeTheStartFailsItAndForgetsTheSandbox) {
  RegisterFakeAgent();
  std::string token = Token();
  FakeShim shim(stub_.get(), token);
  ASSERT_TRUE(shim.WaitConnected());
  agent_server_->Shutdown(absl::Milliseconds(100));
  pb::NewContainerResponse response;
  grpc::Status status =
      NewContainer(NewContainerRequest(token, {"emit", "out:x"}), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("sandbox sb1"));
  EXPECT_EQ(shim.WaitDone().error_code(), grpc::StatusCode::UNAVAILABLE);
  std::string another;
  EXPECT_EQ(Allocate("sb1", &another).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// One shim stops reading: the other process's stream goes on to its end, the
// stopped one's output is held back (the agent cannot write it all), and
// once the shim reads again it gets all of it, intact.
TEST_F(ProxyServiceTest, StoppedShimSlowsOnlyItsOwnProcess) {
  RegisterFakeAgent();
  constexpr uint64_t kBytes = 64 << 20;
  const std::string bytes = absl::StrCat(kBytes);
  std::string stopped_token = Token();
  std::string running_token = Token();
  FakeShim stopped(stub_.get(), stopped_token, /*hold=*/true);
  FakeShim running(stub_.get(), running_token);
  pb::NewContainerResponse stopped_process;
  ASSERT_TRUE(NewContainer(NewContainerRequest(stopped_token, {"bulk", bytes}),
                           &stopped_process)
                  .ok());
  pb::NewContainerResponse running_process;
  ASSERT_TRUE(NewContainer(NewContainerRequest(running_token, {"bulk", bytes}),
                           &running_process)
                  .ok());
  ASSERT_TRUE(running.WaitDone().ok());
  std::string out = running.out();
  ASSERT_EQ(out.size(), kBytes);
  for (uint64_t i = 0; i < kBytes; ++i) {
    if (out[i] != testing::PatternByte(i)) {
      FAIL() << "byte " << i << " differs";
    }
  }
  // The stopped shim's process could write only a little (flow control).
  // (gRPC's windows on the two hops hold some MiB; 8 MiB here.)
  EXPECT_LT(agent_.processes().at(stopped_process.process_id()).stdout_written,
            kBytes / 2);
  EXPECT_THAT(stopped.frames(), Not(::testing::Contains("exit")));
  stopped.Release();
  ASSERT_TRUE(stopped.WaitDone().ok());
  out = stopped.out();
  ASSERT_EQ(out.size(), kBytes);
  for (uint64_t i = 0; i < kBytes; ++i) {
    if (out[i] != testing::PatternByte(i)) {
      FAIL() << "byte " << i << " differs";
    }
  }
  EXPECT_TRUE(stopped.offsets_ok());
  EXPECT_EQ(stopped.frames().back(), "exit");
}

// The proxy stops (its state kept in a state directory) and another starts
// while a process writes 50 MB: the shim resumes with the offset it has and
// gets every byte once, in order.
TEST_F(ProxyServiceTest, ShimResumesAcrossARestartOfTheProxy) {
  StopProxy();
  const std::string state_dir = dir_.Join("state");
  StartProxy(state_dir);
  RegisterFakeAgent();
  constexpr uint64_t kBytes = 50 << 20;
  std::string token = Token();
  std::string out;
  bool offsets_ok = true;
  auto take = [&](const pb::ConnectResponse& down) {
    if (!down.has_stdout()) return;
    if (down.stdout().offset() != out.size()) offsets_ok = false;
    out += down.stdout().data();
  };
  {
    grpc::ClientContext context;
    auto stream = stub_->Connect(&context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    ASSERT_TRUE(stream->Write(hello));
    pb::NewContainerResponse response;
    ASSERT_TRUE(
        NewContainer(NewContainerRequest(token, {"bulk", absl::StrCat(kBytes)}),
                     &response)
            .ok());
    pb::ConnectResponse down;
    while (out.size() < (5 << 20) && stream->Read(&down)) take(down);
    ASSERT_GE(out.size(), 5u << 20);
    StopProxy();
    // What was on its way still arrives; then the stream ends.
    while (stream->Read(&down)) take(down);
    EXPECT_FALSE(stream->Finish().ok());
  }
  ASSERT_LT(out.size(), kBytes);
  // A new proxy on the same state directory.
  StartProxy(state_dir);
  berth::agent::v1::ProcessExit exit;
  bool exit_last = false;
  {
    grpc::ClientContext context;
    auto stream = stub_->Connect(&context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    hello.mutable_hello()->set_resume(true);
    hello.mutable_hello()->set_stdout_offset(out.size());
    ASSERT_TRUE(stream->Write(hello));
    pb::ConnectResponse down;
    while (stream->Read(&down)) {
      exit_last = down.has_exit();
      if (down.has_exit()) exit = down.exit();
      take(down);
    }
    grpc::Status status = stream->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_TRUE(exit_last);
  EXPECT_TRUE(offsets_ok);
  ASSERT_EQ(out.size(), kBytes);
  for (uint64_t i = 0; i < kBytes; ++i) {
    if (out[i] != testing::PatternByte(i)) {
      FAIL() << "byte " << i << " differs";
    }
  }
  // A token is still single-use: no second resume.
  FakeShim again(stub_.get(), token);
  EXPECT_EQ(again.WaitDone().error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

// The proxy "dies" (ProxyOptions::die_during_start_for_test) after the agent
// started a process and before it acted on the agent's answer, the window a
// kill -9 of berth-proxy found (the session was written only after the
// answer): the next proxy on the same state directory knows the token, and
// the shim resumes and gets the process's output and exit.
TEST_F(ProxyServiceTest, AShimResumesAProcessWhoseStartTheProxyDidNotAnswer) {
  StopProxy();
  const std::string state_dir = dir_.Join("state");
  die_during_start_ = [](ProxyOptions::StartStep step) {
    return step == ProxyOptions::StartStep::kAfterAgentAnswer;
  };
  StartProxy(state_dir);
  RegisterFakeAgent();
  std::string token = Token();
  {
    FakeShim shim(stub_.get(), token);
    ASSERT_TRUE(shim.WaitConnected());
    pb::NewContainerResponse response;
    grpc::Status status = NewContainer(
        NewContainerRequest(token, {"emit", "out:hello", "err:oops", "exit:3"}),
        &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << status.error_message();
    ASSERT_EQ(StartedWith("emit"), 1) << "the agent did not start it";
    StopProxy();
    EXPECT_EQ(shim.WaitDone().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  ASSERT_EQ(SessionRecords(state_dir), 1)
      << "no record of the process the agent started";
  die_during_start_ = nullptr;
  StartProxy(state_dir);
  Resumed resumed = Resume(token);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status.error_message();
  EXPECT_EQ(resumed.out, "hello");
  EXPECT_EQ(resumed.err, "oops");
  EXPECT_TRUE(resumed.exit_last);
  EXPECT_EQ(resumed.exit.exit_code(), 3);
  EXPECT_EQ(StartedWith("emit"), 1);
}

// The proxy "dies" after writing the session record and before asking the
// agent: the next proxy restores the session, but the agent has no such
// process, so the shim's resume ends at once with NOT_FOUND saying the
// process is gone (not a wait, not PERMISSION_DENIED), and neither the
// session nor its record is left.
TEST_F(ProxyServiceTest, AResumeOfAProcessTheAgentNeverGotFailsCleanly) {
  StopProxy();
  const std::string state_dir = dir_.Join("state");
  die_during_start_ = [](ProxyOptions::StartStep step) {
    return step == ProxyOptions::StartStep::kBeforeAgentCall;
  };
  StartProxy(state_dir);
  RegisterFakeAgent();
  std::string token = Token();
  {
    FakeShim shim(stub_.get(), token);
    ASSERT_TRUE(shim.WaitConnected());
    pb::NewContainerResponse response;
    grpc::Status status = NewContainer(
        NewContainerRequest(token, {"emit", "out:never", "exit:0"}), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << status.error_message();
    StopProxy();
    EXPECT_EQ(shim.WaitDone().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  ASSERT_EQ(StartedWith("emit"), 0);
  die_during_start_ = nullptr;
  StartProxy(state_dir);
  Resumed resumed = Resume(token);
  EXPECT_EQ(resumed.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << resumed.status.error_message();
  EXPECT_THAT(resumed.status.error_message(), HasSubstr("is gone"));
  EXPECT_THAT(resumed.status.error_message(), HasSubstr("sb1"));
  EXPECT_FALSE(resumed.exit_last);
  EXPECT_EQ(resumed.out, "");
  EXPECT_EQ(SessionRecords(state_dir), 0) << "the session's record was left";
  EXPECT_EQ(StartedWith("emit"), 0) << "the resume started the process";
  // Nothing left in the proxy either: the token is unknown now.
  FakeShim again(stub_.get(), token);
  EXPECT_EQ(again.WaitDone().error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

// The agent answers a start while the proxy stops (its shims already told
// so): the caller gets OK with the process id, the process gets no SIGHUP,
// and the shim resumes it with the next proxy.
TEST_F(ProxyServiceTest, AStartAnsweredWhileTheProxyStopsIsLeftForTheNext) {
  StopProxy();
  const std::string state_dir = dir_.Join("state");
  StartProxy(state_dir);
  RegisterFakeAgent();
  std::string token = Token();
  // Its own channel: StopProxy drops stub_.
  std::unique_ptr<pb::ProxyService::Stub> caller = pb::ProxyService::NewStub(
      grpc::CreateChannel("unix:" + dir_.Join("proxy.sock"),
                          grpc::InsecureChannelCredentials()));
  {
    FakeShim shim(stub_.get(), token);
    ASSERT_TRUE(shim.WaitConnected());
    agent_.HoldStartAnswers(true);
    AsyncNewContainer start(
        caller.get(),
        NewContainerRequest(token, {"emit", "out:later", "exit:4"}));
    ASSERT_TRUE(agent_.Await([](const auto& p) { return p.size() == 1; }));
    std::thread stopper([this] { StopProxy(); });
    // The stop has begun once the shim is told so; then the agent answers.
    EXPECT_EQ(shim.WaitDone().error_code(), grpc::StatusCode::UNAVAILABLE);
    agent_.HoldStartAnswers(false);
    pb::NewContainerResponse response;
    grpc::Status status = start.Wait(&response);
    stopper.join();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_FALSE(response.process_id().empty());
  }
  // Its broken connection would be shared with the next stub_'s channel.
  caller.reset();
  for (const auto& [id, p] : agent_.processes()) {
    EXPECT_TRUE(p.signals.empty()) << "process " << id << " was signalled";
  }
  StartProxy(state_dir);
  Resumed resumed = Resume(token);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status.error_message();
  EXPECT_EQ(resumed.out, "later");
  EXPECT_TRUE(resumed.exit_last);
  EXPECT_EQ(resumed.exit.exit_code(), 4);
}

// A restarted proxy keeps the sandbox records whose agent's socket is there
// and forgets those whose socket is gone or that nobody listens on (a
// sandbox removed, or whose agent ended, while the proxy was down: its
// UnregisterSandbox failed), file and all.
TEST_F(ProxyServiceTest, RestoreForgetsSandboxesWhoseAgentSocketIsGone) {
  StopProxy();
  const std::string state_dir = dir_.Join("state");
  StartProxy(state_dir);
  RegisterFakeAgent();
  // A second sandbox whose agent then ends, leaving its socket file: bound,
  // nobody listening.
  const std::string stale = dir_.Join("stale.sock");
  {
    testing::FakeAgent second_agent;
    UnixGrpcServer::Options options;
    options.socket_path = stale;
    options.services = {&second_agent};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    grpc::Status registered = Register("sb2", "unix:" + stale);
    ASSERT_TRUE(registered.ok()) << registered.error_message();
    (*server)->Shutdown(absl::Seconds(1));
  }
  if (access(stale.c_str(), F_OK) != 0) {
    base::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(fd.valid());
    struct sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    ASSERT_LT(stale.size(), sizeof(address.sun_path));
    stale.copy(address.sun_path, stale.size());
    ASSERT_EQ(bind(fd.get(), reinterpret_cast<struct sockaddr*>(&address),
                   sizeof(address)),
              0);
  }
  auto records = [&] {
    int n = 0;
    if (DIR* d = opendir((state_dir + "/sandboxes").c_str())) {
      while (struct dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  };
  ASSERT_EQ(records(), 2);
  StopProxy();
  StartProxy(state_dir);
  EXPECT_EQ(records(), 1) << "a sandbox whose agent answers was forgotten, or "
                             "one whose socket nobody listens on kept";
  StopProxy();
  agent_server_->Shutdown(absl::Seconds(1));
  agent_server_.reset();
  unlink(dir_.Join("agent.sock").c_str());
  StartProxy(state_dir);
  EXPECT_EQ(records(), 0) << "the record of a sandbox whose agent socket is "
                             "gone was kept";
}

// A sandbox whose agent went while the proxy ran, and whose
// UnregisterSandbox never came (it found the proxy down, and the agent still
// served when the proxy came back): the proxy's stop forgets it, record and
// all, and keeps the sandbox whose agent answers.
TEST_F(ProxyServiceTest, StopForgetsSandboxesWhoseAgentIsGone) {
  StopProxy();
  const std::string state_dir = dir_.Join("state");
  StartProxy(state_dir);
  RegisterFakeAgent();
  const std::string gone = dir_.Join("gone.sock");
  {
    testing::FakeAgent second_agent;
    UnixGrpcServer::Options options;
    options.socket_path = gone;
    options.services = {&second_agent};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    grpc::Status registered = Register("sb2", "unix:" + gone);
    ASSERT_TRUE(registered.ok()) << registered.error_message();
    (*server)->Shutdown(absl::Seconds(1));
  }
  unlink(gone.c_str());
  auto records = [&] {
    int n = 0;
    if (DIR* d = opendir((state_dir + "/sandboxes").c_str())) {
      while (struct dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  };
  ASSERT_EQ(records(), 2);
  StopProxy();
  EXPECT_EQ(records(), 1) << "the record of a sandbox whose agent is gone was "
                             "kept, or the live one's removed";
  StartProxy(state_dir);
  std::string token;
  EXPECT_TRUE(Allocate("sb1", &token).ok());
  EXPECT_EQ(Allocate("sb2", &token).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace proxy
}  // namespace berth
