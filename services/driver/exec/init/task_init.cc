// berth-task-init: the only process the exec driver keeps per task, and the
// helper that runs an exec'd command inside a task.
//
//   berth-task-init run    PID 1 of the task's pid namespace. Joins the
//                          task's cgroup and network namespace, mounts the
//                          namespace's /proc, starts the task's program,
//                          copies its stdout and stderr into rotated log
//                          files, forwards signals to it, reaps every
//                          orphan, and when the program ends records how in
//                          the exit file and exits (the kernel then kills
//                          whatever is left in the namespace).
//   berth-task-init exec   Joins a running task's cgroup and namespaces,
//                          runs one command there (with the terminal on fd
//                          0 as its controlling terminal when asked), and
//                          reports its wait status.
//
// Both read an InitSpec (init_spec.h) from fd 3 and report on fd 4; exec
// also gets a pidfd of the task's init on fd 5, run the driver's go there
// (InitSpec::go_fd). Linked statically against
// libc and libstdc++ only, so that a task costs a few hundred KiB.

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "plugins/sdk/rotating_log.h"
#include "services/driver/common/attach_hub.h"
#include "services/driver/common/exit_file.h"
#include "services/driver/common/init_spec.h"
#include "services/driver/common/privileges.h"
#include "services/driver/common/root_setup.h"

extern char** environ;

// The init is never instrumented, but under --config=asan the toolchain still
// links the sanitizer runtime into it. Its LeakSanitizer would stop the world
// at exit with a traced clone, which hangs inside a task's pid namespace:
// this documented hook turns it off. Unused in normal (static) builds.
extern "C" int __lsan_is_turned_off() { return 1; }

namespace berth::exec_driver {
namespace {

using ::berth::driver_common::AttachHub;
using ::berth::driver_common::AttachStream;
using ::berth::driver_common::DecodeInitSpec;
using ::berth::driver_common::DropPrivileges;
using ::berth::driver_common::EncodeExitRecord;
using ::berth::driver_common::EncodeInitReport;
using ::berth::driver_common::ExitRecord;
using ::berth::driver_common::InitReport;
using ::berth::driver_common::InitSpec;
using ::berth::driver_common::kAttachReplayBytes;
using ::berth::driver_common::kInitReportFd;
using ::berth::driver_common::kInitSpecFd;
using ::berth::driver_common::kInitTargetFd;
using ::berth::driver_common::RlimitSpec;
using ::berth::driver_common::SetUpRoot;
using ::berth::driver_common::WriteExitRecordAt;
using ::berth::plugin::kStderrLogName;
using ::berth::plugin::kStdoutLogName;
using ::berth::plugin::RotatingLog;

constexpr char kUsage[] =
    "usage: berth-task-init run|exec\n"
    "\n"
    "The per-task process of berth-driver-exec; started by the driver, not\n"
    "by hand. It reads its instructions (an encoded InitSpec) from fd 3 and\n"
    "reports on fd 4.\n"
    "\n"
    "  run    become PID 1 of a new task: join its cgroup and network\n"
    "         namespace, mount /proc, start the program, keep its output in\n"
    "         rotated files, forward signals, reap orphans, record the exit\n"
    "  exec   run one command inside a running task (pidfd of its init on\n"
    "         fd 5) and report its wait status\n";

// Signals the init passes on to the task's program.
constexpr int kForwardedSignals[] = {SIGHUP,  SIGINT,  SIGQUIT,  SIGTERM,
                                     SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT,
                                     SIGALRM, SIGTSTP, SIGTTIN,  SIGTTOU};

// WriteAll, ReadAll and CStrings are base/'s (base/io.h, base/process.h)
// written again on purpose: this static binary is every task's PID 1 and
// links no Abseil or glog, which linking //base would pull in.
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteAll(int fd, const std::string& data) {
  return WriteAll(fd, data.data(), data.size());
}

bool WriteFile(const std::string& path, const std::string& content) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = WriteAll(fd, content);
  const int saved = errno;
  close(fd);
  errno = saved;
  return ok;
}

bool ReadAll(int fd, std::string* out) {
  char buffer[16384];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out->append(buffer, static_cast<size_t>(n));
  }
}

// Reports a failure of `what` (with errno `err`) on the report fd and exits.
[[noreturn]] void Fail(int err, const std::string& what) {
  InitReport report;
  report.kind = InitReport::Kind::kFailed;
  report.error_number = err;
  report.what = what;
  WriteAll(kInitReportFd, EncodeInitReport(report));
  std::fprintf(stderr, "berth-task-init: %s: %s\n", what.c_str(),
               std::strerror(err));
  _exit(1);
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> result;
  result.reserve(strings.size() + 1);
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

// What a child writes on its close-on-exec pipe when it could not exec.
struct ChildError {
  int error_number;
  char what[120];
};

[[noreturn]] void ChildFail(int pipe_fd, const std::string& what) {
  ChildError error;
  error.error_number = errno;
  std::snprintf(error.what, sizeof(error.what), "%s", what.c_str());
  WriteAll(pipe_fd, reinterpret_cast<const char*>(&error), sizeof(error));
  _exit(127);
}

// In a forked child: takes the task's identity, then its directory, then
// executes the program. Only returns through ChildFail.
// In a forked child: takes the task's identity and drops what it may not
// keep (capabilities, no_new_privs, seccomp, every descriptor but stdio),
// then its directory, then executes the program. Only returns through
// ChildFail.
[[noreturn]] void BecomeTaskProgram(InitSpec& spec, int error_fd,
                                    bool search_path) {
  std::vector<char*> argv = CStrings(spec.args);
  std::vector<char*> envp = CStrings(spec.env);
  // While still privileged: raising a hard limit takes CAP_SYS_RESOURCE.
  for (const RlimitSpec& limit : spec.rlimits) {
    struct rlimit value;
    value.rlim_cur = static_cast<rlim_t>(limit.soft);
    value.rlim_max = static_cast<rlim_t>(limit.hard);
    if (setrlimit(limit.resource, &value) != 0) {
      ChildFail(error_fd,
                "setting resource limit " + std::to_string(limit.resource));
    }
  }
  std::string what;
  int error_number = 0;
  if (!DropPrivileges(spec.privileges, spec.uid, spec.gid, spec.groups, &what,
                      &error_number)) {
    errno = error_number;
    ChildFail(error_fd, what);
  }
  // As the task's user, so that a directory it may not enter is refused.
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) {
    ChildFail(error_fd, "changing to working directory " + spec.cwd);
  }
  if (search_path && spec.path.find('/') == std::string::npos) {
    environ = envp.data();  // execvpe searches the PATH of environ
    execvpe(spec.path.c_str(), argv.data(), envp.data());
  } else {
    execve(spec.path.c_str(), argv.data(), envp.data());
  }
  ChildFail(error_fd, "executing " + spec.path);
}

// Waits for a child's close-on-exec pipe: true when it executed (EOF).
bool ChildExecuted(int pipe_fd, ChildError* error) {
  size_t got = 0;
  char* data = reinterpret_cast<char*>(error);
  while (got < sizeof(*error)) {
    const ssize_t n = read(pipe_fd, data + got, sizeof(*error) - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<size_t>(n);
  }
  return got < sizeof(*error);
}

void ResetSignals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    signal(sig, SIG_DFL);
  }
}

int64_t UnixNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Copies what is readable on `fd` into `log` and to attached callers;
// false at end of file (a terminal's master: EIO once no process holds the
// terminal any more).
bool Pump(int fd, RotatingLog* log, bool* log_failed, AttachHub* hub,
          AttachStream stream) {
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      if (!log->Write(buffer, static_cast<size_t>(n)) && !*log_failed) {
        *log_failed = true;
        std::fprintf(stderr, "berth-task-init: writing %s: %s\n",
                     log->CurrentPath().c_str(), std::strerror(errno));
      }
      hub->Output(stream, buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN;
  }
}

// A terminal of the task's own devpts (its root's /dev/ptmx): the master,
// and its peer in `*slave`. -1 with errno on failure.
int OpenTerminal(int* slave, std::string* what) {
  *what = "opening /dev/ptmx";
  const int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return -1;
  int unlock = 0;
  *what = "unlocking the terminal";
  if (ioctl(master, TIOCSPTLCK, &unlock) != 0) {
    const int saved = errno;
    close(master);
    errno = saved;
    return -1;
  }
  // The peer without a lookup by path (Linux 4.13), else by its name.
  *what = "opening the terminal's peer";
  *slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (*slave < 0) {
    int number = 0;
    if (ioctl(master, TIOCGPTN, &number) == 0) {
      *slave = open(("/dev/pts/" + std::to_string(number)).c_str(),
                    O_RDWR | O_NOCTTY | O_CLOEXEC);
    }
  }
  if (*slave < 0) {
    const int saved = errno;
    close(master);
    errno = saved;
    return -1;
  }
  return master;
}

// The directory holding `path`, opened without following a link at its end.
int OpenParentDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  return open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// What the program's process is started with (StartProgram's argument).
struct ProgramStart {
  InitSpec* spec;
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int error_fd;
};

// What a task that is neither tty nor stdin_open keeps of its output for a
// first attach.
constexpr size_t kQuietReplayBytes = 64 * 1024;

// Its stack until it executes: most of it never touched.
constexpr size_t kProgramStackBytes = 1 << 20;

// The task's program, in a process cloned with CLONE_VM | CLONE_VFORK.
// Never returns: executes the program or reports why not and exits.
int StartProgram(void* arg) {
  ProgramStart* start = static_cast<ProgramStart*>(arg);
  ResetSignals();
  setsid();
  WriteFile("/proc/self/oom_score_adj", "0");
  if (dup2(start->stdin_fd, STDIN_FILENO) < 0 ||
      dup2(start->stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(start->stderr_fd, STDERR_FILENO) < 0) {
    ChildFail(start->error_fd, "setting up stdio");
  }
  // The terminal becomes the new session's controlling terminal.
  if (start->spec->tty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) != 0) {
    ChildFail(start->error_fd, "taking the terminal");
  }
  BecomeTaskProgram(*start->spec, start->error_fd, /*search_path=*/false);
}

int RunInit(InitSpec& spec) {
  // The task must not read this process's memory, descriptors or root
  // through /proc/1 (it holds host directories open): only a process with
  // CAP_SYS_PTRACE over it could.
  prctl(PR_SET_DUMPABLE, 0);
  // The attach socket is the init's alone, never the program's.
  if (spec.attach_fd >= 0) fcntl(spec.attach_fd, F_SETFD, FD_CLOEXEC);
  // The init is tiny and must outlive an OOM in its own cgroup, so that it
  // can record how the program ended; the program gets the default back.
  WriteFile("/proc/self/oom_score_adj", "-1000");
  for (const std::string& procs : spec.cgroup_procs) {
    if (!WriteFile(procs, "0")) Fail(errno, "joining cgroup " + procs);
  }
  // After joining: the namespace's root is the task's own cgroup.
  if (spec.root.enabled && spec.root.cgroup_namespace &&
      unshare(CLONE_NEWCGROUP) != 0) {
    Fail(errno, "making the task's cgroup namespace");
  }
  if (!spec.netns.empty()) {
    const int fd = open(spec.netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Fail(errno, "opening network namespace " + spec.netns);
    if (setns(fd, CLONE_NEWNET) != 0) {
      Fail(errno, "joining network namespace " + spec.netns);
    }
    close(fd);
  }
  if (!spec.hostname.empty() &&
      sethostname(spec.hostname.data(), spec.hostname.size()) != 0) {
    Fail(errno, "setting host name " + spec.hostname);
  }

  // The host directories the init writes to, held open: once in the task's
  // root their paths name nothing, and an fd cannot be redirected by a
  // link the task plants.
  // The driver opens them for an init in a user namespace (whose ids may
  // not search their parents).
  const int log_dir_fd =
      spec.log_dir_fd >= 0
          ? spec.log_dir_fd
          : open(spec.log_dir.c_str(),
                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (log_dir_fd < 0) Fail(errno, "opening log directory " + spec.log_dir);
  const int exit_dir_fd = spec.exit_dir_fd >= 0
                              ? spec.exit_dir_fd
                              : OpenParentDirectory(spec.exit_file);
  if (exit_dir_fd < 0)
    Fail(errno, "opening the directory of " + spec.exit_file);
  const size_t exit_slash = spec.exit_file.rfind('/');
  const std::string exit_name = exit_slash == std::string::npos
                                    ? spec.exit_file
                                    : spec.exit_file.substr(exit_slash + 1);
  RotatingLog out_log(log_dir_fd, kStdoutLogName, spec.log_max_bytes,
                      spec.log_max_files);
  RotatingLog err_log(log_dir_fd, kStderrLogName, spec.log_max_bytes,
                      spec.log_max_files);
  if (!out_log.Open()) Fail(errno, "opening " + spec.log_dir + "/stdout.log");
  if (!err_log.Open()) Fail(errno, "opening " + spec.log_dir + "/stderr.log");

  if (spec.root.enabled) {
    std::string what;
    int error_number = 0;
    if (!SetUpRoot(spec.root, &what, &error_number)) {
      Fail(error_number, what);
    }
  } else {
    // Mounts made here stay here; the host's new mounts still show up.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
      Fail(errno, "making the task's mounts private");
    }
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
      Fail(errno, "mounting /proc of the task's pid namespace");
    }
  }

  // The program's stdio: a terminal (tty), else pipes; stdin a pipe that
  // attached callers write to (stdin_open), else /dev/null.
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, exec_pipe[2];
  int in_pipe[2] = {-1, -1};
  int terminal = -1, terminal_peer = -1;
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) Fail(errno, "making pipes");
  if (spec.tty) {
    std::string what;
    terminal = OpenTerminal(&terminal_peer, &what);
    if (terminal < 0) Fail(errno, what);
    // The program's user owns its terminal, as a login's does.
    if (fchown(terminal_peer, spec.uid, static_cast<gid_t>(-1)) != 0) {
      std::fprintf(stderr,
                   "berth-task-init: giving the terminal to uid %u: %s\n",
                   static_cast<unsigned>(spec.uid), std::strerror(errno));
    }
  } else if (pipe2(out_pipe, O_CLOEXEC) != 0 ||
             pipe2(err_pipe, O_CLOEXEC) != 0) {
    Fail(errno, "making pipes");
  }
  if (spec.stdin_open && !spec.tty && pipe2(in_pipe, O_CLOEXEC) != 0) {
    Fail(errno, "making the stdin pipe");
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) Fail(errno, "opening /dev/null");
  const int program_in = spec.tty          ? terminal_peer
                         : in_pipe[0] >= 0 ? in_pipe[0]
                                           : null_fd;
  const int program_out = spec.tty ? terminal_peer : out_pipe[1];
  const int program_err = spec.tty ? terminal_peer : err_pipe[1];
  // A stdin pipe whose program is gone must not kill the init (EPIPE).
  signal(SIGPIPE, SIG_IGN);

  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int sig : kForwardedSignals) sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  const int signal_fd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) Fail(errno, "making a signalfd");

  // Not before the driver has recorded this init's pid (its go): a driver
  // killed first must find no program that ran (end of file: none starts).
  if (spec.go_fd >= 0) {
    char go = 0;
    ssize_t n;
    do {
      n = read(spec.go_fd, &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) {
      Fail(n == 0 ? ECANCELED : errno, "waiting for the driver's go on fd " +
                                           std::to_string(spec.go_fd) +
                                           " (not starting the program)");
    }
    close(spec.go_fd);
  }

  // The program's process shares this one's memory until it executes (as
  // vfork and posix_spawn do: no page tables copied, no copy-on-write
  // faults afterwards; a task's start is measured). This process is single
  // threaded and waits meanwhile, so the child may allocate.
  ProgramStart start{&spec, program_in, program_out, program_err, exec_pipe[1]};
  void* const stack = mmap(nullptr, kProgramStackBytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) Fail(errno, "mapping the program's first stack");
  const pid_t program =
      clone(StartProgram, static_cast<char*>(stack) + kProgramStackBytes,
            CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  if (program < 0) Fail(errno, "starting the task's program");
  munmap(stack, kProgramStackBytes);
  for (int fd : {out_pipe[1], err_pipe[1], in_pipe[0], terminal_peer}) {
    if (fd >= 0) close(fd);
  }
  close(exec_pipe[1]);
  close(null_fd);
  ChildError child_error;
  if (!ChildExecuted(exec_pipe[0], &child_error)) {
    waitpid(program, nullptr, 0);
    errno = child_error.error_number;
    Fail(child_error.error_number, child_error.what);
  }
  close(exec_pipe[0]);
  InitReport started;
  started.kind = InitReport::Kind::kStarted;
  WriteAll(kInitReportFd, EncodeInitReport(started));
  close(kInitReportFd);
  // From here on stderr is the driver's log of this init.

  // Attached callers (AttachTask): the driver's listening socket; the
  // program's output goes to them too, their stdin and resizes to it.
  AttachHub::Options attach;
  attach.listen_fd = spec.attach_fd;
  attach.stdin_fd = in_pipe[1];
  attach.terminal_fd = terminal;
  attach.terminal_stdin = spec.stdin_open;
  // What the first attach gets of the output written before it: the
  // contract's 1 MiB for an interactive task (`berth run -it` loses no
  // prompt), less for the others (most never attached), whose init must
  // stay small however much they write.
  attach.replay_bytes =
      spec.tty || spec.stdin_open ? kAttachReplayBytes : kQuietReplayBytes;
  AttachHub hub(attach);

  int out_fd = spec.tty ? terminal : out_pipe[0];
  int err_fd = spec.tty ? -1 : err_pipe[0];
  if (out_fd >= 0) fcntl(out_fd, F_SETFL, O_NONBLOCK);
  if (err_fd >= 0) fcntl(err_fd, F_SETFL, O_NONBLOCK);
  bool out_failed = false, err_failed = false;
  bool exited = false;
  int wait_status = 0;
  std::vector<struct pollfd> fds;
  while (!exited) {
    fds.assign(
        {{signal_fd, POLLIN, 0}, {out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}});
    const size_t attach_fds = hub.AddPollFds(&fds);
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("berth-task-init: poll");
      break;
    }
    if (fds[1].revents != 0 &&
        !Pump(out_fd, &out_log, &out_failed, &hub, AttachStream::kStdout)) {
      // The terminal stays open: attached callers still write to it.
      if (out_fd != terminal) close(out_fd);
      out_fd = -1;
    }
    if (fds[2].revents != 0 &&
        !Pump(err_fd, &err_log, &err_failed, &hub, AttachStream::kStderr)) {
      close(err_fd);
      err_fd = -1;
    }
    hub.HandlePoll(fds.data() + 3, attach_fds);
    struct signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof(info)) == sizeof(info)) {
      if (info.ssi_signo != SIGCHLD) {
        // Only what the driver sends (from outside the task's pid
        // namespace, so no sender pid here) is passed on: a process of the
        // task cannot make its init do anything.
        if (info.ssi_pid == 0) {
          kill(program, static_cast<int>(info.ssi_signo));
        }
        continue;
      }
      // Reap the program and every orphan the namespace handed us.
      int status = 0;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == program) {
          exited = true;
          wait_status = status;
        }
      }
    }
  }
  // All the program wrote before it ended is in the pipes: keep it.
  if (out_fd >= 0) {
    Pump(out_fd, &out_log, &out_failed, &hub, AttachStream::kStdout);
  }
  if (err_fd >= 0) {
    Pump(err_fd, &err_log, &err_failed, &hub, AttachStream::kStderr);
  }

  ExitRecord record;
  if (WIFEXITED(wait_status)) record.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) record.signal = WTERMSIG(wait_status);
  record.exited_at_unix_nanos = UnixNanos();
  const bool recorded = WriteExitRecordAt(exit_dir_fd, exit_name, record);
  if (!recorded) {
    std::fprintf(stderr, "berth-task-init: recording the exit in %s: %s\n",
                 spec.exit_file.c_str(), std::strerror(errno));
  }
  // Attached callers get the rest of the output and the exit; one that
  // does not read holds the init back a second at most.
  hub.Exit(record.exit_code, record.signal);
  hub.Flush(1000);
  return recorded ? 0 : 1;
}

int RunExec(InitSpec& spec) {
  for (const std::string& procs : spec.cgroup_procs) {
    if (!WriteFile(procs, "0")) Fail(errno, "joining cgroup " + procs);
  }
  // The mount namespace brings the task's root (and cwd "/") with it. A
  // task's own user namespace is joined with the rest (the kernel takes it
  // first, so that the others are joined with its privileges); joining the
  // one we are in would be EINVAL.
  int namespaces = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                   CLONE_NEWNET | CLONE_NEWCGROUP;
  if (spec.join_user_namespace) namespaces |= CLONE_NEWUSER;
  if (setns(kInitTargetFd, namespaces) != 0) {
    Fail(errno, "joining the task's namespaces");
  }
  close(kInitTargetFd);
  if (spec.join_user_namespace) {
    // Our host uid 0 means nothing in there (it shows as the overflow id):
    // become the namespace's root, as the task's init is, before anything
    // of the task can see us; and stay out of its reach (ptrace, /proc).
    if (setgroups(0, nullptr) != 0) {
      Fail(errno, "dropping supplementary groups");
    }
    if (setresgid(0, 0, 0) != 0) {
      Fail(errno, "becoming gid 0 of the task's user namespace");
    }
    if (setresuid(0, 0, 0) != 0) {
      Fail(errno, "becoming uid 0 of the task's user namespace");
    }
    prctl(PR_SET_DUMPABLE, 0);
  }
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) Fail(errno, "making a pipe");
  const pid_t command = fork();
  if (command < 0) Fail(errno, "forking the command");
  if (command == 0) {
    close(kInitReportFd);
    ResetSignals();
    setsid();
    if (spec.tty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) != 0) {
      ChildFail(exec_pipe[1], "taking the terminal");
    }
    // The driver kills this helper to cancel the command.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    BecomeTaskProgram(spec, exec_pipe[1], /*search_path=*/true);
  }
  close(exec_pipe[1]);
  // Our copies of the command's stdio must not keep its streams open.
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (null_fd >= 0) dup2(null_fd, fd);
  }
  ChildError child_error;
  if (!ChildExecuted(exec_pipe[0], &child_error)) {
    waitpid(command, nullptr, 0);
    Fail(child_error.error_number, child_error.what);
  }
  int status = 0;
  while (waitpid(command, &status, 0) < 0) {
    if (errno != EINTR) Fail(errno, "waiting for the command");
  }
  InitReport report;
  report.kind = InitReport::Kind::kExited;
  report.wait_status = status;
  WriteAll(kInitReportFd, EncodeInitReport(report));
  return 0;
}

}  // namespace
}  // namespace berth::exec_driver

int main(int argc, char** argv) {
  using namespace berth::exec_driver;
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "--help" || mode == "-h" || mode == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (mode == "--version") {
    std::puts("berth-task-init 0.1.0");
    return 0;
  }
  if (argc != 2 || (mode != "run" && mode != "exec")) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string data;
  if (!ReadAll(kInitSpecFd, &data)) {
    std::fprintf(stderr, "berth-task-init: reading the spec on fd %d: %s\n",
                 kInitSpecFd, std::strerror(errno));
    return 2;
  }
  close(kInitSpecFd);
  InitSpec spec;
  std::string error;
  if (!DecodeInitSpec(data, &spec, &error)) {
    std::fprintf(stderr, "berth-task-init: bad spec on fd %d: %s\n",
                 kInitSpecFd, error.c_str());
    return 2;
  }
  return mode == "run" ? RunInit(spec) : RunExec(spec);
}
