#include "services/agent/spawn.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
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

}  // namespace
}  // namespace berth::agent
