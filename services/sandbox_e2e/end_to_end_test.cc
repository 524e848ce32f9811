// The three real binaries together (issue 7, point 8): berth-agent as a plain
// process on a socket in a temporary directory, berth-proxy on temporary
// runtime and state directories with a shortened --shim_timeout, and
// berth-shim processes whose stdio are pipes of this test, which also plays
// the driver (RegisterSandbox, AllocateToken, NewContainer, ExecCmd).
//
// The sandboxed processes write what they print also to a file (`tee`), so
// what a shim wrote can be compared byte for byte with what its process
// wrote.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/agent/v1/agent.grpc.pb.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/test_util.h"
#include "services/shim/shim_process.h"

extern char** environ;

namespace berth {
namespace {

namespace agent_pb = ::berth::agent::v1;
namespace pb = ::berth::proxy::v1;
using ::berth::shim::testing::ShimProcess;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::HasSubstr;

constexpr int kShimFailure = 255;

// Starts `args` with stdout and stderr appended to `log`.
pid_t Spawn(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int error =
      posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? pid : -1;
}

void KillAndReap(pid_t* pid) {
  if (*pid <= 0) return;
  kill(*pid, SIGKILL);
  int status = 0;
  waitpid(*pid, &status, 0);
  *pid = -1;
}

void Deadline(grpc::ClientContext* context,
              absl::Duration timeout = absl::Seconds(60)) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// `/bin/sh -c script` with a PATH (the agent gives a process exactly `env`).
agent_pb::ProcessSpec Sh(const std::string& script) {
  agent_pb::ProcessSpec spec;
  spec.add_args("/bin/sh");
  spec.add_args("-c");
  spec.add_args(script);
  spec.add_env("PATH=/usr/bin:/bin");
  return spec;
}

// Random bytes to stdout and, the same bytes, to `file`.
agent_pb::ProcessSpec RandomOutput(uint64_t bytes, const std::string& file) {
  return Sh(absl::StrCat("head -c ", bytes, " /dev/urandom | tee ", file));
}

// The proxy's ProcessIo calls to the agent carry a deadline (a year): the
// agent refuses every call without one. These tests found that missing.

class EndToEndTest : public ::testing::Test {
 protected:
  static constexpr absl::Duration kShimTimeout = absl::Seconds(2);

  void SetUp() override {
    StartAgent();
    ASSERT_TRUE(WaitFor([&] { return PathExists(agent_socket_); }))
        << "berth-agent did not listen: " << AgentLog();
    absl::StatusOr<std::shared_ptr<grpc::Channel>> agent_channel =
        DialUnix(agent_socket_, absl::Seconds(30));
    ASSERT_TRUE(agent_channel.ok()) << agent_channel.status();
    agent_ = agent_pb::AgentService::NewStub(*agent_channel);
    StartProxy();
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(proxy_socket_, absl::Seconds(30));
    ASSERT_TRUE(channel.ok()) << channel.status();
    proxy_ = pb::ProxyService::NewStub(*channel);
    grpc::ClientContext context;
    Deadline(&context);
    pb::RegisterSandboxRequest request;
    request.set_sandbox_id("sb");
    request.set_agent_address("unix:" + agent_socket_);
    pb::RegisterSandboxResponse response;
    const grpc::Status status =
        proxy_->RegisterSandbox(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  void TearDown() override {
    KillAndReap(&proxy_pid_);
    if (agent_pid_ > 0) {
      // SIGTERM: the agent kills its processes before it exits.
      kill(agent_pid_, SIGTERM);
      int status = 0;
      waitpid(agent_pid_, &status, 0);
      agent_pid_ = -1;
    }
    // Processes the agent could not take with it (it was SIGKILLed).
    for (pid_t pid : orphans_) kill(pid, SIGKILL);
  }

  void StartAgent() {
    agent_pid_ = Spawn({RunfilePath("services/agent/berth-agent"),
                        "--socket=" + agent_socket_, "--sandbox_id=sb"},
                       dir_.Join("agent.log"));
    ASSERT_GT(agent_pid_, 0);
  }

  void StartProxy() {
    proxy_pid_ = Spawn(
        {RunfilePath("services/proxy/berth-proxy"),
         "--runtime_dir=" + dir_.Join("run"),
         "--state_dir=" + dir_.Join("state"),
         absl::StrCat("--shim_timeout=", absl::FormatDuration(kShimTimeout))},
        dir_.Join("proxy.log"));
    ASSERT_GT(proxy_pid_, 0);
  }

  std::string AllocateToken() {
    grpc::ClientContext context;
    Deadline(&context);
    pb::AllocateTokenRequest request;
    request.set_sandbox_id("sb");
    pb::AllocateTokenResponse response;
    const grpc::Status status =
        proxy_->AllocateToken(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.token();
  }

  // NewContainer for `token` in container `container` (held until its shim
  // connected, at most `shim_timeout`, else the proxy's flag).
  grpc::Status NewContainer(const std::string& token,
                            const std::string& container,
                            const agent_pb::ProcessSpec& process,
                            absl::Duration shim_timeout = absl::ZeroDuration(),
                            pb::NewContainerResponse* response = nullptr) {
    grpc::ClientContext context;
    Deadline(&context);
    pb::NewContainerRequest request;
    request.set_token(token);
    request.set_container_id(container);
    *request.mutable_process() = process;
    if (shim_timeout > absl::ZeroDuration()) {
      request.mutable_shim_timeout()->set_seconds(
          absl::ToInt64Seconds(shim_timeout));
    }
    pb::NewContainerResponse unused;
    return proxy_->NewContainer(&context, request,
                                response != nullptr ? response : &unused);
  }

  grpc::Status ExecCmd(const std::string& token, const std::string& container,
                       const agent_pb::ProcessSpec& process,
                       pb::ExecCmdResponse* response = nullptr) {
    grpc::ClientContext context;
    Deadline(&context);
    pb::ExecCmdRequest request;
    request.set_token(token);
    request.set_container_id(container);
    *request.mutable_process() = process;
    request.mutable_shim_timeout()->set_seconds(30);
    pb::ExecCmdResponse unused;
    return proxy_->ExecCmd(&context, request,
                           response != nullptr ? response : &unused);
  }

  // The agent's own answer about a process.
  grpc::Status WaitProcess(const std::string& container,
                           const std::string& process,
                           agent_pb::WaitProcessResponse* response,
                           absl::Duration timeout = absl::Seconds(30)) {
    grpc::ClientContext context;
    Deadline(&context, timeout);
    agent_pb::WaitProcessRequest request;
    request.set_container_id(container);
    request.set_process_id(process);
    return agent_->WaitProcess(&context, request, response);
  }

  ShimProcess::Options ShimOptions(const std::string& token) {
    ShimProcess::Options options;
    options.args = {"--proxy_socket=" + proxy_socket_,
                    "--reconnect_timeout=30s"};
    options.env = {absl::StrCat("BERTH_SHIM_TOKEN=", token)};
    return options;
  }

  std::string Logs() {
    return absl::StrCat("\n--- proxy log:\n",
                        ReadFileOrEmpty(dir_.Join("proxy.log")),
                        "\n--- agent log:\n", AgentLog());
  }
  std::string AgentLog() { return ReadFileOrEmpty(dir_.Join("agent.log")); }

  // Whether what the shim wrote is exactly what its process wrote to `file`.
  static void ExpectSameOutput(const std::string& shim_out,
                               const std::string& file, uint64_t bytes) {
    const std::string written = ReadFileOrEmpty(file);
    EXPECT_EQ(written.size(), bytes) << file;
    EXPECT_EQ(shim_out.size(), bytes);
    EXPECT_TRUE(shim_out == written)
        << "the shim's stdout differs from " << file;
  }

  ShortTempDir dir_;
  const std::string agent_socket_ = dir_.Join("agent.sock");
  const std::string proxy_socket_ = dir_.Join("run/proxy.sock");
  pid_t agent_pid_ = -1;
  pid_t proxy_pid_ = -1;
  std::vector<pid_t> orphans_;
  std::unique_ptr<agent_pb::AgentService::Stub> agent_;
  std::unique_ptr<pb::ProxyService::Stub> proxy_;
};

// Point 8: the shim connects 2 s after NewContainer; the process starts only
// then, and all its output arrives.
TEST_F(EndToEndTest, ShimConnectingLateGetsAllOutput) {
  constexpr uint64_t kBytes = 10'000'000;
  const std::string file = dir_.Join("out");
  const std::string token = AllocateToken();
  grpc::Status status;
  std::thread call([&] {
    status =
        NewContainer(token, "c", RandomOutput(kBytes, file), absl::Seconds(30));
  });
  absl::SleepFor(absl::Seconds(2));
  EXPECT_FALSE(PathExists(file)) << "the process started before its shim";
  ShimProcess shim(ShimOptions(token));
  call.join();
  ASSERT_TRUE(status.ok()) << status.error_message() << Logs();
  EXPECT_EQ(shim.Wait(), 0) << shim.err() << Logs();
  ExpectSameOutput(shim.out(), file, kBytes);
}

// Point 8: no shim: DEADLINE_EXCEEDED after --shim_timeout, nothing started
// on the agent, and the token is released.
TEST_F(EndToEndTest, NoShimDeadlineExceededAndNothingStarted) {
  const std::string marker = dir_.Join("started");
  const std::string token = AllocateToken();
  const grpc::Status status = NewContainer(
      token, "c", Sh(absl::StrCat("touch ", marker, "; sleep 1000")));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << status.error_message();
  EXPECT_THAT(
      status.error_message(),
      HasSubstr("timeout waiting for shim with token " + token.substr(0, 8)));
  EXPECT_THAT(status.error_message(), ::testing::Not(HasSubstr(token)));
  EXPECT_FALSE(PathExists(marker)) << "the process was started";
  agent_pb::WaitProcessResponse response;
  const grpc::Status wait =
      WaitProcess("c", token.substr(0, 8) + "-1", &response);
  EXPECT_EQ(wait.error_code(), grpc::StatusCode::NOT_FOUND)
      << wait.error_message();
  // The token is released: a shim coming now is refused.
  ShimProcess late(ShimOptions(token));
  EXPECT_EQ(late.Wait(), kShimFailure);
  EXPECT_THAT(late.err(), HasSubstr("refused the token"));
  EXPECT_THAT(ReadFileOrEmpty(dir_.Join("proxy.log")),
              HasSubstr("waiting for shim to register itself with token " +
                        token.substr(0, 8)));
}

// Point 8: a second call is served (start to exit) while a first waits for
// its shim.
TEST_F(EndToEndTest, SecondCallServedWhileFirstWaits) {
  const std::string first = AllocateToken();
  std::atomic<bool> first_returned{false};
  grpc::Status first_status;
  std::thread call([&] {
    first_status =
        NewContainer(first, "c1", Sh("echo first"), absl::Seconds(60));
    first_returned = true;
  });
  absl::SleepFor(absl::Milliseconds(300));
  const std::string second = AllocateToken();
  ShimProcess second_shim(ShimOptions(second));
  const grpc::Status second_status =
      NewContainer(second, "c2", Sh("echo second"));
  EXPECT_TRUE(second_status.ok()) << second_status.error_message() << Logs();
  EXPECT_EQ(second_shim.Wait(), 0) << second_shim.err() << Logs();
  EXPECT_EQ(second_shim.out(), "second\n");
  EXPECT_FALSE(first_returned) << "the first call did not wait for its shim";
  ShimProcess first_shim(ShimOptions(first));
  call.join();
  EXPECT_TRUE(first_status.ok()) << first_status.error_message() << Logs();
  EXPECT_EQ(first_shim.Wait(), 0) << first_shim.err() << Logs();
  EXPECT_EQ(first_shim.out(), "first\n");
}

// Point 8: two processes in one sandbox (NewContainer and ExecCmd); the
// first's shim is stopped with SIGSTOP. The other's 100 MB pass completely,
// and the stopped one's output is intact after SIGCONT.
TEST_F(EndToEndTest, StoppedShimHoldsOnlyItsOwnProcess) {
  constexpr uint64_t kStoppedBytes = 20'000'000;
  constexpr uint64_t kBytes = 100'000'000;
  const std::string stopped_file = dir_.Join("stopped");
  const std::string file = dir_.Join("other");
  const std::string stopped_token = AllocateToken();
  ShimProcess stopped(ShimOptions(stopped_token));
  pb::NewContainerResponse stopped_process;
  ASSERT_TRUE(NewContainer(stopped_token, "c",
                           RandomOutput(kStoppedBytes, stopped_file),
                           absl::Seconds(30), &stopped_process)
                  .ok())
      << Logs();
  ASSERT_EQ(kill(stopped.pid(), SIGSTOP), 0);

  const std::string token = AllocateToken();
  ShimProcess other(ShimOptions(token));
  ASSERT_TRUE(ExecCmd(token, "c", RandomOutput(kBytes, file)).ok()) << Logs();
  EXPECT_EQ(other.Wait(), 0) << other.err() << Logs();
  ExpectSameOutput(other.out(), file, kBytes);

  // The stopped shim's process is held, not ended.
  agent_pb::WaitProcessResponse exit;
  EXPECT_EQ(WaitProcess("c", stopped_process.process_id(), &exit,
                        absl::Milliseconds(200))
                .error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED)
      << "the stopped shim's process ended: " << exit.ShortDebugString();
  ASSERT_EQ(kill(stopped.pid(), SIGCONT), 0);
  EXPECT_EQ(stopped.Wait(), 0) << stopped.err() << Logs();
  ExpectSameOutput(stopped.out(), stopped_file, kStoppedBytes);
}

// cat echoing 8 MiB while its stdin still flows: more than the agent's 1 MiB
// window of unacknowledged output. The shim's acks must reach the agent
// while stdin waits for cat (which waits for the agent to read its stdout):
// they go out of band (AckOutput), not behind stdin on the process's
// stream, where they deadlocked after about 1 MiB.
TEST_F(EndToEndTest, CatEchoesMebibytesWhileStdinFlows) {
  constexpr size_t kBytes = 8 << 20;
  constexpr size_t kPiece = 64 << 10;
  signal(SIGPIPE, SIG_IGN);  // a shim that died fails the writes, not us
  std::string input(kBytes, '\0');
  for (size_t i = 0; i < kBytes; ++i) {
    input[i] = static_cast<char>((i * 131 + (i >> 12)) & 0xff);
  }
  const std::string token = AllocateToken();
  ShimProcess shim(ShimOptions(token));
  agent_pb::ProcessSpec cat;
  cat.add_args("cat");
  cat.add_env("PATH=/usr/bin:/bin");
  pb::NewContainerResponse process;
  ASSERT_TRUE(NewContainer(token, "c", cat, absl::Seconds(30), &process).ok())
      << Logs();
  std::thread writer([&] {
    for (size_t at = 0; at < kBytes; at += kPiece) {
      shim.WriteStdin(input.substr(at, kPiece));
    }
    shim.CloseStdin();
  });
  // Stalled, the shim is killed after 60 s and its output is short.
  EXPECT_EQ(shim.Wait(), 0) << shim.err() << Logs();
  writer.join();
  EXPECT_EQ(shim.out().size(), kBytes);
  EXPECT_TRUE(shim.out() == input) << "cat's output differs from its input";
}

// Point 8: exit codes, and 128 + N for a signal, including one the shim
// forwarded.
TEST_F(EndToEndTest, ExitCodesAndSignals) {
  {
    const std::string token = AllocateToken();
    ShimProcess shim(ShimOptions(token));
    ASSERT_TRUE(
        NewContainer(token, "c", Sh("echo out; echo err >&2; exit 7")).ok())
        << Logs();
    EXPECT_EQ(shim.Wait(), 7) << shim.err() << Logs();
    EXPECT_EQ(shim.out(), "out\n");
    EXPECT_EQ(shim.err(), "err\n");
  }
  {
    const std::string token = AllocateToken();
    ShimProcess shim(ShimOptions(token));
    ASSERT_TRUE(ExecCmd(token, "c", Sh("kill -TERM $$")).ok()) << Logs();
    EXPECT_EQ(shim.Wait(), 128 + SIGTERM) << shim.err() << Logs();
  }
  {
    const std::string token = AllocateToken();
    ShimProcess shim(ShimOptions(token));
    agent_pb::ProcessSpec sleep;
    sleep.add_args("sleep");
    sleep.add_args("1000");
    sleep.add_env("PATH=/usr/bin:/bin");
    ASSERT_TRUE(ExecCmd(token, "c", sleep).ok()) << Logs();
    ASSERT_EQ(kill(shim.pid(), SIGUSR1), 0);
    EXPECT_EQ(shim.Wait(), 128 + SIGUSR1) << shim.err() << Logs();
  }
}

// Point 6: berth-proxy SIGKILLed and restarted on the same state directory
// while a process writes 50 MB: the process keeps running, the shim
// reconnects and resumes, and what it wrote is exactly what the process
// wrote.
TEST_F(EndToEndTest, ProxyKilledAndRestartedWhileOutputFlows) {
  constexpr uint64_t kBytes = 50'000'000;
  const std::string file = dir_.Join("out");
  const std::string token = AllocateToken();
  absl::Notification read_stdout;
  ShimProcess::Options options = ShimOptions(token);
  options.hold_stdout = &read_stdout;  // output in flight everywhere
  ShimProcess shim(options);
  pb::NewContainerResponse process;
  ASSERT_TRUE(NewContainer(token, "c", RandomOutput(kBytes, file),
                           absl::Seconds(30), &process)
                  .ok())
      << Logs();
  absl::SleepFor(absl::Milliseconds(300));  // let the pipes and window fill
  KillAndReap(&proxy_pid_);
  agent_pb::WaitProcessResponse exit;
  EXPECT_EQ(
      WaitProcess("c", process.process_id(), &exit, absl::Milliseconds(200))
          .error_code(),
      grpc::StatusCode::DEADLINE_EXCEEDED)
      << "the process ended with the proxy: " << exit.ShortDebugString();
  StartProxy();
  read_stdout.Notify();
  EXPECT_EQ(shim.Wait(), 0) << shim.err() << Logs();
  ExpectSameOutput(shim.out(), file, kBytes);
  EXPECT_THAT(ReadFileOrEmpty(dir_.Join("proxy.log")),
              HasSubstr("resumed process"));
  ASSERT_TRUE(WaitProcess("c", process.process_id(), &exit).ok());
  EXPECT_EQ(exit.exit().exit_code(), 0);
  EXPECT_EQ(exit.exit().signal(), 0);
}

// Point 6: the agent killed: every shim of its sandbox exits 255 naming the
// sandbox.
TEST_F(EndToEndTest, AgentKilledEveryShimExits255NamingTheSandbox) {
  std::vector<std::unique_ptr<ShimProcess>> shims;
  for (int i = 0; i < 2; ++i) {
    const std::string token = AllocateToken();
    shims.push_back(std::make_unique<ShimProcess>(ShimOptions(token)));
    pb::NewContainerResponse process;
    ASSERT_TRUE(NewContainer(token, absl::StrCat("c", i), Sh("sleep 1000"),
                             absl::Seconds(30), &process)
                    .ok())
        << Logs();
    orphans_.push_back(process.pid());
  }
  KillAndReap(&agent_pid_);
  for (std::unique_ptr<ShimProcess>& shim : shims) {
    EXPECT_EQ(shim->Wait(), kShimFailure) << shim->err() << Logs();
    EXPECT_THAT(shim->err(), HasSubstr("sandbox sb"));
  }
}

// Point 6: a shim killed: its process gets SIGHUP.
TEST_F(EndToEndTest, ShimKilledItsProcessGetsSighup) {
  const std::string token = AllocateToken();
  ShimProcess shim(ShimOptions(token));
  agent_pb::ProcessSpec sleep;
  sleep.add_args("sleep");
  sleep.add_args("1000");
  sleep.add_env("PATH=/usr/bin:/bin");
  pb::NewContainerResponse process;
  ASSERT_TRUE(NewContainer(token, "c", sleep, absl::Seconds(30), &process).ok())
      << Logs();
  ASSERT_EQ(kill(shim.pid(), SIGKILL), 0);
  EXPECT_EQ(shim.Wait(), -SIGKILL);
  agent_pb::WaitProcessResponse exit;
  const grpc::Status status = WaitProcess("c", process.process_id(), &exit);
  ASSERT_TRUE(status.ok()) << status.error_message() << Logs();
  EXPECT_EQ(exit.exit().signal(), SIGHUP) << exit.ShortDebugString();
}

}  // namespace
}  // namespace berth
