// The berth-proxy binary: flags, proxy.sock, a whole process through it
// (against the fake agent in this test's process), and SIGTERM.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
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
#include "services/common/peer_test_util.h"
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

// Registers sandbox "sb" (its agent at `agent_address`) and allocates a
// token of it into `token`, each call within 30 s.
void RegisterAndAllocate(pb::ProxyService::Stub* stub,
                         const std::string& agent_address, std::string* token) {
  const auto deadline = [](grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  };
  {
    grpc::ClientContext context;
    deadline(&context);
    pb::RegisterSandboxRequest request;
    request.set_sandbox_id("sb");
    request.set_agent_address(agent_address);
    pb::RegisterSandboxResponse response;
    ASSERT_TRUE(stub->RegisterSandbox(&context, request, &response).ok());
  }
  grpc::ClientContext context;
  deadline(&context);
  pb::AllocateTokenRequest request;
  request.set_sandbox_id("sb");
  pb::AllocateTokenResponse response;
  ASSERT_TRUE(stub->AllocateToken(&context, request, &response).ok());
  *token = response.token();
}

TEST(BerthProxyTest, Version) {
  ShortTempDir dir;
  pid_t pid = Spawn({"--version"}, dir.Join("log"));
  ASSERT_GT(pid, 0);
  int status = WaitExit(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_THAT(ReadFileOrEmpty(dir.Join("log")), HasSubstr("0.1.0"));
}

TEST(BerthProxyTest, Help) {
  ShortTempDir dir;
  pid_t pid = Spawn({"--help"}, dir.Join("log"));
  ASSERT_GT(pid, 0);
  int status = WaitExit(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string help = ReadFileOrEmpty(dir.Join("log"));
  EXPECT_THAT(help, HasSubstr("--shim_timeout"));
  EXPECT_THAT(help, HasSubstr("--state_dir"));
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
    EXPECT_EQ(berth::testing::FileMode(socket), 0600);
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

// Who may call proxy.sock: root (and berth-proxy's own uid) only; and a shim
// reaches only the process of its own token: holding token A it gets A's
// process's output and exit, never B's, and A cannot be claimed again.
TEST(BerthProxyTest, OtherUidsAreRefusedAndAShimReachesOnlyItsOwnProcess) {
  ShortTempDir dir;
  testing::FakeAgent agent;
  UnixGrpcServer::Options agent_options;
  agent_options.socket_path = dir.Join("agent.sock");
  agent_options.services = {&agent};
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> agent_server =
      UnixGrpcServer::Start(agent_options);
  ASSERT_TRUE(agent_server.ok()) << agent_server.status();
  const std::string log = dir.Join("log");
  pid_t pid = Spawn(
      {"--runtime_dir=" + dir.Join("run"), "--state_dir=" + dir.Join("state")},
      log);
  ASSERT_GT(pid, 0);
  const std::string socket = dir.Join("run/proxy.sock");
  {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket, absl::Seconds(30));
    ASSERT_TRUE(channel.ok()) << channel.status();

    grpc::Status denied =
        berth::testing::CallHealthAs(socket, berth::testing::Caller{});
    EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << denied.error_message();
    EXPECT_THAT(denied.error_message(),
                HasSubstr("uid 65534 may not call " + socket));

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
      ASSERT_TRUE(stub->RegisterSandbox(&context, request, &response).ok());
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
    auto new_container = [&](const std::string& token, const std::string& id,
                             const std::string& out, int code) {
      grpc::ClientContext context;
      deadline(&context);
      pb::NewContainerRequest request;
      request.set_token(token);
      request.set_container_id(id);
      request.mutable_process()->add_args("emit");
      request.mutable_process()->add_args("out:" + out);
      request.mutable_process()->add_args(absl::StrCat("exit:", code));
      pb::NewContainerResponse response;
      return stub->NewContainer(&context, request, &response);
    };
    struct Seen {
      std::string out;
      int exit_code = -1;
      grpc::Status status;
    };
    auto run_shim = [&](const std::string& token, bool* connected) {
      Seen seen;
      grpc::ClientContext context;
      auto shim = stub->Connect(&context);
      pb::ConnectRequest hello;
      hello.mutable_hello()->set_token(token);
      shim->Write(hello);
      pb::ConnectResponse down;
      while (shim->Read(&down)) {
        if (down.has_connected()) *connected = true;
        if (down.has_stdout()) seen.out += down.stdout().data();
        if (down.has_exit()) seen.exit_code = down.exit().exit_code();
      }
      seen.status = shim->Finish();
      return seen;
    };

    const std::string a = allocate();
    const std::string b = allocate();
    // B's process waits for B's shim; A's shim must not be given it.
    grpc::Status b_started;
    std::thread b_starter(
        [&] { b_started = new_container(b, "cb", "bee", 2); });
    grpc::Status a_started;
    std::thread a_starter(
        [&] { a_started = new_container(a, "ca", "aye", 1); });
    bool a_connected = false;
    Seen shim_a = run_shim(a, &a_connected);
    a_starter.join();
    EXPECT_TRUE(a_started.ok()) << a_started.error_message();
    EXPECT_TRUE(a_connected);
    EXPECT_TRUE(shim_a.status.ok()) << shim_a.status.error_message();
    EXPECT_EQ(shim_a.out, "aye");
    EXPECT_EQ(shim_a.exit_code, 1);

    // Token A again (as a resume, too): used up, refused.
    bool again_connected = false;
    Seen again = run_shim(a, &again_connected);
    EXPECT_FALSE(again_connected);
    EXPECT_EQ(again.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << again.status.error_message();
    EXPECT_EQ(again.out, "");

    bool b_connected = false;
    Seen shim_b = run_shim(b, &b_connected);
    b_starter.join();
    EXPECT_TRUE(b_started.ok()) << b_started.error_message();
    EXPECT_EQ(shim_b.out, "bee");
    EXPECT_EQ(shim_b.exit_code, 2);
  }
  kill(pid, SIGTERM);
  int status = WaitExit(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << ReadFileOrEmpty(log);
  (*agent_server)->Shutdown(absl::Seconds(1));
}

// Point 6 of issue 7: berth-proxy killed (SIGKILL) and started again on the
// same directories while a process writes 50 MB; the shim reconnects with its
// token and offset and gets every byte once, in order, then the exit.
TEST(BerthProxyTest, ShimResumesAfterTheProxyIsKilled) {
  ShortTempDir dir;
  testing::FakeAgent agent;
  UnixGrpcServer::Options agent_options;
  agent_options.socket_path = dir.Join("agent.sock");
  agent_options.services = {&agent};
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> agent_server =
      UnixGrpcServer::Start(agent_options);
  ASSERT_TRUE(agent_server.ok()) << agent_server.status();
  const std::vector<std::string> flags = {"--runtime_dir=" + dir.Join("run"),
                                          "--state_dir=" + dir.Join("state")};
  const std::string socket = dir.Join("run/proxy.sock");
  const std::string log = dir.Join("log");
  auto connect = [&]() -> std::unique_ptr<pb::ProxyService::Stub> {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket, absl::Seconds(30));
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return nullptr;
    return pb::ProxyService::NewStub(*channel);
  };
  auto deadline = [](grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  };
  constexpr uint64_t kBytes = 50 << 20;
  std::string out;
  bool offsets_ok = true;
  auto take = [&](const pb::ConnectResponse& down) {
    if (!down.has_stdout()) return;
    if (down.stdout().offset() != out.size()) offsets_ok = false;
    out += down.stdout().data();
  };

  pid_t pid = Spawn(flags, log);
  ASSERT_GT(pid, 0);
  std::string token;
  {
    std::unique_ptr<pb::ProxyService::Stub> stub = connect();
    ASSERT_NE(stub, nullptr);
    ASSERT_NO_FATAL_FAILURE(
        RegisterAndAllocate(stub.get(), dir.Join("agent.sock"), &token));
    grpc::ClientContext shim_context;
    auto shim = stub->Connect(&shim_context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    ASSERT_TRUE(shim->Write(hello));
    {
      grpc::ClientContext context;
      deadline(&context);
      pb::NewContainerRequest request;
      request.set_token(token);
      request.set_container_id("c");
      request.mutable_process()->add_args("bulk");
      request.mutable_process()->add_args(absl::StrCat(kBytes));
      pb::NewContainerResponse response;
      grpc::Status status = stub->NewContainer(&context, request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
    pb::ConnectResponse down;
    while (out.size() < (5 << 20) && shim->Read(&down)) take(down);
    ASSERT_GE(out.size(), 5u << 20);
    kill(pid, SIGKILL);
    WaitExit(pid);
    while (shim->Read(&down)) take(down);
    EXPECT_EQ(shim->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  ASSERT_LT(out.size(), kBytes);

  pid = Spawn(flags, log);
  ASSERT_GT(pid, 0);
  bool exit_last = false;
  {
    std::unique_ptr<pb::ProxyService::Stub> stub = connect();
    ASSERT_NE(stub, nullptr);
    grpc::ClientContext shim_context;
    auto shim = stub->Connect(&shim_context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    hello.mutable_hello()->set_resume(true);
    hello.mutable_hello()->set_stdout_offset(out.size());
    ASSERT_TRUE(shim->Write(hello));
    pb::ConnectResponse down;
    while (shim->Read(&down)) {
      exit_last = down.has_exit();
      take(down);
    }
    grpc::Status status = shim->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  kill(pid, SIGTERM);
  int status = WaitExit(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  (*agent_server)->Shutdown(absl::Seconds(1));

  EXPECT_TRUE(exit_last);
  EXPECT_TRUE(offsets_ok);
  ASSERT_EQ(out.size(), kBytes);
  uint64_t differing = 0;
  for (uint64_t i = 0; i < kBytes; ++i) {
    if (out[i] != testing::PatternByte(i)) ++differing;
  }
  EXPECT_EQ(differing, 0u);
  std::string logged = ReadFileOrEmpty(log);
  EXPECT_THAT(logged, HasSubstr("resumed process"));
  EXPECT_THAT(logged, ::testing::Not(HasSubstr(token)));
}

// berth-proxy SIGKILLed while the agent has started a process but not yet
// answered (the fake agent holds its answer): the next berth-proxy on the
// same directories knows the token (the session was written before the
// agent was asked), so the shim resumes and gets the output and the exit.
TEST(BerthProxyTest, ShimResumesAProcessStartedAsTheProxyWasKilled) {
  ShortTempDir dir;
  testing::FakeAgent agent;
  UnixGrpcServer::Options agent_options;
  agent_options.socket_path = dir.Join("agent.sock");
  agent_options.services = {&agent};
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> agent_server =
      UnixGrpcServer::Start(agent_options);
  ASSERT_TRUE(agent_server.ok()) << agent_server.status();
  const std::vector<std::string> flags = {"--runtime_dir=" + dir.Join("run"),
                                          "--state_dir=" + dir.Join("state")};
  const std::string socket = dir.Join("run/proxy.sock");
  const std::string log = dir.Join("log");
  auto connect = [&]() -> std::unique_ptr<pb::ProxyService::Stub> {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket, absl::Seconds(30));
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return nullptr;
    return pb::ProxyService::NewStub(*channel);
  };
  auto deadline = [](grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  };

  pid_t pid = Spawn(flags, log);
  ASSERT_GT(pid, 0);
  std::string token;
  {
    std::unique_ptr<pb::ProxyService::Stub> stub = connect();
    ASSERT_NE(stub, nullptr);
    ASSERT_NO_FATAL_FAILURE(
        RegisterAndAllocate(stub.get(), dir.Join("agent.sock"), &token));
    grpc::ClientContext shim_context;
    auto shim = stub->Connect(&shim_context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    ASSERT_TRUE(shim->Write(hello));
    agent.HoldStartAnswers(true);
    grpc::Status started;
    std::thread starter([&] {
      grpc::ClientContext context;
      deadline(&context);
      pb::NewContainerRequest request;
      request.set_token(token);
      request.set_container_id("c");
      request.mutable_process()->add_args("emit");
      request.mutable_process()->add_args("out:hello");
      request.mutable_process()->add_args("err:oops");
      request.mutable_process()->add_args("exit:7");
      pb::NewContainerResponse response;
      started = stub->NewContainer(&context, request, &response);
    });
    const bool agent_started = agent.Await(
        [](const std::map<std::string, testing::FakeAgent::Process>& p) {
          return !p.empty();
        });
    kill(pid, SIGKILL);
    WaitExit(pid);
    agent.HoldStartAnswers(false);
    starter.join();
    ASSERT_TRUE(agent_started) << "the agent was never asked to start it";
    EXPECT_FALSE(started.ok()) << "the start was answered";
    pb::ConnectResponse down;
    while (shim->Read(&down)) {
    }
    EXPECT_EQ(shim->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }

  pid = Spawn(flags, log);
  ASSERT_GT(pid, 0);
  std::string out;
  std::string err;
  bool exit_last = false;
  int exit_code = -1;
  grpc::Status resumed;
  {
    std::unique_ptr<pb::ProxyService::Stub> stub = connect();
    ASSERT_NE(stub, nullptr);
    grpc::ClientContext shim_context;
    deadline(&shim_context);
    auto shim = stub->Connect(&shim_context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    hello.mutable_hello()->set_resume(true);
    ASSERT_TRUE(shim->Write(hello));
    pb::ConnectResponse down;
    while (shim->Read(&down)) {
      exit_last = down.has_exit();
      if (down.has_exit()) exit_code = down.exit().exit_code();
      if (down.has_stdout()) out += down.stdout().data();
      if (down.has_stderr()) err += down.stderr().data();
    }
    resumed = shim->Finish();
  }
  kill(pid, SIGTERM);
  int status = WaitExit(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  (*agent_server)->Shutdown(absl::Seconds(1));

  EXPECT_TRUE(resumed.ok()) << resumed.error_message();
  EXPECT_EQ(out, "hello");
  EXPECT_EQ(err, "oops");
  EXPECT_TRUE(exit_last);
  EXPECT_EQ(exit_code, 7);
  EXPECT_EQ(agent.processes().size(), 1u);
}

}  // namespace
}  // namespace proxy
}  // namespace berth
