#include "services/agent/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/io.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "services/agent/container_ns.h"
#include "services/agent/output_window.h"
#include "services/driver/common/privileges.h"

extern char** environ;

namespace berth::agent {
namespace {

// What a child writes on its close-on-exec pipe when it could not execute.
struct ChildError {
  int error_number;
  int step;
  // kStepPrivileges: DropPrivileges' step.
  char what[120];
};

enum ChildStep {
  kStepStdio = 1,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepCwd,
  kStepExec,
  kStepNamespaces,
  kStepPrivileges,
  kStepRlimits,
};

[[noreturn]] void ChildFail(int fd, int step, const char* what = "") {
  ChildError error = {errno, step, {}};
  std::snprintf(error.what, sizeof(error.what), "%s", what);
  (void)!write(fd, &error, sizeof(error));
  _exit(127);
}

// A pipe (close-on-exec) as two owned ends; false, with errno set, if none.
bool MakePipe(base::UniqueFd* read_end, base::UniqueFd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  return true;
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
  for (int i = 0; i < spec.rlimits_size(); ++i) {
    const v1::Rlimit& limit = spec.rlimits(i);
    if (limit.resource() < 0 || limit.resource() >= RLIMIT_NLIMITS) {
      return absl::InvalidArgumentError(absl::StrCat(
          "process.rlimits[", i, "].resource ", limit.resource(),
          " is not a resource limit (0 to ", RLIMIT_NLIMITS - 1, ")"));
    }
    if (limit.soft() > limit.hard()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "process.rlimits[", i, "]: the soft limit ", limit.soft(),
          " is above the hard limit ", limit.hard()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SpawnedProcess> SpawnProcess(const v1::ProcessSpec& spec,
                                            bool* forked,
                                            const SpawnPlace& place) {
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
  const bool drop = spec.privileges().enabled();
  driver_common::PrivilegeSpec privileges;
  privileges.enabled = drop;
  privileges.capabilities = spec.privileges().capabilities();
  privileges.no_new_privs = spec.privileges().no_new_privs();
  privileges.seccomp_filter = spec.privileges().seccomp_filter();
  // Without a user the process stays the agent's, root's, identity.
  const uid_t drop_uid = set_user ? uid : getuid();
  const gid_t drop_gid = set_user ? gid : getgid();
  struct Limit {
    int resource;
    struct rlimit value;
  };
  std::vector<Limit> limits;
  for (const v1::Rlimit& limit : spec.rlimits()) {
    limits.push_back({limit.resource(),
                      {static_cast<rlim_t>(limit.soft()),
                       static_cast<rlim_t>(limit.hard())}});
  }

  // Our ends (the caller's once the child has executed) and the child's
  // (the terminal's slave, or the pipes' other ends), closed on every way
  // out.
  SpawnedProcess spawned;
  base::UniqueFd theirs[3];
  const auto errno_error = [](absl::string_view what) {
    return absl::ErrnoToStatus(errno, what);
  };
  int child_in = -1, child_out = -1, child_err = -1;
  if (spec.terminal()) {
    base::UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!master.valid()) return errno_error("opening a pseudo-terminal");
    if (grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) {
      return errno_error("unlocking the pseudo-terminal");
    }
    char name[128];
    if (ptsname_r(master.get(), name, sizeof(name)) != 0) {
      return errno_error("naming the pseudo-terminal");
    }
    theirs[0].reset(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!theirs[0].valid()) return errno_error(absl::StrCat("opening ", name));
    if (spec.has_terminal_size()) {
      SetWindowSize(master.get(), spec.terminal_size());
    }
    spawned.out_fd.reset(fcntl(master.get(), F_DUPFD_CLOEXEC, 0));
    if (!spawned.out_fd.valid()) return errno_error("dup");
    spawned.in_fd = std::move(master);
    child_in = child_out = child_err = theirs[0].get();
  } else {
    if (!MakePipe(&theirs[0], &spawned.in_fd) ||
        !MakePipe(&spawned.out_fd, &theirs[1]) ||
        !MakePipe(&spawned.err_fd, &theirs[2])) {
      return errno_error("pipe2");
    }
    // Best effort: the default 64 KiB caps each read below a frame, and an
    // unprivileged agent may be held to /proc/sys/fs/pipe-max-size.
    (void)fcntl(spawned.out_fd.get(), F_SETPIPE_SZ, kOutputPipeBytes);
    (void)fcntl(spawned.err_fd.get(), F_SETPIPE_SZ, kOutputPipeBytes);
    child_in = theirs[0].get();
    child_out = theirs[1].get();
    child_err = theirs[2].get();
  }
  base::UniqueFd exec_read, exec_write;
  if (!MakePipe(&exec_read, &exec_write)) return errno_error("pipe2");

  const bool terminal = spec.terminal();
  const int mount_ns = place.mount_ns;
  if (place.holder_pidfd >= 0) {
    // A pidfd is readable once its process has ended: the namespace then
    // takes no new process.
    pollfd pfd = {place.holder_pidfd, POLLIN, 0};
    if (poll(&pfd, 1, 0) != 0) {
      return absl::FailedPreconditionError(
          "its namespaces are gone (its main process has ended)");
    }
  }
  pid_t pid;
  {
    // This thread's children are made in the container's pid namespace
    // until the end of this block.
    std::optional<ChildrenInPidNamespace> in_container;
    if (place.pid_ns >= 0) {
      in_container.emplace(place.pid_ns);
      if (!in_container->ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "joining the container's pid namespace: ", std::strerror(errno)));
      }
    }
    pid = fork();
    if (pid == 0 && in_container.has_value()) in_container->InChild();
  }
  if (pid < 0) return errno_error("fork");
  if (pid == 0) {
    // The child: only async-signal-safe calls from here on (it leaves by
    // exec or _exit: no destructor runs).
    const int error_fd = exec_write.get();
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
    // The container's mounts: the agent's socket is not among them.
    if (mount_ns >= 0 && setns(mount_ns, CLONE_NEWNS) != 0) {
      ChildFail(error_fd, kStepNamespaces);
    }
    // Before the user and privileges: raising a hard limit takes
    // CAP_SYS_RESOURCE, which the program may not keep.
    for (size_t i = 0; i < limits.size(); ++i) {
      if (setrlimit(static_cast<__rlimit_resource_t>(limits[i].resource),
                    &limits[i].value) != 0) {
        // The index in decimal, without stdio (async-signal-safe).
        char what[24];
        char* end = what + sizeof(what) - 1;
        *end = '\0';
        size_t n = i;
        do {
          *--end = static_cast<char>('0' + n % 10);
          n /= 10;
        } while (n != 0);
        ChildFail(error_fd, kStepRlimits, end);
      }
    }
    if (drop) {
      std::string what;
      int error_number = 0;
      if (!driver_common::DropPrivileges(privileges, drop_uid, drop_gid, groups,
                                         &what, &error_number)) {
        errno = error_number;
        ChildFail(error_fd, kStepPrivileges, what.c_str());
      }
    } else if (set_user) {
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
  // The child's copies only from here: the read below sees end of file when
  // it executes.
  exec_write.reset();
  for (base::UniqueFd& fd : theirs) fd.reset();
  ChildError error = {};
  size_t got = 0;
  while (got < sizeof(error)) {
    const ssize_t r =
        read(exec_read.get(), reinterpret_cast<char*>(&error) + got,
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
      case kStepNamespaces:
        return absl::FailedPreconditionError(
            absl::StrCat("joining the container's mount namespace: ", reason));
      case kStepRlimits: {
        error.what[sizeof(error.what) - 1] = '\0';
        size_t index = 0;
        (void)absl::SimpleAtoi(error.what, &index);
        const v1::Rlimit& limit =
            spec.rlimits(static_cast<int>(std::min<size_t>(
                index, static_cast<size_t>(spec.rlimits_size() - 1))));
        return absl::InvalidArgumentError(absl::StrCat(
            "process.rlimits[", error.what, "]: cannot set resource ",
            limit.resource(), " to soft ", limit.soft(), ", hard ",
            limit.hard(), ": ", reason));
      }
      case kStepPrivileges:
        error.what[sizeof(error.what) - 1] = '\0';
        return absl::InvalidArgumentError(
            absl::StrCat("process.privileges: ", error.what, ": ", reason));
      default:
        return absl::InternalError(absl::StrCat("setting up the stdio of \"",
                                                program, "\": ", reason));
    }
  }
  // Started: the descriptors now belong to the caller.
  exec_read.reset();
  (void)base::SetNonBlocking(spawned.in_fd.get());
  (void)base::SetNonBlocking(spawned.out_fd.get());
  if (spawned.err_fd.valid()) (void)base::SetNonBlocking(spawned.err_fd.get());
  spawned.pid = pid;
  return spawned;
}

void SetWindowSize(int fd, const v1::TerminalSize& size) {
  struct winsize ws = {};
  ws.ws_row = static_cast<unsigned short>(size.rows());
  ws.ws_col = static_cast<unsigned short>(size.columns());
  ioctl(fd, TIOCSWINSZ, &ws);
}

}  // namespace berth::agent
