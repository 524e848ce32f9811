#include "services/driver/sandbox/shim_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::sandbox_driver {
namespace {

using ::berth::testing::ShortTempDir;
using ::testing::HasSubstr;
using ::testing::Not;

siginfo_t Exited(int code) {
  siginfo_t info = {};
  info.si_code = CLD_EXITED;
  info.si_status = code;
  return info;
}

siginfo_t Killed(int signal) {
  siginfo_t info = {};
  info.si_code = CLD_KILLED;
  info.si_status = signal;
  return info;
}

TEST(ShimExitTest, ExitCodesAndSignals) {
  struct Case {
    siginfo_t info;
    int exit_code;
    int signal;
  };
  for (const Case& c : {
           Case{Exited(0), 0, 0},
           Case{Exited(3), 3, 0},
           Case{Exited(128), 128, 0},
           // 128+N is read as signal N, for N up to 64.
           Case{Exited(130), 0, SIGINT},
           Case{Exited(128 + 64), 0, 64},
           Case{Exited(128 + 65), 128 + 65, 0},
           Case{Exited(255), 255, 0},
           // The shim itself killed.
           Case{Killed(SIGKILL), 0, SIGKILL},
       }) {
    const plugin::ExitStatus status = ShimExit(c.info);
    EXPECT_EQ(status.exit_code, c.exit_code)
        << "si_code " << c.info.si_code << ", si_status " << c.info.si_status;
    EXPECT_EQ(status.signal, c.signal)
        << "si_code " << c.info.si_code << ", si_status " << c.info.si_status;
  }
}

// A stand-in for berth-shim: a script, written into `dir`.
std::string WriteFakeShim(const ShortTempDir& dir, const std::string& body) {
  const std::string path = dir.Join("fake-shim");
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

// Reads `fd` to its end.
std::string ReadAll(int fd) {
  std::string data;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

TEST(StartShimTest, TheTokenIsInTheEnvironmentOnlyAndTheFlagsOnTheCommandLine) {
  ShortTempDir dir;
  const std::string shim = WriteFakeShim(dir,
                                         "echo \"args: $*\"\n"
                                         "echo \"token: $BERTH_SHIM_TOKEN\"\n"
                                         "env | grep -c '^BERTH_SHIM_TOKEN='\n"
                                         "exit 7\n");
  // A token of the driver's own environment is not passed on.
  setenv("BERTH_SHIM_TOKEN", "the-drivers-own", 1);
  absl::Cleanup unset = [] { unsetenv("BERTH_SHIM_TOKEN"); };
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  ShimOutput output;
  output.log_dir = "/task/logs";
  output.max_file_bytes = 1024;
  output.max_files = 3;

  absl::StatusOr<Shim> started =
      StartShim(shim, "/run/berth/proxy.sock", "secret-token", null_fd, out[1],
                out[1], output);
  close(out[1]);
  close(null_fd);
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string printed = ReadAll(out[0]);
  close(out[0]);
  siginfo_t info = {};
  ASSERT_EQ(
      waitid(static_cast<idtype_t>(P_PIDFD), started->pidfd, &info, WEXITED),
      0);
  close(started->pidfd);

  EXPECT_EQ(info.si_pid, started->pid);
  EXPECT_EQ(ShimExit(info).exit_code, 7);
  EXPECT_THAT(printed, HasSubstr("args: --proxy_socket=/run/berth/proxy.sock "
                                 "--reconnect_timeout=60s "
                                 "--task_log_dir=/task/logs "
                                 "--task_log_max_file_bytes=1024 "
                                 "--task_log_max_files=3\n"));
  EXPECT_THAT(printed, HasSubstr("token: secret-token\n1\n"));
  EXPECT_THAT(printed, Not(HasSubstr("args: secret-token")));
  EXPECT_THAT(printed, Not(HasSubstr("the-drivers-own")));
}

TEST(StartShimTest, WithoutALogDirectoryNoLogFlags) {
  ShortTempDir dir;
  const std::string shim = WriteFakeShim(dir, "echo \"args: $*\"\n");
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  absl::StatusOr<Shim> started =
      StartShim(shim, "/p.sock", "t", out[0], out[1], out[1]);
  close(out[1]);
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string printed = ReadAll(out[0]);
  close(out[0]);
  siginfo_t info = {};
  waitid(static_cast<idtype_t>(P_PIDFD), started->pidfd, &info, WEXITED);
  close(started->pidfd);
  EXPECT_EQ(printed, "args: --proxy_socket=/p.sock --reconnect_timeout=60s\n");
}

TEST(KillAndReapTest, KillsReapsAndClosesThePidfd) {
  ShortTempDir dir;
  const std::string shim = WriteFakeShim(dir, "exec sleep 60\n");
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  absl::StatusOr<Shim> started =
      StartShim(shim, "/p.sock", "t", null_fd, null_fd, null_fd);
  close(null_fd);
  ASSERT_TRUE(started.ok()) << started.status();
  Shim shim_process = *started;

  KillAndReap(shim_process);

  EXPECT_EQ(shim_process.pidfd, -1);
  // Reaped: no zombie is left under its pid.
  EXPECT_EQ(waitpid(started->pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  // Nothing to do a second time.
  KillAndReap(shim_process);
}

}  // namespace
}  // namespace berth::sandbox_driver
