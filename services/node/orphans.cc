#include "services/node/orphans.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/io.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "services/common/unix_socket.h"

namespace berth::node {
namespace {

// The names of the subdirectories of `dir` (none when it cannot be read).
std::vector<std::string> SubDirs(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (lstat(absl::StrCat(dir, "/", name).c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode)) {
      names.push_back(name);
    }
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// `dir` and every cgroup below it, deepest first.
void CollectDepthFirst(const std::string& dir, std::vector<std::string>* out) {
  for (const std::string& sub : SubDirs(dir)) {
    CollectDepthFirst(absl::StrCat(dir, "/", sub), out);
  }
  out->push_back(dir);
}

// The pids in the cgroup.procs of each of `dirs`.
std::vector<pid_t> ProcsOf(const std::vector<std::string>& dirs) {
  std::vector<pid_t> pids;
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::string> procs =
        base::ReadFile(absl::StrCat(dir, "/cgroup.procs"));
    if (!procs.ok()) continue;
    for (absl::string_view line :
         absl::StrSplit(*procs, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
    }
  }
  return pids;
}

// Waits up to `timeout` for the process behind `pidfd` to end.
bool WaitPidfd(int pidfd, absl::Duration timeout) {
  pollfd p = {pidfd, POLLIN, 0};
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const int64_t ms =
        std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    const int n = poll(&p, 1, static_cast<int>(ms));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

absl::StatusOr<pid_t> SocketPeerPid(const std::string& path) {
  absl::StatusOr<base::UniqueFd> fd = ConnectUnixSocket(path);
  if (absl::IsNotFound(fd.status()) || absl::IsUnavailable(fd.status())) {
    return absl::NotFoundError(absl::StrCat("nobody listens on socket ", path));
  }
  if (!fd.ok()) return fd.status();
  ucred cred = {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd->get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot read SO_PEERCRED of socket ", path));
  }
  if (cred.pid <= 0) {
    return absl::NotFoundError(
        absl::StrCat("no process listens on socket ", path));
  }
  return cred.pid;
}

absl::Status StopSocketOwner(const std::string& path, absl::Duration grace) {
  absl::StatusOr<pid_t> pid = SocketPeerPid(path);
  if (absl::IsNotFound(pid.status())) return absl::OkStatus();
  if (!pid.ok()) return pid.status();
  if (*pid == getpid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("socket ", path, " is this process's own"));
  }
  base::UniqueFd pidfd(base::PidfdOpen(*pid));
  if (!pidfd.valid()) {
    if (errno == ESRCH) return absl::OkStatus();  // gone meanwhile
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot open a pidfd of pid ", *pid,
                                            ", which listens on ", path));
  }
  // The pidfd names the listener only if it still listens now: a pid read
  // before the listener exited could have been reused since.
  absl::StatusOr<pid_t> again = SocketPeerPid(path);
  if (!again.ok() || *again != *pid) return absl::OkStatus();
  struct stat st;
  if (stat(absl::StrCat("/proc/", *pid).c_str(), &st) != 0) {
    return absl::OkStatus();
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "socket ", path, " is served by pid ", *pid, " of uid ", st.st_uid,
        ", not this node's uid ", geteuid(), ": not stopping it"));
  }
  LOG(WARNING) << "socket " << path << " is served by pid " << *pid
               << ", which this node has no record of (its state is gone?): "
                  "stopping it";
  if (base::PidfdSendSignal(pidfd.get(), SIGTERM) != 0 && errno == ESRCH) {
    return absl::OkStatus();
  }
  if (!WaitPidfd(pidfd.get(), grace)) {
    LOG(WARNING) << "pid " << *pid << " (socket " << path
                 << ") did not exit within " << grace << " of SIGTERM; "
                 << "killing it";
    base::PidfdSendSignal(pidfd.get(), SIGKILL);
    if (!WaitPidfd(pidfd.get(), absl::Seconds(10))) {
      return absl::DeadlineExceededError(
          absl::StrCat("pid ", *pid, ", which listens on ", path,
                       ", is still there 10s after SIGKILL"));
    }
  }
  // Its socket is left stale: the next server there removes it; do it now
  // so that nobody mistakes it for a live one.
  if (absl::IsNotFound(SocketPeerPid(path).status())) unlink(path.c_str());
  return absl::OkStatus();
}

std::vector<std::string> CgroupParentsOf(const std::vector<std::string>& args) {
  std::vector<std::string> parents;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (absl::StartsWith(args[i], "--cgroup_parent=")) {
      value = args[i].substr(strlen("--cgroup_parent="));
    } else if (args[i] == "--cgroup_parent" && i + 1 < args.size()) {
      value = args[++i];
    } else {
      continue;
    }
    absl::string_view trimmed = value;
    while (absl::ConsumePrefix(&trimmed, "/")) {
    }
    while (absl::ConsumeSuffix(&trimmed, "/")) {
    }
    // Never a path that climbs out of the hierarchy.
    if (trimmed.empty() || absl::StrContains(trimmed, "..")) continue;
    parents.emplace_back(trimmed);
  }
  return parents;
}

std::vector<std::string> CgroupMountPoints(const std::string& mountinfo) {
  std::vector<std::string> points;
  for (absl::string_view line :
       absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE ...
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || dash + 1 == fields.end()) {
      continue;
    }
    if (dash[1] != "cgroup" && dash[1] != "cgroup2") continue;
    // Octal escapes (\040 for a space) are not expected in /sys/fs/cgroup.
    if (absl::StrContains(fields[4], "\\")) continue;
    points.emplace_back(fields[4]);
  }
  return points;
}

absl::StatusOr<OrphanTasksRemoved> RemoveOrphanTaskCgroups(
    const std::vector<std::string>& mount_points,
    const std::vector<std::string>& parents, const std::set<std::string>& known,
    absl::Duration timeout) {
  OrphanTasksRemoved removed;
  std::vector<std::string> left;
  for (const std::string& parent : parents) {
    for (const std::string& mount : mount_points) {
      const std::string parent_dir = absl::StrCat(mount, "/", parent);
      for (const std::string& task : SubDirs(parent_dir)) {
        if (known.count(task) > 0) continue;
        const std::string dir = absl::StrCat(parent_dir, "/", task);
        std::vector<std::string> dirs;
        CollectDepthFirst(dir, &dirs);
        // v2: one write kills them all; v1: one pass per fork generation.
        if (int fd = open(absl::StrCat(dir, "/cgroup.kill").c_str(),
                          O_WRONLY | O_CLOEXEC);
            fd >= 0) {
          (void)!write(fd, "1", 1);
          close(fd);
        }
        const absl::Time deadline = absl::Now() + timeout;
        std::vector<pid_t> pids = ProcsOf(dirs);
        while (!pids.empty() && absl::Now() < deadline) {
          for (pid_t pid : pids) {
            if (kill(pid, SIGKILL) == 0) ++removed.processes_killed;
          }
          absl::SleepFor(absl::Milliseconds(20));
          pids = ProcsOf(dirs);
        }
        int rmdir_errno = 0;
        for (const std::string& d : dirs) {
          rmdir_errno = rmdir(d.c_str()) == 0 ? 0 : errno;
        }
        if (rmdir_errno != 0 && rmdir_errno != ENOENT) {
          left.push_back(absl::StrCat(dir, " (", std::strerror(rmdir_errno),
                                      pids.empty() ? "" : "; processes left",
                                      ")"));
          continue;
        }
        LOG(INFO) << "removed the cgroup " << dir
                  << " of a task this node has no record of";
        removed.tasks.insert(task);
      }
    }
  }
  if (!left.empty()) {
    return absl::InternalError(
        absl::StrCat("cannot remove the cgroups of tasks this node has no "
                     "record of: ",
                     absl::StrJoin(left, ", ")));
  }
  return removed;
}

std::vector<pid_t> KillOrphanShims(const std::string& tasks_dir,
                                   const std::set<std::string>& known) {
  std::vector<pid_t> killed;
  const std::string flag = absl::StrCat("--task_log_dir=", tasks_dir, "/");
  for (const std::string& entry : SubDirs("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry, &pid) || pid <= 0 || pid == getpid()) {
      continue;
    }
    char exe[4096];
    const ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), exe,
                               sizeof(exe) - 1);
    if (n <= 0) continue;
    absl::string_view exe_path(exe, n);
    absl::ConsumeSuffix(&exe_path, " (deleted)");
    if (!absl::EndsWith(exe_path, "/berth-shim")) continue;
    absl::StatusOr<std::string> cmdline =
        base::ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    if (!cmdline.ok()) continue;
    for (absl::string_view arg : absl::StrSplit(*cmdline, '\0')) {
      if (!absl::ConsumePrefix(&arg, flag)) continue;
      // <ID>/logs
      const std::string id(arg.substr(0, arg.find('/')));
      if (id.empty() || known.count(id) > 0) break;
      if (kill(pid, SIGKILL) == 0) {
        LOG(INFO) << "killed the shim (pid " << pid << ") of task " << id
                  << ", which this node has no record of";
        killed.push_back(pid);
      }
      break;
    }
  }
  return killed;
}

}  // namespace berth::node
