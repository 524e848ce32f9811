#include "services/netns_hook/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"

namespace berth::netns_hook {
namespace {

// An errno as a status whose code cannot be mistaken for one this file
// documents (INVALID_ARGUMENT for a bad name, ALREADY_EXISTS, NOT_FOUND): a
// system call's EINVAL or ENOENT here is a failure of ours, not the caller's.
absl::Status SystemError(int err, absl::string_view what) {
  absl::Status status = absl::ErrnoToStatus(err, what);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kNotFound:
      return absl::InternalError(status.message());
    default:
      return status;
  }
}

absl::Status CheckName(absl::string_view name) {
  if (name.empty() || name == "." || name == ".." ||
      name.find('/') != absl::string_view::npos ||
      name.find('\0') != absl::string_view::npos || name.size() > NAME_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid network namespace name \"", name, "\": it must be 1 to ",
        NAME_MAX, " bytes, not \".\" or \"..\", without '/'"));
  }
  return absl::OkStatus();
}

// Retries a system call interrupted by a signal.
template <typename F>
auto NoIntr(F call) {
  decltype(call()) result;
  do {
    result = call();
  } while (result < 0 && errno == EINTR);
  return result;
}

// Whether `path` is a mounted network namespace.
bool IsNetNamespace(const std::string& path) {
  struct statfs fs;
  if (statfs(path.c_str(), &fs) != 0 ||
      fs.f_type != static_cast<decltype(fs.f_type)>(NSFS_MAGIC)) {
    return false;
  }
  const base::UniqueFd fd(
      open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  return fd.valid() && ioctl(fd.get(), NS_GET_NSTYPE) == CLONE_NEWNET;
}

// Unmounts everything mounted at `path` (MNT_DETACH, not following a
// symlink); OK when nothing is, or nothing is there.
absl::Status UnmountAll(const std::string& path) {
  // More than one mount on the same file is never made here; the bound only
  // stops a loop on a file something keeps mounting over.
  for (int i = 0; i < 16; ++i) {
    if (umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) continue;
    if (errno == EINVAL || errno == ENOENT) return absl::OkStatus();
    return SystemError(errno,
                       absl::StrCat("unmounting network namespace ", path));
  }
  return absl::InternalError(
      absl::StrCat("unmounting network namespace ", path,
                   ": still a mount point after 16 unmounts"));
}

// What the child cloned by Create needs and reports. Everything is prepared
// by the parent: the child shares our memory (CLONE_VM) while the parent
// thread waits (CLONE_VFORK), so it may only make system calls: no
// allocation, no lock, no errno of its own (it writes the waiting thread's,
// which the parent does not read).
struct CreateChild {
  const char* target;  // "/proc/self/fd/N": the file, opened and locked
  struct ifreq loopback;
  // Written by the child.
  const char* failed_step;  // nullptr once everything is done
  int error;
};

int RunCreateChild(void* raw) {
  CreateChild* child = static_cast<CreateChild*>(raw);
  // Cloned into the new network namespace. Its loopback starts down.
  const int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    child->error = errno;
    child->failed_step = "opening a socket in the new network namespace";
    _exit(1);
  }
  if (ioctl(sock, SIOCGIFFLAGS, &child->loopback) != 0) {
    child->error = errno;
    child->failed_step = "reading the flags of lo (SIOCGIFFLAGS)";
    _exit(1);
  }
  child->loopback.ifr_flags |= IFF_UP;
  if (ioctl(sock, SIOCSIFFLAGS, &child->loopback) != 0) {
    child->error = errno;
    child->failed_step = "bringing lo up (SIOCSIFFLAGS)";
    _exit(1);
  }
  if (mount("/proc/self/ns/net", child->target, nullptr, MS_BIND, nullptr) !=
      0) {
    child->error = errno;
    child->failed_step = "bind-mounting /proc/self/ns/net over the file";
    _exit(1);
  }
  child->failed_step = nullptr;
  _exit(0);
}

constexpr size_t kChildStackSize = 64 * 1024;

// Clones the child of Create and waits for it to be gone. Returns the
// status the child reported.
absl::Status CloneCreateChild(int file_fd, const std::string& path) {
  CreateChild child;
  std::memset(&child, 0, sizeof(child));
  const std::string target = absl::StrCat("/proc/self/fd/", file_fd);
  child.target = target.c_str();
  std::strncpy(child.loopback.ifr_name, "lo", IFNAMSIZ);
  child.failed_step = "the child died before it reported";
  child.error = 0;

  void* stack = mmap(nullptr, kChildStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return SystemError(errno, "mmap (a child's stack)");
  // All signals blocked around the clone: the child shares our memory, so
  // none of our handlers may run in it. Exit signal 0, not SIGCHLD: only a
  // wait with __WCLONE or __WALL (ours) reaps the child, not a waitpid(-1)
  // of another thread, and no SIGCHLD handler sees it.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid =
      clone(RunCreateChild, static_cast<char*>(stack) + kChildStackSize,
            CLONE_NEWNET | CLONE_VM | CLONE_VFORK, &child);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  munmap(stack, kChildStackSize);
  if (pid < 0) {
    return SystemError(
        clone_errno,
        absl::StrCat("making network namespace ", path,
                     " (clone with CLONE_NEWNET, which needs CAP_SYS_ADMIN)"));
  }
  // Once clone returns the child no longer uses our memory: it has exited.
  int wait_status = 0;
  NoIntr([&] { return waitpid(pid, &wait_status, __WCLONE); });
  if (child.failed_step != nullptr && child.error == 0) {
    return absl::InternalError(
        absl::StrCat("making network namespace ", path, ": ", child.failed_step,
                     " (wait status ", wait_status, ")"));
  }
  if (child.failed_step != nullptr) {
    return SystemError(child.error,
                       absl::StrCat("making network namespace ", path, ": ",
                                    child.failed_step));
  }
  return absl::OkStatus();
}

}  // namespace

NamespaceDir::NamespaceDir(std::string dir) : dir_(std::move(dir)) {}

std::string NamespaceDir::PathOf(absl::string_view name) const {
  return absl::StrCat(dir_, "/", name);
}

absl::Status NamespaceDir::Prepare() const {
  if (mkdir(dir_.c_str(), 0755) == 0) {
    // Exactly 0755 whatever the umask.
    if (chmod(dir_.c_str(), 0755) != 0) {
      return SystemError(errno, absl::StrCat("chmod 0755 ", dir_));
    }
  } else if (errno != EEXIST) {
    return SystemError(errno, absl::StrCat("making the network namespace "
                                           "directory ",
                                           dir_));
  }
  const base::UniqueFd lock(
      open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!lock.valid()) {
    return SystemError(
        errno, absl::StrCat("opening the network namespace directory ", dir_));
  }
  // Two callers binding the directory to itself at once would stack two
  // mounts (Debian bug 949235 for ip netns); the lock makes the check and
  // the bind one step.
  if (NoIntr([&lock] { return flock(lock.get(), LOCK_EX); }) != 0) {
    return SystemError(errno, absl::StrCat("flock ", dir_));
  }
  bool bound = false;
  while (mount("", dir_.c_str(), nullptr, MS_SHARED | MS_REC, nullptr) != 0) {
    // EINVAL: not a mount point (yet).
    if (errno != EINVAL || bound) {
      return SystemError(errno, absl::StrCat("making ", dir_,
                                             " a shared mount point (mount "
                                             "--make-rshared)"));
    }
    if (mount(dir_.c_str(), dir_.c_str(), nullptr, MS_BIND | MS_REC, nullptr) !=
        0) {
      return SystemError(
          errno, absl::StrCat("binding ", dir_, " to itself (mount --rbind)"));
    }
    bound = true;
  }
  return absl::OkStatus();
}

absl::Status NamespaceDir::Create(absl::string_view name) const {
  if (absl::Status valid = CheckName(name); !valid.ok()) return valid;
  const std::string path = PathOf(name);
  // The file is locked (flock) while it is checked and mounted over, so
  // that two Creates of one name never stack two namespaces: the second
  // either opens the namespace itself, or waits for the first and then sees
  // it mounted (or its file gone, and starts again).
  for (int attempt = 0; attempt < 3; ++attempt) {
    const base::UniqueFd fd(NoIntr([&] {
      return open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                  0444);
    }));
    if (!fd.valid()) {
      if (errno == ENOENT) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot make network namespace ", path, ": directory ", dir_,
            " does not exist (NamespaceDir::Prepare makes it)"));
      }
      return SystemError(errno,
                         absl::StrCat("making network namespace file ", path));
    }
    struct statfs fs;
    if (fstatfs(fd.get(), &fs) == 0 &&
        fs.f_type == static_cast<decltype(fs.f_type)>(NSFS_MAGIC)) {
      return absl::AlreadyExistsError(
          absl::StrCat("a namespace is already mounted at ", path));
    }
    if (NoIntr([&fd] { return flock(fd.get(), LOCK_EX); }) != 0) {
      return SystemError(errno, absl::StrCat("flock ", path));
    }
    if (statfs(path.c_str(), &fs) == 0 &&
        fs.f_type == static_cast<decltype(fs.f_type)>(NSFS_MAGIC)) {
      return absl::AlreadyExistsError(
          absl::StrCat("a namespace is already mounted at ", path));
    }
    struct stat opened, at_path;
    if (fstat(fd.get(), &opened) != 0) {
      return SystemError(errno, absl::StrCat("fstat ", path));
    }
    if (lstat(path.c_str(), &at_path) != 0 || opened.st_dev != at_path.st_dev ||
        opened.st_ino != at_path.st_ino) {
      continue;  // removed or replaced while we waited for the lock
    }
    if (!S_ISREG(opened.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot make network namespace ", path, ": not a regular file"));
    }
    absl::Status made = CloneCreateChild(fd.get(), path);
    if (!made.ok()) {
      // Nothing is mounted (the bind mount was the child's last step, and
      // only a complete child reports success), but a child killed from
      // outside may have got that far: unmount anyway, then unlink, under
      // the lock.
      UnmountAll(path).IgnoreError();
      unlink(path.c_str());
    }
    return made;
  }
  return absl::AbortedError(absl::StrCat(
      "making network namespace ", path,
      ": the file kept being removed or replaced by someone else"));
}

bool NamespaceDir::Exists(absl::string_view name) const {
  if (!CheckName(name).ok()) return false;
  return IsNetNamespace(PathOf(name));
}

absl::Status NamespaceDir::Remove(absl::string_view name) const {
  if (absl::Status valid = CheckName(name); !valid.ok()) return valid;
  const std::string path = PathOf(name);
  if (absl::Status unmounted = UnmountAll(path); !unmounted.ok()) {
    return unmounted;
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return SystemError(errno,
                       absl::StrCat("removing network namespace file ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> NamespaceDir::List(
    absl::string_view prefix) const {
  std::vector<std::string> names;
  DIR* dir = opendir(dir_.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return names;
    return SystemError(
        errno, absl::StrCat("listing the network namespace directory ", dir_));
  }
  absl::Cleanup close_dir = [dir] { closedir(dir); };
  errno = 0;
  while (const struct dirent* entry = readdir(dir)) {
    const absl::string_view entry_name = entry->d_name;
    if (entry_name == "." || entry_name == "..") continue;
    if (absl::StartsWith(entry_name, prefix)) {
      names.emplace_back(entry_name);
    }
    errno = 0;
  }
  if (errno != 0) {
    return SystemError(
        errno, absl::StrCat("listing the network namespace directory ", dir_));
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<int> RunInNamespace(const std::string& path,
                                   const std::function<int()>& fn) {
  const base::UniqueFd ns(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns.valid()) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("no network namespace at ", path));
    }
    return SystemError(errno, absl::StrCat("opening network namespace ", path));
  }
  if (ioctl(ns.get(), NS_GET_NSTYPE) != CLONE_NEWNET) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a network namespace"));
  }
  // The child reports a failed setns through this pipe; EOF means it joined.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return SystemError(errno, "pipe2");
  base::UniqueFd report_read(report[0]);
  base::UniqueFd report_write(report[1]);
  const pid_t pid = fork();
  if (pid < 0) return SystemError(errno, "fork");
  if (pid == 0) {
    // The child leaves by _exit, so no destructor runs in it: it closes its
    // copies itself.
    close(report_read.get());
    if (setns(ns.get(), CLONE_NEWNET) != 0) {
      const int err = errno;
      (void)!write(report_write.get(), &err, sizeof(err));
      _exit(127);
    }
    close(report_write.get());
    close(ns.get());
    _exit(fn() & 0xff);
  }
  report_write.reset();  // or the read below never sees end of file
  int setns_errno = 0;
  const ssize_t n = NoIntr([&] {
    return read(report_read.get(), &setns_errno, sizeof(setns_errno));
  });
  report_read.reset();
  int wait_status = 0;
  if (NoIntr([&] { return waitpid(pid, &wait_status, 0); }) < 0) {
    return SystemError(errno, absl::StrCat("waiting for the child in ", path));
  }
  if (n == static_cast<ssize_t>(sizeof(setns_errno))) {
    return SystemError(setns_errno,
                       absl::StrCat("joining network namespace ", path));
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::InternalError(absl::StrCat(
        "the child in network namespace ", path, " was killed by signal ",
        WTERMSIG(wait_status), " (", strsignal(WTERMSIG(wait_status)), ")"));
  }
  return WEXITSTATUS(wait_status);
}

}  // namespace berth::netns_hook
