// berth-agent as PID 1 of new pid, mount, uts and ipc namespaces (the way
// the sandbox driver starts it), through unshare(1). Needs root: skips,
// saying why, without it.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

constexpr char kUnshare[] = "/usr/bin/unshare";

pid_t Spawn(std::vector<std::string> args, const std::string& output) {
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
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

int WaitExit(pid_t pid) {
  int status = 0;
  if (!WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; })) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  // The socket is bound a moment before the agent listens on it: the first
  // call waits for the listener (within the deadline) instead of failing at
  // once with "connection refused".
  context->set_wait_for_ready(true);
  return context;
}

// Runs `script` in the container as process `id` and returns its stdout.
std::string RunScript(v1::AgentService::Stub& stub, const std::string& id,
                      const std::string& script) {
  v1::ExecCmdRequest request;
  request.set_container_id("c1");
  request.set_process_id(id);
  request.mutable_process()->add_args("sh");
  request.mutable_process()->add_args("-c");
  request.mutable_process()->add_args(script);
  request.mutable_process()->add_env("PATH=/usr/bin:/bin");
  v1::ExecCmdResponse response;
  grpc::Status status = stub.ExecCmd(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  auto context = Context();
  auto stream = stub.ProcessIo(context.get());
  v1::ProcessIoRequest attach;
  attach.mutable_attach()->set_container_id("c1");
  attach.mutable_attach()->set_process_id(id);
  stream->Write(attach);
  std::string out;
  v1::ProcessIoResponse frame;
  while (stream->Read(&frame)) out += frame.stdout_chunk().data();
  EXPECT_TRUE(stream->Finish().ok());
  return out;
}

TEST(AgentPid1Test, ServesReapsAndDestroysAsPid1OfItsNamespaces) {
  if (geteuid() != 0 || access(kUnshare, X_OK) != 0) {
    GTEST_SKIP() << "needs root and " << kUnshare
                 << " to make pid, mount, uts and ipc namespaces";
  }
  ShortTempDir dir;
  const std::string socket = dir.Join("agent.sock");
  const std::string log = dir.Join("log");
  const pid_t unshare =
      Spawn({kUnshare, "--pid", "--fork", "--mount-proc", "--uts", "--ipc",
             RunfilePath("services/agent/berth-agent"), "--socket=" + socket,
             "--sandbox_id=pid1"},
            log);
  ASSERT_TRUE(WaitFor([&] { return PathExists(socket); }))
      << ReadFileOrEmpty(log);
  auto stub = v1::AgentService::NewStub(grpc::CreateChannel(
      "unix:" + socket, grpc::InsecureChannelCredentials()));

  v1::NewContainerRequest request;
  request.set_container_id("c1");
  request.set_process_id("init");
  request.mutable_process()->add_args("sleep");
  request.mutable_process()->add_args("1000");
  request.mutable_process()->add_env("PATH=/usr/bin:/bin");
  v1::NewContainerResponse started;
  ASSERT_TRUE(stub->NewContainer(Context().get(), request, &started).ok());
  EXPECT_LT(started.pid(), 100);  // a pid of the sandbox's namespace

  EXPECT_EQ(RunScript(*stub, "comm", "cat /proc/1/comm"), "berth-agent\n");
  // Orphans are reaped by the agent as PID 1: no zombie stays. Two children
  // outlive their shell, so that the agent inherits them; then they die.
  const std::string orphans =
      RunScript(*stub, "orphans",
                "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; "
                "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!");
  const std::vector<std::string> pids =
      absl::StrSplit(orphans, '\n', absl::SkipEmpty());
  ASSERT_EQ(pids.size(), 2u) << orphans;
  const std::string proc_dirs =
      absl::StrCat("/proc/", pids[0], " /proc/", pids[1]);
  EXPECT_EQ(RunScript(*stub, "parents",
                      absl::StrCat("cd /proc && grep -h '^PPid:' ", pids[0],
                                   "/status ", pids[1], "/status")),
            "PPid:\t1\nPPid:\t1\n");
  RunScript(*stub, "kill", absl::StrCat("kill ", pids[0], " ", pids[1]));
  // Reaped: gone from /proc (a zombie keeps its directory there).
  int looks = 0;
  EXPECT_TRUE(WaitFor([&] {
    return RunScript(*stub, absl::StrCat("gone-", ++looks),
                     absl::StrCat("ls -d ", proc_dirs, " 2>/dev/null; true")) ==
           "";
  })) << RunScript(*stub, "left", absl::StrCat("cat ", proc_dirs, "/status"));
  EXPECT_EQ(RunScript(*stub, "zombies",
                      "grep -l '^State:.*Z' /proc/[0-9]*/status; true"),
            "");

  v1::DestroySandboxResponse destroyed;
  ASSERT_TRUE(stub->DestroySandbox(Context().get(), {}, &destroyed).ok());
  EXPECT_EQ(WaitExit(unshare), 0) << ReadFileOrEmpty(log);
  EXPECT_FALSE(PathExists(socket));
}

}  // namespace
}  // namespace berth::agent
