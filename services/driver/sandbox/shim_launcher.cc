#include "services/driver/sandbox/shim_launcher.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/process.h"

extern char** environ;

namespace berth::sandbox_driver {

absl::StatusOr<Shim> StartShim(const std::string& shim_path,
                               const std::string& proxy_socket,
                               const std::string& token, int stdin_fd,
                               int stdout_fd, int stderr_fd,
                               const ShimOutput& output) {
  // The proxy may be away while it restarts (a kill -9, then `tools/dev up`
  // or systemd bringing it back): 5 s was shorter than that and every
  // sandbox task ended with 255 when its shim gave up (issue 18, point 4).
  std::vector<std::string> args = {
      shim_path, absl::StrCat("--proxy_socket=", proxy_socket),
      "--reconnect_timeout=60s"};
  if (!output.log_dir.empty()) {
    args.push_back(absl::StrCat("--task_log_dir=", output.log_dir));
    args.push_back(
        absl::StrCat("--task_log_max_file_bytes=", output.max_file_bytes));
    args.push_back(absl::StrCat("--task_log_max_files=", output.max_files));
  }
  // The shim's descriptor of the attach socket.
  constexpr int kAttachFd = 3;
  if (output.attach_fd >= 0) {
    args.push_back(absl::StrCat("--attach_fd=", kAttachFd));
    if (output.attach_stdin) args.push_back("--attach_stdin");
  }
  const int attach_fd = output.attach_fd;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, "BERTH_SHIM_TOKEN=", 17) != 0) env.push_back(*e);
  }
  env.push_back(absl::StrCat("BERTH_SHIM_TOKEN=", token));
  std::vector<char*> argv = base::CStrings(args);
  std::vector<char*> envp = base::CStrings(env);
  const pid_t pid = fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, "fork for berth-shim");
  if (pid == 0) {
    // Async-signal-safe only from here.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    if (dup2(stdin_fd, 0) < 0 || dup2(stdout_fd, 1) < 0 ||
        dup2(stderr_fd, 2) < 0) {
      _exit(127);
    }
    if (attach_fd >= 0) {
      // dup2 onto itself would keep close-on-exec.
      if (attach_fd == kAttachFd) {
        if (fcntl(kAttachFd, F_SETFD, 0) != 0) _exit(127);
      } else if (dup2(attach_fd, kAttachFd) < 0) {
        _exit(127);
      }
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  Shim shim;
  shim.pid = pid;
  shim.pidfd = base::PidfdOpen(pid);
  if (shim.pidfd < 0) {
    const int err = errno;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return absl::ErrnoToStatus(err, "pidfd_open of berth-shim");
  }
  fcntl(shim.pidfd, F_SETFD, FD_CLOEXEC);
  return shim;
}

void KillAndReap(Shim& shim) {
  if (shim.pidfd < 0) return;
  base::PidfdSendSignal(shim.pidfd, SIGKILL);
  siginfo_t info;
  waitid(static_cast<idtype_t>(P_PIDFD), shim.pidfd, &info, WEXITED);
  close(shim.pidfd);
  shim.pidfd = -1;
}

plugin::ExitStatus ShimExit(const siginfo_t& info) {
  plugin::ExitStatus status;
  if (info.si_code == CLD_EXITED) {
    if (info.si_status > 128 && info.si_status < 128 + 65) {
      status.signal = info.si_status - 128;
    } else {
      status.exit_code = info.si_status;
    }
  } else {
    status.signal = info.si_status;
  }
  return status;
}

}  // namespace berth::sandbox_driver
