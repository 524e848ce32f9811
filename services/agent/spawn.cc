#include "services/agent/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/io.h"
#include "base/process.h"
#include "services/agent/output_window.h"

extern char** environ;

namespace berth::agent {
namespace {

// What a child writes on its close-on-exec pipe when it could not execute.
struct ChildError {
  int error_number;
  int step;
};

enum ChildStep {
  kStepStdio = 1,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepCwd,
  kStepExec,
};

[[noreturn]] void ChildFail(int fd, int step) {
  ChildError error = {errno, step};
  (void)!write(fd, &error, sizeof(error));
  _exit(127);
}

}  // namespace

absl::Status ValidateProcessSpec(const v1::ProcessSpec& spec) {
  if (spec.args().empty() || spec.args(0).empty()) {
    return absl::InvalidArgumentError("process.args is empty");
  }
  for (int i = 0; i < spec.env_size(); ++i) {
    if (spec.env(i).find('=') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "process.env[", i, "] \"", spec.env(i), "\" is not KEY=VALUE"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SpawnedProcess> SpawnProcess(const v1::ProcessSpec& spec,
                                            bool* forked) {
  *forked = false;
  std::vector<std::string> args(spec.args().begin(), spec.args().end());
  std::vector<std::string> env(spec.env().begin(), spec.env().end());
  std::vector<char*> argv = base::CStrings(args);
  std::vector<char*> envp = base::CStrings(env);
  const std::string& program = args[0];
  const bool search_path = program.find('/') == std::string::npos;
  const bool set_user = spec.has_user();
  std::vector<gid_t> groups(spec.user().additional_gids().begin(),
                            spec.user().additional_gids().end());
  const uid_t uid = spec.user().uid();
  const gid_t gid = spec.user().gid();
  const std::string cwd = spec.cwd();

  // Our ends and the child's, closed on every way out.
  std::vector<int> ours, theirs;
  absl::Cleanup close_all = [&] {
    for (int fd : ours) close(fd);
    for (int fd : theirs) close(fd);
  };
  const auto errno_error = [](absl::string_view what) {
    return absl::ErrnoToStatus(errno, what);
  };
  int child_in = -1, child_out = -1, child_err = -1;
  int in_fd = -1, out_fd = -1, err_fd = -1;
  if (spec.terminal()) {
    const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0) return errno_error("opening a pseudo-terminal");
    ours.push_back(master);
    if (grantpt(master) != 0 || unlockpt(master) != 0) {
      return errno_error("unlocking the pseudo-terminal");
    }
    char name[128];
    if (ptsname_r(master, name, sizeof(name)) != 0) {
      return errno_error("naming the pseudo-terminal");
    }
    const int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) return errno_error(absl::StrCat("opening ", name));
    theirs.push_back(slave);
    if (spec.has_terminal_size()) SetWindowSize(master, spec.terminal_size());
    const int out_copy = fcntl(master, F_DUPFD_CLOEXEC, 0);
    if (out_copy < 0) return errno_error("dup");
    ours.push_back(out_copy);
    in_fd = master;
    out_fd = out_copy;
    child_in = child_out = child_err = slave;
  } else {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) return errno_error("pipe2");
    theirs.push_back(in[0]);
    ours.push_back(in[1]);
    if (pipe2(out, O_CLOEXEC) != 0) return errno_error("pipe2");
    ours.push_back(out[0]);
    theirs.push_back(out[1]);
    if (pipe2(err, O_CLOEXEC) != 0) return errno_error("pipe2");
    ours.push_back(err[0]);
    theirs.push_back(err[1]);
    // Best effort: the default 64 KiB caps each read below a frame, and an
    // unprivileged agent may be held to /proc/sys/fs/pipe-max-size.
    (void)fcntl(out[0], F_SETPIPE_SZ, kOutputPipeBytes);
    (void)fcntl(err[0], F_SETPIPE_SZ, kOutputPipeBytes);
    in_fd = in[1];
    out_fd = out[0];
    err_fd = err[0];
    child_in = in[0];
    child_out = out[1];
    child_err = err[1];
  }
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) return errno_error("pipe2");
  theirs.push_back(exec_pipe[1]);
  ours.push_back(exec_pipe[0]);

  const bool terminal = spec.terminal();
  const pid_t pid = fork();
  if (pid < 0) return errno_error("fork");
  if (pid == 0) {
    // The child: only async-signal-safe calls from here on.
    const int error_fd = exec_pipe[1];
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
    }
    setsid();
    if (terminal && ioctl(child_in, TIOCSCTTY, 0) != 0) {
      ChildFail(error_fd, kStepStdio);
    }
    if (dup2(child_in, STDIN_FILENO) < 0 ||
        dup2(child_out, STDOUT_FILENO) < 0 ||
        dup2(child_err, STDERR_FILENO) < 0) {
      ChildFail(error_fd, kStepStdio);
    }
    if (set_user) {
      if (setgroups(groups.size(), groups.data()) != 0) {
        ChildFail(error_fd, kStepGroups);
      }
      if (setgid(gid) != 0) ChildFail(error_fd, kStepGid);
      if (setuid(uid) != 0) ChildFail(error_fd, kStepUid);
    }
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) ChildFail(error_fd, kStepCwd);
    if (search_path) {
      environ = envp.data();  // execvpe searches the PATH of environ
      execvpe(program.c_str(), argv.data(), envp.data());
    } else {
      execve(program.c_str(), argv.data(), envp.data());
    }
    ChildFail(error_fd, kStepExec);
  }
  // The caller's reaper now has a child to wait for.
  *forked = true;
  close(exec_pipe[1]);
  theirs.pop_back();
  for (int fd : theirs) close(fd);
  theirs.clear();
  ChildError error = {};
  size_t got = 0;
  while (got < sizeof(error)) {
    const ssize_t r = read(exec_pipe[0], reinterpret_cast<char*>(&error) + got,
                           sizeof(error) - got);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<size_t>(r);
  }
  if (got == sizeof(error)) {
    // It did not execute; the caller's reaper reaps it.
    const std::string reason = std::strerror(error.error_number);
    switch (error.step) {
      case kStepExec:
        if (error.error_number == ENOENT) {
          return absl::NotFoundError(absl::StrCat("process.args[0]: program \"",
                                                  program, "\" not found"));
        }
        return absl::InvalidArgumentError(absl::StrCat(
            "process.args[0]: cannot execute \"", program, "\": ", reason));
      case kStepCwd:
        return absl::InvalidArgumentError(absl::StrCat(
            "process.cwd: cannot change to \"", cwd, "\": ", reason));
      case kStepGroups:
        return absl::InvalidArgumentError(absl::StrCat(
            "process.user.additional_gids: cannot set them: ", reason));
      case kStepGid:
        return absl::InvalidArgumentError(absl::StrCat(
            "process.user.gid: cannot become group ", gid, ": ", reason));
      case kStepUid:
        return absl::InvalidArgumentError(absl::StrCat(
            "process.user.uid: cannot become user ", uid, ": ", reason));
      default:
        return absl::InternalError(absl::StrCat("setting up the stdio of \"",
                                                program, "\": ", reason));
    }
  }
  // Started: the descriptors now belong to the caller.
  std::move(close_all).Cancel();
  close(exec_pipe[0]);
  (void)base::SetNonBlocking(in_fd);
  (void)base::SetNonBlocking(out_fd);
  if (err_fd >= 0) (void)base::SetNonBlocking(err_fd);
  SpawnedProcess spawned;
  spawned.pid = pid;
  spawned.in_fd = in_fd;
  spawned.out_fd = out_fd;
  spawned.err_fd = err_fd;
  return spawned;
}

void SetWindowSize(int fd, const v1::TerminalSize& size) {
  struct winsize ws = {};
  ws.ws_row = static_cast<unsigned short>(size.rows());
  ws.ws_col = static_cast<unsigned short>(size.columns());
  ioctl(fd, TIOCSWINSZ, &ws);
}

}  // namespace berth::agent
