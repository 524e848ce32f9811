// The berth-proxy binary: flags, proxy.sock, a whole process through it
// (against the fake agent in this test's process), and SIGTERM.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/proxy/fake_agent.h"

extern char** environ;

namespace berth {
namespace proxy {
namespace {

namespace pb = ::berth::proxy::v1;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::testing::HasSubstr;

// Runs the binary with `args`, stdout and stderr to `log`; its pid.
pid_t Spawn(std::vector<std::string> args, const std::string& log) {
  std::string binary = RunfilePath("services/proxy/berth-proxy");
  args.insert(args.begin(), binary);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(),
                       environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(BerthProxyTest, Version) {
  ShortTempDir dir;
  pid_t pid = Spawn({"--version"}, dir.Join("log"));
  ASSERT_GT(pid, 0);
  int status = WaitExit(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_THAT(ReadFileOrEmpty(dir.Join("log")), HasSubstr("0.1.0"));
}

TEST(BerthProxyTest, ServesAProcessAndStopsOnSigterm) {
  ShortTempDir dir;
  testing::FakeAgent agent;
  UnixGrpcServer::Options agent_options;
  agent_options.socket_path = dir.Join("agent.sock");
  agent_options.services = {&agent};
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> agent_server =
      UnixGrpcServer::Start(agent_options);
  ASSERT_TRUE(agent_server.ok()) << agent_server.status();

  const std::string log = dir.Join("log");
  pid_t pid = Spawn({"--runtime_dir=" + dir.Join("run"),
                     "--state_dir=" + dir.Join("state"), "--shim_timeout=1s"},
                    log);
  ASSERT_GT(pid, 0);
  const std::string socket = dir.Join("run/proxy.sock");
  {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket, absl::Seconds(30));
    ASSERT_TRUE(channel.ok()) << channel.status();
    EXPECT_EQ(berth::testing::FileMode(socket), 0660);
    std::unique_ptr<pb::ProxyService::Stub> stub =
        pb::ProxyService::NewStub(*channel);
    auto deadline = [](grpc::ClientContext* context) {
      context->set_deadline(
          absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    };
    {
      grpc::ClientContext context;
      deadline(&context);
      pb::RegisterSandboxRequest request;
      request.set_sandbox_id("sb");
      request.set_agent_address("unix:" + dir.Join("agent.sock"));
      pb::RegisterSandboxResponse response;
      grpc::Status status = stub->RegisterSandbox(&context, request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(response.agent_version(), "fake-agent-1");
    }
    auto allocate = [&] {
      grpc::ClientContext context;
      deadline(&context);
      pb::AllocateTokenRequest request;
      request.set_sandbox_id("sb");
      pb::AllocateTokenResponse response;
      EXPECT_TRUE(stub->AllocateToken(&context, request, &response).ok());
      return response.token();
    };
    auto new_container = [&](const std::string& token,
                             pb::NewContainerResponse* response) {
      grpc::ClientContext context;
      deadline(&context);
      pb::NewContainerRequest request;
      request.set_token(token);
      request.set_container_id("c");
      request.mutable_process()->add_args("emit");
      request.mutable_process()->add_args("out:hi");
      request.mutable_process()->add_args("exit:7");
      return stub->NewContainer(&context, request, response);
    };

    // --shim_timeout: no shim, DEADLINE_EXCEEDED after 1 s.
    std::string lost = allocate();
    pb::NewContainerResponse response;
    grpc::Status status = new_container(lost, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_THAT(status.error_message(), HasSubstr(lost.substr(0, 8)));

    // A shim, and the process through it.
    std::string token = allocate();
    grpc::ClientContext shim_context;
    auto shim = stub->Connect(&shim_context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    ASSERT_TRUE(shim->Write(hello));
    pb::ConnectResponse down;
    ASSERT_TRUE(shim->Read(&down));
    EXPECT_TRUE(down.has_connected());
    status = new_container(token, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    std::string out;
    int exit_code = -1;
    while (shim->Read(&down)) {
      if (down.has_stdout()) out += down.stdout().data();
      if (down.has_exit()) exit_code = down.exit().exit_code();
    }
    EXPECT_TRUE(shim->Finish().ok());
    EXPECT_EQ(out, "hi");
    EXPECT_EQ(exit_code, 7);

    std::string logged = ReadFileOrEmpty(log);
    EXPECT_THAT(logged, HasSubstr(absl::StrCat(
                            "waiting for shim to register itself with token ",
                            lost.substr(0, 8), " (timeout in 1 seconds)")));
    EXPECT_THAT(logged, ::testing::Not(HasSubstr(lost)));
    EXPECT_THAT(logged, ::testing::Not(HasSubstr(token)));
  }
  kill(pid, SIGTERM);
  int status = WaitExit(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << ReadFileOrEmpty(log);
  EXPECT_FALSE(berth::testing::PathExists(socket));
  (*agent_server)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace proxy
}  // namespace berth
