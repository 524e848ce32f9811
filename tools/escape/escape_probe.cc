// berth-escape-probe: tries, from inside a task, the ways out of a
// container (issue 15, point 10) and prints what happened to each.
//
//   berth-escape-probe [--json] [--list] [PROBE...]
//
// Every probe is harmless when the isolation it tests is missing: nothing is
// written to /proc/sysrq-trigger or /proc/sys (files are opened for writing
// and closed at once), a module load is asked for with fd -1, a mount that
// succeeds is unmounted at once, a file that gets created is unlinked at
// once, the clock is set to the time just read, a cgroup move is tried with a
// child that exits right after, a renamed directory is renamed back. See
// README.md for what each probe does and what "refused" means for it.
//
// Exits 0 when every probe was refused, 1 when one escaped, 2 on bad usage.
//
// Static, libc and libstdc++ only: it runs inside any root (a busybox image,
// a root built from the host's directories).

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
  bool escaped = false;
  std::string result;  // what happened, one line
};

struct Probe {
  const char* name;
  const char* expected;
  std::function<Outcome()> run;
};

std::string Err(int err) { return std::strerror(err); }

Outcome Refused(std::string result) { return {false, std::move(result)}; }
Outcome Escaped(std::string result) { return {true, std::move(result)}; }

// The errors by which a seccomp filter or a missing capability refuses a
// call (a filter may answer ENOSYS as well).
bool IsRefusal(int err) {
  return err == EPERM || err == EACCES || err == ENOSYS || err == EROFS;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value of "KEY:\t..." in /proc/self/status, or "" when absent.
std::string StatusField(const std::string& key) {
  std::istringstream in(ReadSmallFile("/proc/self/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      size_t start = key.size() + 1;
      while (start < line.size() && (line[start] == '\t' || line[start] == ' '))
        ++start;
      return line.substr(start);
    }
  }
  return "";
}

// A file masked by binding /dev/null over it (what Docker does to
// /proc/kcore and others): opening it reaches nothing.
bool IsDevNull(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) &&
         st.st_rdev == makedev(1, 3);
}

// Opens PATH for writing and closes it at once: never writes.
// Returns "" when refused, else what was opened.
std::string OpenForWriteOnly(const std::string& path, std::string* why) {
  const bool access_ok = access(path.c_str(), W_OK) == 0;
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *why += path + ": " + Err(errno) +
            (access_ok ? " (access W_OK said yes)" : "") + "; ";
    return "";
  }
  const bool masked = IsDevNull(fd);
  close(fd);
  if (masked) {
    *why += path + ": /dev/null over it; ";
    return "";
  }
  return path;
}

// A directory this process can make a scratch entry in, or "".
std::string ScratchDir() {
  for (const char* dir : {"/tmp", "/dev/shm", "/var/tmp", "/run"}) {
    std::string probe =
        std::string(dir) + "/.escape-probe-" + std::to_string(getpid());
    if (mkdir(probe.c_str(), 0700) == 0) {
      rmdir(probe.c_str());
      return dir;
    }
  }
  return "";
}

// --- the probes -----------------------------------------------------------

Outcome WriteHostFile() {
  const std::string name = "escape-probe-" + std::to_string(getpid());
  std::string why;
  for (const std::string dir : {"/var/lib/berth", "/root", "/etc", "/usr",
                                "/usr/local/bin", "/var/lib"}) {
    const std::string path = dir + "/" + name;
    const int fd =
        open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
             0600);
    if (fd >= 0) {
      close(fd);
      unlink(path.c_str());
      return Escaped("created " + path + " (removed again)");
    }
    why += dir + ": " + Err(errno) + "; ";
  }
  return Refused(why);
}

Outcome ReadKcore() {
  const int fd = open("/proc/kcore", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Refused("open: " + Err(errno));
  if (IsDevNull(fd)) {
    close(fd);
    return Refused("/dev/null over it");
  }
  char byte;
  const ssize_t n = read(fd, &byte, 1);
  const int err = errno;
  close(fd);
  if (n > 0) return Escaped("read a byte of /proc/kcore");
  if (n == 0) return Refused("read 0 bytes");
  return Refused("read: " + Err(err));
}

Outcome OpenWritable(const std::vector<std::string>& paths) {
  std::string why;
  for (const std::string& path : paths) {
    const std::string opened = OpenForWriteOnly(path, &why);
    if (!opened.empty()) {
      return Escaped("opened " + opened +
                     " O_WRONLY (closed, nothing written)");
    }
  }
  return Refused(why);
}

Outcome SysrqWritable() { return OpenWritable({"/proc/sysrq-trigger"}); }

Outcome ProcSysWritable() {
  return OpenWritable(
      {"/proc/sys/kernel/domainname", "/proc/sys/kernel/core_pattern"});
}

// Mounts a tmpfs and unmounts it at once. "" on success, else the error.
std::string TryMountTmpfs(std::string* target_out) {
  std::string target;
  const std::string scratch = ScratchDir();
  bool made = false;
  if (!scratch.empty()) {
    target = scratch + "/probe-mnt-" + std::to_string(getpid());
    made = mkdir(target.c_str(), 0700) == 0;
  }
  if (!made) {  // an existing directory: the mount is undone at once
    target = "/";
    for (const char* dir : {"/tmp", "/mnt", "/srv"}) {
      struct stat st;
      if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
        target = dir;
        break;
      }
    }
  }
  *target_out = target;
  std::string error;
  if (mount("tmpfs", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=4k") == 0) {
    umount2(target.c_str(), MNT_DETACH);
  } else {
    error = Err(errno);
  }
  if (made) rmdir(target.c_str());
  return error;
}

Outcome MountTmpfs() {
  std::string target;
  const std::string error = TryMountTmpfs(&target);
  if (error.empty())
    return Escaped("mounted a tmpfs on " + target + " (undone)");
  return Refused("mount on " + target + ": " + error);
}

// Runs FN in a forked child; returns its exit code, or -1.
int InChild(const std::function<int()>& fn) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) _exit(fn());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

Outcome UsernsMount() {
  int pipefd[2];
  if (pipe(pipefd) != 0) return Refused("pipe: " + Err(errno));
  const int code = InChild([&]() {
    close(pipefd[0]);
    std::string message;
    int code = 0;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      message = "unshare(CLONE_NEWUSER|CLONE_NEWNS): " + Err(errno);
      code = 10;
    } else {
      std::string target;
      const std::string error = TryMountTmpfs(&target);
      if (error.empty()) {
        message = "new user+mount namespace, mounted a tmpfs on " + target +
                  " (undone)";
      } else {
        message = "unshare worked; mount on " + target + ": " + error;
        code = 11;
      }
    }
    (void)!write(pipefd[1], message.data(), message.size());
    return code;
  });
  close(pipefd[1]);
  char buffer[512];
  const ssize_t n = read(pipefd[0], buffer, sizeof buffer);
  close(pipefd[0]);
  const std::string message = n > 0 ? std::string(buffer, n) : "no child";
  if (code == 0) return Escaped(message);
  return Refused(message);
}

Outcome FinitModule() {
  // fd -1: the call can load nothing. The kernel checks the capability
  // before the descriptor: EBADF means the call itself was allowed.
  errno = 0;
  const long ret = syscall(SYS_finit_module, -1, "", 0);
  if (ret == 0) return Escaped("finit_module(-1) returned 0");
  const int err = errno;
  if (err == EPERM || err == ENOSYS) return Refused(Err(err));
  return Escaped("allowed, failed only on the descriptor: " + Err(err));
}

// Host block devices by major:minor, from /proc/partitions.
std::vector<dev_t> HostBlockDevices() {
  std::vector<dev_t> devices;
  std::istringstream in(ReadSmallFile("/proc/partitions"));
  std::string line;
  while (std::getline(in, line) && devices.size() < 4) {
    unsigned major_number = 0, minor_number = 0;
    unsigned long long blocks = 0;
    char name[64];
    if (sscanf(line.c_str(), " %u %u %llu %63s", &major_number, &minor_number,
               &blocks, name) == 4) {
      devices.push_back(makedev(major_number, minor_number));
    }
  }
  if (devices.empty()) devices.push_back(makedev(8, 0));
  return devices;
}

Outcome BlockDevice() {
  std::string why;
  for (const char* path :
       {"/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/xvda", "/dev/loop0"}) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      close(fd);
      return Escaped(std::string("opened ") + path + " (nothing read)");
    }
    if (errno != ENOENT) why += std::string(path) + ": " + Err(errno) + "; ";
  }
  const std::string scratch = ScratchDir();
  if (scratch.empty()) return Refused(why + "no writable dir for mknod");
  for (const dev_t device : HostBlockDevices()) {
    const std::string node = scratch + "/probe-blk-" + std::to_string(getpid());
    const std::string label =
        std::to_string(major(device)) + ":" + std::to_string(minor(device));
    if (mknod(node.c_str(), S_IFBLK | 0600, device) != 0) {
      why += "mknod " + label + ": " + Err(errno) + "; ";
      continue;
    }
    const int fd = open(node.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    const int err = errno;
    unlink(node.c_str());
    if (fd >= 0) {
      close(fd);
      return Escaped("mknod+open block " + label + " (nothing read)");
    }
    why += "open block " + label + ": " + Err(err) + "; ";
  }
  return Refused(why);
}

// The cgroup lines of /proc/PID/cgroup, as one string.
std::string CgroupsOf(pid_t pid) {
  return ReadSmallFile("/proc/" + std::to_string(pid) + "/cgroup");
}

Outcome CgroupEscape() {
  std::vector<std::string> targets;
  for (const char* path :
       {"/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs",
        "/sys/fs/cgroup/pids/cgroup.procs",
        "/sys/fs/cgroup/memory/cgroup.procs",
        "/sys/fs/cgroup/systemd/cgroup.procs"}) {
    if (access(path, F_OK) == 0) targets.push_back(path);
  }
  if (targets.empty()) return Refused("no cgroup.procs visible");
  std::string why;
  for (const std::string& target : targets) {
    // A child is moved, not this process: it exits right after.
    int gate[2];
    if (pipe(gate) != 0) return Refused("pipe: " + Err(errno));
    fflush(stdout);
    const pid_t child = fork();
    if (child < 0) return Refused("fork: " + Err(errno));
    if (child == 0) {
      close(gate[1]);
      char byte;
      (void)!read(gate[0], &byte, 1);
      _exit(0);
    }
    close(gate[0]);
    const std::string before = CgroupsOf(child);
    const int fd = open(target.c_str(), O_WRONLY | O_CLOEXEC);
    std::string result;
    bool moved = false;
    if (fd < 0) {
      result = "open: " + Err(errno);
    } else {
      const std::string pid = std::to_string(child);
      if (write(fd, pid.data(), pid.size()) < 0) {
        result = "write: " + Err(errno);
      } else {
        moved = CgroupsOf(child) != before;
        result = moved ? "moved a child out of its cgroup"
                       : "written, same cgroup (a cgroup namespace's root)";
      }
      close(fd);
    }
    close(gate[1]);
    waitpid(child, nullptr, 0);
    if (moved) return Escaped(target + ": " + result);
    why += target + ": " + result + "; ";
  }
  return Refused(why);
}

// Tries to connect to a Unix socket; "" when refused, else how it connected.
std::string TryConnect(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return "";
  for (const int type : {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM}) {
    const int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return "";
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    const int ret =
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    const int err = errno;
    close(fd);
    // EAGAIN: a listener whose backlog is full; the permission check passed.
    if (ret == 0 || err == EAGAIN || err == EINPROGRESS) return path;
    if (err != EPROTOTYPE) return "";
  }
  return "";
}

void FindSockets(const std::string& dir, int depth, int* budget,
                 std::vector<std::string>* found) {
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return;
  while (dirent* entry = readdir(listing)) {
    if (--*budget <= 0) break;
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = (dir == "/" ? "" : dir) + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISSOCK(st.st_mode)) {
      found->push_back(path);
    } else if (S_ISDIR(st.st_mode) && depth > 0) {
      FindSockets(path, depth - 1, budget, found);
    }
  }
  closedir(listing);
}

Outcome BerthSocket() {
  std::vector<std::string> sockets = {
      "/run/berth/node.sock",          "/run/berth/netns.sock",
      "/run/berth/stats.sock",         "/run/berth/proxy.sock",
      "/run/berth/plugins/exec.sock",  "/run/berth/plugins/sandbox.sock",
      "/berth/task/.berth/agent.sock",
  };
  int budget = 20000;
  for (const char* dir :
       {"/run", "/var/run", "/var/lib/berth", "/tmp", "/berth", "/var/tmp"}) {
    FindSockets(dir, 4, &budget, &sockets);
  }
  std::vector<std::string> connected;
  size_t tried = 0;
  for (const std::string& path : sockets) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    ++tried;
    const std::string how = TryConnect(path);
    if (!how.empty() &&
        std::find(connected.begin(), connected.end(), how) == connected.end())
      connected.push_back(how);
  }
  if (connected.empty()) {
    return Refused(std::to_string(tried) + " sockets found, none connected");
  }
  std::string list;
  for (size_t i = 0; i < connected.size() && i < 6; ++i) {
    list += (i ? ", " : "") + connected[i];
  }
  if (connected.size() > 6) {
    list += " and " + std::to_string(connected.size() - 6) + " more";
  }
  return Escaped("connected to " + list);
}

// The process to attack: berth's agent or init if one is visible, else PID 1;
// never this process. 0 when there is none.
pid_t TargetProcess(std::string* what) {
  // The agent (a sandbox's) before the init, the init before any PID 1.
  const char* const kRanked[] = {"berth-agent", "berth-task-init"};
  constexpr int kRanks = 3;
  pid_t best = 0;
  int best_rank = kRanks;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    std::string comm = ReadSmallFile("/proc/" + std::to_string(pid) + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    int rank = pid == 1 ? kRanks - 1 : kRanks;
    for (int i = 0; i < kRanks - 1; ++i) {
      if (comm == kRanked[i]) rank = i;
    }
    if (rank < best_rank) {
      best = pid;
      best_rank = rank;
      *what = comm + " (pid " + std::to_string(pid) + ")";
    }
  }
  closedir(proc);
  return best;
}

Outcome PtracePid1() {
  std::string what;
  const pid_t target = TargetProcess(&what);
  if (target == 0) return Refused("no other process visible (probe is pid 1)");
  // PTRACE_SEIZE does not stop the target; the child that seized exits at
  // once, which detaches it.
  const int code = InChild([&]() {
    if (ptrace(PTRACE_SEIZE, target, nullptr, nullptr) == 0) return 0;
    return errno;
  });
  if (code == 0) return Escaped("PTRACE_SEIZE of " + what + " worked");
  return Refused(what + ": " + (code > 0 ? Err(code) : "child failed"));
}

Outcome KillPid1() {
  std::string what;
  const pid_t target = TargetProcess(&what);
  if (target == 0) return Refused("no other process visible (probe is pid 1)");
  // SIGCONT to a running process does nothing.
  if (kill(target, SIGCONT) == 0)
    return Escaped("SIGCONT to " + what + " delivered");
  return Refused(what + ": " + Err(errno));
}

Outcome Pid1Root() {
  std::string what;
  const pid_t target = TargetProcess(&what);
  if (target == 0) return Refused("no other process visible (probe is pid 1)");
  const std::string root = "/proc/" + std::to_string(target) + "/root/";
  DIR* listing = opendir(root.c_str());
  if (listing == nullptr) return Refused(what + " root: " + Err(errno));
  closedir(listing);
  struct stat theirs, ours;
  if (stat(root.c_str(), &theirs) == 0 && stat("/", &ours) == 0 &&
      theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino) {
    return Refused(what + " has this task's root");
  }
  return Escaped("listed " + root + " of " + what + ", another root");
}

Outcome ClockSettime() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  // The time just read: setting it changes nothing that matters.
  if (clock_settime(CLOCK_REALTIME, &now) == 0) {
    return Escaped("clock_settime(CLOCK_REALTIME) allowed");
  }
  return Refused(Err(errno));
}

Outcome Keyctl() {
  const long id =
      syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
  if (id >= 0) return Escaped("session keyring " + std::to_string(id));
  const int err = errno;
  if (err == EPERM || err == ENOSYS) return Refused(Err(err));
  return Escaped("allowed, failed with " + Err(err));
}

Outcome Bpf() {
  // A zero-sized attribute: an unspecified map type, nothing is made.
  const long ret = syscall(SYS_bpf, BPF_MAP_CREATE, nullptr, 0);
  if (ret >= 0) {
    close(static_cast<int>(ret));
    return Escaped("bpf(BPF_MAP_CREATE) made a map");
  }
  const int err = errno;
  if (err == EPERM || err == ENOSYS) return Refused(Err(err));
  return Escaped("allowed, failed with " + Err(err));
}

Outcome PerfEventOpen() {
  perf_event_attr attr{};
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof attr;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.disabled = 1;
  const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  if (fd >= 0) {
    close(static_cast<int>(fd));
    return Escaped("perf_event_open on itself worked");
  }
  const int err = errno;
  if (IsRefusal(err)) return Refused(Err(err));
  return Escaped("allowed, failed with " + Err(err));
}

// --print-euid: what a setuid copy of this binary runs as.
int PrintEuid() {
  std::printf("%u\n", static_cast<unsigned>(geteuid()));
  return 0;
}

// As root: copies this binary, makes it setuid-root, and runs it as uid
// 65534 with --print-euid. The copy lives in a scratch directory for the
// moment it runs and is removed after.
std::string SetuidCopyEuid(std::string* detail) {
  const std::string scratch = ScratchDir();
  if (scratch.empty()) {
    *detail = "no writable directory for a setuid copy";
    return "";
  }
  const std::string copy = scratch + "/probe-suid-" + std::to_string(getpid());
  {
    std::ifstream in("/proc/self/exe", std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
    if (!in || !out) {
      *detail = "cannot copy /proc/self/exe to " + copy;
      unlink(copy.c_str());
      return "";
    }
  }
  if (chown(copy.c_str(), 0, 0) != 0 || chmod(copy.c_str(), 04755) != 0) {
    *detail = "chmod u+s " + copy + ": " + Err(errno);
    unlink(copy.c_str());
    return "";
  }
  int out[2];
  if (pipe(out) != 0) {
    unlink(copy.c_str());
    return "";
  }
  fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    dup2(out[1], 1);
    close(out[0]);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(20);
    execl(copy.c_str(), copy.c_str(), "--print-euid", nullptr);
    _exit(21);
  }
  close(out[1]);
  char buffer[32] = {0};
  const ssize_t n = read(out[0], buffer, sizeof buffer - 1);
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  unlink(copy.c_str());
  if (n <= 0) {
    *detail = "setuid copy ran no output (exit " +
              std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
              ")";
    return "";
  }
  std::string euid(buffer, n);
  while (!euid.empty() && euid.back() == '\n') euid.pop_back();
  return euid;
}

Outcome SetuidNnp() {
  const std::string nnp = StatusField("NoNewPrivs");
  std::string detail = "NoNewPrivs " + (nnp.empty() ? "?" : nnp);
  if (getuid() == 0) {
    std::string why;
    const std::string euid = SetuidCopyEuid(&why);
    if (euid == "0") {
      return Escaped(detail + "; a setuid-root copy run as 65534 got euid 0");
    }
    detail += euid.empty() ? "; " + why
                           : "; setuid-root copy run as 65534: euid " + euid;
  }
  if (nnp != "1") {
    // Not root, or the copy could not be made: without no_new_privs every
    // setuid binary in the root raises privileges.
    return Escaped(detail + " (no_new_privs off)");
  }
  return Refused(detail);
}

Outcome CapSysAdmin() {
  constexpr int kCapSysAdmin = 21;
  std::string result, with;
  for (const char* set : {"CapEff", "CapPrm", "CapBnd"}) {
    const std::string value = StatusField(set);
    const uint64_t bits = std::strtoull(value.c_str(), nullptr, 16);
    result += std::string(set) + " " + value + " ";
    if (bits & (uint64_t{1} << kCapSysAdmin)) with += std::string(set) + " ";
  }
  if (!with.empty()) return Escaped("CAP_SYS_ADMIN in " + with);
  return Refused(result);
}

// The task directory as the task sees it: /berth/task, or the working
// directory when it holds the driver's .berth.
std::string VisibleTaskDir() {
  struct stat st;
  if (stat("/berth/task/.berth", &st) == 0 ||
      stat("/berth/task/logs", &st) == 0)
    return "/berth/task";
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) != nullptr) {
    const std::string dir = cwd;
    if (stat((dir + "/.berth").c_str(), &st) == 0) return dir;
  }
  return "";
}

Outcome SymlinkAttack() {
  const std::string dir = VisibleTaskDir();
  if (dir.empty()) return Refused("no task directory visible");
  std::string why;
  for (const std::string name : {".berth", "logs"}) {
    const std::string path = dir + "/" + name;
    const std::string aside = path + "-probe-" + std::to_string(getpid());
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      why += path + ": " + Err(errno) + "; ";
      continue;
    }
    if (rename(path.c_str(), aside.c_str()) != 0) {
      why += "rename " + path + ": " + Err(errno) + "; ";
      continue;
    }
    // A link to where root must not write could now stand in its place;
    // planted here is one to a directory of this task's own, and removed.
    std::string planted = "rename worked";
    if (symlink("/tmp", path.c_str()) == 0) {
      planted += ", link planted in its place";
      unlink(path.c_str());
    }
    rename(aside.c_str(), path.c_str());
    return Escaped(path + ": " + planted + " (put back)");
  }
  return Refused(why);
}

// The descriptors beyond stdio this process was started with (taken first
// thing in main): berth's init, its pipes or the driver's files leaking
// into a task would show here.
std::vector<int>& InheritedDescriptors() {
  static std::vector<int>* const fds = new std::vector<int>;
  return *fds;
}

void TakeInheritedDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd > 2 && fd != own) InheritedDescriptors().push_back(fd);
  }
  closedir(dir);
}

Outcome InheritedFds() {
  if (InheritedDescriptors().empty()) {
    return Refused("only 0, 1 and 2 were open at start");
  }
  std::string list;
  for (const int fd : InheritedDescriptors()) {
    char target[256] = {};
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    list += (list.empty() ? "" : ", ") + std::to_string(fd) + " -> " +
            (n > 0 ? std::string(target, static_cast<size_t>(n)) : "?");
  }
  return Escaped("started with " + list);
}

const std::vector<Probe>& Probes() {
  static const std::vector<Probe>* const probes = new std::vector<Probe>{
      {"write_host_file", "no host file created", WriteHostFile},
      {"read_kcore", "open/read fails or masked", ReadKcore},
      {"sysrq_writable", "open O_WRONLY fails", SysrqWritable},
      {"proc_sys_writable", "open O_WRONLY fails", ProcSysWritable},
      {"mount_tmpfs", "mount fails", MountTmpfs},
      {"userns_mount", "unshare or mount fails", UsernsMount},
      {"finit_module", "EPERM", FinitModule},
      {"block_device", "no block device opens", BlockDevice},
      {"cgroup_escape", "no move out of own cgroup", CgroupEscape},
      {"berth_socket", "no Unix socket connects", BerthSocket},
      {"ptrace_pid1", "EPERM", PtracePid1},
      {"kill_pid1", "EPERM", KillPid1},
      {"pid1_root", "other root unreadable", Pid1Root},
      {"clock_settime", "EPERM", ClockSettime},
      {"keyctl", "EPERM", Keyctl},
      {"bpf", "EPERM", Bpf},
      {"perf_event_open", "EPERM/EACCES", PerfEventOpen},
      {"setuid_nnp", "no_new_privs; setuid gains nothing", SetuidNnp},
      {"cap_sys_admin", "no CAP_SYS_ADMIN", CapSysAdmin},
      {"symlink_attack", "task dir not replaceable", SymlinkAttack},
      {"inherited_fds", "only stdio at start", InheritedFds},
  };
  return *probes;
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// One line of a table cell: no '|' or newline inside.
std::string Cell(std::string text) {
  for (char& c : text) {
    if (c == '|' || c == '\n') c = '/';
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == ';'))
    text.pop_back();
  return text;
}

int Usage(FILE* out) {
  std::fprintf(out,
               "usage: berth-escape-probe [--json] [--list] [PROBE...]\n"
               "Tries each way out of a container (all by default) and prints "
               "probe | expected | result | verdict;\nexits 0 only when every "
               "probe was refused.\n");
  return out == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  TakeInheritedDescriptors();
  bool json = false;
  std::vector<const Probe*> selected;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--print-euid") return PrintEuid();
    if (arg == "--json") {
      json = true;
    } else if (arg == "--list") {
      for (const Probe& probe : Probes()) std::printf("%s\n", probe.name);
      return 0;
    } else if (arg == "-h" || arg == "--help") {
      return Usage(stdout);
    } else {
      const Probe* found = nullptr;
      for (const Probe& probe : Probes()) {
        if (arg == probe.name) found = &probe;
      }
      if (found == nullptr) {
        std::fprintf(stderr, "berth-escape-probe: unknown probe \"%s\"\n",
                     arg.c_str());
        return Usage(stderr);
      }
      selected.push_back(found);
    }
  }
  if (selected.empty()) {
    for (const Probe& probe : Probes()) selected.push_back(&probe);
  }
  // Output of a forked child never repeats buffered lines of the parent.
  setvbuf(stdout, nullptr, _IOLBF, 0);

  int escaped = 0;
  if (json)
    std::printf("{\"uid\": %u, \"probes\": [", getuid());
  else
    std::printf("# berth-escape-probe: uid %u gid %u pid %d\n", getuid(),
                getgid(), getpid());
  bool first = true;
  for (const Probe* probe : selected) {
    const Outcome outcome = probe->run();
    if (outcome.escaped) ++escaped;
    const char* verdict = outcome.escaped ? "ESCAPED" : "refused";
    if (json) {
      std::printf(
          "%s\n  {\"probe\": %s, \"expected\": %s, \"result\": %s, "
          "\"verdict\": %s}",
          first ? "" : ",", JsonString(probe->name).c_str(),
          JsonString(probe->expected).c_str(),
          JsonString(Cell(outcome.result)).c_str(),
          JsonString(verdict).c_str());
    } else {
      std::printf("%s | %s | %s | %s\n", probe->name, probe->expected,
                  Cell(outcome.result).c_str(), verdict);
    }
    first = false;
  }
  if (json)
    std::printf("\n], \"escaped\": %d}\n", escaped);
  else
    std::printf("# %d of %zu escaped\n", escaped, selected.size());
  return escaped == 0 ? 0 : 1;
}
