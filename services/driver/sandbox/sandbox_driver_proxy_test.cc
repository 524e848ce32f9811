// The driver in-process with a real berth-proxy (its binary, on a temporary
// runtime directory) and the real agent, init and shim: the real exit of a
// task and of an exec (code and signal apart, which the shim's 128+N cannot
// tell), recovery of a task that ended while no driver ran, the task's
// cgroup with its limits, and a sandbox in a user namespace. Needs root
// (namespaces, cgroups); skips without.

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/sdk/attach.h"
#include "plugins/sdk/cancel.h"
#include "services/common/test_util.h"
#include "services/driver/common/attach_test_util.h"
#include "services/driver/common/start_record.h"
#include "services/driver/sandbox/sandbox_driver.h"
#include "services/driver/sandbox/sandbox_state.pb.h"

extern char** environ;

namespace berth::sandbox_driver {
namespace {

namespace dv1 = ::berth::driver::v1;
using ::berth::driver_common::FakeAttachStream;
using ::berth::driver_common::MakeAttachSetup;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;

// An AttachTask call on a thread of its own.
class Attached {
 public:
  Attached(SandboxDriver& driver, const std::string& task_id, bool stdin,
           uint32_t rows = 0, uint32_t columns = 0)
      : stream_(MakeAttachSetup(task_id, stdin, rows, columns)),
        thread_([this, &driver] {
          absl::Status status = driver.AttachTask(&stream_);
          absl::MutexLock lock(&mu_);
          status_ = status;
          done_ = true;
        }) {}
  ~Attached() {
    stream_.Leave();
    thread_.join();
  }
  FakeAttachStream& stream() { return stream_; }
  // The call's status once it has returned (within 30 s).
  absl::StatusOr<absl::Status> Result() {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Seconds(30))) {
      return absl::DeadlineExceededError("AttachTask did not return");
    }
    return status_;
  }

 private:
  FakeAttachStream stream_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The state of a process ('Z' for a zombie), '?' when there is none.
char ProcessState(pid_t pid) {
  const std::string stat =
      ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return '?';
  return stat[paren + 2];
}

// The target of the link `path`, or "" when it is none.
std::string ReadLink(const std::string& path) {
  char target[256];
  const ssize_t n = readlink(path.c_str(), target, sizeof(target));
  return n > 0 ? std::string(target, n) : "";
}

class SandboxDriverProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, cgroups)";
    if (!PathExists("/sys/fs/cgroup/pids") &&
        !PathExists("/sys/fs/cgroup/cgroup.controllers")) {
      GTEST_SKIP() << "no cgroup file system at /sys/fs/cgroup";
    }
    std::vector<std::string> args = {RunfilePath("services/proxy/berth-proxy"),
                                     "--runtime_dir=" + dir_.Join("run"),
                                     "--state_dir=" + dir_.Join("ps"),
                                     "--shim_timeout=10s"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = dir_.Join("proxy.log");
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_EQ(posix_spawn(&proxy_pid_, argv[0], &actions, nullptr, argv.data(),
                          environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_TRUE(WaitFor([&] {
      return PathExists(dir_.Join("run/proxy.sock"));
    })) << ReadFileOrEmpty(log);
  }

  void TearDown() override {
    driver_.reset();
    if (proxy_pid_ > 0) {
      kill(proxy_pid_, SIGTERM);
      waitpid(proxy_pid_, nullptr, 0);
    }
    for (const char* hierarchy : {"cpu", "cpuacct", "memory", "pids", "freezer",
                                  "devices", "cpu,cpuacct", ""}) {
      rmdir(absl::StrCat("/sys/fs/cgroup/", hierarchy, "/", cgroup_parent_)
                .c_str());
    }
  }

  SandboxDriverOptions Options() {
    SandboxDriverOptions options;
    options.agent_path = RunfilePath("services/agent/berth-agent");
    options.shim_path = RunfilePath("services/shim/berth-shim");
    options.init_path =
        RunfilePath("services/driver/exec/init/berth-task-init");
    options.proxy_socket = dir_.Join("run/proxy.sock");
    options.state_dir = dir_.Join("state");
    options.cgroup_parent = "/" + cgroup_parent_;
    return options;
  }

  SandboxDriver& driver() {
    if (driver_ == nullptr)
      driver_ = std::make_unique<SandboxDriver>(Options());
    return *driver_;
  }

  dv1::TaskConfig ShellTask(const std::string& id, const std::string& script) {
    dv1::TaskConfig task;
    task.set_id(id);
    task.set_task_dir(dir_.Join(id));
    auto& fields = *task.mutable_driver_config()->mutable_fields();
    fields["command"].set_string_value("/bin/sh");
    auto* args = fields["args"].mutable_list_value();
    args->add_values()->set_string_value("-c");
    args->add_values()->set_string_value(script);
    return task;
  }

  dv1::ExitResult Wait(const std::string& id) {
    plugin::CancelToken cancel;
    absl::StatusOr<dv1::ExitResult> result = driver().WaitTask(id, cancel);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.value_or(dv1::ExitResult());
  }

  void Destroy(const std::string& id) {
    absl::Status status = driver().DestroyTask(id, /*force=*/true);
    EXPECT_TRUE(status.ok()) << status;
  }

  testing::ShortTempDir dir_;
  const std::string cgroup_parent_ = absl::StrCat("berth-sbtest-", getpid());
  pid_t proxy_pid_ = -1;
  std::unique_ptr<SandboxDriver> driver_;
};

// Exit code 130 and SIGINT are both 130 as the shim's exit status; the
// driver asks the agent and tells them apart, for tasks and for execs.
TEST_F(SandboxDriverProxyTest, ExitCode130IsNotSigint) {
  ASSERT_TRUE(driver().StartTask(ShellTask("code130", "exit 130")).ok());
  dv1::ExitResult code = Wait("code130");
  EXPECT_EQ(code.exit_code(), 130);
  EXPECT_EQ(code.signal(), 0);

  ASSERT_TRUE(driver().StartTask(ShellTask("sigint", "exec sleep 1000")).ok());
  ASSERT_TRUE(driver().SignalTask("sigint", SIGINT).ok());
  dv1::ExitResult signalled = Wait("sigint");
  EXPECT_EQ(signalled.exit_code(), 0);
  EXPECT_EQ(signalled.signal(), SIGINT);

  ASSERT_TRUE(driver().StartTask(ShellTask("execs", "exec sleep 1000")).ok());
  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec = driver().ExecTask(
      "execs", {"/bin/sh", "-c", "exit 130"}, absl::Seconds(30), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->result().exit_code(), 130);
  EXPECT_EQ(exec->result().signal(), 0);
  exec = driver().ExecTask("execs", {"/bin/sh", "-c", "kill -INT $$"},
                           absl::Seconds(30), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->result().exit_code(), 0);
  EXPECT_EQ(exec->result().signal(), SIGINT);

  for (const char* id : {"code130", "sigint", "execs"}) Destroy(id);
}

// A tty task (issue 17): a terminal from the agent (`tty` names a pty), its
// output before the first attach replayed to it, a line read through the
// attach and echoed, resizes seen by `stty size`, and its exit code; all of
// it in the log too.
TEST_F(SandboxDriverProxyTest, TtyTaskThroughAttach) {
  dv1::TaskConfig config =
      ShellTask("tty",
                "tty; echo ready; read line; echo \"got $line\"; "
                "while read x; do stty size; [ \"$x\" = q ] && exit 3; done");
  config.set_tty(true);
  config.set_stdin_open(true);
  ASSERT_TRUE(driver().StartTask(config).ok());
  const std::string log = dir_.Join("tty/logs/stdout.log");
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(ReadFileOrEmpty(log), "ready");
  })) << ReadFileOrEmpty(log);
  {
    Attached attached(driver(), "tty", /*stdin=*/true, 24, 80);
    FakeAttachStream& stream = attached.stream();
    // Written before the attach, replayed to it; a terminal's \r\n.
    ASSERT_TRUE(stream.WaitForOutput("ready\r\n")) << stream.Output();
    EXPECT_THAT(stream.Output(), ::testing::StartsWith("/dev/pts/"));
    stream.Stdin("hello\n");
    ASSERT_TRUE(stream.WaitForOutput("got hello\r\n")) << stream.Output();
    // The resize reaches the terminal through the proxy's Resize, not the
    // stdin stream: ask until the program sees it.
    stream.Resize(33, 99);
    ASSERT_TRUE(WaitFor([&] {
      stream.Stdin("\n");
      return absl::StrContains(stream.Output(), "33 99\r\n");
    })) << stream.Output();
    stream.Stdin("q\n");
    absl::StatusOr<absl::Status> ended = attached.Result();
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_TRUE(ended->ok()) << *ended;
  }
  EXPECT_EQ(Wait("tty").exit_code(), 3);
  const std::string logged = ReadFileOrEmpty(log);
  EXPECT_THAT(logged, HasSubstr("ready\r\n"));
  EXPECT_THAT(logged, HasSubstr("got hello\r\n"));
  EXPECT_THAT(logged, HasSubstr("33 99\r\n"));
  Destroy("tty");
  EXPECT_FALSE(PathExists(dir_.Join("tty/.berth/attach.sock")));
}

// A stdin_open task without a terminal: `cat` echoes what an attach sends
// and exits 0 on its stdin close; output before the first attach reaches
// it, a second attach gets only what comes after it; the caller leaving
// leaves the task running; stdin is refused to an attach of a task
// without stdin_open.
TEST_F(SandboxDriverProxyTest, StdinOpenTaskThroughAttach) {
  dv1::TaskConfig config = ShellTask("cat", "echo before; exec cat");
  config.set_stdin_open(true);
  ASSERT_TRUE(driver().StartTask(config).ok());
  const std::string log = dir_.Join("cat/logs/stdout.log");
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(ReadFileOrEmpty(log), "before");
  })) << ReadFileOrEmpty(log);
  {
    Attached first(driver(), "cat", /*stdin=*/true);
    ASSERT_TRUE(first.stream().WaitForOutput("before\n"));
    first.stream().Stdin("one\n");
    ASSERT_TRUE(first.stream().WaitForOutput("before\none\n"))
        << first.stream().Output();
  }  // left: the task runs on
  ASSERT_FALSE(driver().InspectTask("cat")->state() == dv1::TASK_STATE_EXITED);
  {
    Attached second(driver(), "cat", /*stdin=*/true);
    Attached watcher(driver(), "cat", /*stdin=*/false);
    second.stream().Stdin("two\n");
    ASSERT_TRUE(second.stream().WaitForOutput("two\n"));
    ASSERT_TRUE(watcher.stream().WaitForOutput("two\n"));
    second.stream().CloseStdin();
    absl::StatusOr<absl::Status> ended = second.Result();
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_TRUE(ended->ok()) << *ended;
    EXPECT_EQ(second.stream().Output(), "two\n");
    absl::StatusOr<absl::Status> watched = watcher.Result();
    ASSERT_TRUE(watched.ok()) << watched.status();
    EXPECT_EQ(watcher.stream().Output(), "two\n");
  }
  dv1::ExitResult result = Wait("cat");
  EXPECT_EQ(result.exit_code(), 0);
  EXPECT_EQ(result.signal(), 0);
  EXPECT_EQ(ReadFileOrEmpty(log), "before\none\ntwo\n");
  Destroy("cat");

  ASSERT_TRUE(driver().StartTask(ShellTask("closed", "exec sleep 1000")).ok());
  {
    Attached refused(driver(), "closed", /*stdin=*/true);
    absl::StatusOr<absl::Status> status = refused.Result();
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->code(), absl::StatusCode::kFailedPrecondition) << *status;
  }
  {
    Attached unknown(driver(), "nope", /*stdin=*/false);
    absl::StatusOr<absl::Status> status = unknown.Result();
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->code(), absl::StatusCode::kNotFound) << *status;
  }
  Destroy("closed");
}

// A driver restarted while an interactive task runs attaches to it again:
// the socket is where it was and its shim still serves it.
TEST_F(SandboxDriverProxyTest, AttachAfterRecovery) {
  dv1::TaskConfig config = ShellTask("again", "echo up; exec cat");
  config.set_stdin_open(true);
  absl::StatusOr<dv1::StartTaskResponse> started = driver().StartTask(config);
  ASSERT_TRUE(started.ok()) << started.status();
  driver_.reset();
  absl::StatusOr<dv1::TaskStatus> recovered =
      driver().RecoverTask(started->handle());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  {
    Attached attached(driver(), "again", /*stdin=*/true);
    ASSERT_TRUE(attached.stream().WaitForOutput("up\n"));
    attached.stream().Stdin("after\n");
    ASSERT_TRUE(attached.stream().WaitForOutput("up\nafter\n"))
        << attached.stream().Output();
    attached.stream().CloseStdin();
    absl::StatusOr<absl::Status> ended = attached.Result();
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_TRUE(ended->ok()) << *ended;
  }
  EXPECT_EQ(Wait("again").exit_code(), 0);
  Destroy("again");
}

// TaskConfig.rlimits, for the task's process and an exec (issue 17), seen
// in /proc/self/limits; TaskConfig.hostname in the sandbox's UTS namespace.
// (Raising a hard limit above the driver's takes CAP_SYS_RESOURCE, which
// the agent keeps, but which the hosts these tests run on may not give
// root: not tested here.)
TEST_F(SandboxDriverProxyTest, RlimitsAndHostname) {
  const std::string probe =
      "grep -E '^Max (open files|core file size)' /proc/self/limits | "
      "tr -s ' '; echo \"host $(hostname)\"; ";
  dv1::TaskConfig config =
      ShellTask("limits", absl::StrCat(probe, "echo done; exec sleep 1000"));
  config.set_hostname("box-17");
  dv1::Rlimit* nofile = config.add_rlimits();
  nofile->set_type("RLIMIT_NOFILE");
  nofile->set_soft(300);
  nofile->set_hard(900);
  dv1::Rlimit* core = config.add_rlimits();
  core->set_type("RLIMIT_CORE");
  core->set_soft(0);
  core->set_hard(0);
  absl::StatusOr<dv1::StartTaskResponse> started = driver().StartTask(config);
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string log = dir_.Join("limits/logs/stdout.log");
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(ReadFileOrEmpty(log), "done");
  })) << ReadFileOrEmpty(log);
  const auto expect_limits = [](const std::string& out,
                                const std::string& what) {
    EXPECT_THAT(out, HasSubstr("Max open files 300 900 files")) << what;
    EXPECT_THAT(out, HasSubstr("Max core file size 0 0 bytes")) << what;
    EXPECT_THAT(out, HasSubstr("host box-17\n")) << what;
  };
  expect_limits(ReadFileOrEmpty(log), "the task");
  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec = driver().ExecTask(
      "limits", {"/bin/sh", "-c", probe}, absl::Seconds(30), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  expect_limits(exec->stdout(), "an exec");
  Destroy("limits");
}

// A start that fails after the run's attach socket was made removes it.
TEST_F(SandboxDriverProxyTest, AFailedStartRemovesTheAttachSocket) {
  SandboxDriverOptions options = Options();
  options.init_path = dir_.Join("no-such-init");
  driver_ = std::make_unique<SandboxDriver>(options);
  const std::string task_dir = dir_.Join("failed");
  ASSERT_EQ(mkdir(task_dir.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((task_dir + "/.berth").c_str(), 0700), 0);
  dv1::TaskConfig config = ShellTask("failed", "exit 0");
  config.set_stdin_open(true);
  absl::StatusOr<dv1::StartTaskResponse> started = driver().StartTask(config);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(started.status().message(), HasSubstr("no-such-init"));
  EXPECT_FALSE(PathExists(task_dir + "/.berth/attach.sock"));
}

// What a process of the task (and an exec'd command) can reach (issue 15,
// point 9): its own root with the task directory at /berth/task, none of
// berth's directories, Docker's default capabilities, no_new_privs, the
// default seccomp filter; the agent is neither in its pid namespace nor
// signallable, and the agent's socket directory is not in its view.
TEST_F(SandboxDriverProxyTest, ProcessesAreIsolatedFromTheHostAndTheAgent) {
  const std::string probe = absl::StrCat(
      "for p in /berth/task /run/berth /run/berth-agent/sock /root/.cache ",
      dir_.path(), "; do if [ -e $p ]; then echo \"seen $p\"; ",
      "else echo \"absent $p\"; fi; done; ",
      "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; ",
      // PID 1 is the holder of the container's namespaces, a forked copy
      // of the agent without any capability; no other agent is in view (the
      // shell itself is skipped: its script names /run/berth-agent).
      "for f in /proc/[0-9]*; do case $f in /proc/1 | /proc/$$) continue;; "
      "esac; ",
      "grep -qs 'berth[-]agent' $f/cmdline && echo agent=listed; done; ",
      "echo \"holder $(grep CapPrm /proc/1/status)\"; ",
      "if kill -CONT $AGENT 2>/dev/null; then echo agent=signalled; ",
      "else echo agent=unreachable; fi; ");
  dv1::TaskConfig config =
      ShellTask("iso", absl::StrCat(probe, "echo done; exec sleep 1000"));
  // The agent's pid as the host sees it: the init's only child.
  ASSERT_TRUE(driver().StartTask(config).ok());
  absl::StatusOr<dv1::TaskStatus> status = driver().InspectTask("iso");
  ASSERT_TRUE(status.ok()) << status.status();
  const std::string init_pid = status->driver_attributes().at("init_pid");
  const std::string agent_pid(absl::StripAsciiWhitespace(ReadFileOrEmpty(
      absl::StrCat("/proc/", init_pid, "/task/", init_pid, "/children"))));
  ASSERT_FALSE(agent_pid.empty());
  const std::string log = dir_.Join("iso/logs/stdout.log");
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(ReadFileOrEmpty(log), "done");
  })) << ReadFileOrEmpty(log);
  const auto expect_isolated = [&](const std::string& out) {
    EXPECT_THAT(out, HasSubstr("seen /berth/task\n"));
    EXPECT_THAT(out, HasSubstr("absent /run/berth\n"));
    EXPECT_THAT(out, HasSubstr("absent /run/berth-agent/sock\n"));
    EXPECT_THAT(out, HasSubstr("absent /root/.cache\n"));
    EXPECT_THAT(out, HasSubstr(absl::StrCat("absent ", dir_.path(), "\n")));
    EXPECT_THAT(out, HasSubstr("CapEff:\t00000000a80425fb"));
    EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t1"));
    EXPECT_THAT(out, HasSubstr("Seccomp:\t2"));
    EXPECT_THAT(out, Not(HasSubstr("agent=listed")));
    EXPECT_THAT(out, HasSubstr("holder CapPrm:\t0000000000000000"));
    EXPECT_THAT(out, HasSubstr("agent=unreachable"));
  };
  // The task's $AGENT is empty (a kill of nothing fails too); the exec's
  // is the agent's pid as the host sees it. (Its pid in the sandbox's
  // namespace, 2, is the task's main process in the container's.)
  expect_isolated(ReadFileOrEmpty(log));
  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec = driver().ExecTask(
      "iso", {"/bin/sh", "-c", absl::StrCat("AGENT=", agent_pid, "; ", probe)},
      absl::Seconds(30), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  expect_isolated(exec->stdout());
  Destroy("iso");
}

// The driver goes (its sandboxes stay), the task ends while none runs; a new
// driver recovers it from its handle with how it really ended.
TEST_F(SandboxDriverProxyTest, RecoversATaskThatEndedWhileNoDriverRan) {
  // In the task's directory: the task has its own root, where it sees that
  // directory at /berth/task and nothing else of the host's /tmp.
  const std::string go = dir_.Join("ended/go");
  const dv1::TaskConfig config =
      ShellTask("ended",
                "while [ ! -e /berth/task/go ]; do sleep 0.05; done; "
                "exit 7");
  absl::StatusOr<dv1::StartTaskResponse> started = driver().StartTask(config);
  ASSERT_TRUE(started.ok()) << started.status();
  absl::StatusOr<dv1::TaskStatus> status = driver().InspectTask("ended");
  ASSERT_TRUE(status.ok());
  pid_t shim = 0;
  ASSERT_TRUE(
      absl::SimpleAtoi(status->driver_attributes().at("shim_pid"), &shim));
  driver_.reset();  // no driver from here on
  ASSERT_TRUE(std::ofstream(go).good());
  // The task exits; its shim (a child of this process) stays a zombie,
  // unreaped.
  ASSERT_TRUE(WaitFor([&] { return ProcessState(shim) == 'Z'; }));
  EXPECT_FALSE(PathExists(dir_.Join("ended/.berth/exit")))
      << "a driver recorded the exit";

  absl::StatusOr<dv1::TaskStatus> recovered =
      driver().RecoverTask(started->handle());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->state(), dv1::TASK_STATE_EXITED);
  EXPECT_EQ(recovered->exit_result().exit_code(), 7);
  EXPECT_EQ(recovered->exit_result().signal(), 0);
  EXPECT_EQ(Wait("ended").exit_code(), 7);
  EXPECT_EQ(ProcessState(shim), '?') << "the shim was not reaped";
  Destroy("ended");
}

// A running task survives its driver; the next one re-adopts it, stops it
// and gets its real end.
TEST_F(SandboxDriverProxyTest, RecoversARunningTask) {
  absl::StatusOr<dv1::StartTaskResponse> started =
      driver().StartTask(ShellTask("running", "exec sleep 1000"));
  ASSERT_TRUE(started.ok()) << started.status();
  driver_.reset();
  absl::StatusOr<dv1::TaskStatus> recovered =
      driver().RecoverTask(started->handle());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->state(), dv1::TASK_STATE_RUNNING);
  ASSERT_TRUE(driver().StopTask("running", absl::Seconds(5), SIGTERM).ok());
  dv1::ExitResult stopped = Wait("running");
  EXPECT_EQ(stopped.signal(), SIGTERM);
  Destroy("running");

  // A handle of something else is refused, naming the field.
  dv1::TaskHandle bad = started->handle();
  bad.set_driver_state("nonsense");
  absl::StatusOr<dv1::TaskStatus> refused = driver().RecoverTask(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "driver_state"))
      << refused.status();
}

// The sandbox's processes are in the task's cgroup, with its limits,
// measured by TaskStats, and the cgroup goes with DestroyTask.
TEST_F(SandboxDriverProxyTest, SandboxInItsCgroupWithItsLimits) {
  if (!PathExists("/sys/fs/cgroup/pids/cgroup.procs")) {
    GTEST_SKIP() << "checks the cgroup v1 pids hierarchy, which is not here";
  }
  dv1::TaskConfig config = ShellTask("limited", "exec sleep 1000");
  config.mutable_resources()->set_pids_limit(50);
  ASSERT_TRUE(driver().StartTask(config).ok());
  const std::string cgroup =
      absl::StrCat("/sys/fs/cgroup/pids/", cgroup_parent_, "/limited");
  EXPECT_EQ(absl::StripAsciiWhitespace(ReadFileOrEmpty(cgroup + "/pids.max")),
            "50");
  absl::StatusOr<dv1::TaskStatus> status = driver().InspectTask("limited");
  ASSERT_TRUE(status.ok());
  const std::string init_pid = status->driver_attributes().at("init_pid");
  EXPECT_TRUE(absl::StrContains(ReadFileOrEmpty(cgroup + "/cgroup.procs"),
                                init_pid + "\n"))
      << "the sandbox's init " << init_pid << " is not in " << cgroup;
  absl::StatusOr<stats::v1::TaskResourceUsage> usage =
      driver().TaskStats("limited");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->task_id(), "limited");
  EXPECT_GT(usage->usage().memory().usage(), 0u);
  Destroy("limited");
  EXPECT_FALSE(PathExists(cgroup)) << cgroup << " is left";
}

// The entries of a directory ("." and ".." aside).
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

// A driver killed during StartTask leaves the sandbox it made (the init,
// berth-agent, the cgroup holding them, berth-proxy's record) and no record
// of it; the node records the start failed and its DestroyTask goes to the
// next driver, which removes all of it by the task's id (found by
// tools/chaos) and answers NOT_FOUND. An id that is not one StartTask takes
// (it names paths) is refused, naming it.
TEST_F(SandboxDriverProxyTest,
       DestroyOfAnUnknownTaskRemovesItsHalfMadeSandbox) {
  absl::StatusOr<dv1::StartTaskResponse> started =
      driver().StartTask(ShellTask("halfmade", "exec sleep 1000"));
  ASSERT_TRUE(started.ok()) << started.status();
  absl::StatusOr<dv1::TaskStatus> status = driver().InspectTask("halfmade");
  ASSERT_TRUE(status.ok()) << status.status();
  pid_t shim = 0;
  ASSERT_TRUE(
      absl::SimpleAtoi(status->driver_attributes().at("shim_pid"), &shim));
  driver_.reset();  // the driver, and its record of the task, are gone
  // Nor had the shim been started (this process's child).
  kill(shim, SIGKILL);
  waitpid(shim, nullptr, 0);
  std::vector<std::string> cgroups;
  std::vector<pid_t> pids;
  for (const char* hierarchy : {"cpu", "cpuacct", "memory", "pids", "freezer",
                                "devices", "cpu,cpuacct", ""}) {
    const std::string cgroup = absl::StrCat("/sys/fs/cgroup/", hierarchy, "/",
                                            cgroup_parent_, "/halfmade");
    if (!PathExists(cgroup)) continue;
    cgroups.push_back(cgroup);
    for (absl::string_view line :
         absl::StrSplit(ReadFileOrEmpty(cgroup + "/cgroup.procs"), '\n',
                        absl::SkipEmpty())) {
      pid_t pid = 0;
      if (absl::SimpleAtoi(line, &pid)) pids.push_back(pid);
    }
  }
  ASSERT_FALSE(cgroups.empty()) << "the sandbox has no cgroup";
  ASSERT_GE(pids.size(), 2u) << "no init and berth-agent in its cgroup";
  ASSERT_EQ(Entries(dir_.Join("ps/proxy/sandboxes")).size(), 1u)
      << "berth-proxy has no record of the sandbox";

  absl::Status destroyed = driver().DestroyTask("halfmade", /*force=*/true);
  EXPECT_TRUE(absl::IsNotFound(destroyed)) << destroyed;
  for (const std::string& cgroup : cgroups) {
    EXPECT_FALSE(PathExists(cgroup)) << cgroup << " is left";
  }
  for (pid_t pid : pids) {
    const char state = ProcessState(pid);
    EXPECT_TRUE(state == '?' || state == 'Z')
        << "pid " << pid << " of the sandbox still runs (state " << state
        << ")";
  }
  // The init was this process's child: reaped.
  for (pid_t pid : pids) waitpid(pid, nullptr, WNOHANG);
  EXPECT_THAT(Entries(dir_.Join("ps/proxy/sandboxes")), ::testing::IsEmpty());
  // Destroyed again: nothing there, still NOT_FOUND.
  EXPECT_TRUE(absl::IsNotFound(driver().DestroyTask("halfmade", true)));

  for (const std::string id : {"..", "../halfmade", "a/b", ".hidden", ""}) {
    absl::Status refused = driver().DestroyTask(id, /*force=*/true);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument)
        << "\"" << id << "\": " << refused;
    EXPECT_THAT(std::string(refused.message()), HasSubstr("task.id"));
  }
}

// A driver killed during StartTask, after the task's process started: the
// node never got the handle. The next driver finds the run by its start
// record when asked (InspectTask, as berth-node does after a broken
// StartTask), gives its handle, and the run ends with its real status.
TEST_F(SandboxDriverProxyTest, TheNextDriverFindsARunWhoseStartWasCutOff) {
  SandboxDriverOptions cut = Options();
  cut.start_cut_for_test = SandboxDriverOptions::StartCut::kAfterNewContainer;
  driver_ = std::make_unique<SandboxDriver>(cut);
  absl::StatusOr<dv1::StartTaskResponse> started =
      driver().StartTask(ShellTask("cutoff", "echo ran; exec sleep 1000"));
  ASSERT_TRUE(absl::IsAborted(started.status())) << started.status();
  const std::string log = dir_.Join("cutoff/logs/stdout.log");
  ASSERT_TRUE(WaitFor([&] { return ReadFileOrEmpty(log) == "ran\n"; }))
      << ReadFileOrEmpty(log);
  driver_.reset();

  absl::StatusOr<dv1::TaskStatus> found = driver().InspectTask("cutoff");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->state(), dv1::TASK_STATE_RUNNING);
  const std::string process_id = found->driver_attributes().at("process_id");
  EXPECT_FALSE(process_id.empty());
  absl::StatusOr<dv1::TaskHandle> handle = driver().HandleOf("cutoff");
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ(handle->config().id(), "cutoff");
  SandboxTaskState given;
  ASSERT_TRUE(given.ParseFromString(handle->driver_state()));
  EXPECT_EQ(given.process_id(), process_id);

  // That handle recovers the run after one more restart.
  driver_.reset();
  absl::StatusOr<dv1::TaskStatus> recovered = driver().RecoverTask(*handle);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->state(), dv1::TASK_STATE_RUNNING);
  ASSERT_TRUE(driver().StopTask("cutoff", absl::Seconds(5), SIGTERM).ok());
  EXPECT_EQ(Wait("cutoff").signal(), SIGTERM);
  EXPECT_EQ(ReadFileOrEmpty(log), "ran\n");  // one run
  Destroy("cutoff");
  const std::string state = Options().state_dir;
  EXPECT_TRUE(absl::IsNotFound(
      driver_common::ReadStartRecord(state, "cutoff").status()));
  EXPECT_TRUE(absl::IsNotFound(driver().InspectTask("cutoff").status()));
}

// A start cut off before NewContainer is not a run: the next driver answers
// NOT_FOUND, and DestroyTask removes what the start made and its record.
TEST_F(SandboxDriverProxyTest, AStartCutOffBeforeItsProcessIsNotFound) {
  SandboxDriverOptions cut = Options();
  cut.start_cut_for_test = SandboxDriverOptions::StartCut::kBeforeNewContainer;
  driver_ = std::make_unique<SandboxDriver>(cut);
  absl::StatusOr<dv1::StartTaskResponse> started =
      driver().StartTask(ShellTask("never", "echo ran; exec sleep 1000"));
  ASSERT_TRUE(absl::IsAborted(started.status())) << started.status();
  const std::string state = Options().state_dir;
  ASSERT_TRUE(driver_common::ReadStartRecord(state, "never").ok());
  driver_.reset();

  absl::StatusOr<dv1::TaskStatus> found = driver().InspectTask("never");
  EXPECT_TRUE(absl::IsNotFound(found.status())) << found.status();
  EXPECT_THAT(std::string(found.status().message()),
              HasSubstr("before its process started"));
  EXPECT_TRUE(absl::IsNotFound(driver().DestroyTask("never", true)));
  EXPECT_TRUE(absl::IsNotFound(
      driver_common::ReadStartRecord(state, "never").status()));
  for (const char* hierarchy : {"pids", ""}) {
    const std::string cgroup = absl::StrCat("/sys/fs/cgroup/", hierarchy, "/",
                                            cgroup_parent_, "/never");
    EXPECT_FALSE(PathExists(cgroup)) << cgroup << " is left";
  }
  EXPECT_EQ(ReadFileOrEmpty(dir_.Join("never/logs/stdout.log")), "");
}

// NewContainer's reply lost (berth-proxy or the shim killed with it) after
// the agent started the process: the start is a start, asked of the agent.
TEST_F(SandboxDriverProxyTest, ALostNewContainerReplyIsAStartTheAgentConfirms) {
  SandboxDriverOptions lose = Options();
  lose.start_cut_for_test =
      SandboxDriverOptions::StartCut::kLoseNewContainerReply;
  driver_ = std::make_unique<SandboxDriver>(lose);
  absl::StatusOr<dv1::StartTaskResponse> started =
      driver().StartTask(ShellTask("lost", "echo ran; exit 7"));
  ASSERT_TRUE(started.ok()) << started.status();
  SandboxTaskState state;
  ASSERT_TRUE(state.ParseFromString(started->handle().driver_state()));
  EXPECT_FALSE(state.process_id().empty());
  EXPECT_EQ(Wait("lost").exit_code(), 7);
  EXPECT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(dir_.Join("lost/logs/stdout.log")) == "ran\n";
  })) << ReadFileOrEmpty(dir_.Join("lost/logs/stdout.log"));
  Destroy("lost");
}

// With TaskConfig.isolation.user_namespace the whole sandbox is in a user
// namespace: the task is root inside and 3500000 on the host (the owner of
// what it writes in a bind), an exec'd command is in the same namespace,
// and a recovered task keeps both.
TEST_F(SandboxDriverProxyTest, UserNamespace) {
  // As berth's state directory, traversable (the init's ids reach the
  // driver's root mount point by path); `shared` writable by anyone.
  ASSERT_EQ(chmod(dir_.path().c_str(), 0711), 0);
  const std::string shared = dir_.Join("shared");
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  const std::string probe =
      "echo uid=$(id -u); echo \"map $(cat /proc/self/uid_map)\"; "
      "echo ns=$(readlink /proc/self/ns/user); ";
  dv1::TaskConfig config =
      ShellTask("userns", absl::StrCat(probe, "touch /shared/made; echo done; ",
                                       "exec sleep 1000"));
  dv1::UserNamespace& userns =
      *config.mutable_isolation()->mutable_user_namespace();
  for (auto* map :
       {userns.mutable_uid_mappings(), userns.mutable_gid_mappings()}) {
    dv1::IdMapping* m = map->Add();
    m->set_container_id(0);
    m->set_host_id(3500000);
    m->set_size(65536);
  }
  dv1::Mount* mount = config.mutable_isolation()->add_mounts();
  mount->set_type(dv1::MOUNT_TYPE_BIND);
  mount->set_source(shared);
  mount->set_destination("/shared");
  absl::StatusOr<dv1::StartTaskResponse> started = driver().StartTask(config);
  ASSERT_TRUE(started.ok())
      << started.status() << "\n"
      << ReadFileOrEmpty(dir_.Join("userns/.berth/init.log"))
      << ReadFileOrEmpty(dir_.Join("userns/.berth/agent-logs/stderr.log"));
  const std::string log = dir_.Join("userns/logs/stdout.log");
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(ReadFileOrEmpty(log), "done");
  })) << ReadFileOrEmpty(log);
  const std::string out = ReadFileOrEmpty(log);
  EXPECT_THAT(out, HasSubstr("uid=0\n"));
  // "         0    3500000      65536", the kernel's columns.
  const std::vector<std::string> map_line = absl::StrSplit(
      out.substr(out.find("map "),
                 out.find('\n', out.find("map ")) - out.find("map ")),
      ' ', absl::SkipEmpty());
  EXPECT_THAT(map_line, ::testing::ElementsAre("map", "0", "3500000", "65536"))
      << out;
  const std::string host_ns = ReadLink("/proc/self/ns/user");
  const size_t ns_at = out.find("ns=");
  ASSERT_NE(ns_at, std::string::npos) << out;
  const std::string task_ns =
      out.substr(ns_at + 3, out.find('\n', ns_at) - ns_at - 3);
  EXPECT_NE(task_ns, host_ns);
  struct stat made;
  ASSERT_EQ(stat(dir_.Join("shared/made").c_str(), &made), 0);
  EXPECT_EQ(made.st_uid, 3500000u);
  EXPECT_EQ(made.st_gid, 3500000u);
  absl::StatusOr<dv1::TaskStatus> status = driver().InspectTask("userns");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->driver_attributes().at("user_namespace"), "true");

  // An exec'd command, by this driver and by one that recovered the task.
  const auto expect_exec_inside = [&](const std::string& what) {
    plugin::CancelToken cancel;
    absl::StatusOr<dv1::ExecTaskResponse> exec = driver().ExecTask(
        "userns", {"/bin/sh", "-c", probe}, absl::Seconds(30), cancel);
    ASSERT_TRUE(exec.ok()) << what << ": " << exec.status();
    EXPECT_THAT(exec->stdout(), HasSubstr("uid=0\n")) << what;
    EXPECT_THAT(exec->stdout(), HasSubstr(absl::StrCat("ns=", task_ns, "\n")))
        << what;
  };
  expect_exec_inside("exec");
  driver_.reset();
  absl::StatusOr<dv1::TaskStatus> recovered =
      driver().RecoverTask(started->handle());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->state(), dv1::TASK_STATE_RUNNING);
  EXPECT_EQ(recovered->driver_attributes().at("user_namespace"), "true");
  expect_exec_inside("exec after recovery");
  ASSERT_TRUE(driver().StopTask("userns", absl::Seconds(5), SIGTERM).ok());
  EXPECT_EQ(Wait("userns").signal(), SIGTERM);
  Destroy("userns");
}

// Copies `from` to `to` with `mode`.
void CopyFile(const std::string& from, const std::string& to, mode_t mode) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary);
  out << in.rdbuf();
  out.close();
  ASSERT_TRUE(in.good() && out.good()) << from << " -> " << to;
  ASSERT_EQ(chmod(to.c_str(), mode), 0) << to;
}

// An image's root (issue 16): busybox (static) and its applets, no loader
// and no libraries, but an /etc/ld.so.preload naming a library that marks
// its loading. berth-agent (dynamic) starts from its own directory, where
// the driver binds the host's loader and the agent's libraries read-only,
// and reads nothing of the image while it loads (the mark is never made);
// the task's processes see neither that directory nor any host library. As
// the host's root and in a user namespace.
TEST_F(SandboxDriverProxyTest, ImageRootWithoutTheAgentsLibraries) {
  ASSERT_EQ(chmod(dir_.path().c_str(), 0711), 0);
  const std::string probe =
      "for p in /run/berth-agent/berth-agent /run/berth-agent/sock "
      "/run/berth-agent/proc /lib64 "
      "/lib/x86_64-linux-gnu /usr; do if [ -e $p ]; then echo \"seen $p\"; "
      "else echo \"absent $p\"; fi; done; "
      "echo \"agent dir [$(ls -A /run/berth-agent)]\"; "
      "echo \"mounts $(grep -c -e berth-agent -e linux-gnu "
      "/proc/self/mountinfo)\"; "
      "echo \"holder $(cat /proc/1/comm)\"; ";
  const auto expect_isolated = [](const std::string& out,
                                  const std::string& what) {
    for (const char* path :
         {"/run/berth-agent/berth-agent", "/run/berth-agent/sock",
          "/run/berth-agent/proc", "/lib64", "/lib/x86_64-linux-gnu", "/usr"}) {
      EXPECT_THAT(out, HasSubstr(absl::StrCat("absent ", path, "\n"))) << what;
    }
    EXPECT_THAT(out, HasSubstr("agent dir []\n")) << what;
    EXPECT_THAT(out, HasSubstr("mounts 0\n")) << what;
    EXPECT_THAT(out, HasSubstr("holder berth-holder\n")) << what;
  };
  for (const bool userns : {false, true}) {
    const std::string id = userns ? "image-userns" : "image";
    SCOPED_TRACE(id);
    const std::string rootfs = dir_.Join(absl::StrCat(id, "-rootfs"));
    for (const char* sub : {"", "/bin", "/etc", "/lib"}) {
      ASSERT_EQ(mkdir(absl::StrCat(rootfs, sub).c_str(), 0755), 0) << sub;
    }
    CopyFile("/bin/busybox", rootfs + "/bin/busybox", 0755);
    for (const char* applet :
         {"sh", "ls", "cat", "grep", "sleep", "echo", "touch"}) {
      ASSERT_EQ(
          symlink("busybox", absl::StrCat(rootfs, "/bin/", applet).c_str()), 0);
    }
    CopyFile(
        RunfilePath("services/driver/sandbox/libpreload_marker_testing.so"),
        rootfs + "/lib/libpreload_marker.so", 0755);
    {
      std::ofstream preload(rootfs + "/etc/ld.so.preload");
      preload << "/lib/libpreload_marker.so\n";
    }
    dv1::TaskConfig config =
        ShellTask(id, absl::StrCat(probe, "echo done; exec sleep 1000"));
    config.mutable_isolation()->set_rootfs(rootfs);
    if (userns) {
      // The image as an unprivileged runtime leaves it: owned by the ids
      // the task's root maps to (the root makes its mount points in it).
      for (const char* path :
           {"", "/bin", "/etc", "/lib", "/bin/busybox", "/bin/sh", "/bin/ls",
            "/bin/cat", "/bin/grep", "/bin/sleep", "/bin/echo", "/bin/touch",
            "/lib/libpreload_marker.so", "/etc/ld.so.preload"}) {
        ASSERT_EQ(lchown(absl::StrCat(rootfs, path).c_str(), 3500000, 3500000),
                  0)
            << path;
      }
      dv1::UserNamespace& ns =
          *config.mutable_isolation()->mutable_user_namespace();
      for (auto* map : {ns.mutable_uid_mappings(), ns.mutable_gid_mappings()}) {
        dv1::IdMapping* m = map->Add();
        m->set_container_id(0);
        m->set_host_id(3500000);
        m->set_size(65536);
      }
    }
    absl::StatusOr<dv1::StartTaskResponse> started = driver().StartTask(config);
    ASSERT_TRUE(started.ok())
        << started.status() << "\n"
        << ReadFileOrEmpty(dir_.Join(id + "/.berth/init.log"))
        << ReadFileOrEmpty(dir_.Join(id + "/.berth/agent-logs/stderr.log"));
    const std::string log = dir_.Join(id + "/logs/stdout.log");
    ASSERT_TRUE(WaitFor([&] {
      return absl::StrContains(ReadFileOrEmpty(log), "done");
    })) << ReadFileOrEmpty(log);
    expect_isolated(ReadFileOrEmpty(log), "the task");
    plugin::CancelToken cancel;
    absl::StatusOr<dv1::ExecTaskResponse> exec = driver().ExecTask(
        id, {"/bin/sh", "-c", probe}, absl::Seconds(30), cancel);
    ASSERT_TRUE(exec.ok()) << exec.status();
    expect_isolated(exec->stdout(), "an exec");
    EXPECT_FALSE(PathExists(dir_.Join(id + "/preloaded")))
        << "the image's /etc/ld.so.preload was read";
    const std::string agent_log =
        ReadFileOrEmpty(dir_.Join(id + "/.berth/agent-logs/stderr.log"));
    EXPECT_THAT(agent_log, Not(HasSubstr("ld.so"))) << agent_log;
    ASSERT_TRUE(driver().StopTask(id, absl::Seconds(5), SIGTERM).ok());
    EXPECT_EQ(Wait(id).signal(), SIGTERM);
    Destroy(id);
  }
}

}  // namespace
}  // namespace berth::sandbox_driver
