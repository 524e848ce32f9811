#include "services/driver/common/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/io.h"
#include "base/unique_fd.h"

namespace berth::driver_common {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what) {
  return absl::ErrnoToStatus(err, what);
}

// A memfd holding `data`, positioned at its start (close-on-exec).
absl::StatusOr<base::UniqueFd> MemfdWith(const std::string& data) {
  base::UniqueFd fd(memfd_create("berth-init-spec", MFD_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, "memfd_create");
  if (absl::Status written = base::WriteAll(fd.get(), data, "the init spec");
      !written.ok()) {
    return written;
  }
  lseek(fd.get(), 0, SEEK_SET);
  return fd;
}

// Reads one line from `fd` until `deadline`; false on timeout or EOF
// without a newline (what came is in *line).
bool ReadLine(int fd, absl::Time deadline, std::string* line) {
  char buffer[512];
  while (line->empty() || line->back() != '\n') {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    struct pollfd pfd = {fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(ms));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    line->append(buffer, static_cast<size_t>(n));
  }
  return true;
}

std::string DescribeWait(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) {
    return absl::StrCat("exited with code ", info.si_status);
  }
  return absl::StrCat("was killed by signal ", info.si_status, " (",
                      strsignal(info.si_status), ")");
}

// What the cloned child needs; prepared before clone() because the child
// shares the parent's memory and may only make system calls.
struct CloneArgs {
  const char* path;
  char* const* argv;
  char* const* envp;
  int fds[5];  // become 0..4; all >= 10
};

int CloneChild(void* raw) {
  const CloneArgs* args = static_cast<const CloneArgs*>(raw);
  // Signals are blocked (by the parent, around clone). Defaults first, so
  // that no handler of the parent's ever runs here, then unblock: the init
  // starts with default dispositions and an empty mask.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int target = 0; target < 5; ++target) {
    if (dup2(args->fds[target], target) < 0) _exit(126);
  }
  syscall(SYS_close_range, 5, ~0U, 0);
  execve(args->path, args->argv, args->envp);
  _exit(127);
}

base::UniqueFd DupHigh(int fd) {
  return base::UniqueFd(fcntl(fd, F_DUPFD_CLOEXEC, 10));
}

}  // namespace

absl::StatusOr<StartedInit> StartInit(const std::string& init_path,
                                      const InitSpec& spec, int stderr_fd,
                                      absl::Duration timeout) {
  absl::StatusOr<base::UniqueFd> spec_fd = MemfdWith(EncodeInitSpec(spec));
  if (!spec_fd.ok()) return spec_fd.status();
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe2");
  const base::UniqueFd report_read(report[0]);
  base::UniqueFd report_write(report[1]);
  base::UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null_fd.valid()) return ErrnoStatus(errno, "opening /dev/null");

  CloneArgs args;
  const int sources[5] = {null_fd.get(), null_fd.get(), stderr_fd,
                          spec_fd->get(), report_write.get()};
  base::UniqueFd high[5];
  for (int i = 0; i < 5; ++i) {
    high[i] = DupHigh(sources[i]);
    if (!high[i].valid()) return ErrnoStatus(errno, "dup");
    args.fds[i] = high[i].get();
  }
  std::string path = init_path;
  std::string arg0 = "berth-task-init";
  std::string arg1 = "run";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  char* envp[] = {nullptr};
  args.path = path.c_str();
  args.argv = argv;
  args.envp = envp;

  constexpr size_t kStackSize = 64 * 1024;
  void* stack = mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return ErrnoStatus(errno, "mmap");
  int pidfd = -1;
  // CLONE_VM | CLONE_VFORK, as posix_spawn does: no copy of this (large,
  // threaded) process; we resume once the child has executed the init. The
  // child shares our memory until then: no signal handler may run in it.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid =
      clone(CloneChild, static_cast<char*>(stack) + kStackSize,
            CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD,
            &args, &pidfd);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  munmap(stack, kStackSize);
  if (pid < 0) {
    return ErrnoStatus(clone_errno,
                       "making the task's namespaces (clone with new pid, "
                       "mount, ipc and uts namespaces)");
  }
  base::UniqueFd owned_pidfd(pidfd);
  // The init has its copies now. Ours go, the report pipe's write end among
  // them: the read below then sees end of file if the init dies.
  spec_fd->reset();
  report_write.reset();
  null_fd.reset();
  for (base::UniqueFd& fd : high) fd.reset();

  auto reap = [pid, pidfd] {
    siginfo_t info;
    std::memset(&info, 0, sizeof(info));
    waitid(static_cast<idtype_t>(P_PIDFD), pidfd, &info, WEXITED);
    return info;
  };
  std::string line;
  const bool complete =
      ReadLine(report_read.get(), absl::Now() + timeout, &line);
  InitReport decoded;
  if (complete && DecodeInitReport(line, &decoded) &&
      decoded.kind == InitReport::Kind::kStarted) {
    return StartedInit{pid, std::move(owned_pidfd)};
  }
  syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  const siginfo_t info = reap();
  owned_pidfd.reset();
  if (complete && decoded.kind == InitReport::Kind::kFailed) {
    return ErrnoStatus(decoded.error_number, decoded.what);
  }
  if (!complete && line.empty() && info.si_code == CLD_EXITED &&
      info.si_status == 127) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute the task init ", init_path,
                     " (berth-driver-exec --init_path)"));
  }
  if (!complete && line.empty()) {
    return absl::InternalError(absl::StrCat(
        "the task init ", init_path, " ", DescribeWait(info),
        " before it reported; see init.log in the task's .berth directory"));
  }
  return absl::InternalError(absl::StrCat("the task init ", init_path,
                                          " reported \"", line, "\" and then ",
                                          DescribeWait(info)));
}

absl::StatusOr<StartedHelper> StartExecHelper(const std::string& init_path,
                                              const InitSpec& spec,
                                              int target_pidfd, int stdin_fd,
                                              int stdout_fd, int stderr_fd) {
  absl::StatusOr<base::UniqueFd> spec_fd = MemfdWith(EncodeInitSpec(spec));
  if (!spec_fd.ok()) return spec_fd.status();
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe2");
  base::UniqueFd report_read(report[0]);
  const base::UniqueFd report_write(report[1]);
  const int sources[6] = {stdin_fd,       stdout_fd,          stderr_fd,
                          spec_fd->get(), report_write.get(), target_pidfd};
  base::UniqueFd high[6];
  for (int i = 0; i < 6; ++i) {
    high[i] = DupHigh(sources[i]);
    if (!high[i].valid()) return ErrnoStatus(errno, "dup");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (int target = 0; target < 6; ++target) {
    posix_spawn_file_actions_adddup2(&actions, high[target].get(), target);
  }
  posix_spawn_file_actions_addclosefrom_np(&actions, 6);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
  std::string arg0 = "berth-task-init";
  std::string arg1 = "exec";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  const int err =
      posix_spawn(&pid, init_path.c_str(), &actions, &attr, argv, envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot execute the task init ", init_path, ": ", std::strerror(err)));
  }
  // The helper has its copies; ours (and the report pipe's write end) close
  // on return, so that the caller sees end of file when the helper is done.
  return StartedHelper{pid, report_read.release()};
}

}  // namespace berth::driver_common
