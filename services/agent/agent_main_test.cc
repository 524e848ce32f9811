// berth-agent as a binary: flags, serving on --socket, and the exits (0
// after DestroySandbox has answered, 0 on SIGTERM), run as a child process
// with its output in a file.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/agent/v1/agent.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

extern char** environ;

namespace berth::agent {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;

// Runs `binary` (a runfile path) with `args`; its stdout and stderr go to
// `output`.
pid_t SpawnBinary(const std::string& binary,
                  const std::vector<std::string>& args,
                  const std::string& output) {
  std::vector<std::string> argv_strings = {RunfilePath(binary)};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ),
            0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Runs berth-agent with `args`, as SpawnBinary.
pid_t Spawn(const std::vector<std::string>& args, const std::string& output) {
  return SpawnBinary("services/agent/berth-agent", args, output);
}

// The exit code, or -1 when it did not exit within 30 s (then killed).
int WaitExit(pid_t pid) {
  int status = 0;
  const bool exited =
      WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; });
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  return context;
}

TEST(AgentMainTest, VersionAndHelp) {
  ShortTempDir dir;
  const std::string out = dir.Join("out");
  ASSERT_EQ(WaitExit(Spawn({"--version"}, out)), 0);
  EXPECT_TRUE(absl::StrContains(ReadFileOrEmpty(out), "0.1.0"))
      << ReadFileOrEmpty(out);
  ASSERT_EQ(WaitExit(Spawn({"--help"}, out)), 0);
  const std::string help = ReadFileOrEmpty(out);
  EXPECT_TRUE(absl::StrContains(help, "--socket")) << help;
  EXPECT_TRUE(absl::StrContains(help, "output_window_bytes")) << help;
  // Without a socket it says so and fails.
  EXPECT_EQ(WaitExit(Spawn({}, out)), 2);
  EXPECT_TRUE(absl::StrContains(ReadFileOrEmpty(out), "--socket"));
}

// --enter_root_fd naming no directory: the agent stops before serving.
// (Entering a root, through berth-agent-boot, is tested by the sandbox
// driver's tests: services/driver/sandbox.)
TEST(AgentMainTest, EnterRootFdThatIsNoDirectoryFails) {
  ShortTempDir dir;
  const std::string socket = dir.Join("agent.sock");
  const std::string out = dir.Join("out");
  EXPECT_EQ(WaitExit(Spawn({"--socket=" + socket, "--enter_root_fd=99"}, out)),
            1);
  EXPECT_TRUE(absl::StrContains(ReadFileOrEmpty(out), "--enter_root_fd"))
      << ReadFileOrEmpty(out);
  EXPECT_FALSE(PathExists(socket));
}

// berth-agent-boot refuses a usage without an absolute DIR and PROGRAM,
// and names the step that fails.
TEST(AgentMainTest, BootUsage) {
  ShortTempDir dir;
  const std::string out = dir.Join("out");
  auto run = [&](const std::vector<std::string>& args) {
    return WaitExit(SpawnBinary("services/agent/berth-agent-boot", args, out));
  };
  EXPECT_EQ(run({}), 2);
  EXPECT_TRUE(absl::StrContains(ReadFileOrEmpty(out), "usage:"));
  EXPECT_EQ(run({"relative", "/berth-agent"}), 2);
  EXPECT_EQ(run({dir.Join("missing"), "/berth-agent"}), 127);
  EXPECT_TRUE(absl::StrContains(ReadFileOrEmpty(out), dir.Join("missing")))
      << ReadFileOrEmpty(out);
}

TEST(AgentMainTest, ServesAndExitsZeroAfterDestroySandbox) {
  ShortTempDir dir;
  const std::string socket = dir.Join("agent.sock");
  const std::string log = dir.Join("log");
  const pid_t agent = Spawn({"--socket=" + socket, "--sandbox_id=sb1"}, log);
  ASSERT_TRUE(WaitFor([&] { return PathExists(socket); }))
      << ReadFileOrEmpty(log);
  auto stub = v1::AgentService::NewStub(grpc::CreateChannel(
      "unix:" + socket, grpc::InsecureChannelCredentials()));
  v1::PingResponse ping;
  // The socket exists once bound, a moment before the agent listens on it.
  std::unique_ptr<grpc::ClientContext> first = Context();
  first->set_wait_for_ready(true);
  ASSERT_TRUE(stub->Ping(first.get(), {}, &ping).ok());
  EXPECT_EQ(ping.agent_version(), "0.1.0");

  v1::NewContainerRequest request;
  request.set_container_id("c1");
  request.set_process_id("init");
  request.mutable_process()->add_args("sleep");
  request.mutable_process()->add_args("1000");
  request.mutable_process()->add_env("PATH=/usr/bin:/bin");
  v1::NewContainerResponse started;
  ASSERT_TRUE(stub->NewContainer(Context().get(), request, &started).ok());
  ASSERT_GT(started.pid(), 0);

  v1::DestroySandboxResponse destroyed;
  ASSERT_TRUE(stub->DestroySandbox(Context().get(), {}, &destroyed).ok());
  EXPECT_EQ(WaitExit(agent), 0) << ReadFileOrEmpty(log);
  EXPECT_EQ(kill(started.pid(), 0), -1);  // killed and reaped
  EXPECT_FALSE(PathExists(socket));
}

TEST(AgentMainTest, ExitsZeroOnSigterm) {
  ShortTempDir dir;
  const std::string socket = dir.Join("agent.sock");
  const std::string log = dir.Join("log");
  const pid_t agent = Spawn({"--socket=" + socket}, log);
  ASSERT_TRUE(WaitFor([&] { return PathExists(socket); }))
      << ReadFileOrEmpty(log);
  kill(agent, SIGTERM);
  EXPECT_EQ(WaitExit(agent), 0) << ReadFileOrEmpty(log);
}

}  // namespace
}  // namespace berth::agent
