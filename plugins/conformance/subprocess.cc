#include "plugins/conformance/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "plugins/host/process_util.h"

extern char** environ;

namespace berth::conformance {
namespace {

using plugin::host::internal::ErrnoError;

constexpr size_t kMaxCapture = 1 << 20;

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Reads what is there from `fd` into `out` (up to kMaxCapture); closes it
// at end of file or on an error.
void Drain(int& fd, std::string& out) {
  char buffer[16384];
  while (fd >= 0) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      const size_t room = kMaxCapture - std::min(kMaxCapture, out.size());
      const size_t keep = std::min(static_cast<size_t>(n), room);
      out.append(buffer, keep);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    CloseFd(fd);  // EOF or an error
  }
}

}  // namespace

std::string ProcessResult::Describe() const {
  if (timed_out) return "did not exit within the deadline (killed)";
  if (exited) return absl::StrCat("exited with code ", exit_code);
  const char* name = strsignal(signal);
  return absl::StrCat("was killed by signal ", signal, " (",
                      name != nullptr ? name : "unknown", ")");
}

std::vector<std::string> EnvironmentWithout(const std::string& drop_prefix) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (!drop_prefix.empty() && absl::StartsWith(*entry, drop_prefix)) {
      continue;
    }
    env.emplace_back(*entry);
  }
  return env;
}

absl::StatusOr<ProcessResult> RunProcess(const std::string& binary,
                                         const std::vector<std::string>& args,
                                         const std::vector<std::string>& env,
                                         absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return ErrnoError(errno, "pipe");
  }
  if (pipe2(err_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return ErrnoError(err, "pipe");
  }

  absl::StatusOr<pid_t> spawned = plugin::host::internal::Spawn(
      binary, args, env, /*stdin_fd=*/-1, out_pipe[1], err_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  int out_fd = out_pipe[0];
  int err_fd = err_pipe[0];
  if (!spawned.ok()) {
    CloseFd(out_fd);
    CloseFd(err_fd);
    return spawned.status();
  }
  const pid_t pid = *spawned;

  // The exit is seen through a pidfd; without one (an old kernel), by
  // polling waitpid every 10 ms.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  ProcessResult result;
  bool reaped = false;
  int wait_status = 0;
  // Until the process has been reaped and both pipes are closed (a child it
  // left in its process group is killed with it; one that made a session of
  // its own may hold the pipes open: then until the deadline).
  while (!reaped || out_fd >= 0 || err_fd >= 0) {
    if (!reaped && waitpid(pid, &wait_status, WNOHANG) == pid) {
      reaped = true;
      CloseFd(pidfd);
      kill(-pid, SIGKILL);
      continue;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      if (!reaped) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
        }
        reaped = true;
      }
      break;
    }
    pollfd fds[3];
    int count = 0;
    if (out_fd >= 0) fds[count++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) fds[count++] = {err_fd, POLLIN, 0};
    if (pidfd >= 0) fds[count++] = {pidfd, POLLIN, 0};
    int wait_ms = static_cast<int>(
        std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000));
    if (!reaped && pidfd < 0) wait_ms = std::min(wait_ms, 10);
    if (poll(fds, count, wait_ms) < 0 && errno != EINTR) {
      const int err = errno;
      kill(-pid, SIGKILL);
      if (!reaped) waitpid(pid, &wait_status, 0);
      CloseFd(pidfd);
      CloseFd(out_fd);
      CloseFd(err_fd);
      return ErrnoError(err, "poll");
    }
    Drain(out_fd, result.stdout_data);
    Drain(err_fd, result.stderr_data);
  }
  Drain(out_fd, result.stdout_data);
  Drain(err_fd, result.stderr_data);
  CloseFd(pidfd);
  CloseFd(out_fd);
  CloseFd(err_fd);
  if (!result.timed_out) {
    if (WIFEXITED(wait_status)) {
      result.exited = true;
      result.exit_code = WEXITSTATUS(wait_status);
    } else if (WIFSIGNALED(wait_status)) {
      result.signal = WTERMSIG(wait_status);
    }
  }
  return result;
}

}  // namespace berth::conformance
