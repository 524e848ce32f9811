#include "services/driver/common/root_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "services/driver/common/init_spec.h"

namespace berth::driver_common {
namespace {

// A temporary directory, removed with its contents (the mounts made over
// parts of it lived in a child's mount namespace and are gone by then).
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string pattern =
        std::string(base != nullptr ? base : "/tmp") + "/root_setup-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string Make(const std::string& relative) const {
    const std::string full = path_ + "/" + relative;
    std::filesystem::create_directories(full);
    return full;
  }
  std::string Write(const std::string& relative,
                    const std::string& content) const {
    const std::string full = path_ + "/" + relative;
    const int fd = open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      (void)!write(fd, content.data(), content.size());
      close(fd);
    }
    return full;
  }

 private:
  std::string path_;
};

// Checks made inside the new root: a line on the pipe per failure.
class Checks {
 public:
  explicit Checks(int fd) : fd_(fd) {}
  void Expect(bool ok, const std::string& what) {
    if (ok) return;
    ++failures_;
    const std::string line =
        "FAIL " + what + " (errno " + std::strerror(errno) + ")\n";
    (void)!write(fd_, line.data(), line.size());
  }
  int failures() const { return failures_; }

 private:
  int fd_;
  int failures_ = 0;
};

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

bool IsSymlink(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

bool IsDevNull(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode) &&
         st.st_rdev == makedev(1, 3);
}

bool ReadOnlyMount(const std::string& path) {
  struct statvfs st;
  return statvfs(path.c_str(), &st) == 0 && (st.f_flag & ST_RDONLY) != 0;
}

// Creates and writes a file; true if it worked.
bool CanWrite(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  const bool ok = write(fd, "x", 1) == 1;
  close(fd);
  return ok;
}

// Opening `path` for writing fails with `error` (nothing is written).
bool WriteRefused(const std::string& path, int error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    close(fd);
    return false;
  }
  return errno == error;
}

std::string ReadAll(const std::string& path) {
  std::string out;
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return "<unreadable>";
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) out.append(buffer, n);
  close(fd);
  return out;
}

// Entries of a directory other than . and ..; nullopt-like -1 if unreadable.
std::vector<std::string> Entries(const std::string& path, bool* ok = nullptr) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (ok != nullptr) *ok = dir != nullptr;
  if (dir == nullptr) return names;
  while (const struct dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  return names;
}

bool EmptyDir(const std::string& path) {
  bool ok = false;
  return Entries(path, &ok).empty() && ok;
}

struct Outcome {
  bool skipped = false;
  int exit_code = -1;
  // A line per failed check.
  std::string output;
};

// Runs `body` as PID 1 of new mount, pid, cgroup, ipc and uts namespaces
// (the way berth-task-init runs) and returns what it reported.
Outcome RunIsolated(const std::function<void(Checks&)>& body) {
  Outcome outcome;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    outcome.output = "pipe failed";
    return outcome;
  }
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWCGROUP | CLONE_NEWIPC |
                CLONE_NEWUTS) != 0) {
      const std::string line =
          std::string("SKIP unshare: ") + std::strerror(errno) + "\n";
      (void)!write(pipe_fds[1], line.data(), line.size());
      _exit(77);
    }
    const pid_t init = fork();
    if (init == 0) {
      Checks checks(pipe_fds[1]);
      body(checks);
      _exit(checks.failures() == 0 ? 0 : 1);
    }
    close(pipe_fds[1]);
    int status = 0;
    if (init < 0 || waitpid(init, &status, 0) != init) _exit(3);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  close(pipe_fds[1]);
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) {
    outcome.output.append(buffer, n);
  }
  close(pipe_fds[0]);
  int status = 0;
  if (child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status)) {
    outcome.exit_code = WEXITSTATUS(status);
  }
  outcome.skipped = outcome.exit_code == 77;
  return outcome;
}

// SetUpRoot, a failure reported as a check.
bool Enter(const RootSpec& spec, Checks& checks) {
  std::string what;
  int error_number = 0;
  const bool ok = SetUpRoot(spec, &what, &error_number);
  errno = error_number;
  checks.Expect(ok, "SetUpRoot: " + what);
  return ok;
}

class RootSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for mount namespaces";
    ASSERT_FALSE(temp_.path().empty()) << "mkdtemp: " << std::strerror(errno);
  }

  // A tmpfs root with the host's system directories.
  RootSpec HostDirsRoot() const {
    RootSpec spec;
    spec.enabled = true;
    spec.mount_point = temp_.Make("root");
    spec.host_dirs = {"/bin", "/usr", "/lib", "/lib64", "/etc", "/sbin"};
    return spec;
  }

  void ExpectPassed(const Outcome& outcome) {
    if (outcome.skipped) GTEST_SKIP() << outcome.output;
    EXPECT_EQ(outcome.output, "");
    EXPECT_EQ(outcome.exit_code, 0);
  }

  TempDir temp_;
};

TEST_F(RootSetupTest, BuildsAMinimalIsolatedRoot) {
  RootSpec spec = HostDirsRoot();
  spec.task_dir = temp_.Make("task");
  temp_.Write("task/hello", "hello");
  temp_.Make("task/.berth");
  temp_.Write("task/.berth/secret", "secret");
  temp_.Make("task/logs");
  temp_.Write("task/logs/stdout.log", "log");
  const std::string ro_source = temp_.Make("ro-source");
  temp_.Write("ro-source/kept", "kept");
  const std::string rw_source = temp_.Make("rw-source");
  const std::string file_source = temp_.Write("config.txt", "config");
  const std::string marker = temp_.Write("outside-marker", "outside");
  spec.mounts = {
      {MountSpec::Kind::kBind, ro_source, "/data/ro", true},
      {MountSpec::Kind::kBind, rw_source, "/data/rw", false},
      {MountSpec::Kind::kBind, file_source, "/etc-extra/config.txt", true},
      {MountSpec::Kind::kTmpfs, "", "/scratch", false},
  };

  const Outcome outcome = RunIsolated([&](Checks& c) {
    // What the host has, looked at before the root is entered.
    const bool bin_is_link = IsSymlink("/bin");
    const bool has_kcore = Exists("/proc/kcore");
    const bool has_keys = Exists("/proc/keys");
    const bool has_sysrq = Exists("/proc/sysrq-trigger");
    const bool has_acpi = Exists("/proc/acpi");
    const bool has_firmware = Exists("/sys/firmware");
    std::vector<std::string> cgroup_hierarchies;
    for (const std::string& name : Entries("/sys/fs/cgroup")) {
      if (!IsSymlink("/sys/fs/cgroup/" + name)) {
        cgroup_hierarchies.push_back(name);
      }
    }
    std::vector<std::string> host_block_devices;
    for (const std::string& name : Entries("/dev")) {
      struct stat st;
      if (stat(("/dev/" + name).c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
        host_block_devices.push_back(name);
      }
    }
    if (!Enter(spec, c)) return;

    char cwd[PATH_MAX];
    c.Expect(getcwd(cwd, sizeof(cwd)) != nullptr && std::string(cwd) == "/",
             "cwd is /");
    c.Expect(!Exists(marker), "the old root is gone: " + marker);
    // Host directories, read-only.
    c.Expect(access("/usr/bin/env", X_OK) == 0, "/usr/bin/env executable");
    c.Expect(WriteRefused("/usr/root-setup-test", EROFS), "/usr read-only");
    c.Expect(WriteRefused("/etc/root-setup-test", EROFS), "/etc read-only");
    if (bin_is_link) {
      c.Expect(IsSymlink("/bin"), "/bin a symlink as on the host");
      c.Expect(access("/bin/sh", X_OK) == 0, "/bin/sh through the symlink");
    }
    for (const char* absent : {"/root", "/home", "/run/berth", "/var/lib"}) {
      c.Expect(!Exists(absent), std::string(absent) + " absent");
    }
    // A private /tmp.
    c.Expect(EmptyDir("/tmp"), "/tmp empty");
    c.Expect(CanWrite("/tmp/file"), "/tmp writable");
    // The task directory, its .berth and logs hidden.
    c.Expect(ReadAll("/berth/task/hello") == "hello", "/berth/task/hello");
    c.Expect(CanWrite("/berth/task/written"), "/berth/task writable");
    for (const char* hidden : {"/berth/task/.berth", "/berth/task/logs"}) {
      const std::string path = hidden;
      c.Expect(EmptyDir(path), path + " empty");
      c.Expect(rename(hidden, "/berth/task/moved") != 0,
               path + " cannot be renamed");
      c.Expect(WriteRefused(path + "/new", EROFS), path + " read-only");
    }
    // Isolation.mounts.
    c.Expect(ReadAll("/data/ro/kept") == "kept", "/data/ro/kept readable");
    c.Expect(WriteRefused("/data/ro/new", EROFS), "/data/ro read-only");
    c.Expect(CanWrite("/data/rw/new"), "/data/rw writable");
    c.Expect(ReadAll("/etc-extra/config.txt") == "config", "file bind");
    c.Expect(WriteRefused("/etc-extra/config.txt", EROFS),
             "file bind read-only");
    c.Expect(CanWrite("/scratch/new"), "/scratch tmpfs writable");
    // /proc of the task's pid namespace, masked.
    char self[32] = {0};
    c.Expect(readlink("/proc/self", self, sizeof(self) - 1) > 0 &&
                 std::string(self) == "1",
             "/proc/self is 1 (the pid namespace's own proc)");
    if (has_kcore) c.Expect(IsDevNull("/proc/kcore"), "/proc/kcore masked");
    if (has_keys) c.Expect(IsDevNull("/proc/keys"), "/proc/keys masked");
    if (has_acpi) c.Expect(EmptyDir("/proc/acpi"), "/proc/acpi masked");
    c.Expect(access("/proc/sys/kernel/hostname", W_OK) != 0 && errno == EROFS,
             "/proc/sys read-only");
    if (has_sysrq) {
      c.Expect(ReadOnlyMount("/proc/sysrq-trigger"),
               "/proc/sysrq-trigger read-only");
    }
    // /sys read-only, cgroups of the task only.
    c.Expect(Exists("/sys/kernel") && ReadOnlyMount("/sys"), "/sys read-only");
    if (has_firmware)
      c.Expect(EmptyDir("/sys/firmware"), "/sys/firmware masked");
    c.Expect(ReadOnlyMount("/sys/fs/cgroup"), "/sys/fs/cgroup read-only");
    for (const std::string& name : cgroup_hierarchies) {
      const std::string path = "/sys/fs/cgroup/" + name;
      c.Expect(ReadOnlyMount(path), path + " read-only");
      const std::string procs = ReadAll(path + "/cgroup.procs");
      c.Expect(("\n" + procs).find("\n1\n") != std::string::npos,
               path + "/cgroup.procs lists the task's init as 1: " + procs);
    }
    // A minimal /dev.
    const int null = open("/dev/null", O_RDWR);
    char byte;
    c.Expect(null >= 0 && write(null, "x", 1) == 1 && read(null, &byte, 1) == 0,
             "/dev/null works");
    if (null >= 0) close(null);
    c.Expect(IsDevNull("/dev/null"), "/dev/null is 1:3");
    for (const std::string& name : Entries("/dev")) {
      struct stat st;
      c.Expect(
          lstat(("/dev/" + name).c_str(), &st) == 0 && !S_ISBLK(st.st_mode),
          "/dev/" + name + " is no block device");
    }
    for (const std::string& name : host_block_devices) {
      c.Expect(!Exists("/dev/" + name), "/dev/" + name + " absent");
    }
    c.Expect(Exists("/dev/pts/ptmx"), "/dev/pts/ptmx");
    c.Expect(IsSymlink("/dev/ptmx"), "/dev/ptmx a symlink");
    c.Expect(CanWrite("/dev/shm/new"), "/dev/shm writable");
    c.Expect(Exists("/dev/mqueue"), "/dev/mqueue");
    c.Expect(IsSymlink("/dev/fd"), "/dev/fd a symlink");
    c.Expect(!Exists("/dev/core"), "no /dev/core");
  });
  ExpectPassed(outcome);
  EXPECT_TRUE(Exists(temp_.path() + "/task/written"));
  EXPECT_TRUE(Exists(rw_source + "/new"));
  EXPECT_FALSE(Exists(ro_source + "/new"));
  EXPECT_EQ(ReadAll(temp_.path() + "/task/.berth/secret"), "secret");
  EXPECT_TRUE(Exists(temp_.path() + "/task/logs/stdout.log"));
}

TEST_F(RootSetupTest, ReadOnlyRootfsKeepsTmpWritable) {
  RootSpec spec = HostDirsRoot();
  spec.readonly_rootfs = true;
  const Outcome outcome = RunIsolated([&](Checks& c) {
    if (!Enter(spec, c)) return;
    c.Expect(WriteRefused("/new-file", EROFS), "/ read-only");
    c.Expect(mkdir("/new-dir", 0755) != 0 && errno == EROFS,
             "mkdir in / refused");
    c.Expect(CanWrite("/tmp/new"), "/tmp writable");
    c.Expect(!Exists("/berth"), "no task dir asked, no /berth");
  });
  ExpectPassed(outcome);
}

// An image's symlinks, absolute or climbing with "..", are resolved inside
// the root: mounts and the directories made for them stay there.
TEST_F(RootSetupTest, SymlinksInAnImageStayInsideTheRoot) {
  const std::string victim = temp_.Make("victim");
  const std::string victim_proc = temp_.Make("victim-proc");
  temp_.Make("victim-up");
  const std::string rootfs = temp_.Make("rootfs");
  ASSERT_EQ(symlink(victim.c_str(), (rootfs + "/evil").c_str()), 0);
  ASSERT_EQ(symlink("../victim-up", (rootfs + "/up").c_str()), 0);
  ASSERT_EQ(symlink(victim_proc.c_str(), (rootfs + "/proc").c_str()), 0);
  const std::string source = temp_.Make("source");
  temp_.Write("source/marker", "marker");

  RootSpec spec;
  spec.enabled = true;
  spec.mount_point = temp_.Make("root");
  spec.rootfs = rootfs;
  spec.mounts = {
      {MountSpec::Kind::kBind, source, "/evil/deeper/bound", true},
      {MountSpec::Kind::kTmpfs, "", "/up/scratch", false},
  };
  const Outcome outcome = RunIsolated([&](Checks& c) {
    if (!Enter(spec, c)) return;
    c.Expect(ReadAll("/evil/deeper/bound/marker") == "marker",
             "the bind, through the image's symlink");
    c.Expect(ReadAll(victim + "/deeper/bound/marker") == "marker",
             "the bind where the symlink points inside the root");
    c.Expect(CanWrite("/up/scratch/new") && Exists("/victim-up/scratch/new"),
             "the tmpfs at /victim-up/scratch inside the root");
    char self[32] = {0};
    c.Expect(readlink("/proc/self", self, sizeof(self) - 1) > 0 &&
                 std::string(self) == "1",
             "proc mounted through the image's /proc symlink");
  });
  ExpectPassed(outcome);
  EXPECT_TRUE(Entries(victim).empty()) << victim << " touched on the host";
  EXPECT_TRUE(Entries(victim_proc).empty()) << victim_proc << " touched";
  EXPECT_TRUE(Entries(temp_.path() + "/victim-up").empty());
}

TEST_F(RootSetupTest, AFailureNamesTheStepAndPath) {
  RootSpec spec = HostDirsRoot();
  const std::string missing = temp_.path() + "/no-such-source";
  spec.mounts = {{MountSpec::Kind::kBind, missing, "/data", false}};
  const Outcome outcome = RunIsolated([&](Checks& c) {
    std::string what;
    int error_number = 0;
    c.Expect(!SetUpRoot(spec, &what, &error_number), "SetUpRoot failed");
    c.Expect(what.find(missing) != std::string::npos &&
                 what.find("/data") != std::string::npos,
             "what names the source and destination: " + what);
    errno = error_number;
    c.Expect(error_number == ENOENT, "errno ENOENT");
  });
  ExpectPassed(outcome);
}

TEST_F(RootSetupTest, PrivilegedSeesTheHostsDevicesAndWritableSys) {
  RootSpec spec = HostDirsRoot();
  spec.privileged = true;
  const Outcome outcome = RunIsolated([&](Checks& c) {
    const std::vector<std::string> host_dev = Entries("/dev");
    const bool has_kcore = Exists("/proc/kcore");
    if (!Enter(spec, c)) return;
    const std::vector<std::string> dev = Entries("/dev");
    c.Expect(std::set<std::string>(dev.begin(), dev.end()) ==
                 std::set<std::string>(host_dev.begin(), host_dev.end()),
             "/dev is the host's");
    if (has_kcore) c.Expect(!IsDevNull("/proc/kcore"), "/proc/kcore unmasked");
    c.Expect(!ReadOnlyMount("/sys"), "/sys writable");
  });
  ExpectPassed(outcome);
}

}  // namespace
}  // namespace berth::driver_common
