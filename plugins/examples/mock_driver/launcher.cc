#include "plugins/examples/mock_driver/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace berth::mock {
namespace {

constexpr char kDefaultPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// ---- Only async-signal-safe calls from here to the end of the namespace:
// ---- they run in the child of a threaded process.

// What a child reports when it could not exec.
struct Failure {
  int stage;  // one of the k* below
  int error;  // errno
};
constexpr int kStageNone = 0;
constexpr int kStageFork = 1;
constexpr int kStageStdio = 2;
constexpr int kStageChdir = 3;
constexpr int kStageExec = 4;
constexpr int kStageTerminal = 5;

// What the monitor tells the plugin.
struct Report {
  pid_t task;
  Failure failure;
};

void CloseFrom(int first) {
  if (syscall(SYS_close_range, first, ~0U, 0) == 0) return;
  for (int fd = first; fd < 65536; ++fd) close(fd);
}

// Default dispositions and no blocked signal, as a fresh process expects
// (the plugin blocks SIGTERM and SIGINT and ignores SIGPIPE).
void ResetSignals() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = SIG_DFL;
  for (int signal = 1; signal < NSIG; ++signal) {
    if (signal == SIGKILL || signal == SIGSTOP) continue;
    sigaction(signal, &action, nullptr);  // fails harmlessly for libc's
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

bool WriteAll(int fd, const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= n;
  }
  return true;
}

// Reads exactly `size` bytes; false at an early end of file.
bool ReadAll(int fd, void* data, size_t size) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= n;
  }
  return true;
}

[[noreturn]] void Fail(int report_fd, int stage) {
  const Failure failure = {stage, errno};
  WriteAll(report_fd, &failure, sizeof(failure));
  _exit(127);
}

// Appends the decimal `value` at `out`; returns the end.
char* AppendInt(char* out, long long value) {
  char digits[24];
  int n = 0;
  const bool negative = value < 0;
  unsigned long long magnitude =
      negative ? 0ULL - static_cast<unsigned long long>(value) : value;
  do {
    digits[n++] = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude > 0);
  if (negative) *out++ = '-';
  while (n > 0) *out++ = digits[--n];
  return out;
}

volatile sig_atomic_t task_to_kill = 0;
volatile sig_atomic_t run_for_expired = 0;

void OnRunForExpired(int) {
  run_for_expired = 1;
  if (task_to_kill > 0) kill(-task_to_kill, SIGKILL);
}

// The task, in the monitor's child.
[[noreturn]] void ExecTask(const ExecSpec& exec, const MonitorSpec& spec,
                           int failure_fd) {
  setsid();
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out = open(spec.stdout_path.c_str(),
                       O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  const int err = open(spec.stderr_path.c_str(),
                       O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (in < 0 || out < 0 || err < 0) Fail(failure_fd, kStageStdio);
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) {
    Fail(failure_fd, kStageStdio);
  }
  if (chdir(exec.cwd()) != 0) Fail(failure_fd, kStageChdir);
  ResetSignals();
  execve(exec.path(), exec.argv(), exec.envp());
  Fail(failure_fd, kStageExec);
}

// The monitor, in the plugin's child. `report_fd` is its end of a socket
// pair with the plugin.
[[noreturn]] void RunMonitor(const ExecSpec& exec, const MonitorSpec& spec,
                             const char* exit_tmp_path, int report_fd) {
  // Keep only the report socket (as fd 3) and /dev/null as stdio: the
  // monitor must hold nothing of the plugin's (its listening socket, its
  // stdout pipe to the host).
  if (report_fd != 3) {
    if (dup2(report_fd, 3) < 0) _exit(126);
    report_fd = 3;
  }
  CloseFrom(4);
  const int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (devnull > 3) close(devnull);
  }
  setsid();
  // Signals do not concern the monitor, but SIGALRM for run_for.
  sigset_t all_but_alarm;
  sigfillset(&all_but_alarm);
  sigdelset(&all_but_alarm, SIGALRM);
  sigprocmask(SIG_SETMASK, &all_but_alarm, nullptr);

  Report report = {0, {kStageNone, 0}};
  int failure_pipe[2];
  if (pipe2(failure_pipe, O_CLOEXEC) != 0) {
    report.failure = {kStageFork, errno};
    WriteAll(report_fd, &report, sizeof(report));
    _exit(1);
  }
  const pid_t task = fork();
  if (task == 0) {
    close(report_fd);
    close(failure_pipe[0]);
    ExecTask(exec, spec, failure_pipe[1]);
  }
  close(failure_pipe[1]);
  if (task < 0) {
    report.failure = {kStageFork, errno};
  } else {
    report.task = task;
    Failure failure;
    if (ReadAll(failure_pipe[0], &failure, sizeof(failure))) {
      report.failure = failure;
    }
  }
  close(failure_pipe[0]);
  WriteAll(report_fd, &report, sizeof(report));
  if (report.failure.stage != kStageNone) {
    int status;
    if (task > 0) waitpid(task, &status, 0);
    _exit(1);
  }
  // The plugin reads /proc/<task> before we may reap it; it says when by a
  // byte, or by going away.
  char released;
  while (read(report_fd, &released, 1) < 0 && errno == EINTR) {
  }
  close(report_fd);

  task_to_kill = task;
  if (spec.run_for > absl::ZeroDuration()) {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = OnRunForExpired;  // no SA_RESTART: waitid returns
    sigaction(SIGALRM, &action, nullptr);
    struct itimerval timer;
    std::memset(&timer, 0, sizeof(timer));
    const int64_t micros = absl::ToInt64Microseconds(spec.run_for);
    timer.it_value.tv_sec = micros / 1000000;
    timer.it_value.tv_usec = micros % 1000000;
    if (timer.it_value.tv_sec == 0 && timer.it_value.tv_usec == 0) {
      timer.it_value.tv_usec = 1;
    }
    setitimer(ITIMER_REAL, &timer, nullptr);
  }
  // Wait without reaping: while the task is a zombie its pid, and so its
  // process group id, cannot be reused, so killing the group is safe.
  siginfo_t info;
  while (waitid(P_PID, task, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  struct itimerval off;
  std::memset(&off, 0, sizeof(off));
  setitimer(ITIMER_REAL, &off, nullptr);
  kill(-task, SIGKILL);  // what is left of the task's process group
  int status = 0;
  while (waitpid(task, &status, 0) < 0 && errno == EINTR) {
  }

  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  // "<wait status> <monitor pid> <seconds> <nanoseconds> <run_for expired>"
  char line[128];
  char* end = line;
  end = AppendInt(end, status);
  *end++ = ' ';
  end = AppendInt(end, getpid());
  *end++ = ' ';
  end = AppendInt(end, now.tv_sec);
  *end++ = ' ';
  end = AppendInt(end, now.tv_nsec);
  *end++ = ' ';
  end = AppendInt(end, run_for_expired ? 1 : 0);
  *end++ = '\n';
  const int fd =
      open(exit_tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) _exit(2);
  const bool written = WriteAll(fd, line, end - line) && fsync(fd) == 0;
  close(fd);
  if (!written || rename(exit_tmp_path, spec.exit_path.c_str()) != 0) {
    unlink(exit_tmp_path);
    _exit(2);
  }
  _exit(0);
}

// An exec'd command, in the plugin's child.
[[noreturn]] void ExecChild(const ExecSpec& exec, bool tty,
                            const char* terminal_path, int in, int out, int err,
                            int failure_fd) {
  setsid();
  if (tty) {
    const int terminal = open(terminal_path, O_RDWR);
    if (terminal < 0 || ioctl(terminal, TIOCSCTTY, 0) != 0) {
      Fail(failure_fd, kStageTerminal);
    }
    in = out = err = terminal;
  }
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) {
    Fail(failure_fd, kStageStdio);
  }
  if (failure_fd != 3) {
    if (dup2(failure_fd, 3) < 0) Fail(failure_fd, kStageStdio);
    fcntl(3, F_SETFD, FD_CLOEXEC);
    failure_fd = 3;
  }
  CloseFrom(4);
  if (chdir(exec.cwd()) != 0) Fail(failure_fd, kStageChdir);
  ResetSignals();
  execve(exec.path(), exec.argv(), exec.envp());
  Fail(failure_fd, kStageExec);
}

// ---- End of the async-signal-safe part.

absl::Status FailureStatus(const Failure& failure, const ExecSpec& exec) {
  const std::string reason = std::strerror(failure.error);
  switch (failure.stage) {
    case kStageExec:
      return absl::InvalidArgumentError(
          absl::StrCat("cannot execute ", exec.path(), ": ", reason));
    case kStageChdir:
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot change into directory ", exec.cwd(), ": ", reason));
    case kStageStdio:
      return absl::InternalError(absl::StrCat("cannot set up the stdio of ",
                                              exec.path(), ": ", reason));
    case kStageTerminal:
      return absl::InternalError(absl::StrCat("cannot open the terminal for ",
                                              exec.path(), ": ", reason));
    default:
      return absl::InternalError(
          absl::StrCat("cannot start ", exec.path(), ": fork: ", reason));
  }
}

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

}  // namespace

ExecSpec::ExecSpec(std::string path, std::vector<std::string> argv,
                   std::vector<std::string> env, std::string cwd)
    : path_(std::move(path)),
      argv_(std::move(argv)),
      env_(std::move(env)),
      cwd_(std::move(cwd)) {
  for (std::string& arg : argv_) argv_pointers_.push_back(arg.data());
  argv_pointers_.push_back(nullptr);
  for (std::string& entry : env_) env_pointers_.push_back(entry.data());
  env_pointers_.push_back(nullptr);
}

absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::vector<std::string>& env,
                                           absl::string_view field) {
  if (program.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  }
  if (program.find('/') != std::string::npos) return program;
  std::string path = kDefaultPath;
  for (const std::string& entry : env) {
    if (absl::StartsWith(entry, "PATH=")) path = entry.substr(5);
  }
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", program);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": \"", program, "\" is not an executable on PATH=", path));
}

absl::StatusOr<MonitoredPids> LaunchMonitored(
    const ExecSpec& exec, const MonitorSpec& monitor,
    const std::function<void(const MonitoredPids&)>& before_release) {
  const std::string exit_tmp_path = monitor.exit_path + ".tmp";
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::ErrnoToStatus(errno, "cannot make a socket pair");
  }
  const pid_t monitor_pid = fork();
  if (monitor_pid == 0) {
    close(sockets[0]);
    RunMonitor(exec, monitor, exit_tmp_path.c_str(), sockets[1]);
  }
  const int fork_error = errno;
  close(sockets[1]);
  if (monitor_pid < 0) {
    close(sockets[0]);
    return absl::ErrnoToStatus(
        fork_error, absl::StrCat("cannot fork a monitor for ", exec.path()));
  }
  Report report;
  const bool reported = ReadAll(sockets[0], &report, sizeof(report));
  if (!reported || report.failure.stage != kStageNone) {
    close(sockets[0]);
    int status;
    while (waitpid(monitor_pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!reported) {
      return absl::InternalError(absl::StrCat("the monitor of ", exec.path(),
                                              " died before it reported"));
    }
    return FailureStatus(report.failure, exec);
  }
  const MonitoredPids pids = {monitor_pid, report.task};
  before_release(pids);
  const char released = 1;
  WriteAll(sockets[0], &released, 1);
  close(sockets[0]);
  return pids;
}

std::string FormatExitRecord(const ExitRecord& record) {
  const int64_t nanos = absl::ToUnixNanos(record.exited_at);
  return absl::StrCat(record.wait_status, " ", record.monitor_pid, " ",
                      nanos / 1000000000, " ", nanos % 1000000000, " ",
                      record.run_for_expired ? 1 : 0, "\n");
}

absl::StatusOr<ExitRecord> ParseExitRecord(absl::string_view content) {
  std::vector<absl::string_view> parts = absl::StrSplit(
      absl::StripTrailingAsciiWhitespace(content), ' ', absl::SkipEmpty());
  ExitRecord record;
  int64_t seconds = 0;
  int64_t nanos = 0;
  int expired = 0;
  if (parts.size() != 5 || !absl::SimpleAtoi(parts[0], &record.wait_status) ||
      !absl::SimpleAtoi(parts[1], &record.monitor_pid) ||
      !absl::SimpleAtoi(parts[2], &seconds) ||
      !absl::SimpleAtoi(parts[3], &nanos) ||
      !absl::SimpleAtoi(parts[4], &expired)) {
    return absl::DataLossError(
        absl::StrCat("bad exit record \"", content, "\""));
  }
  record.exited_at = absl::FromUnixSeconds(seconds) + absl::Nanoseconds(nanos);
  record.run_for_expired = expired != 0;
  return record;
}

absl::StatusOr<ExitRecord> ReadExitRecord(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no exit record ", path));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
  }
  std::stringstream content;
  content << in.rdbuf();
  absl::StatusOr<ExitRecord> record = ParseExitRecord(content.str());
  if (!record.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", record.status().message()));
  }
  return record;
}

absl::StatusOr<Child> SpawnChild(const ExecSpec& exec, bool tty,
                                 plugin::TerminalSize size) {
  Child child;
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  std::string terminal_path;
  auto close_all = [&] {
    for (int fd :
         {in[0], in[1], out[0], out[1], err[0], err[1], child.terminal}) {
      if (fd >= 0) close(fd);
    }
  };
  if (tty) {
    child.terminal = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[128];
    if (child.terminal < 0 || grantpt(child.terminal) != 0 ||
        unlockpt(child.terminal) != 0 ||
        ptsname_r(child.terminal, name, sizeof(name)) != 0) {
      const int error = errno;
      close_all();
      return absl::ErrnoToStatus(
          error, absl::StrCat("cannot make a terminal for ", exec.path()));
    }
    terminal_path = name;
    if (size.rows > 0 && size.columns > 0) {
      struct winsize window = {};
      window.ws_row = size.rows;
      window.ws_col = size.columns;
      ioctl(child.terminal, TIOCSWINSZ, &window);
    }
  } else if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
             pipe2(err, O_CLOEXEC) != 0) {
    const int error = errno;
    close_all();
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot make pipes for ", exec.path()));
  }
  int failure_pipe[2];
  if (pipe2(failure_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    close_all();
    return absl::ErrnoToStatus(error, "pipe2");
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(failure_pipe[0]);
    ExecChild(exec, tty, terminal_path.c_str(), in[0], out[1], err[1],
              failure_pipe[1]);
  }
  const int fork_error = errno;
  close(failure_pipe[1]);
  if (pid < 0) {
    close(failure_pipe[0]);
    close_all();
    return absl::ErrnoToStatus(fork_error,
                               absl::StrCat("cannot fork for ", exec.path()));
  }
  Failure failure;
  const bool failed = ReadAll(failure_pipe[0], &failure, sizeof(failure));
  close(failure_pipe[0]);
  if (failed) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close_all();
    return FailureStatus(failure, exec);
  }
  child.pid = pid;
  child.pidfd = PidfdOpen(pid);
  if (tty) {
    SetNonBlocking(child.terminal);
  } else {
    close(in[0]);
    close(out[1]);
    close(err[1]);
    child.stdin_fd = in[1];
    child.stdout_fd = out[0];
    child.stderr_fd = err[0];
    SetNonBlocking(child.stdin_fd);
    SetNonBlocking(child.stdout_fd);
    SetNonBlocking(child.stderr_fd);
  }
  return child;
}

void CloseChild(Child& child) {
  for (int* fd : {&child.pidfd, &child.terminal, &child.stdin_fd,
                  &child.stdout_fd, &child.stderr_fd}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

int PidfdOpen(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

int PidfdSendSignal(int pidfd, int signal) {
  return static_cast<int>(
      syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
}

plugin::ExitStatus ToExitStatus(int wait_status) {
  plugin::ExitStatus status;
  if (WIFEXITED(wait_status)) {
    status.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status.signal = WTERMSIG(wait_status);
  }
  return status;
}

}  // namespace berth::mock
