// berth-shim through the real berth-proxy binary, against the proxy's fake
// agent (in this process): the whole path a sandboxed process's stdio takes,
// and a proxy killed with SIGKILL and started again while output flows.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/proxy/fake_agent.h"
#include "services/shim/shim.h"
#include "services/shim/shim_process.h"

extern char** environ;

namespace berth {
namespace shim {
namespace {

namespace pb = ::berth::proxy::v1;
using ::berth::proxy::testing::FakeAgent;
using ::berth::proxy::testing::PatternByte;
using ::berth::shim::testing::ShimProcess;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;

std::string Bulk(uint64_t size) {
  std::string data(size, '\0');
  for (uint64_t i = 0; i < size; ++i) data[i] = PatternByte(i);
  return data;
}

class ShimThroughProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    UnixGrpcServer::Options options;
    options.socket_path = dir_.Join("agent.sock");
    options.services = {&agent_};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    agent_server_ = *std::move(server);
    StartProxy();
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket_, absl::Seconds(30));
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = pb::ProxyService::NewStub(*channel);
    grpc::ClientContext context;
    Deadline(&context);
    pb::RegisterSandboxRequest request;
    request.set_sandbox_id("sb");
    request.set_agent_address("unix:" + dir_.Join("agent.sock"));
    pb::RegisterSandboxResponse response;
    const grpc::Status status =
        stub_->RegisterSandbox(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  void TearDown() override {
    if (proxy_pid_ > 0) {
      // Its clean stop is berth-proxy's own test; SIGKILL is quicker.
      kill(proxy_pid_, SIGKILL);
      int status = 0;
      waitpid(proxy_pid_, &status, 0);
    }
    if (agent_server_ != nullptr) agent_server_->Shutdown(absl::Seconds(1));
  }

  void StartProxy() {
    std::vector<std::string> args = {RunfilePath("services/proxy/berth-proxy"),
                                     "--runtime_dir=" + dir_.Join("run"),
                                     "--state_dir=" + dir_.Join("state")};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string log = dir_.Join("proxy.log");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    ASSERT_EQ(posix_spawn(&proxy_pid_, argv[0], &actions, nullptr, argv.data(),
                          environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
  }

  static void Deadline(grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  }

  std::string AllocateToken() {
    grpc::ClientContext context;
    Deadline(&context);
    pb::AllocateTokenRequest request;
    request.set_sandbox_id("sb");
    pb::AllocateTokenResponse response;
    const grpc::Status status =
        stub_->AllocateToken(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.token();
  }

  // Starts `args` in a new container for `token` (waits for its shim).
  grpc::Status NewContainer(const std::string& token,
                            const std::vector<std::string>& args) {
    grpc::ClientContext context;
    Deadline(&context);
    pb::NewContainerRequest request;
    request.set_token(token);
    request.set_container_id(absl::StrCat("c", ++containers_));
    for (const std::string& arg : args)
      request.mutable_process()->add_args(arg);
    pb::NewContainerResponse response;
    return stub_->NewContainer(&context, request, &response);
  }

  ShimProcess::Options ShimOptions(const std::string& token) {
    ShimProcess::Options options;
    options.args = {"--proxy_socket=" + socket_, "--reconnect_timeout=30s"};
    options.env = {absl::StrCat(kTokenEnvVar, "=", token)};
    return options;
  }

  std::string ProxyLog() { return ReadFileOrEmpty(dir_.Join("proxy.log")); }

  ShortTempDir dir_;
  const std::string socket_ = dir_.Join("run/proxy.sock");
  FakeAgent agent_;
  std::unique_ptr<UnixGrpcServer> agent_server_;
  pid_t proxy_pid_ = -1;
  std::unique_ptr<pb::ProxyService::Stub> stub_;
  int containers_ = 0;
};

TEST_F(ShimThroughProxyTest, OutputExitCodeAndStderr) {
  const std::string token = AllocateToken();
  ShimProcess shim(ShimOptions(token));
  ASSERT_TRUE(
      NewContainer(token, {"emit", "out:hi", "err:oops", "exit:7"}).ok());
  EXPECT_EQ(shim.Wait(), 7) << shim.err() << ProxyLog();
  EXPECT_EQ(shim.out(), "hi");
  EXPECT_EQ(shim.err(), "oops");
}

TEST_F(ShimThroughProxyTest, BulkOutputExactly) {
  constexpr uint64_t kBytes = 16 << 20;
  const std::string token = AllocateToken();
  ShimProcess shim(ShimOptions(token));
  ASSERT_TRUE(NewContainer(token, {"bulk", absl::StrCat(kBytes)}).ok());
  EXPECT_EQ(shim.Wait(), 0) << shim.err() << ProxyLog();
  EXPECT_EQ(shim.out().size(), kBytes);
  EXPECT_TRUE(shim.out() == Bulk(kBytes)) << "stdout differs";
}

TEST_F(ShimThroughProxyTest, StdinThroughCat) {
  const std::string token = AllocateToken();
  ShimProcess shim(ShimOptions(token));
  ASSERT_TRUE(NewContainer(token, {"cat"}).ok());
  const std::string input(200 * 1024 + 5, 'x');
  shim.WriteStdin(input);
  shim.CloseStdin();
  EXPECT_EQ(shim.Wait(), 0) << shim.err() << ProxyLog();
  EXPECT_TRUE(shim.out() == input) << "stdout differs";
}

TEST_F(ShimThroughProxyTest, SignalReachesTheProcessAndExitIs128PlusN) {
  const std::string token = AllocateToken();
  ShimProcess shim(ShimOptions(token));
  ASSERT_TRUE(NewContainer(token, {"wait_signal"}).ok());
  kill(shim.pid(), SIGUSR1);
  EXPECT_EQ(shim.Wait(), 128 + SIGUSR1) << shim.err() << ProxyLog();
}

TEST_F(ShimThroughProxyTest, UnknownTokenExits255AtOnce) {
  ShimProcess shim(ShimOptions("00112233445566778899aabbccddeeff"));
  EXPECT_EQ(shim.Wait(), kShimFailureExitCode);
  EXPECT_THAT(shim.err(), ::testing::HasSubstr("refused the token"));
  EXPECT_THAT(shim.err(), ::testing::HasSubstr("00112233"));
}

// Issue 7, point 6: the agent goes; the shim exits 255 with the proxy's
// message naming the sandbox, without trying again.
TEST_F(ShimThroughProxyTest, AgentGoneExits255NamingTheSandbox) {
  const std::string token = AllocateToken();
  ShimProcess shim(ShimOptions(token));
  ASSERT_TRUE(NewContainer(token, {"wait_signal"}).ok());
  agent_server_->Shutdown(absl::ZeroDuration());
  EXPECT_EQ(shim.Wait(), kShimFailureExitCode) << ProxyLog();
  EXPECT_THAT(shim.err(), ::testing::HasSubstr("sandbox sb"));
  EXPECT_THAT(shim.err(), ::testing::HasSubstr("agent is gone"));
}

// Issue 7, point 6, with the real shim: the proxy is killed while the shim's
// stdout is full (so output is in flight everywhere) and started again; the
// shim resumes and every byte arrives once, in order.
TEST_F(ShimThroughProxyTest, ProxyKilledAndRestartedNothingLostOrTwice) {
  constexpr uint64_t kBytes = 20 << 20;
  const std::string token = AllocateToken();
  absl::Notification read_stdout;
  ShimProcess::Options options = ShimOptions(token);
  options.hold_stdout = &read_stdout;
  ShimProcess shim(options);
  ASSERT_TRUE(NewContainer(token, {"bulk", absl::StrCat(kBytes)}).ok());
  // The shim's stdout fills up: its writes block, and output waits in the
  // proxy and the agent behind it.
  ASSERT_TRUE(berth::testing::WaitFor([&] { return shim.StdoutFull(); }))
      << ProxyLog();
  kill(proxy_pid_, SIGKILL);
  int status = 0;
  waitpid(proxy_pid_, &status, 0);
  proxy_pid_ = -1;
  StartProxy();
  read_stdout.Notify();
  EXPECT_EQ(shim.Wait(), 0) << shim.err() << ProxyLog();
  EXPECT_EQ(shim.out().size(), kBytes);
  EXPECT_TRUE(shim.out() == Bulk(kBytes)) << "stdout differs";
  EXPECT_THAT(ProxyLog(), ::testing::HasSubstr("resumed process"));
}

}  // namespace
}  // namespace shim
}  // namespace berth
