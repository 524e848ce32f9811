#include "services/agent/spawn.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::agent {
namespace {

using ::testing::HasSubstr;

v1::ProcessSpec Spec(const std::vector<std::string>& args) {
  v1::ProcessSpec spec;
  for (const std::string& arg : args) spec.add_args(arg);
  spec.add_env("PATH=/usr/bin:/bin");
  return spec;
}

// Everything `fd` (non-blocking) gives until its end (EOF, or EIO from a
// terminal whose other side is closed); closes it.
std::string ReadToEnd(base::UniqueFd fd) {
  std::string data;
  char buffer[4096];
  while (true) {
    pollfd pfd = {fd.get(), POLLIN, 0};
    if (poll(&pfd, 1, /*timeout_ms=*/30000) != 1) break;
    const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

int WaitExitCode(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ValidateProcessSpecTest, NamesTheField) {
  EXPECT_TRUE(ValidateProcessSpec(Spec({"true"})).ok());
  EXPECT_EQ(ValidateProcessSpec(Spec({})).message(), "process.args is empty");
  EXPECT_EQ(ValidateProcessSpec(Spec({""})).message(), "process.args is empty");
  v1::ProcessSpec spec = Spec({"true"});
  spec.add_env("NOEQUALS");
  const absl::Status status = ValidateProcessSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "process.env[1] \"NOEQUALS\" is not KEY=VALUE");
}

TEST(SpawnProcessTest, PipesCarryStdioAndThePathIsSearched) {
  v1::ProcessSpec spec =
      Spec({"sh", "-c", "read line; echo \"out $line\"; echo err >&2; exit 3"});
  bool forked = false;
  absl::StatusOr<SpawnedProcess> spawned = SpawnProcess(spec, &forked);
  ASSERT_TRUE(spawned.ok()) << spawned.status();
  EXPECT_TRUE(forked);
  ASSERT_TRUE(spawned->err_fd.valid());
  ASSERT_EQ(write(spawned->in_fd.get(), "x\n", 2), 2);
  spawned->in_fd.reset();
  EXPECT_EQ(ReadToEnd(std::move(spawned->out_fd)), "out x\n");
  EXPECT_EQ(ReadToEnd(std::move(spawned->err_fd)), "err\n");
  EXPECT_EQ(WaitExitCode(spawned->pid), 3);
}

TEST(SpawnProcessTest, TerminalIsStdinStdoutAndStderr) {
  v1::ProcessSpec spec = Spec(
      {"sh", "-c", "test -t 0 && test -t 1 && test -t 2 && echo tty; exit 0"});
  spec.set_terminal(true);
  bool forked = false;
  absl::StatusOr<SpawnedProcess> spawned = SpawnProcess(spec, &forked);
  ASSERT_TRUE(spawned.ok()) << spawned.status();
  EXPECT_FALSE(spawned->err_fd.valid());
  EXPECT_EQ(ReadToEnd(std::move(spawned->out_fd)), "tty\r\n");
  spawned->in_fd.reset();
  EXPECT_EQ(WaitExitCode(spawned->pid), 0);
}

TEST(SpawnProcessTest, AMissingProgramIsNotFoundAndItsChildIsLeftToReap) {
  bool forked = false;
  absl::StatusOr<SpawnedProcess> spawned =
      SpawnProcess(Spec({"no-such-program-anywhere"}), &forked);
  EXPECT_EQ(spawned.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(spawned.status().message(),
            "process.args[0]: program \"no-such-program-anywhere\" not found");
  EXPECT_TRUE(forked);
  int status = 0;
  EXPECT_GT(waitpid(-1, &status, 0), 0);
  EXPECT_EQ(WEXITSTATUS(status), 127);
}

TEST(SpawnProcessTest, AMissingDirectoryNamesProcessCwd) {
  v1::ProcessSpec spec = Spec({"true"});
  spec.set_cwd("/no/such/directory");
  bool forked = false;
  absl::StatusOr<SpawnedProcess> spawned = SpawnProcess(spec, &forked);
  EXPECT_EQ(spawned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      spawned.status().message(),
      HasSubstr("process.cwd: cannot change to \"/no/such/directory\""));
  int status = 0;
  EXPECT_GT(waitpid(-1, &status, 0), 0);
}

TEST(SpawnProcessTest, RlimitsAreSetBeforeTheProgramRuns) {
  // Lowering needs no privilege: the soft and hard nofile limits, and the
  // core size, as /proc/self/limits shows them to the program.
  v1::ProcessSpec spec =
      Spec({"sh", "-c",
            "grep -E '^Max (open files|core file size)' /proc/self/limits | "
            "tr -s ' '"});
  v1::Rlimit* nofile = spec.add_rlimits();
  nofile->set_resource(RLIMIT_NOFILE);
  nofile->set_soft(123);
  nofile->set_hard(456);
  v1::Rlimit* core = spec.add_rlimits();
  core->set_resource(RLIMIT_CORE);
  core->set_soft(0);
  core->set_hard(0);
  ASSERT_TRUE(ValidateProcessSpec(spec).ok());
  bool forked = false;
  absl::StatusOr<SpawnedProcess> spawned = SpawnProcess(spec, &forked);
  ASSERT_TRUE(spawned.ok()) << spawned.status();
  spawned->in_fd.reset();
  EXPECT_EQ(ReadToEnd(std::move(spawned->out_fd)),
            "Max core file size 0 0 bytes \nMax open files 123 456 files \n");
  EXPECT_EQ(WaitExitCode(spawned->pid), 0);
}

TEST(SpawnProcessTest, ARlimitThatCannotBeSetNamesItsIndex) {
  // Raising a hard limit takes CAP_SYS_RESOURCE: in a child of the test that
  // lowered its own hard limit and is not root (none of root's
  // capabilities), asking for more than that fails in the spawned child.
  int result[2];
  ASSERT_EQ(pipe2(result, O_CLOEXEC), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(result[0]);
    struct rlimit lower = {64, 128};
    if (setrlimit(RLIMIT_NOFILE, &lower) != 0) _exit(2);
    // Without CAP_SYS_RESOURCE (root keeps the others).
    __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &header, data) != 0) _exit(3);
    for (__user_cap_data_struct& set : data) {
      set.effective &= ~(1u << CAP_SYS_RESOURCE);
      set.permitted &= ~(1u << CAP_SYS_RESOURCE);
      set.inheritable &= ~(1u << CAP_SYS_RESOURCE);
    }
    if (syscall(SYS_capset, &header, data) != 0) _exit(4);
    v1::ProcessSpec spec = Spec({"true"});
    spec.add_rlimits()->set_resource(RLIMIT_CORE);
    v1::Rlimit* limit = spec.add_rlimits();
    limit->set_resource(RLIMIT_NOFILE);
    limit->set_soft(256);
    limit->set_hard(256);
    bool forked = false;
    absl::StatusOr<SpawnedProcess> spawned = SpawnProcess(spec, &forked);
    const std::string message =
        absl::StrCat(static_cast<int>(spawned.status().code()), " ",
                     spawned.status().message());
    (void)!write(result[1], message.data(), message.size());
    _exit(0);
  }
  close(result[1]);
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = read(result[0], buffer, sizeof(buffer))) > 0) {
    message.append(buffer, static_cast<size_t>(n));
  }
  close(result[0]);
  EXPECT_EQ(WaitExitCode(child), 0);
  EXPECT_EQ(message,
            absl::StrCat(static_cast<int>(absl::StatusCode::kInvalidArgument),
                         " process.rlimits[1]: cannot set resource 7 to soft "
                         "256, hard 256: Operation not permitted"));
}

TEST(ValidateProcessSpecTest, RlimitsNameTheField) {
  v1::ProcessSpec spec = Spec({"true"});
  v1::Rlimit* limit = spec.add_rlimits();
  limit->set_resource(RLIMIT_NOFILE);
  limit->set_soft(10);
  limit->set_hard(5);
  EXPECT_EQ(ValidateProcessSpec(spec).message(),
            "process.rlimits[0]: the soft limit 10 is above the hard limit 5");
  limit->set_resource(RLIMIT_NLIMITS);
  limit->set_soft(1);
  EXPECT_THAT(std::string(ValidateProcessSpec(spec).message()),
              HasSubstr("process.rlimits[0].resource"));
}

}  // namespace
}  // namespace berth::agent
