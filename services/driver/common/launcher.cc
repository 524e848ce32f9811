#include "services/driver/common/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

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
  int fds[6];  // become 0..5 (5: kInitGoFd); all >= `low`
  // Become kInitFirstPassedFd...; all >= `low`.
  int passed[kMaxPassedFds];
  int passed_count = 0;
  // In a new user namespace: the read end of the pipe on which the parent
  // says (one byte) that the maps are written, and the init opened by the
  // parent; both >= `low`. -1 otherwise.
  int sync_fd = -1;
  int exec_fd = -1;
};

// "error ERRNO WHAT\n" (an InitReport) on the report pipe, without
// allocating: the child of a fork-like clone of a threaded process.
void ReportFromChild(int err, const char* what) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + err % 10);
    err /= 10;
  } while (err > 0 && n < 16);
  char line[256];
  size_t length = 0;
  auto append = [&](const char* text, size_t size) {
    for (size_t i = 0; i < size && length < sizeof(line) - 1; ++i) {
      line[length++] = text[i];
    }
  };
  append("error ", 6);
  while (n > 0) append(&digits[--n], 1);
  append(" ", 1);
  append(what, strlen(what));
  append("\n", 1);
  if (write(kInitReportFd, line, length) < 0) _exit(125);
}

// In a new user namespace, once the parent has written its maps: become
// the namespace's root (the ids inherited from the parent map to nothing)
// without the host's supplementary groups.
void BecomeNamespaceRoot(int sync_fd) {
  char go = 0;
  ssize_t n;
  do {
    n = read(sync_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(125);  // the parent failed, and kills us
  // Raw system calls: glibc's setresuid and friends would first signal
  // every thread it believes this process has (it is a copy of a threaded
  // process) and wait for them forever.
  if (syscall(SYS_setresgid, 0, 0, 0) != 0) {
    ReportFromChild(errno, "becoming gid 0 of the task's user namespace");
    _exit(125);
  }
  if (syscall(SYS_setgroups, 0, nullptr) != 0) {
    ReportFromChild(errno, "dropping supplementary groups");
    _exit(125);
  }
  if (syscall(SYS_setresuid, 0, 0, 0) != 0) {
    ReportFromChild(errno, "becoming uid 0 of the task's user namespace");
    _exit(125);
  }
}

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
  static_assert(kInitGoFd == 5 && kInitFirstPassedFd == 6,
                "fds 0..5 are the init's fixed ones, the passed ones follow");
  for (int target = 0; target < 6; ++target) {
    if (dup2(args->fds[target], target) < 0) _exit(126);
  }
  for (int i = 0; i < args->passed_count; ++i) {
    if (dup2(args->passed[i], kInitFirstPassedFd + i) < 0) _exit(126);
  }
  const unsigned int first_unused =
      static_cast<unsigned int>(kInitFirstPassedFd + args->passed_count);
  if (args->sync_fd < 0) {
    syscall(SYS_close_range, first_unused, ~0U, 0);
    execve(args->path, args->argv, args->envp);
    _exit(127);
  }
  BecomeNamespaceRoot(args->sync_fd);
  // The rest close at exec (exec_fd included: an ELF binary needs no path).
  syscall(SYS_close_range, first_unused, ~0U, CLOSE_RANGE_CLOEXEC);
  syscall(SYS_execveat, args->exec_fd, "", args->argv, args->envp,
          AT_EMPTY_PATH);
  _exit(127);
}

// A copy of `fd` at `low` or above, out of the way of the numbers the
// child moves its descriptors to.
base::UniqueFd DupHigh(int fd, int low = 10) {
  return base::UniqueFd(fcntl(fd, F_DUPFD_CLOEXEC, low));
}

// Writes all of `data` to the existing file `path` in one write (what
// /proc/PID/uid_map needs).
absl::Status WriteOnce(const std::string& path, const std::string& data) {
  const base::UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("opening ", path));
  if (write(fd.get(), data.data(), data.size()) !=
      static_cast<ssize_t>(data.size())) {
    return ErrnoStatus(errno, absl::StrCat("writing \"", data, "\" to ", path));
  }
  return absl::OkStatus();
}

// What the init cannot do itself in a user namespace of its own, done for
// the cloned `pid` before it goes on: its maps, its cgroups, its OOM score.
absl::Status PrepareUserNamespaceChild(pid_t pid, const UserNamespaceMaps& maps,
                                       const InitSpec& spec) {
  const std::string proc = absl::StrCat("/proc/", pid);
  if (absl::Status s =
          WriteOnce(absl::StrCat(proc, "/uid_map"), FormatIdMap(maps.uid));
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          WriteOnce(absl::StrCat(proc, "/gid_map"), FormatIdMap(maps.gid));
      !s.ok()) {
    return s;
  }
  for (const std::string& procs : spec.cgroup_procs) {
    if (absl::Status s = WriteOnce(procs, absl::StrCat(pid)); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("joining cgroup ", procs, ": ", s.message()));
    }
  }
  // As the init does for itself outside a user namespace (in one, lowering
  // it is refused): it must outlive an OOM of its cgroup to record the exit.
  WriteOnce(absl::StrCat(proc, "/oom_score_adj"), "-1000").IgnoreError();
  return absl::OkStatus();
}

}  // namespace

std::string FormatIdMap(const std::vector<IdMapLine>& lines) {
  std::string map;
  for (const IdMapLine& line : lines) {
    absl::StrAppend(&map, line.container_id, " ", line.host_id, " ", line.size,
                    "\n");
  }
  return map;
}

absl::StatusOr<StartedInit> StartInit(
    const std::string& init_path, const InitSpec& requested_spec, int stderr_fd,
    absl::Duration timeout, const UserNamespaceMaps* userns,
    const std::vector<int>& passed_fds,
    const std::function<absl::Status(pid_t)>& spawned) {
  if (passed_fds.size() > static_cast<size_t>(kMaxPassedFds)) {
    return absl::InvalidArgumentError(
        absl::StrCat(passed_fds.size(), " descriptors for the init, at most ",
                     kMaxPassedFds));
  }
  const int low =
      std::max(10, kInitFirstPassedFd + static_cast<int>(passed_fds.size()));
  InitSpec spec = requested_spec;
  // The init waits for our go on kInitGoFd before it starts the program
  // (see `spawned` in launcher.h).
  spec.go_fd = kInitGoFd;
  // In a user namespace, the cgroups and the network namespace are joined
  // here (see launcher.h), not by the init.
  if (userns != nullptr) {
    if (userns->uid.empty() || userns->gid.empty()) {
      return absl::InvalidArgumentError(
          "a user namespace needs a uid and a gid mapping");
    }
    spec.cgroup_procs.clear();
    spec.netns.clear();
  }
  absl::StatusOr<base::UniqueFd> spec_fd = MemfdWith(EncodeInitSpec(spec));
  if (!spec_fd.ok()) return spec_fd.status();
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe2");
  const base::UniqueFd report_read(report[0]);
  base::UniqueFd report_write(report[1]);
  base::UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null_fd.valid()) return ErrnoStatus(errno, "opening /dev/null");
  // The go: a socket pair rather than a pipe, so that the write to an init
  // already dead cannot raise SIGPIPE here (MSG_NOSIGNAL). Only this
  // process holds `go_write` (close-on-exec, closed in the child): if it
  // dies, the init reads end of file.
  int go[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0) {
    return ErrnoStatus(errno, "socketpair");
  }
  base::UniqueFd go_read(go[0]);
  base::UniqueFd go_write(go[1]);

  CloneArgs args;
  const int sources[6] = {null_fd.get(),  null_fd.get(),      stderr_fd,
                          spec_fd->get(), report_write.get(), go_read.get()};
  base::UniqueFd high[6];
  for (int i = 0; i < 6; ++i) {
    high[i] = DupHigh(sources[i], low);
    if (!high[i].valid()) return ErrnoStatus(errno, "dup");
    args.fds[i] = high[i].get();
  }
  std::vector<base::UniqueFd> passed_high;
  for (int fd : passed_fds) {
    passed_high.push_back(DupHigh(fd, low));
    if (!passed_high.back().valid()) return ErrnoStatus(errno, "dup");
    args.passed[args.passed_count++] = passed_high.back().get();
  }
  std::string path = init_path;
  std::string arg0 = "berth-task-init";
  std::string arg1 = "run";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  char* envp[] = {nullptr};
  args.path = path.c_str();
  args.argv = argv;
  args.envp = envp;

  // The user namespace's: the child waits on `sync` for its maps, and is
  // executed from `exec_fd`, the network namespace it is cloned in.
  base::UniqueFd sync_read, sync_write, exec_fd, netns_fd;
  if (userns != nullptr) {
    int sync[2];
    if (pipe2(sync, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe2");
    sync_read.reset(sync[0]);
    sync_write.reset(sync[1]);
    sync_read = DupHigh(sync_read.get(), low);
    exec_fd.reset(open(init_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!exec_fd.valid()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open the task init ", init_path,
                       " (berth-driver-exec --init_path): ", strerror(errno)));
    }
    exec_fd = DupHigh(exec_fd.get(), low);
    if (!sync_read.valid() || !exec_fd.valid()) {
      return ErrnoStatus(errno, "dup");
    }
    args.sync_fd = sync_read.get();
    args.exec_fd = exec_fd.get();
    if (!requested_spec.netns.empty()) {
      netns_fd.reset(open(requested_spec.netns.c_str(), O_RDONLY | O_CLOEXEC));
      if (!netns_fd.valid()) {
        return ErrnoStatus(errno, absl::StrCat("opening network namespace ",
                                               requested_spec.netns));
      }
    }
  }

  constexpr size_t kStackSize = 64 * 1024;
  void* stack = mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return ErrnoStatus(errno, "mmap");
  int pidfd = -1;
  // CLONE_VM | CLONE_VFORK, as posix_spawn does: no copy of this (large,
  // threaded) process; we resume once the child has executed the init. The
  // child shares our memory until then: no signal handler may run in it.
  // In a user namespace we must run before the child goes on (to write its
  // maps), so it is a copy of this process instead (no CLONE_VM, whose
  // stack we could not free): it only makes system calls.
  const int flags =
      userns == nullptr
          ? CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD
          : CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC |
                CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD;
  pid_t pid = -1;
  int clone_errno = 0;
  bool in_netns = true;
  auto clone_init = [&] {
    // A thread's network namespace is its own: the child inherits it.
    if (netns_fd.valid() && setns(netns_fd.get(), CLONE_NEWNET) != 0) {
      clone_errno = errno;
      in_netns = false;
      return;
    }
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid = clone(CloneChild, static_cast<char*>(stack) + kStackSize, flags,
                &args, &pidfd);
    clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  };
  if (netns_fd.valid()) {
    std::thread(clone_init).join();
  } else {
    clone_init();
  }
  munmap(stack, kStackSize);
  if (!in_netns) {
    return ErrnoStatus(clone_errno, absl::StrCat("joining network namespace ",
                                                 requested_spec.netns));
  }
  if (pid < 0) {
    return ErrnoStatus(
        clone_errno, userns == nullptr
                         ? "making the task's namespaces (clone with new pid, "
                           "mount, ipc and uts namespaces)"
                         : "making the task's namespaces (clone with new "
                           "user, pid, mount, ipc and uts namespaces)");
  }
  base::UniqueFd owned_pidfd(pidfd);
  go_read.reset();
  if (spawned) {
    if (absl::Status told = spawned(pid); !told.ok()) {
      // No go: the init reads end of file and does not start the program;
      // it is killed anyway, whatever it was doing.
      go_write.reset();
      syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
      siginfo_t info;
      waitid(static_cast<idtype_t>(P_PIDFD), pidfd, &info, WEXITED);
      return told;
    }
  }
  // An init already dead makes this fail: its report then says why.
  send(go_write.get(), "g", 1, MSG_NOSIGNAL);
  go_write.reset();
  if (userns != nullptr) {
    sync_read.reset();
    exec_fd.reset();
    absl::Status prepared =
        PrepareUserNamespaceChild(pid, *userns, requested_spec);
    if (prepared.ok() && write(sync_write.get(), "g", 1) != 1) {
      prepared = ErrnoStatus(errno, "starting the task init");
    }
    sync_write.reset();
    if (!prepared.ok()) {
      syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
      siginfo_t info;
      waitid(static_cast<idtype_t>(P_PIDFD), pidfd, &info, WEXITED);
      return prepared;
    }
  }
  // The init has its copies now. Ours go, the report pipe's write end among
  // them: the read below then sees end of file if the init dies.
  spec_fd->reset();
  report_write.reset();
  null_fd.reset();
  for (base::UniqueFd& fd : high) fd.reset();
  passed_high.clear();

  auto reap = [pidfd] {
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
