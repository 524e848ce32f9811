// What StartTask is asked, checked and resolved before anything is made: the
// program found on the task's PATH, the user and groups looked up (in an
// image's own /etc/passwd and /etc/group for a task on one), the
// working directory placed inside the task directory, the limits and the
// network checked. Every error is INVALID_ARGUMENT (or FAILED_PRECONDITION
// for what the node must fix) naming the task and the field, e.g.
//   task web-1: driver_config.command: "nginx" is not on the task's PATH
//   (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)

#ifndef SERVICES_DRIVER_COMMON_TASK_SPEC_H_
#define SERVICES_DRIVER_COMMON_TASK_SPEC_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "services/driver/common/init_spec.h"
#include "services/driver/common/passwd.h"
#include "services/driver/common/task_cgroup.h"

namespace berth::driver_common {

// The schema of the driver_config that ResolveTaskSpec reads (command, args,
// work_dir), which both built-in drivers take.
plugin::v1::ConfigSchema DriverConfigSchema();

// The PATH a task gets when its environment has none.
inline constexpr char kDefaultPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Below this a task cannot even start its init and a shell.
inline constexpr uint64_t kMinMemoryBytes = 4 << 20;
// The init and the program.
inline constexpr uint64_t kMinPids = 2;

// The largest values a client may ask for, so that none wraps or is cut
// when converted to what the kernel takes; INVALID_ARGUMENT naming the
// field above them.
// cgroup v1 cpu.shares' maximum (runc refuses more as well).
inline constexpr uint64_t kMaxCpuShares = 262144;
// A million cores: the CFS quota (millicores * 100 microseconds per 100 ms
// period) stays far below the kernel's 2^44 - 1 microseconds and int64.
inline constexpr uint64_t kMaxCpuMillicores = 1000000000;
// What memory.max and memory.limit_in_bytes can hold (the kernel counts
// pages in a long; more is silently taken as no limit).
inline constexpr uint64_t kMaxMemoryBytes = 0x7fffffffffffffffULL;
// pids.max takes less than the kernel's PIDS_MAX (PID_MAX_LIMIT + 1).
inline constexpr uint64_t kMaxPids = 4194304;
// Rotated files kept per stream: berth-node's log reader reads no more (and
// each rotation renames every one of them).
inline constexpr uint32_t kMaxLogFiles = 1024;

inline constexpr uint64_t kDefaultLogFileBytes = 10 << 20;
inline constexpr uint32_t kDefaultLogFiles = 4;

struct TaskSpec {
  std::string id;
  // Absolute path of the program; args[0] is the command as given.
  std::string path;
  std::vector<std::string> args;
  // "NAME=value", TaskConfig.env plus PATH, HOME and BERTH_* where unset.
  std::vector<std::string> env;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  // Absolute; inside task_dir.
  std::string task_dir;
  std::string work_dir;
  // The working directory as the program sees it (in its own root, the task
  // directory is at kTaskDirInRoot).
  std::string cwd;
  // Empty for the host's network namespace.
  std::string netns_path;
  // TaskConfig.hostname, else the task's name, else its id.
  std::string hostname;
  // TaskConfig.rlimits resolved.
  std::vector<RlimitSpec> rlimits;
  CgroupLimits limits;
  uint64_t log_max_bytes = kDefaultLogFileBytes;
  uint32_t log_max_files = kDefaultLogFiles;
  // TaskConfig.isolation resolved (root.mount_point is the driver's to set).
  RootSpec root;
  // isolation.rootfs_idmapped: root.rootfs already shows the task's ids (an
  // image snapshot over idmapped layers); bound as it is, never idmapped.
  bool rootfs_idmapped = false;
  PrivilegeSpec privileges;
};

// The host directories an imageless task's root gets, read-only (a driver
// flag may change them, as Nomad's chroot_env does).
inline constexpr const char* kDefaultHostDirs[] = {
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/usr", "/etc"};

// What a driver puts in every task's isolation.
struct IsolationDefaults {
  // Each task gets its own root, capabilities, no_new_privs and seccomp.
  // False keeps the host's root and root's privileges (Isolation ignored).
  bool own_root = false;
  // Host directories bound read-only into an imageless root.
  std::vector<std::string> host_dirs{std::begin(kDefaultHostDirs),
                                     std::end(kDefaultHostDirs)};
  // The default seccomp filter, compiled once (DefaultSeccompFilter).
  std::string seccomp_filter;
};

// Where a task's files go when the node gives it no directory.
std::string DefaultTaskDir(const std::string& state_dir,
                           const std::string& task_id);

// Checks and resolves `task` (whose driver_config passed the schema).
// `state_dir` is the driver's, for a task without task_dir.
absl::StatusOr<TaskSpec> ResolveTaskSpec(
    const driver::v1::TaskConfig& task, const std::string& state_dir,
    const IsolationDefaults& defaults = IsolationDefaults());

// What a driver whose IsolationDefaults::own_root is set enforces of
// TaskConfig.isolation (ResolveIsolation below, the init's root_setup and
// privileges): every part, user namespaces included.
driver::v1::IsolationCapabilities OwnRootIsolationCapabilities();

// TaskConfig.isolation into spec->root and spec->privileges, given the
// driver's defaults; INVALID_ARGUMENT naming the field (isolation.<...>).
absl::Status ResolveIsolation(const driver::v1::Isolation& isolation,
                              const IsolationDefaults& defaults,
                              TaskSpec* spec);

// TaskConfig.rlimits resolved: each type one of getrlimit(2)'s RLIMIT_*
// names, at most once, soft at most hard; INVALID_ARGUMENT naming
// rlimits[i].type (or .soft) otherwise.
absl::StatusOr<std::vector<RlimitSpec>> ResolveRlimits(
    const google::protobuf::RepeatedPtrField<driver::v1::Rlimit>& rlimits);

// A task id usable as a file and cgroup name: 1-128 of [A-Za-z0-9._-], not
// starting with '.'. INVALID_ARGUMENT naming task.id otherwise.
absl::Status CheckTaskId(const std::string& id);

// The user `user` names (a name or a number) on the host (its NSS, for a
// task without an image): uid, primary gid, supplementary groups and home.
// An unknown name is INVALID_ARGUMENT naming `field`; a uid without an
// entry gets kNoGroup. A task on an image looks its user up in the image's
// own files instead (ResolveUserInFiles, passwd.h), as ResolveTaskSpec does.
absl::StatusOr<ResolvedUser> ResolveUser(const std::string& user,
                                         const std::string& field);
absl::StatusOr<gid_t> ResolveGroup(const std::string& group,
                                   const std::string& field);

// `command` as execve needs it: a path with a '/' is taken as it is
// (relative to `work_dir`), a bare name is looked up on `path_env`. The file
// must exist, be a regular file and be executable.
// `stat_in_task`, when given, stats a path as the task will see it (see
// StatInRoot); the path returned is the task's.
absl::StatusOr<std::string> FindProgram(
    const std::string& command, const std::string& path_env,
    const std::string& work_dir, const std::string& field,
    const std::function<absl::StatusOr<struct stat>(const std::string&)>&
        stat_in_task = nullptr);

// Where on the host the task's `path` (in its own root, spec.root) is: a
// bind mount's source, the task directory, the image root or a read-only
// host directory; "" when it is in none (or in a tmpfs).
std::string HostPathInRoot(const TaskSpec& spec, const std::string& path);

// stat(2) of the task's `path` as the task will see it: a link inside an
// image, a bind source or the task directory resolves inside what holds it
// (openat2 RESOLVE_IN_ROOT), never on the host, so that root is never led
// to a host path by content a task or an image controls. NOT_FOUND naming
// the path when the task's root has nothing there.
absl::StatusOr<struct stat> StatInRoot(const TaskSpec& spec,
                                       const std::string& path);

// The content of the regular file at the task's `path`, found as StatInRoot
// finds it (a link resolves inside what holds it) and opened only once it
// is known to be a regular file (a FIFO or a device there is never
// opened): NOT_FOUND when the task's root has nothing there,
// FAILED_PRECONDITION when it is not a regular file, OUT_OF_RANGE when it
// holds more than `max_bytes`.
absl::StatusOr<std::string> ReadFileInRoot(const TaskSpec& spec,
                                           const std::string& path,
                                           size_t max_bytes);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_TASK_SPEC_H_
