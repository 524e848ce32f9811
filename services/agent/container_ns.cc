#include "services/agent/container_ns.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/process.h"
#include "glog/logging.h"
#include "services/driver/common/privileges.h"

namespace berth::agent {
namespace {

// What the holder writes on its pipe: error_number 0 once it is ready.
struct HolderReport {
  int error_number;
  char what[160];
};

void Report(int fd, int error_number, const std::string& what) {
  HolderReport report = {};
  report.error_number = error_number;
  std::snprintf(report.what, sizeof(report.what), "%s", what.c_str());
  (void)!write(fd, &report, sizeof(report));
}

[[noreturn]] void HolderFail(int fd, const std::string& what) {
  Report(fd, errno == 0 ? EINVAL : errno, what);
  _exit(127);
}

// A mount point of /proc/self/mountinfo with its octal escapes undone.
std::string Unescape(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const char a = field[i + 1], b = field[i + 2], c = field[i + 3];
      if (a >= '0' && a <= '3' && b >= '0' && b <= '7' && c >= '0' &&
          c <= '7') {
        out.push_back(
            static_cast<char>((a - '0') * 64 + (b - '0') * 8 + (c - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

struct ProcSubmount {
  std::string path;
  std::string fstype;
  bool read_only = false;
};

// /proc of the holder's pid namespace in place of the agent's, with what
// was mounted below the old one made again. False with errno set and
// `*what` naming the step.
bool RemountProc(std::string* what) {
  std::string mountinfo;
  {
    const int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *what = "reading /proc/self/mountinfo";
      return false;
    }
    char buffer[8192];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
      mountinfo.append(buffer, static_cast<size_t>(n));
    }
    close(fd);
  }
  bool have_proc = false;
  std::vector<ProcSubmount> submounts;
  for (absl::string_view line :
       absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 7) continue;
    const std::string point = Unescape(fields[4]);
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 1 >= fields.size()) continue;
    if (point == "/proc") {
      have_proc = true;
    } else if (absl::StartsWith(point, "/proc/")) {
      ProcSubmount submount;
      submount.path = point;
      submount.fstype = std::string(fields[dash + 1]);
      for (absl::string_view option : absl::StrSplit(fields[5], ',')) {
        if (option == "ro") submount.read_only = true;
      }
      submounts.push_back(std::move(submount));
    }
  }
  if (!have_proc) return true;
  constexpr unsigned long kProcFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  // The new proc is made (detached) while the sandbox's is still mounted,
  // then moved in its place: in a user namespace the kernel makes a proc
  // only where one is already visible (mount_too_revealing).
  const int fs = fsopen("proc", FSOPEN_CLOEXEC);
  if (fs < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    const int err = errno;
    if (fs >= 0) close(fs);
    errno = err;
    *what = "making the proc of the container's pid namespace";
    return false;
  }
  const int proc =
      fsmount(fs, FSMOUNT_CLOEXEC,
              MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  const int fsmount_errno = errno;
  close(fs);
  if (proc < 0) {
    errno = fsmount_errno;
    *what = "mounting the proc of the container's pid namespace";
    return false;
  }
  if (umount2("/proc", MNT_DETACH) != 0) {
    const int err = errno;
    close(proc);
    errno = err;
    *what = "unmounting the sandbox's /proc";
    return false;
  }
  const bool moved =
      move_mount(proc, "", AT_FDCWD, "/proc", MOVE_MOUNT_F_EMPTY_PATH) == 0;
  const int move_errno = errno;
  close(proc);
  if (!moved) {
    errno = move_errno;
    *what = "mounting /proc of the container's pid namespace";
    return false;
  }
  for (const ProcSubmount& submount : submounts) {
    const char* path = submount.path.c_str();
    struct stat st;
    // A path of the old /proc only (a pid of the sandbox's namespace).
    if (lstat(path, &st) != 0) continue;
    const unsigned long read_only = submount.read_only ? MS_RDONLY : 0;
    bool remount = false;
    if (submount.fstype == "proc") {
      remount = true;
      if (mount(path, path, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        *what = absl::StrCat("binding ", submount.path, " again");
        return false;
      }
    } else if (S_ISDIR(st.st_mode)) {
      if (mount("tmpfs", path, "tmpfs", kProcFlags | read_only, "size=4k") !=
          0) {
        *what = absl::StrCat("masking ", submount.path, " again");
        return false;
      }
    } else {
      remount = true;
      if (mount("/dev/null", path, nullptr, MS_BIND, nullptr) != 0) {
        *what = absl::StrCat("masking ", submount.path, " again");
        return false;
      }
    }
    if (remount && read_only != 0 &&
        mount(nullptr, path, nullptr,
              MS_BIND | MS_REMOUNT | MS_RDONLY | kProcFlags, nullptr) != 0) {
      *what = absl::StrCat("making ", submount.path, " read-only again");
      return false;
    }
  }
  return true;
}

// The holder: PID 1 of the container's pid namespace. Only returns by
// _exit.
[[noreturn]] void RunHolder(const std::string& hide_dir, int report_fd,
                            int go_fd, int agent_pidfd) {
  // The agent's death ends the holder, and with it the container: a pidfd
  // of the agent turns readable then (below). Not PR_SET_PDEATHSIG, which
  // fires when the *thread* that forked us ends, and gRPC ends idle threads
  // of its pool: it killed containers under load.
  // What `ps` in the container shows as its PID 1 (the fork kept the name
  // of the agent's thread that made it).
  prctl(PR_SET_NAME, "berth-holder");
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  setsid();
  if (unshare(CLONE_NEWNS) != 0) {
    HolderFail(report_fd, "making the container's mount namespace");
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    HolderFail(report_fd, "making the container's mounts private");
  }
  if (!hide_dir.empty() && umount2(hide_dir.c_str(), MNT_DETACH) != 0) {
    HolderFail(report_fd, absl::StrCat("unmounting ", hide_dir));
  }
  std::string what;
  if (!RemountProc(&what)) HolderFail(report_fd, what);
  if (chdir("/") != 0) HolderFail(report_fd, "changing to /");
  driver_common::PrivilegeSpec none;
  none.enabled = true;
  none.capabilities = 0;
  none.no_new_privs = true;
  int error_number = 0;
  if (!driver_common::DropPrivileges(none, 0, 0, {}, &what, &error_number)) {
    errno = error_number;
    HolderFail(report_fd, what);
  }
  Report(report_fd, 0, "");
  // Dumpable until the agent has opened our namespaces (or gone).
  char go;
  while (read(go_fd, &go, 1) < 0 && errno == EINTR) {
  }
  prctl(PR_SET_DUMPABLE, 0);
  // Nothing of the agent's: its sockets, its processes' pipes (a write end
  // of a stdin held here would never let the process see its end).
  // Only the agent's pidfd stays, as fd 0.
  if (dup2(agent_pidfd, 0) < 0) _exit(1);
  syscall(SYS_close_range, 1U, ~0U, 0U);
  sigset_t child;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  const int child_fd = signalfd(-1, &child, SFD_CLOEXEC | SFD_NONBLOCK);
  if (child_fd < 0) _exit(1);
  while (true) {
    while (waitpid(-1, nullptr, WNOHANG | __WALL) > 0) {
    }
    struct pollfd fds[2] = {{0, POLLIN, 0}, {child_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[0].revents != 0) _exit(0);  // the agent is gone
    struct signalfd_siginfo info;
    while (read(child_fd, &info, sizeof(info)) == sizeof(info)) {
    }
  }
}

// A pidfd of the agent itself: its own pid namespace, for the children of a
// thread to be made there again; what a holder watches.
int OwnPidfd() {
  static const int fd = base::PidfdOpen(getpid());
  return fd;
}

}  // namespace

ChildrenInPidNamespace::ChildrenInPidNamespace(int pid_ns) {
  entered_ = OwnPidfd() >= 0 && setns(pid_ns, CLONE_NEWPID) == 0;
}

ChildrenInPidNamespace::~ChildrenInPidNamespace() {
  if (entered_ && setns(OwnPidfd(), CLONE_NEWPID) != 0) {
    PLOG(FATAL) << "making this thread's children in the agent's pid "
                   "namespace again";
  }
}

absl::StatusOr<ContainerNamespaces> StartContainerNamespaces(
    const std::string& hide_dir, bool* forked) {
  *forked = false;
  const int agent_pidfd = OwnPidfd();
  if (agent_pidfd < 0) return absl::ErrnoToStatus(errno, "pidfd_open(self)");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  base::UniqueFd report_read(fds[0]), report_write(fds[1]);
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  base::UniqueFd go_read(fds[0]), go_write(fds[1]);
  if (unshare(CLONE_NEWPID) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "making the container's pid namespace: ", std::strerror(errno)));
  }
  const pid_t pid = fork();
  const int fork_errno = errno;
  if (pid == 0) {
    // The agent's ends are the agent's: with its own copy of go_write open
    // the holder would never see the EOF it waits for.
    go_write.reset();
    report_read.reset();
    RunHolder(hide_dir, report_write.get(), go_read.get(), agent_pidfd);
  }
  if (setns(OwnPidfd(), CLONE_NEWPID) != 0) {
    PLOG(FATAL) << "making this thread's children in the agent's pid "
                   "namespace again";
  }
  if (pid < 0) return absl::ErrnoToStatus(fork_errno, "fork");
  *forked = true;
  report_write.reset();
  go_read.reset();
  ContainerNamespaces made;
  made.holder_pid = pid;
  made.holder_pidfd.reset(base::PidfdOpen(pid));
  if (!made.holder_pidfd.valid()) {
    kill(pid, SIGKILL);
    return absl::ErrnoToStatus(errno, "pidfd_open of the container's holder");
  }
  HolderReport report = {};
  size_t got = 0;
  while (got < sizeof(report)) {
    const ssize_t r =
        read(report_read.get(), reinterpret_cast<char*>(&report) + got,
             sizeof(report) - got);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<size_t>(r);
  }
  if (got != sizeof(report) || report.error_number != 0) {
    kill(pid, SIGKILL);
    report.what[sizeof(report.what) - 1] = '\0';
    return absl::FailedPreconditionError(
        absl::StrCat("the container's namespaces: ",
                     got == sizeof(report)
                         ? absl::StrCat(report.what, ": ",
                                        std::strerror(report.error_number))
                         : std::string("its holder ended without a word")));
  }
  for (auto [fd, name] :
       {std::pair{&made.pid_ns, "pid"}, std::pair{&made.mount_ns, "mnt"}}) {
    const std::string path = absl::StrCat("/proc/", pid, "/ns/", name);
    fd->reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd->valid()) {
      const int error = errno;
      kill(pid, SIGKILL);
      return absl::ErrnoToStatus(error, absl::StrCat("opening ", path));
    }
  }
  go_write.reset();  // the holder may now become undumpable
  return made;
}

}  // namespace berth::agent
