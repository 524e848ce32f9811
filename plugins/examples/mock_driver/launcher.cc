#include "plugins/examples/mock_driver/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
#include "base/io.h"
#include "base/unique_fd.h"
#include "plugins/sdk/rotating_log.h"

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
constexpr int kStageLogs = 6;
constexpr int kStageNetns = 7;

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

// WriteAll and ReadAll of fixed-size records, for the child between fork
// and exec (and the monitor) where only async-signal-safe calls may run:
// base/io.h's build error messages, which allocate.
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

// CLOCK_MONOTONIC in nanoseconds.
int64_t MonotonicNanos() {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Joins the network namespace `exec` names, if any.
void JoinNetns(const ExecSpec& exec, int failure_fd) {
  if (exec.netns().empty()) return;
  const int fd = open(exec.netns().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) Fail(failure_fd, kStageNetns);
  close(fd);
}

// The task, in the monitor's child: stdin /dev/null, stdout and stderr the
// write ends of the monitor's pipes.
[[noreturn]] void ExecTask(const ExecSpec& exec, int out_fd, int err_fd,
                           int failure_fd) {
  setsid();
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0) Fail(failure_fd, kStageStdio);
  if (dup2(in, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
    Fail(failure_fd, kStageStdio);
  }
  JoinNetns(exec, failure_fd);
  if (chdir(exec.cwd()) != 0) Fail(failure_fd, kStageChdir);
  ResetSignals();
  execve(exec.path(), exec.argv(), exec.envp());
  Fail(failure_fd, kStageExec);
}

// What the monitor uses, all made before fork: the rotating logs (opened by
// the monitor) and a read buffer.
struct MonitorOutput {
  plugin::RotatingLog* out;
  plugin::RotatingLog* err;
  char* buffer;
  size_t buffer_size;
};

// Copies what one read of the pipe `*fd` gives into `log`; closes it (and
// sets it to -1) at its end.
void CopyOnce(int* fd, plugin::RotatingLog* log, const MonitorOutput& output) {
  const ssize_t n = read(*fd, output.buffer, output.buffer_size);
  if (n > 0) {
    log->Write(output.buffer, static_cast<size_t>(n));  // lost if it fails
    return;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  close(*fd);
  *fd = -1;
}

// Tells the plugin the monitor failed at `stage` (with errno) and exits.
[[noreturn]] void ReportFailure(int report_fd, int stage) {
  const Report report = {0, {stage, errno}};
  WriteAll(report_fd, &report, sizeof(report));
  _exit(1);
}

// The monitor, in the plugin's child. `report_fd` is its end of a socket
// pair with the plugin.
[[noreturn]] void RunMonitor(const ExecSpec& exec, const MonitorSpec& spec,
                             const MonitorOutput& output,
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
  // Signals do not concern the monitor.
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);

  if (!output.out->Open() || !output.err->Open()) {
    ReportFailure(report_fd, kStageLogs);
  }
  int out_pipe[2], err_pipe[2], failure_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    ReportFailure(report_fd, kStageStdio);
  }
  if (pipe2(failure_pipe, O_CLOEXEC) != 0) ReportFailure(report_fd, kStageFork);
  Report report = {0, {kStageNone, 0}};
  const pid_t task = fork();
  if (task == 0) {
    close(report_fd);
    close(failure_pipe[0]);
    close(out_pipe[0]);
    close(err_pipe[0]);
    ExecTask(exec, out_pipe[1], err_pipe[1], failure_pipe[1]);
  }
  close(failure_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  int out_fd = out_pipe[0];
  int err_fd = err_pipe[0];
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

  // Copy the output until the task's main process exits. Its pidfd wakes
  // us then; without one (Linux before 5.3), look every 50 ms.
  const int task_pidfd = PidfdOpen(task);
  const int64_t run_for_nanos = absl::ToInt64Nanoseconds(spec.run_for);
  const int64_t run_for_end =
      run_for_nanos > 0 ? MonotonicNanos() + run_for_nanos : 0;
  bool run_for_expired = false;
  bool exited = false;
  int64_t drain_end = 0;
  int status = 0;
  while (true) {
    const int64_t now = MonotonicNanos();
    if (exited && ((out_fd < 0 && err_fd < 0) || now >= drain_end)) break;
    if (!exited && run_for_end > 0 && !run_for_expired && now >= run_for_end) {
      run_for_expired = true;
      kill(-task, SIGKILL);
    }
    int64_t wake = -1;  // nanoseconds from now; -1: no bound
    if (exited) {
      wake = drain_end - now;
    } else {
      if (run_for_end > 0 && !run_for_expired) wake = run_for_end - now;
      if (task_pidfd < 0 && (wake < 0 || wake > 50000000)) wake = 50000000;
    }
    pollfd fds[3];
    int count = 0;
    int out_index = -1, err_index = -1;
    if (out_fd >= 0) {
      out_index = count;
      fds[count++] = {out_fd, POLLIN, 0};
    }
    if (err_fd >= 0) {
      err_index = count;
      fds[count++] = {err_fd, POLLIN, 0};
    }
    if (!exited && task_pidfd >= 0) fds[count++] = {task_pidfd, POLLIN, 0};
    const int timeout_ms =
        wake < 0 ? -1 : static_cast<int>((wake + 999999) / 1000000);
    if (poll(fds, count, timeout_ms) < 0 && errno != EINTR) {
      // Nothing sensible to do but look again shortly.
      const struct timespec pause = {0, 10000000};
      nanosleep(&pause, nullptr);
    }
    if (out_index >= 0 && fds[out_index].revents != 0) {
      CopyOnce(&out_fd, output.out, output);
    }
    if (err_index >= 0 && fds[err_index].revents != 0) {
      CopyOnce(&err_fd, output.err, output);
    }
    if (!exited) {
      // Without reaping: while the task is a zombie its pid, and so its
      // process group id, cannot be reused, so killing the group is safe.
      siginfo_t info;
      std::memset(&info, 0, sizeof(info));
      if (waitid(P_PID, task, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == task) {
        kill(-task, SIGKILL);  // what is left of the task's process group
        while (waitpid(task, &status, 0) < 0 && errno == EINTR) {
        }
        exited = true;
        drain_end =
            MonotonicNanos() + absl::ToInt64Nanoseconds(kDrainAfterExit);
      }
    }
  }
  if (task_pidfd >= 0) close(task_pidfd);

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
  JoinNetns(exec, failure_fd);
  if (chdir(exec.cwd()) != 0) Fail(failure_fd, kStageChdir);
  ResetSignals();
  execve(exec.path(), exec.argv(), exec.envp());
  Fail(failure_fd, kStageExec);
}

// ---- End of the async-signal-safe part.

// A pipe (close-on-exec) as two owned ends; false, with errno set, if none.
bool MakePipe(base::UniqueFd* read_end, base::UniqueFd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  return true;
}

// `log_dir`: where a monitor writes the task's output.
absl::Status FailureStatus(const Failure& failure, const ExecSpec& exec,
                           absl::string_view log_dir = "") {
  const std::string reason = std::strerror(failure.error);
  switch (failure.stage) {
    case kStageLogs:
      return absl::InternalError(
          absl::StrCat("cannot open the output files of ", exec.path(), " in ",
                       log_dir, ": ", reason));
    case kStageExec:
      return absl::InvalidArgumentError(
          absl::StrCat("cannot execute ", exec.path(), ": ", reason));
    case kStageNetns:
      return absl::InvalidArgumentError(
          absl::StrCat("network.namespace_path: cannot join network namespace ",
                       exec.netns(), ": ", reason));
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
  // Made here: the monitor, a child of a threaded process, must not
  // allocate.
  plugin::RotatingLog out_log(monitor.log_dir, plugin::kStdoutLogName,
                              monitor.log_max_file_bytes,
                              monitor.log_max_files);
  plugin::RotatingLog err_log(monitor.log_dir, plugin::kStderrLogName,
                              monitor.log_max_file_bytes,
                              monitor.log_max_files);
  std::vector<char> buffer(64 << 10);
  const MonitorOutput output = {&out_log, &err_log, buffer.data(),
                                buffer.size()};
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::ErrnoToStatus(errno, "cannot make a socket pair");
  }
  base::UniqueFd ours(sockets[0]);
  base::UniqueFd monitors(sockets[1]);
  const pid_t monitor_pid = fork();
  if (monitor_pid == 0) {
    // The monitor never returns: no destructor runs in it.
    close(ours.get());
    RunMonitor(exec, monitor, output, exit_tmp_path.c_str(), monitors.get());
  }
  const int fork_error = errno;
  monitors.reset();
  if (monitor_pid < 0) {
    return absl::ErrnoToStatus(
        fork_error, absl::StrCat("cannot fork a monitor for ", exec.path()));
  }
  Report report;
  const bool reported = ReadAll(ours.get(), &report, sizeof(report));
  if (!reported || report.failure.stage != kStageNone) {
    ours.reset();
    int status;
    while (waitpid(monitor_pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!reported) {
      return absl::InternalError(absl::StrCat("the monitor of ", exec.path(),
                                              " died before it reported"));
    }
    return FailureStatus(report.failure, exec, monitor.log_dir);
  }
  const MonitoredPids pids = {monitor_pid, report.task};
  before_release(pids);
  const char released = 1;
  WriteAll(ours.get(), &released, 1);
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
  // Ours until the child runs; then the Child's.
  base::UniqueFd terminal;
  base::UniqueFd in_read, in_write, out_read, out_write, err_read, err_write;
  std::string terminal_path;
  if (tty) {
    terminal.reset(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    char name[128];
    if (!terminal.valid() || grantpt(terminal.get()) != 0 ||
        unlockpt(terminal.get()) != 0 ||
        ptsname_r(terminal.get(), name, sizeof(name)) != 0) {
      const int error = errno;
      return absl::ErrnoToStatus(
          error, absl::StrCat("cannot make a terminal for ", exec.path()));
    }
    terminal_path = name;
    if (size.rows > 0 && size.columns > 0) {
      struct winsize window = {};
      window.ws_row = size.rows;
      window.ws_col = size.columns;
      ioctl(terminal.get(), TIOCSWINSZ, &window);
    }
  } else if (!MakePipe(&in_read, &in_write) ||
             !MakePipe(&out_read, &out_write) ||
             !MakePipe(&err_read, &err_write)) {
    const int error = errno;
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot make pipes for ", exec.path()));
  }
  base::UniqueFd failure_read, failure_write;
  if (!MakePipe(&failure_read, &failure_write)) {
    return absl::ErrnoToStatus(errno, "pipe2");
  }
  const pid_t pid = fork();
  if (pid == 0) {
    // ExecChild never returns: no destructor runs in the child.
    close(failure_read.get());
    ExecChild(exec, tty, terminal_path.c_str(), in_read.get(), out_write.get(),
              err_write.get(), failure_write.get());
  }
  const int fork_error = errno;
  failure_write.reset();  // or the read below never sees end of file
  if (pid < 0) {
    return absl::ErrnoToStatus(fork_error,
                               absl::StrCat("cannot fork for ", exec.path()));
  }
  Failure failure;
  const bool failed = ReadAll(failure_read.get(), &failure, sizeof(failure));
  failure_read.reset();
  if (failed) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return FailureStatus(failure, exec);
  }
  Child child;
  child.pid = pid;
  child.pidfd = PidfdOpen(pid);
  if (tty) {
    child.terminal = terminal.release();
    (void)base::SetNonBlocking(child.terminal);
  } else {
    // The child's ends go, so that its output ends when it does.
    in_read.reset();
    out_write.reset();
    err_write.reset();
    child.stdin_fd = in_write.release();
    child.stdout_fd = out_read.release();
    child.stderr_fd = err_read.release();
    (void)base::SetNonBlocking(child.stdin_fd);
    (void)base::SetNonBlocking(child.stdout_fd);
    (void)base::SetNonBlocking(child.stderr_fd);
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
