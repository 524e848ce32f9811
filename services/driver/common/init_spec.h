// What a built-in driver tells berth-task-init: the task's command (the
// sandbox driver's: berth-agent), identity, namespaces, cgroup and log files.
// The driver encodes it into a memfd that becomes the init's fd 3; the init
// decodes it. No absl, glog or protobuf here: the init links nothing but libc
// and libstdc++, statically, to stay small.
//
// Encoding: a sequence of records "KEY LENGTH:VALUE", LENGTH the decimal
// byte count of VALUE, so that no byte of a value (a NUL, a newline, a
// space) can end a record early or forge another: a value is taken whole or
// the spec is refused. ResolveTaskSpec (task_spec.h) still refuses NUL bytes
// in what comes from a TaskConfig, since argv and environ cannot hold them.
// Lists are repeated keys, in order.

#ifndef SERVICES_DRIVER_COMMON_INIT_SPEC_H_
#define SERVICES_DRIVER_COMMON_INIT_SPEC_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace berth::driver_common {

// The file descriptors berth-task-init is started with, besides 0, 1, 2.
inline constexpr int kInitSpecFd = 3;    // the encoded InitSpec (read to EOF)
inline constexpr int kInitReportFd = 4;  // run: "ok" or an error, then closed;
                                         // exec: the exit record
inline constexpr int kInitTargetFd = 5;  // exec: a pidfd of the task's init
// run: where StartInit puts the read end of its go socket (InitSpec::go_fd).
inline constexpr int kInitGoFd = 5;
// run: descriptors the driver passes (StartInit's `passed_fds`) are 6, 7...
// in the init; the *_fd fields below name them.
inline constexpr int kInitFirstPassedFd = 6;

// A mount made in the task's root (Isolation.mounts, resolved).
struct MountSpec {
  enum class Kind { kBind, kTmpfs };
  Kind kind = Kind::kBind;
  // kBind: absolute host path.
  std::string source;
  // Absolute path inside the task's root.
  std::string destination;
  bool read_only = false;
  // kBind in a task with a user namespace: a detached mount tree of
  // `source` (open_tree, attributes already set) that the init attaches
  // instead of reaching `source` by path, which its ids may not search.
  int source_fd = -1;
};

// Where a task's directory appears inside its root.
inline constexpr char kTaskDirInRoot[] = "/berth/task";

// The task's own root, which the init assembles in a private mount namespace
// and enters with pivot_root (see root_setup.h).
struct RootSpec {
  // False: the task keeps the host's root (mounts are still private).
  bool enabled = false;
  // An empty host directory over which the root is assembled (mounts made
  // there stay in the task's mount namespace; one directory serves all).
  std::string mount_point;
  // An image's root file system; empty for a tmpfs root with `host_dirs`.
  std::string rootfs;
  // Host directories bound read-only into an imageless root, e.g. /usr. A
  // path that is a symbolic link on the host (/bin -> usr/bin) becomes the
  // same link; one that does not exist is skipped.
  std::vector<std::string> host_dirs;
  bool readonly_rootfs = false;
  // The task's directory on the host, bound at kTaskDirInRoot; its `.berth`
  // and `logs` (the driver's and the node's) are covered by empty read-only
  // directories so that the task can neither read nor move them.
  std::string task_dir;
  // As MountSpec::source_fd, for `rootfs` and `task_dir`.
  int rootfs_fd = -1;
  int task_dir_fd = -1;
  std::vector<MountSpec> mounts;
  // Every device, /sys writable, nothing of /proc masked.
  bool privileged = false;
  // Mount /sys/fs/cgroup showing the task's own cgroup only (the init has
  // unshared a cgroup namespace after joining the task's cgroups).
  bool cgroup_namespace = true;
};

// What the task's program keeps of root's privileges (see privileges.h).
struct PrivilegeSpec {
  // False: nothing is dropped (the old behaviour; the exec helper of a task
  // started before isolation).
  bool enabled = false;
  // Capabilities (bit N = capability N) in the bounding, permitted,
  // effective and inheritable sets when the user is root; a non-root user
  // keeps none. Ambient is always empty.
  uint64_t capabilities = 0;
  bool no_new_privs = true;
  // A compiled seccomp filter: struct sock_filter[] as raw bytes; empty for
  // none. Loaded last, just before execve.
  std::string seccomp_filter;
};

// One resource limit the program gets (setrlimit before it executes).
struct RlimitSpec {
  // RLIMIT_NOFILE, RLIMIT_NPROC, ... (sys/resource.h).
  int resource = 0;
  // RLIM_INFINITY (UINT64_MAX) is unlimited.
  uint64_t soft = 0;
  uint64_t hard = 0;
};

struct InitSpec {
  // Absolute path of the program (already resolved on the task's PATH).
  std::string path;
  // argv, argv[0] included.
  std::vector<std::string> args;
  // environ, "NAME=value".
  std::vector<std::string> env;
  uid_t uid = 0;
  gid_t gid = 0;
  // Supplementary groups.
  std::vector<gid_t> groups;
  // Working directory of the command.
  std::string cwd;
  // exec: fd 0 is a terminal, made the command's controlling terminal.
  // run: the program gets a terminal of its own (a pty of the task's
  // devpts) as its controlling terminal, stdin, stdout and stderr; the init
  // copies its output into stdout.log (TaskConfig.tty).
  bool tty = false;
  // Resource limits set in the program (run and exec) before it executes.
  std::vector<RlimitSpec> rlimits;
  // What the program keeps of root's privileges (run and exec).
  PrivilegeSpec privileges;
  // exec: the task is in a user namespace of its own, which the helper
  // joins too (with the others, after the cgroups), becoming its root
  // before the command takes `uid` and `gid` (ids inside the namespace).
  bool join_user_namespace = false;

  // ---- run only ----
  // Host name in the task's UTS namespace; empty keeps the host's.
  std::string hostname;
  // Network namespace to join; empty stays in the host's.
  std::string netns;
  // cgroup.procs files to join before anything is started (also exec).
  std::vector<std::string> cgroup_procs;
  // Directory of stdout.log and stderr.log and their rotations.
  std::string log_dir;
  uint64_t log_max_bytes = 10 << 20;
  uint32_t log_max_files = 4;
  // Where the init records how the task ended (see ExitRecord).
  std::string exit_file;
  // Open directories to use for `log_dir` and the directory of `exit_file`
  // (a task in a user namespace: its init may not search their parents).
  int log_dir_fd = -1;
  int exit_dir_fd = -1;
  // The task's root (run; exec joins the task's mount namespace).
  RootSpec root;
  // The program's stdin is a pipe that attached callers write to
  // (TaskConfig.stdin_open); else /dev/null (or, with `tty`, the terminal,
  // which only attached callers can write to when this is set).
  bool stdin_open = false;
  // A listening attach socket (a passed descriptor) the init serves with an
  // AttachHub (attach_hub.h); -1 for none.
  int attach_fd = -1;
  // The driver's go (StartInit sets it to kInitGoFd): the init reads one
  // byte there before it starts the program, which it never starts if it
  // reads end of file instead (the driver failed to record its pid, or was
  // killed before it could). -1: start without waiting.
  int go_fd = -1;
};

std::string EncodeInitSpec(const InitSpec& spec);

// False with `*error` naming the key at fault when `data` is malformed.
bool DecodeInitSpec(const std::string& data, InitSpec* spec,
                    std::string* error);

// How the task's main process ended, as the init records it in
// InitSpec::exit_file (written to a temporary file and renamed into place).
struct ExitRecord {
  int exit_code = 0;
  int signal = 0;
  // CLOCK_REALTIME when the init saw the exit.
  int64_t exited_at_unix_nanos = 0;
};

// "berth-exit v1 CODE SIGNAL NANOS\n".
std::string EncodeExitRecord(const ExitRecord& record);
// An exit record is never longer than this; a reader reads at most this many
// bytes and refuses anything longer.
inline constexpr size_t kMaxExitRecordBytes = 128;
bool DecodeExitRecord(const std::string& data, ExitRecord* record);

// What the init says on kInitReportFd, one line:
//   "started\n"           run: the task's program was executed;
//   "exit STATUS\n"       exec: the command ended with this raw wait status;
//   "error ERRNO WHAT\n"  nothing was started; WHAT names the step and path.
struct InitReport {
  enum class Kind { kStarted, kExited, kFailed };
  Kind kind = Kind::kFailed;
  int wait_status = 0;
  int error_number = 0;
  std::string what;
};
std::string EncodeInitReport(const InitReport& report);
bool DecodeInitReport(const std::string& data, InitReport* report);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_INIT_SPEC_H_
