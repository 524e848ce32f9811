// A container's own namespaces (container_ns.h) and a process spawned in
// them with reduced privileges (spawn.h), as the agent does with
// --container_namespaces. Root only: the test makes a mount namespace of its
// own, mounts a tmpfs standing for the agent's socket directory, and starts
// holders in new pid namespaces.

#include "services/agent/container_ns.h"

#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/agent/spawn.h"

namespace berth::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Docker's default capabilities.
constexpr uint64_t kDockerDefault = 0x00000000a80425fbULL;

// Reads `fd` until `marker` or its end (or 30 s of silence).
std::string ReadUntil(int fd, const std::string& marker) {
  std::string data;
  char buffer[4096];
  while (data.find(marker) == std::string::npos) {
    pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, /*timeout_ms=*/30000) != 1) break;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

// An allow-everything filter: enough to see "Seccomp: 2".
std::string AllowAllFilter() {
  const sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  return std::string(reinterpret_cast<const char*>(&allow), sizeof(allow));
}

// TheHolderEndsWithTheAgent's agent: this binary run again with these
// variables set starts a container, reports its holder's pid and exits
// before any test runs.
const bool kRunAsHelperAgent = [] {
  const char* report_fd = getenv("BERTH_TEST_AGENT_REPORT_FD");
  const char* hide_dir = getenv("BERTH_TEST_HIDE_DIR");
  if (report_fd == nullptr || hide_dir == nullptr) return false;
  bool forked = false;
  absl::StatusOr<ContainerNamespaces> ns =
      StartContainerNamespaces(hide_dir, &forked);
  const pid_t holder = ns.ok() ? ns->holder_pid : -1;
  if (write(std::atoi(report_fd), &holder, sizeof(holder)) != sizeof(holder)) {
    _exit(3);
  }
  _exit(0);
}();

class ContainerNamespacesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to make namespaces";
    // Our own mount namespace: the tmpfs below goes with the test.
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      GTEST_SKIP() << "cannot make a mount namespace: " << strerror(errno);
    }
    const char* tmp = getenv("TEST_TMPDIR");
    hide_dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/agent-sock");
    mkdir(hide_dir_.c_str(), 0700);
    ASSERT_EQ(mount("tmpfs", hide_dir_.c_str(), "tmpfs", 0, "size=64k"), 0)
        << strerror(errno);
    std::ofstream(absl::StrCat(hide_dir_, "/agent.sock")) << "";
  }

  void TearDown() override {
    if (!hide_dir_.empty()) umount2(hide_dir_.c_str(), MNT_DETACH);
  }

  // What a process in the container reports about itself.
  v1::ProcessSpec Probe(const std::string& name) const {
    v1::ProcessSpec spec;
    spec.add_args("sh");
    spec.add_args("-c");
    spec.add_args(absl::StrCat(
        "if [ -e ", hide_dir_, "/agent.sock ]; then echo sock=visible; ",
        "else echo sock=hidden; fi; ", "if kill -0 ", getpid(),
        " 2>/dev/null; then echo agent=signalled; ",
        "else echo agent=unreachable; fi; ", "if [ -e /proc/", getpid(),
        " ]; then echo proc=agent; ", "else echo proc=own; fi; ",
        "echo pid=$$; ",
        "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; ", "echo ",
        name, "=done; exec sleep 60"));
    spec.add_env("PATH=/usr/bin:/bin");
    v1::Privileges* privileges = spec.mutable_privileges();
    privileges->set_enabled(true);
    privileges->set_capabilities(kDockerDefault);
    privileges->set_no_new_privs(true);
    privileges->set_seccomp_filter(AllowAllFilter());
    return spec;
  }

  std::string hide_dir_;
};

TEST_F(ContainerNamespacesTest, ProcessesSeeNeitherTheAgentNorItsSocket) {
  bool forked = false;
  absl::StatusOr<ContainerNamespaces> ns =
      StartContainerNamespaces(hide_dir_, &forked);
  ASSERT_TRUE(ns.ok()) << ns.status();
  ASSERT_TRUE(forked);
  SpawnPlace place;
  place.holder_pidfd = ns->holder_pidfd.get();
  place.pid_ns = ns->pid_ns.get();
  place.mount_ns = ns->mount_ns.get();

  absl::StatusOr<SpawnedProcess> main =
      SpawnProcess(Probe("main"), &forked, place);
  ASSERT_TRUE(main.ok()) << main.status();
  const std::string main_out = ReadUntil(main->out_fd.get(), "main=done");
  EXPECT_THAT(main_out, HasSubstr("sock=hidden"));
  EXPECT_THAT(main_out, HasSubstr("agent=unreachable"));
  EXPECT_THAT(main_out, HasSubstr("proc=own"));
  // The holder is PID 1; the main process is not, so signals reach it.
  EXPECT_THAT(main_out, HasSubstr("pid=2\n"));
  EXPECT_THAT(main_out, HasSubstr("CapEff:\t00000000a80425fb"));
  EXPECT_THAT(main_out, HasSubstr("NoNewPrivs:\t1"));
  EXPECT_THAT(main_out, HasSubstr("Seccomp:\t2"));
  // The agent itself still sees its socket.
  EXPECT_EQ(access(absl::StrCat(hide_dir_, "/agent.sock").c_str(), F_OK), 0);

  // A later process joins the same namespaces.
  absl::StatusOr<SpawnedProcess> exec =
      SpawnProcess(Probe("exec"), &forked, place);
  ASSERT_TRUE(exec.ok()) << exec.status();
  const std::string exec_out = ReadUntil(exec->out_fd.get(), "exec=done");
  EXPECT_THAT(exec_out, HasSubstr("sock=hidden"));
  EXPECT_THAT(exec_out, HasSubstr("agent=unreachable"));
  EXPECT_THAT(exec_out, Not(HasSubstr("pid=1\n")));
  EXPECT_THAT(exec_out, Not(HasSubstr("pid=2\n")));
  EXPECT_THAT(exec_out, HasSubstr("CapEff:\t00000000a80425fb"));

  // SIGTERM from outside reaches the main process (not a namespace's init).
  ASSERT_EQ(kill(main->pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(main->pid, &status, 0), main->pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  // The holder's end is every process's in the container.
  ASSERT_EQ(kill(ns->holder_pid, SIGKILL), 0);
  ASSERT_EQ(waitpid(exec->pid, &status, 0), exec->pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_EQ(waitpid(ns->holder_pid, &status, 0), ns->holder_pid);

  // A container whose holder is gone takes no process.
  absl::StatusOr<SpawnedProcess> late =
      SpawnProcess(Probe("late"), &forked, place);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition)
      << late.status();
  EXPECT_FALSE(forked);
}

// gRPC ends idle threads of its pool: the thread that made a container's
// holder ending must not end the container (PR_SET_PDEATHSIG would).
TEST_F(ContainerNamespacesTest, TheHolderOutlivesTheThreadThatMadeIt) {
  absl::StatusOr<ContainerNamespaces> ns = absl::InternalError("not started");
  std::thread maker([&] {
    bool forked = false;
    ns = StartContainerNamespaces(hide_dir_, &forked);
  });
  maker.join();
  ASSERT_TRUE(ns.ok()) << ns.status();
  struct pollfd exited = {ns->holder_pidfd.get(), POLLIN, 0};
  EXPECT_EQ(poll(&exited, 1, 500), 0) << "the holder ended with its thread";
  ASSERT_EQ(kill(ns->holder_pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(ns->holder_pid, &status, 0), ns->holder_pid);
}

// ...but the agent's end ends it, and with it the container. The agent is
// a process of its own: this binary again, which the helper below turns
// into one that starts a container and exits.
TEST_F(ContainerNamespacesTest, TheHolderEndsWithTheAgent) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    close(fds[0]);
    setenv("BERTH_TEST_AGENT_REPORT_FD", std::to_string(fds[1]).c_str(), 1);
    setenv("BERTH_TEST_HIDE_DIR", hide_dir_.c_str(), 1);
    execl("/proc/self/exe", "container_ns_test_agent", nullptr);
    _exit(127);
  }
  close(fds[1]);
  pid_t holder = -1;
  ASSERT_EQ(read(fds[0], &holder, sizeof(holder)), sizeof(holder));
  close(fds[0]);
  ASSERT_GT(holder, 0) << "the helper agent could not start a container";
  const int holder_pidfd = static_cast<int>(syscall(SYS_pidfd_open, holder, 0));
  int status = 0;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  if (holder_pidfd < 0) return;  // already gone and reaped
  struct pollfd exited = {holder_pidfd, POLLIN, 0};
  EXPECT_EQ(poll(&exited, 1, 10000), 1) << "the holder outlived its agent";
  close(holder_pidfd);
}

// The holder is the container's init: an orphan that ends is reaped, not
// left a zombie.
TEST_F(ContainerNamespacesTest, TheHolderReapsOrphans) {
  bool forked = false;
  absl::StatusOr<ContainerNamespaces> ns =
      StartContainerNamespaces(hide_dir_, &forked);
  ASSERT_TRUE(ns.ok()) << ns.status();
  SpawnPlace place;
  place.holder_pidfd = ns->holder_pidfd.get();
  place.pid_ns = ns->pid_ns.get();
  place.mount_ns = ns->mount_ns.get();
  v1::ProcessSpec spec = Probe("orphans");
  // A subshell leaves a short sleep behind (its parent is then the holder)
  // and the process waits.
  spec.set_args(2, "(sleep 0.2 &); echo orphans=done; exec sleep 60");
  absl::StatusOr<SpawnedProcess> main = SpawnProcess(spec, &forked, place);
  ASSERT_TRUE(main.ok()) << main.status();
  ReadUntil(main->out_fd.get(), "orphans=done");
  // Children of the holder, as the host sees them: none may stay a zombie.
  auto holder_children = [&](bool zombies_only) {
    int count = 0;
    DIR* proc = opendir("/proc");
    while (dirent* entry = readdir(proc)) {
      std::ifstream stat(absl::StrCat("/proc/", entry->d_name, "/stat"));
      std::string line;
      if (!std::getline(stat, line)) continue;
      const size_t close = line.rfind(')');
      if (close == std::string::npos) continue;
      char state = 0;
      int ppid = 0;
      if (sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) {
        continue;
      }
      if (ppid == ns->holder_pid && (!zombies_only || state == 'Z')) ++count;
    }
    closedir(proc);
    return count;
  };
  bool seen_child = false, reaped = false;
  for (int i = 0; i < 100 && !reaped; ++i) {
    if (holder_children(false) > 0) seen_child = true;
    reaped = seen_child && holder_children(false) == 0;
    if (holder_children(true) == 0 && seen_child) reaped = true;
    usleep(50000);
  }
  EXPECT_TRUE(seen_child) << "the orphan never became the holder's";
  EXPECT_EQ(holder_children(true), 0) << "a zombie stayed under the holder";
  kill(ns->holder_pid, SIGKILL);
  int status = 0;
  waitpid(main->pid, &status, 0);
  waitpid(ns->holder_pid, &status, 0);
}

TEST_F(ContainerNamespacesTest, AMissingMountToHideIsRefused) {
  bool forked = false;
  absl::StatusOr<ContainerNamespaces> ns =
      StartContainerNamespaces(absl::StrCat(hide_dir_, "-absent"), &forked);
  EXPECT_EQ(ns.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ns.status().message(), HasSubstr("unmounting"));
  if (forked) {
    while (waitpid(-1, nullptr, 0) > 0) {
    }
  }
}

TEST_F(ContainerNamespacesTest, ABadFilterNamesPrivileges) {
  bool forked = false;
  absl::StatusOr<ContainerNamespaces> ns =
      StartContainerNamespaces(hide_dir_, &forked);
  ASSERT_TRUE(ns.ok()) << ns.status();
  SpawnPlace place;
  place.holder_pidfd = ns->holder_pidfd.get();
  place.pid_ns = ns->pid_ns.get();
  place.mount_ns = ns->mount_ns.get();
  v1::ProcessSpec spec = Probe("bad");
  spec.mutable_privileges()->set_seccomp_filter("xyz");  // not whole filters
  absl::StatusOr<SpawnedProcess> bad = SpawnProcess(spec, &forked, place);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("process.privileges: "));
  kill(ns->holder_pid, SIGKILL);
  while (waitpid(-1, nullptr, 0) > 0) {
  }
}

}  // namespace
}  // namespace berth::agent
