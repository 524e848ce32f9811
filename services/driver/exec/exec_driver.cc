#include "services/driver/exec/exec_driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/beneath.h"
#include "base/process.h"
#include "base/proto_time.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "plugins/sdk/config.h"
#include "plugins/sdk/signals.h"
#include "services/common/remove_tree.h"
#include "services/common/stats/host_info.h"
#include "services/common/status.h"
#include "services/driver/common/attach_client.h"
#include "services/driver/common/exit_file.h"
#include "services/driver/common/idmap_mount.h"
#include "services/driver/common/launcher.h"
#include "services/driver/common/security.h"
#include "services/driver/common/start_record.h"
#include "services/driver/common/task_cgroup.h"
#include "services/driver/common/task_dir.h"
#include "services/driver/common/task_spec.h"
#include "services/driver/common/user_namespace.h"
#include "services/driver/exec/exec_session.h"
#include "services/driver/exec/exec_state.pb.h"

namespace berth::exec_driver {

namespace dv1 = ::berth::driver::v1;
using ::berth::base::PidfdOpen;
using ::berth::base::PidfdSendSignal;
using ::berth::base::ReadProcStat;
using ::berth::driver_common::CheckIdentityMapped;
using ::berth::driver_common::CheckTaskId;
using ::berth::driver_common::DriverConfigSchema;
using ::berth::driver_common::DriverStateDir;
using ::berth::driver_common::ExitRecord;
using ::berth::driver_common::ExitRecordPath;
using ::berth::driver_common::GiveTaskDirToNamespace;
using ::berth::driver_common::InitSpec;
using ::berth::driver_common::MapToHost;
using ::berth::driver_common::OpenForUserNamespace;
using ::berth::driver_common::PrepareTaskDirectories;
using ::berth::driver_common::ReadExitRecord;
using ::berth::driver_common::ReadStartRecord;
using ::berth::driver_common::RemoveStartRecord;
using ::berth::driver_common::ResolveTaskSpec;
using ::berth::driver_common::ResolveUserNamespace;
using ::berth::driver_common::RootSpec;
using ::berth::driver_common::StartedInit;
using ::berth::driver_common::StartInit;
using ::berth::driver_common::TaskCgroup;
using ::berth::driver_common::TaskSpec;
using ::berth::driver_common::UserNamespaceMaps;
using ::berth::driver_common::WantsUserNamespace;
using ::berth::driver_common::WriteStartRecord;

namespace {

constexpr uint32_t kStateVersion = 1;

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string DescribeExit(const dv1::ExitResult& result) {
  if (result.oom_killed()) return "was killed for lack of memory (OOM)";
  if (result.signal() != 0) {
    return absl::StrCat("was killed by ", plugin::SignalName(result.signal()));
  }
  return absl::StrCat("exited with code ", result.exit_code());
}

std::string LayoutName(stats::v1::CgroupLayout layout) {
  switch (layout) {
    case stats::v1::CGROUP_LAYOUT_V1:
      return "v1";
    case stats::v1::CGROUP_LAYOUT_V2:
      return "v2";
    case stats::v1::CGROUP_LAYOUT_HYBRID:
      return "hybrid";
    default:
      return "none";
  }
}

// The status of a failed init start, naming the field at fault.
absl::Status NameTheField(const std::string& task_id,
                          const absl::Status& status) {
  const absl::string_view message = status.message();
  std::string field;
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  if (absl::StartsWith(message, "executing")) {
    field = "driver_config.command";
  } else if (absl::StartsWith(message, "changing to working directory")) {
    field = "driver_config.work_dir";
  } else if (absl::StartsWith(message, "setting user") ||
             absl::StartsWith(message, "setting group") ||
             absl::StartsWith(message, "setting supplementary")) {
    field = "user";
  } else if (absl::StrContains(message, "network namespace")) {
    field = "network.namespace_path";
  } else if (absl::StartsWith(message, "setting resource limit")) {
    field = "rlimits";
  } else {
    code = absl::StatusCode::kFailedPrecondition;
  }
  return absl::Status(
      code,
      absl::StrCat("task ", task_id, ": ",
                   field.empty() ? "" : absl::StrCat(field, ": "), message));
}

// Host directories never idmapped for a task in a user namespace: they hold
// the host's secrets (/etc/shadow, /etc/ssl/private), which the task's root
// cannot read while they show as nobody's (unlike a task without one, which
// is the host's root).
constexpr const char* kHostDirsNotIdmapped[] = {"/etc"};

// Whether the task's root could make a read-only bind writable again: the
// flags of a tree the init attaches are not locked (idmap_mount.h).
bool MayRemount(const InitSpec& init) {
  return init.root.privileged || !init.privileges.enabled ||
         (init.privileges.capabilities & (uint64_t{1} << CAP_SYS_ADMIN)) != 0;
}

// For a task in a user namespace, after OpenForUserNamespace: trees that
// show root-owned files as its root's, idmapped through a namespace with
// the task's maps (made here: only host root can idmap the host's file
// systems, and the task's namespace does not exist yet), in `passed`:
//   - the image (root.rootfs), so that its root owns its files and can
//     make its mount points and write there, files stored with the image's
//     own ids; unless it shows the task's ids already: `rootfs_idmapped`
//     (isolation.rootfs_idmapped, an image snapshot over idmapped layers:
//     an overlay cannot be idmapped itself), or its top owned by the task's
//     mapped root (an image shifted on disk to the task's range);
//   - each read-only host directory (root.host_dirs, not a link, not in
//     kHostDirsNotIdmapped), unless the task could remount it writable and
//     write the host's files as their owner: moved to the front of
//     root.mounts as a read-only bind (one on a file system without
//     idmapped mounts stays as it is, its files nobody's).
// Writable binds are not idmapped: what the task writes there is owned by
// its mapped ids. Costs nothing to a task that has neither.
absl::Status IdmapRootForUserNamespace(InitSpec* init,
                                       const UserNamespaceMaps& maps,
                                       bool rootfs_idmapped,
                                       std::vector<base::UniqueFd>* passed) {
  RootSpec& root = init->root;
  if (!root.enabled) return absl::OkStatus();
  const uint32_t root_uid = *MapToHost(maps.uid, 0);
  struct stat st;
  const bool idmap_image = !root.rootfs.empty() && !rootfs_idmapped &&
                           stat(root.rootfs.c_str(), &st) == 0 &&
                           st.st_uid != root_uid;
  std::vector<std::string> host_dirs;
  if (root.rootfs.empty() && !MayRemount(*init)) {
    for (const std::string& dir : root.host_dirs) {
      if (absl::c_linear_search(kHostDirsNotIdmapped, dir)) continue;
      if (lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        host_dirs.push_back(dir);
      }
    }
  }
  if (!idmap_image && host_dirs.empty()) return absl::OkStatus();
  std::string what;
  int err = 0;
  const base::UniqueFd userns(driver_common::MakeUserNamespace(
      driver_common::FormatIdMap(maps.uid),
      driver_common::FormatIdMap(maps.gid), &what, &err));
  if (!userns.valid()) return absl::ErrnoToStatus(err, what);
  auto pass = [&](base::UniqueFd fd) {
    passed->push_back(std::move(fd));
    return driver_common::kInitFirstPassedFd +
           static_cast<int>(passed->size()) - 1;
  };
  if (idmap_image) {
    base::UniqueFd tree(driver_common::OpenBindTree(
        root.rootfs, 0, /*recursive=*/true, &what, &err, userns.get()));
    if (!tree.valid()) {
      return absl::Status(
          err == EINVAL ? absl::StatusCode::kFailedPrecondition
                        : absl::ErrnoToStatus(err, "").code(),
          absl::StrCat("isolation.rootfs: ", what, ": ", strerror(err),
                       err == EINVAL
                           ? " (its file system has no idmapped mounts; an "
                             "image owned by the task's mapped ids runs "
                             "without)"
                           : ""));
    }
    // In place of the plain tree OpenForUserNamespace made.
    if (root.rootfs_fd >= driver_common::kInitFirstPassedFd &&
        root.rootfs_fd - driver_common::kInitFirstPassedFd <
            static_cast<int>(passed->size())) {
      (*passed)[root.rootfs_fd - driver_common::kInitFirstPassedFd] =
          std::move(tree);
    } else {
      root.rootfs_fd = pass(std::move(tree));
    }
  }
  std::vector<driver_common::MountSpec> mounts;
  for (const std::string& dir : host_dirs) {
    base::UniqueFd tree(driver_common::OpenBindTree(
        dir, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        /*recursive=*/true, &what, &err, userns.get()));
    if (!tree.valid()) {
      VLOG(1) << what << ": " << strerror(err) << "; bound as it is";
      continue;
    }
    driver_common::MountSpec mount;
    mount.kind = driver_common::MountSpec::Kind::kBind;
    mount.source = dir;
    mount.destination = dir;
    mount.read_only = true;
    mount.source_fd = pass(std::move(tree));
    mounts.push_back(std::move(mount));
    root.host_dirs.erase(absl::c_find(root.host_dirs, dir));
  }
  // First: the task's own mounts may lie below them.
  root.mounts.insert(root.mounts.begin(), mounts.begin(), mounts.end());
  if (passed->size() > static_cast<size_t>(driver_common::kMaxPassedFds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "isolation.mounts: at most ",
        driver_common::kMaxPassedFds - 4 - static_cast<int>(mounts.size()),
        " binds in a task with a user namespace"));
  }
  return absl::OkStatus();
}

}  // namespace

struct ExecDriver::Task {
  std::string id;
  dv1::TaskConfig config;
  ExecTaskState state;
  TaskCgroup cgroup;
  pid_t init_pid = -1;
  // The init is this process's child (started, not recovered): reap it.
  bool our_child = false;
  absl::Time started_at;
  // The driver state directory holding its start record.
  std::string record_dir;

  mutable absl::Mutex mu;
  base::UniqueFd pidfd ABSL_GUARDED_BY(mu);
  bool exited ABSL_GUARDED_BY(mu) = false;
  dv1::ExitResult result ABSL_GUARDED_BY(mu);
  absl::Time completed_at ABSL_GUARDED_BY(mu);

  driver_common::InProcessStats in_process_stats;

  Task(std::string id, TaskCgroup cgroup)
      : id(std::move(id)), cgroup(std::move(cgroup)) {}
  bool IsExited() const {
    absl::MutexLock lock(&mu);
    return exited;
  }
  // A dup of the init's pidfd (for a call that outlives the lock), or none.
  base::UniqueFd DupPidfd() const {
    absl::MutexLock lock(&mu);
    return base::UniqueFd(pidfd.valid() ? fcntl(pidfd.get(), F_DUPFD_CLOEXEC, 0)
                                        : -1);
  }
};

ExecDriver::ExecDriver(ExecDriverOptions options)
    : options_(std::move(options)),
      mounts_([this]() -> stats::CgroupMounts {
        absl::StatusOr<stats::CgroupMounts> mounts =
            stats::DetectCgroupLayout(options_.cgroup_root);
        return mounts.ok() ? *mounts : stats::CgroupMounts();
      }()),
      mounts_status_(stats::DetectCgroupLayout(options_.cgroup_root).status()),
      cpu_mhz_(stats::HostCpuMhz("/proc").value_or(0)),
      stats_(mounts_, cpu_mhz_, options_.stats_socket),
      state_dir_(options_.state_dir) {
  if (!options_.state_dir.empty()) {
    driver_common::RemoveStartRecordLeftovers(options_.state_dir);
  }
  isolation_defaults_.own_root = true;
  isolation_defaults_.host_dirs = options_.root_host_dirs;
  const absl::StatusOr<std::string>& filter =
      driver_common::DefaultSeccompFilterOnce();
  if (filter.ok()) {
    isolation_defaults_.seccomp_filter = *filter;
  } else {
    seccomp_status_ = filter.status();
    LOG(ERROR) << "the default seccomp filter: " << seccomp_status_
               << "; tasks that do not ask for seccomp=unconfined are refused";
  }
  PublishFingerprint(Probe());
}

ExecDriver::~ExecDriver() = default;

plugin::DriverInfo ExecDriver::Info() const {
  return {kDriverName, kDriverVersion,
          "runs tasks as processes in their own namespaces and cgroup"};
}

plugin::v1::ConfigSchema ExecDriver::TaskConfigSchema() const {
  return DriverConfigSchema();
}

absl::Status ExecDriver::SetConfig(const google::protobuf::Struct&,
                                   const plugin::v1::NodeContext& node) {
  absl::StatusOr<std::string> dir = DriverStateDir(node, kDriverName);
  if (!dir.ok()) return dir.status();
  if (!dir->empty() && *dir != state_dir()) {
    driver_common::RemoveStartRecordLeftovers(*dir);
    absl::MutexLock lock(&mu_);
    state_dir_ = *std::move(dir);
  }
  stats_.SetSocket(node.stats_socket());
  PublishFingerprint(Probe());
  return absl::OkStatus();
}

dv1::DriverCapabilities ExecDriver::Capabilities() const {
  dv1::DriverCapabilities capabilities;
  capabilities.set_send_signals(true);
  capabilities.set_exec(true);
  capabilities.set_exec_streaming(true);
  capabilities.set_exec_tty(true);
  capabilities.set_fs_isolation(dv1::FS_ISOLATION_CHROOT);
  capabilities.add_network_isolation_modes(dv1::NETWORK_ISOLATION_MODE_HOST);
  capabilities.add_network_isolation_modes(dv1::NETWORK_ISOLATION_MODE_GROUP);
  capabilities.set_recover(true);
  capabilities.set_stats(true);
  capabilities.set_attach(true);
  capabilities.set_rlimits(true);
  *capabilities.mutable_isolation() =
      driver_common::OwnRootIsolationCapabilities();
  return capabilities;
}

dv1::FingerprintResponse ExecDriver::Probe() const {
  dv1::FingerprintResponse fingerprint;
  auto& attributes = *fingerprint.mutable_attributes();
  struct utsname uts;
  if (uname(&uts) == 0) attributes["kernel.version"] = uts.release;
  attributes["cgroup.layout"] = LayoutName(mounts_.layout);
  attributes["cgroup.root"] = options_.cgroup_root;
  attributes["driver.exec.init"] = options_.init_path;

  std::vector<std::string> namespaces, missing_namespaces;
  for (const char* ns : {"ipc", "mnt", "net", "pid", "uts"}) {
    struct stat st;
    (stat(absl::StrCat("/proc/self/ns/", ns).c_str(), &st) == 0
         ? namespaces
         : missing_namespaces)
        .push_back(ns);
  }
  attributes["namespaces"] = absl::StrJoin(namespaces, ",");

  std::vector<std::string> controllers, missing_controllers;
  std::string v2_controllers;
  if (mounts_.layout == stats::v1::CGROUP_LAYOUT_V2) {
    v2_controllers = ReadSmallFile(mounts_.v2 + "/cgroup.controllers");
  }
  for (const char* controller : {"cpu", "memory", "pids"}) {
    const bool present =
        mounts_.layout == stats::v1::CGROUP_LAYOUT_V2
            ? absl::c_linear_search(std::vector<std::string>(absl::StrSplit(
                                        v2_controllers, absl::ByAnyChar(" \n"),
                                        absl::SkipEmpty())),
                                    controller)
            : !mounts_.V1Mount(controller).empty();
    (present ? controllers : missing_controllers).push_back(controller);
  }
  attributes["cgroup.controllers"] = absl::StrJoin(controllers, ",");

  auto set = [&](dv1::HealthState health, std::string description) {
    fingerprint.set_health(health);
    fingerprint.set_health_description(std::move(description));
    return fingerprint;
  };
  if (!mounts_status_.ok()) {
    return set(dv1::HEALTH_STATE_UNDETECTED,
               absl::StrCat("cannot read the cgroup mounts: ",
                            mounts_status_.message()));
  }
  if (mounts_.layout == stats::v1::CGROUP_LAYOUT_NONE) {
    return set(dv1::HEALTH_STATE_UNDETECTED,
               absl::StrCat("no cgroup file system is mounted at or below ",
                            options_.cgroup_root));
  }
  if (!missing_namespaces.empty()) {
    return set(dv1::HEALTH_STATE_UNDETECTED,
               absl::StrCat("the kernel lacks namespaces: ",
                            absl::StrJoin(missing_namespaces, ",")));
  }
  if (!missing_controllers.empty()) {
    return set(
        dv1::HEALTH_STATE_UNHEALTHY,
        absl::StrCat("cgroup controllers missing (", LayoutName(mounts_.layout),
                     " layout at ", options_.cgroup_root,
                     "): ", absl::StrJoin(missing_controllers, ",")));
  }
  if (geteuid() != 0) {
    return set(dv1::HEALTH_STATE_UNHEALTHY,
               absl::StrCat("berth-driver-exec runs as uid ", geteuid(),
                            " and needs root to make namespaces and cgroups"));
  }
  if (access(options_.init_path.c_str(), X_OK) != 0) {
    return set(dv1::HEALTH_STATE_UNHEALTHY,
               absl::StrCat(
                   "the task init ", options_.init_path,
                   " is not executable (--init_path): ", std::strerror(errno)));
  }
  return set(dv1::HEALTH_STATE_HEALTHY,
             absl::StrCat("namespaces and cgroups (",
                          LayoutName(mounts_.layout), ") usable"));
}

std::string ExecDriver::state_dir() const {
  absl::MutexLock lock(&mu_);
  return state_dir_;
}

absl::StatusOr<std::shared_ptr<ExecDriver::Task>> ExecDriver::Find(
    const std::string& task_id) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end() || it->second == nullptr) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  }
  return it->second;
}

absl::StatusOr<dv1::StartTaskResponse> ExecDriver::StartTask(
    const dv1::TaskConfig& task) {
  absl::StatusOr<TaskSpec> spec =
      ResolveTaskSpec(task, state_dir(), isolation_defaults_);
  if (!spec.ok()) return spec.status();
  const std::string& id = spec->id;
  const std::string prefix = absl::StrCat("task ", id, ": ");
  if (absl::Status allowed =
          driver_common::CheckStartAllowed(task, state_dir(), seccomp_status_);
      !allowed.ok()) {
    return allowed;
  }
  // Mapped ids; the task's uid, gid and groups are ids inside.
  std::optional<UserNamespaceMaps> userns;
  if (WantsUserNamespace(task.isolation().user_namespace())) {
    absl::StatusOr<UserNamespaceMaps> maps =
        ResolveUserNamespace(task.isolation().user_namespace());
    absl::Status mapped =
        maps.ok()
            ? CheckIdentityMapped(*maps, spec->uid, spec->gid, spec->groups)
            : maps.status();
    if (!mapped.ok()) {
      return absl::Status(mapped.code(),
                          absl::StrCat(prefix, mapped.message()));
    }
    userns = *std::move(maps);
  }
  // One empty directory serves every task: each init assembles its root
  // over it in its own mount namespace.
  spec->root.mount_point = absl::StrCat(state_dir(), "/root");
  if (mkdir(spec->root.mount_point.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat(prefix, "making ", spec->root.mount_point));
  }
  if (!mounts_status_.ok() || mounts_.layout == stats::v1::CGROUP_LAYOUT_NONE) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "no usable cgroups at ", options_.cgroup_root, " (",
        mounts_status_.ok() ? "none mounted" : mounts_status_.message(), ")"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (tasks_.count(id) > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("task ", id, " already exists"));
    }
    tasks_[id] = nullptr;  // reserved while it starts
  }
  // Everything made from here on is undone unless the start succeeds.
  std::vector<std::function<void()>> undo;
  absl::Cleanup rollback = [&] {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
    absl::MutexLock lock(&mu_);
    tasks_.erase(id);
  };
  // As a killed driver leaves it (interrupt_start_for_test).
  auto interrupted = [&](absl::string_view where) {
    std::move(rollback).Cancel();
    absl::MutexLock lock(&mu_);
    tasks_.erase(id);
    return absl::AbortedError(
        absl::StrCat(prefix, "start interrupted (for a test) ", where));
  };

  // The handle this call answers, kept as the task's start record from
  // before its init may start until DestroyTask: a driver killed before
  // this call returns finds the run from it (InspectTask, HandleOf).
  const std::string record_dir = state_dir();
  if (record_dir.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix,
                     "the driver has no state directory (--state_dir "
                     "or the node's node.state_dir)"));
  }
  ExecTaskState state;
  state.set_cgroup_parent(options_.cgroup_parent);
  state.set_task_dir(spec->task_dir);
  state.set_work_dir(spec->cwd);
  state.set_isolated(spec->root.enabled);
  state.set_user_namespace(userns.has_value());
  state.set_uid(spec->uid);
  state.set_gid(spec->gid);
  for (gid_t group : spec->groups) state.add_groups(group);
  for (const std::string& env : spec->env) state.add_env(env);
  state.set_started_at_unix_nanos(absl::ToUnixNanos(absl::Now()));
  dv1::TaskHandle handle;
  handle.set_version(kStateVersion);
  *handle.mutable_config() = task;
  handle.set_state(dv1::TASK_STATE_RUNNING);
  auto write_record = [&]() -> absl::Status {
    handle.set_driver_state(state.SerializeAsString());
    absl::Status written = WriteStartRecord(record_dir, handle);
    if (!written.ok()) {
      return absl::Status(
          written.code(),
          absl::StrCat(prefix, "start record: ", written.message()));
    }
    return absl::OkStatus();
  };
  if (absl::Status written = write_record(); !written.ok()) return written;
  undo.push_back([record_dir, id, prefix] {
    if (absl::Status removed = RemoveStartRecord(record_dir, id);
        !removed.ok()) {
      LOG(ERROR) << prefix << "rolling back: " << removed;
    }
  });

  struct stat task_dir_stat;
  const bool task_dir_existed =
      lstat(spec->task_dir.c_str(), &task_dir_stat) == 0;
  if (absl::Status status = PrepareTaskDirectories(*spec, prefix, &undo);
      !status.ok()) {
    return status;
  }
  if (userns.has_value()) {
    if (absl::Status given =
            GiveTaskDirToNamespace(spec->task_dir, !task_dir_existed, spec->uid,
                                   spec->gid, *userns, {".berth", "logs"});
        !given.ok()) {
      return absl::Status(given.code(),
                          absl::StrCat(prefix, "task_dir: ", given.message()));
    }
  }
  const std::string private_dir = absl::StrCat(spec->task_dir, "/.berth");
  const std::string log_dir = absl::StrCat(spec->task_dir, "/logs");
  // An exit record of an earlier run would pass for this run's end after a
  // driver restart (RecoverTask) if its init never started the program.
  {
    absl::StatusOr<base::UniqueFd> private_fd = base::OpenBeneath(
        spec->task_dir, ".berth", O_PATH | O_DIRECTORY | O_NOFOLLOW);
    if (!private_fd.ok()) {
      return absl::Status(
          private_fd.status().code(),
          absl::StrCat(prefix, "task_dir: ", private_fd.status().message()));
    }
    if (unlinkat(private_fd->get(), driver_common::kExitRecordName, 0) != 0 &&
        errno != ENOENT) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat(prefix, "removing the earlier run's ",
                              ExitRecordPath(spec->task_dir)));
    }
  }

  absl::StatusOr<TaskCgroup> cgroup =
      TaskCgroup::Create(mounts_, options_.cgroup_parent, id, spec->limits);
  if (!cgroup.ok()) {
    return absl::Status(cgroup.status().code(),
                        absl::StrCat(prefix, cgroup.status().message()));
  }
  undo.push_back([cgroup = *cgroup, prefix] {
    absl::Status status = cgroup.KillAll(absl::Seconds(5));
    if (status.ok()) status = cgroup.Remove(absl::Seconds(5));
    if (!status.ok()) LOG(ERROR) << prefix << "rolling back: " << status;
  });

  const base::UniqueFd init_log(
      open(absl::StrCat(private_dir, "/init.log").c_str(),
           O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!init_log.valid()) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat(prefix, "opening ", private_dir, "/init.log"));
  }

  InitSpec init;
  init.path = spec->path;
  init.args = spec->args;
  init.env = spec->env;
  init.uid = spec->uid;
  init.gid = spec->gid;
  init.groups = spec->groups;
  init.cwd = spec->cwd;
  init.privileges = spec->privileges;
  init.root = spec->root;
  init.hostname = spec->hostname;
  init.netns = spec->netns_path;
  init.cgroup_procs = cgroup->ProcsFiles();
  init.log_dir = log_dir;
  init.log_max_bytes = spec->log_max_bytes;
  init.log_max_files = spec->log_max_files;
  init.exit_file = ExitRecordPath(spec->task_dir);
  init.rlimits = spec->rlimits;
  init.tty = task.tty();
  init.stdin_open = task.stdin_open();
  std::vector<base::UniqueFd> passed;
  if (userns.has_value()) {
    absl::Status opened = OpenForUserNamespace(&init, &passed);
    if (opened.ok())
      opened = IdmapRootForUserNamespace(&init, *userns, spec->rootfs_idmapped,
                                         &passed);
    if (!opened.ok()) {
      return absl::Status(opened.code(),
                          absl::StrCat(prefix, opened.message()));
    }
  }
  // The attach socket of this run, served by the init; found again by its
  // path after a driver restart.
  const std::string attach_path =
      driver_common::AttachSocketPath(spec->task_dir);
  absl::StatusOr<base::UniqueFd> attach =
      driver_common::ListenAttachSocket(attach_path);
  if (!attach.ok()) {
    return absl::Status(attach.status().code(),
                        absl::StrCat(prefix, attach.status().message()));
  }
  undo.push_back(
      [attach_path] { driver_common::RemoveAttachSocket(attach_path); });
  init.attach_fd =
      driver_common::kInitFirstPassedFd + static_cast<int>(passed.size());
  passed.push_back(*std::move(attach));
  std::vector<int> passed_fds;
  for (const base::UniqueFd& fd : passed) passed_fds.push_back(fd.get());
  const absl::Time started_at = absl::Now();
  state.set_started_at_unix_nanos(absl::ToUnixNanos(started_at));
  if (options_.interrupt_start_for_test ==
      ExecDriverOptions::InterruptStart::kBeforeInit) {
    return interrupted("before its init started");
  }
  // The init's pid and start time go into the start record before the
  // wait for the init's report: from then on its program may run.
  absl::Status unrecorded;
  auto spawned = [&](pid_t pid) -> absl::Status {
    if (options_.init_spawned_for_test) {
      unrecorded = options_.init_spawned_for_test(pid);
      if (!unrecorded.ok()) return unrecorded;
    }
    absl::StatusOr<base::ProcStat> stat = ReadProcStat(pid);
    if (!stat.ok()) {
      unrecorded = absl::Status(
          stat.status().code(),
          absl::StrCat(prefix, "reading the start time of its init (pid ", pid,
                       "): ", stat.status().message()));
      return unrecorded;
    }
    state.set_init_pid(pid);
    state.set_init_start_ticks(stat->start_time);
    unrecorded = write_record();
    return unrecorded;
  };
  absl::StatusOr<StartedInit> started = StartInit(
      options_.init_path, init, init_log.get(), options_.start_timeout,
      userns ? &*userns : nullptr, passed_fds, spawned);
  passed.clear();
  if (!started.ok()) {
    return unrecorded.ok() ? NameTheField(id, started.status()) : unrecorded;
  }
  if (options_.interrupt_start_for_test ==
      ExecDriverOptions::InterruptStart::kAfterInit) {
    return interrupted(absl::StrCat("after its init (pid ", started->pid,
                                    ") started the program"));
  }

  auto record = std::make_shared<Task>(id, *cgroup);
  record->config = task;
  record->init_pid = started->pid;
  record->our_child = true;
  record->started_at = started_at;
  record->record_dir = record_dir;
  record->state = state;
  {
    absl::MutexLock lock(&record->mu);
    record->pidfd = std::move(started->pidfd);
  }

  std::move(rollback).Cancel();
  {
    absl::MutexLock lock(&mu_);
    tasks_[id] = record;
  }
  Watch(record);
  stats_.Register(record->id, record->cgroup.path());

  dv1::TaskEventsResponse event;
  event.set_task_id(id);
  event.set_allocation_id(task.allocation_id());
  event.set_message(absl::StrCat("started (init pid ", started->pid, ")"));
  (*event.mutable_annotations())["pid"] = absl::StrCat(started->pid);
  PublishTaskEvent(std::move(event));

  dv1::StartTaskResponse response;
  *response.mutable_handle() = std::move(handle);
  return response;
}

void ExecDriver::Watch(const std::shared_ptr<Task>& task) {
  absl::MutexLock lock(&task->mu);
  if (!task->pidfd.valid()) return;
  absl::Status status =
      watcher_.Watch(task->pidfd.get(), [this, task] { OnInitExited(task); });
  if (!status.ok()) {
    LOG(ERROR) << "task " << task->id << ": cannot watch its init: " << status;
  }
}

void ExecDriver::OnInitExited(const std::shared_ptr<Task>& task) {
  if (task->our_child) {
    const base::UniqueFd pidfd = task->DupPidfd();
    siginfo_t info;
    waitid(static_cast<idtype_t>(P_PIDFD), pidfd.get(), &info,
           WEXITED | WNOHANG);
  }
  dv1::ExitResult result;
  ExitRecord record;
  if (ReadExitRecord(task->state.task_dir(), &record)) {
    result.set_exit_code(record.exit_code);
    result.set_signal(record.signal);
    *result.mutable_exited_at() = base::ToProtoTimestamp(
        absl::FromUnixNanos(record.exited_at_unix_nanos));
  } else {
    // Only SIGKILL stops the init before it records the exit; the kernel
    // then killed everything in its pid namespace, the program with it.
    result.set_signal(SIGKILL);
    *result.mutable_exited_at() = base::ToProtoTimestamp(absl::Now());
  }
  absl::StatusOr<uint64_t> ooms = task->cgroup.OomKillCount();
  if (ooms.ok() && *ooms > 0 && result.signal() == SIGKILL) {
    result.set_oom_killed(true);
  }
  {
    absl::MutexLock lock(&task->mu);
    task->exited = true;
    task->result = result;
    task->completed_at = absl::FromUnixNanos(
        result.exited_at().seconds() * 1000000000 + result.exited_at().nanos());
  }
  dv1::TaskEventsResponse event;
  event.set_task_id(task->id);
  event.set_allocation_id(task->config.allocation_id());
  event.set_message(DescribeExit(result));
  (*event.mutable_annotations())["exit_code"] =
      absl::StrCat(result.exit_code());
  (*event.mutable_annotations())["signal"] = absl::StrCat(result.signal());
  if (result.oom_killed())
    (*event.mutable_annotations())["oom_killed"] = "true";
  PublishTaskEvent(std::move(event));
}

bool ExecDriver::WaitExited(const std::shared_ptr<Task>& task,
                            absl::Duration timeout) {
  absl::MutexLock lock(&task->mu);
  return task->mu.AwaitWithTimeout(absl::Condition(&task->exited), timeout);
}

absl::StatusOr<dv1::ExitResult> ExecDriver::WaitTask(
    const std::string& task_id, const plugin::CancelToken& cancel) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  while (!WaitExited(*task, absl::Milliseconds(100))) {
    if (cancel.IsCancelled()) return absl::CancelledError("wait cancelled");
  }
  absl::MutexLock lock(&(*task)->mu);
  return (*task)->result;
}

absl::Status ExecDriver::KillTask(const std::shared_ptr<Task>& task,
                                  absl::Duration timeout) {
  {
    absl::MutexLock lock(&task->mu);
    // Killing the init kills its whole pid namespace.
    if (!task->exited && task->pidfd.valid()) {
      PidfdSendSignal(task->pidfd.get(), SIGKILL);
    }
  }
  // Exec'd commands may linger outside the pid namespace: sweep the cgroup.
  absl::Status status = task->cgroup.KillAll(timeout);
  if (!status.ok()) {
    LOG(WARNING) << "task " << task->id << ": " << status;
  }
  if (!WaitExited(task, timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("task ", task->id, " did not exit within ",
                     absl::FormatDuration(timeout), " of SIGKILL"));
  }
  return absl::OkStatus();
}

absl::Status ExecDriver::SignalTask(const std::string& task_id, int signal) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Task>& task = *found;
  absl::MutexLock lock(&task->mu);
  if (task->exited) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, " has exited"));
  }
  if (signal != SIGKILL && signal != SIGSTOP) {
    // The init passes it on to the program.
    if (PidfdSendSignal(task->pidfd.get(), signal) != 0 && errno != ESRCH) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("task ", task_id, ": signalling its init"));
    }
    return absl::OkStatus();
  }
  // KILL and STOP cannot be caught, so the init cannot pass them on: send
  // them to the program itself, the init's only child it started.
  const std::string children = ReadSmallFile(absl::StrCat(
      "/proc/", task->init_pid, "/task/", task->init_pid, "/children"));
  std::vector<std::string> pids =
      absl::StrSplit(children, ' ', absl::SkipWhitespace());
  int program = 0;
  if (pids.empty() || !absl::SimpleAtoi(pids[0], &program)) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, ": its program is not running"));
  }
  const base::UniqueFd pidfd(PidfdOpen(program));
  if (!pidfd.valid()) return absl::OkStatus();  // it just exited
  const int result = PidfdSendSignal(pidfd.get(), signal);
  const int err = errno;
  if (result != 0 && err != ESRCH) {
    return absl::ErrnoToStatus(
        err, absl::StrCat("task ", task_id, ": signalling pid ", program));
  }
  return absl::OkStatus();
}

absl::Status ExecDriver::StopTask(const std::string& task_id,
                                  absl::Duration timeout, int signal) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  if ((*task)->IsExited()) return absl::OkStatus();
  absl::Status sent = SignalTask(task_id, signal);
  if (!sent.ok() && !(*task)->IsExited()) {
    LOG(WARNING) << sent << "; killing it";
  }
  if (WaitExited(*task, timeout)) return absl::OkStatus();
  return KillTask(*task, absl::Seconds(10));
}

absl::Status ExecDriver::DestroyUnknownTask(const std::string& task_id) {
  absl::Cleanup release = [&] {
    absl::MutexLock lock(&mu_);
    tasks_.erase(task_id);
  };
  // Its start record (this driver's own file) names its cgroup parent
  // and task directory; the record goes last.
  const std::string state = state_dir();
  std::string cgroup_parent = options_.cgroup_parent;
  std::string recorded_task_dir;
  if (!state.empty()) {
    absl::StatusOr<dv1::TaskHandle> record = ReadStartRecord(state, task_id);
    ExecTaskState recorded;
    if (record.ok() && record->version() == kStateVersion &&
        recorded.ParseFromString(record->driver_state())) {
      if (!recorded.cgroup_parent().empty()) {
        cgroup_parent = recorded.cgroup_parent();
      }
      recorded_task_dir = recorded.task_dir();
    } else if (!record.ok() && !absl::IsNotFound(record.status())) {
      LOG(WARNING) << "task " << task_id << " (unknown): " << record.status()
                   << "; removing what its id names";
    }
  }
  absl::StatusOr<TaskCgroup> orphan =
      TaskCgroup::Open(mounts_, cgroup_parent, task_id);
  if (orphan.ok() &&
      absl::c_any_of(orphan->directories(), [](const std::string& dir) {
        return access(dir.c_str(), F_OK) == 0;
      })) {
    absl::Status status = orphan->KillAll(absl::Seconds(5));
    if (status.ok()) status = orphan->Remove(absl::Seconds(10));
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("task ", task_id, " (unknown): ", status.message()));
    }
    LOG(INFO) << "task " << task_id << ": removed the cgroup " << orphan->path()
              << " of an interrupted start";
  }
  // The task directory is the node's when it gave one (removed, as for
  // a known task, only when the start record names it); the default one
  // under the driver's state directory is the driver's.
  if (!state.empty()) {
    std::vector<std::string> dirs = {
        driver_common::DefaultTaskDir(state, task_id)};
    if (!recorded_task_dir.empty() && recorded_task_dir != dirs[0]) {
      dirs.push_back(recorded_task_dir);
    }
    for (const std::string& dir : dirs) {
      struct stat dir_stat;
      if (lstat(dir.c_str(), &dir_stat) != 0) continue;
      if (absl::Status removed = RemoveTree(dir); !removed.ok()) {
        return absl::Status(
            removed.code(),
            absl::StrCat("task ", task_id, " (unknown): ", removed.message()));
      }
      LOG(INFO) << "task " << task_id << ": removed " << dir
                << " of an interrupted start";
    }
    if (absl::Status removed = RemoveStartRecord(state, task_id);
        !removed.ok()) {
      return absl::Status(
          removed.code(),
          absl::StrCat("task ", task_id, " (unknown): ", removed.message()));
    }
  }
  return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
}

absl::Status ExecDriver::DestroyTask(const std::string& task_id, bool force) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (absl::IsNotFound(found.status())) {
    // Unknown here, but an instance of this driver killed during its
    // StartTask may have made its cgroup and started its init: what the
    // task's id names goes, and the task stays unknown. The id names paths
    // and comes from the caller: only an id StartTask would take is used.
    if (absl::Status valid = CheckTaskId(task_id); !valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("DestroyTask: ", valid.message()));
    }
    std::shared_ptr<Task> adopted;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = tasks_.find(task_id); it != tasks_.end()) {
        // Being started or recovered (InspectTask from its start record):
        // what it makes is not gone yet, nor can it be said to be.
        if (it->second == nullptr) {
          return absl::UnavailableError(
              absl::StrCat("task ", task_id,
                           " is being started, recovered or destroyed; ask "
                           "again"));
        }
        adopted = it->second;  // recovered since Find: destroyed as known
      } else {
        tasks_[task_id] = nullptr;  // no StartTask or recovery meanwhile
      }
    }
    if (adopted != nullptr) {
      found = std::move(adopted);
    } else if (absl::Status removed = DestroyUnknownTask(task_id);
               !removed.ok()) {
      return removed;
    }
  }
  if (!found.ok()) return found.status();
  const std::shared_ptr<Task>& task = *found;
  if (!task->IsExited()) {
    if (!force) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", task_id,
                       " is running: stop it first, or destroy it with force"));
    }
    if (absl::Status status = KillTask(task, absl::Seconds(10)); !status.ok()) {
      return status;
    }
  }
  {
    absl::MutexLock lock(&task->mu);
    if (task->pidfd.valid()) {
      watcher_.Forget(task->pidfd.get());
      task->pidfd.reset();
    }
  }
  absl::Status status = task->cgroup.KillAll(absl::Seconds(5));
  if (status.ok()) status = task->cgroup.Remove(absl::Seconds(10));
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("task ", task_id, ": ", status.message()));
  }
  stats_.Unregister(task_id);
  if (absl::Status removed = RemoveTree(task->state.task_dir());
      !removed.ok()) {
    return absl::Status(removed.code(), absl::StrCat("task ", task_id, ": ",
                                                     removed.message()));
  }
  if (!task->record_dir.empty()) {
    if (absl::Status removed = RemoveStartRecord(task->record_dir, task_id);
        !removed.ok()) {
      return absl::Status(removed.code(), absl::StrCat("task ", task_id, ": ",
                                                       removed.message()));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    tasks_.erase(task_id);
  }
  dv1::TaskEventsResponse event;
  event.set_task_id(task_id);
  event.set_allocation_id(task->config.allocation_id());
  event.set_message("destroyed");
  PublishTaskEvent(std::move(event));
  return absl::OkStatus();
}

dv1::TaskStatus ExecDriver::StatusOf(const Task& task) const {
  dv1::TaskStatus status;
  status.set_id(task.id);
  status.set_name(task.config.name());
  *status.mutable_started_at() = base::ToProtoTimestamp(task.started_at);
  {
    absl::MutexLock lock(&task.mu);
    status.set_state(task.exited ? dv1::TASK_STATE_EXITED
                                 : dv1::TASK_STATE_RUNNING);
    if (task.exited) {
      *status.mutable_exit_result() = task.result;
      *status.mutable_completed_at() =
          base::ToProtoTimestamp(task.completed_at);
    }
  }
  auto& attributes = *status.mutable_driver_attributes();
  attributes["pid"] = absl::StrCat(task.init_pid);
  attributes["cgroup"] = task.cgroup.path();
  attributes["task_dir"] = task.state.task_dir();
  attributes["stdout"] =
      absl::StrCat(task.state.task_dir(), "/logs/stdout.log");
  attributes["stderr"] =
      absl::StrCat(task.state.task_dir(), "/logs/stderr.log");
  return status;
}

absl::StatusOr<dv1::TaskStatus> ExecDriver::InspectTask(
    const std::string& task_id) {
  {
    // Reserved while a StartTask (or DestroyTask) of it runs: not "unknown",
    // which a node that lost a start's reply takes for "never started".
    absl::MutexLock lock(&mu_);
    if (auto it = tasks_.find(task_id);
        it != tasks_.end() && it->second == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "task ", task_id, " is being started or destroyed; ask again"));
    }
  }
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (absl::IsNotFound(task.status())) {
    return RecoverFromStartRecord(task_id, task.status());
  }
  if (!task.ok()) return task.status();
  return StatusOf(**task);
}

absl::StatusOr<dv1::TaskStatus> ExecDriver::RecoverFromStartRecord(
    const std::string& task_id, const absl::Status& unknown) {
  // The id names a path: only one StartTask takes.
  if (!CheckTaskId(task_id).ok()) return unknown;
  const std::string state = state_dir();
  if (state.empty()) return unknown;
  {
    // Reserved until the run is recovered (or not): a DestroyTask meanwhile
    // waits instead of finding nothing to destroy while the run is being
    // adopted.
    absl::MutexLock lock(&mu_);
    if (auto it = tasks_.find(task_id); it != tasks_.end()) {
      if (it->second == nullptr) {
        return absl::UnavailableError(absl::StrCat(
            "task ", task_id, " is being started or destroyed; ask again"));
      }
      return StatusOf(*it->second);  // recovered meanwhile
    }
    tasks_[task_id] = nullptr;
  }
  absl::Cleanup release = [&] {
    absl::MutexLock lock(&mu_);
    if (auto it = tasks_.find(task_id);
        it != tasks_.end() && it->second == nullptr) {
      tasks_.erase(it);
    }
  };
  absl::StatusOr<dv1::TaskHandle> record = ReadStartRecord(state, task_id);
  if (!record.ok()) {
    if (!absl::IsNotFound(record.status())) {
      LOG(WARNING) << "task " << task_id << ": " << record.status()
                   << "; taken for unknown";
    }
    return unknown;
  }
  ExecTaskState recorded;
  if (record->version() == kStateVersion &&
      recorded.ParseFromString(record->driver_state()) &&
      recorded.init_pid() <= 0) {
    return absl::NotFoundError(
        absl::StrCat("task ", task_id,
                     " not found: its start was interrupted before its init "
                     "started (",
                     driver_common::StartRecordPath(state, task_id), ")"));
  }
  if (options_.recovery_reserved_for_test) {
    options_.recovery_reserved_for_test(task_id);
  }
  absl::StatusOr<dv1::TaskStatus> recovered =
      Recover(*record, /*reserved=*/true);
  if (recovered.ok()) {
    LOG(INFO) << "task " << task_id << ": "
              << (recovered->state() == dv1::TASK_STATE_EXITED ? "exited"
                                                               : "running")
              << "; recovered from its start record "
              << driver_common::StartRecordPath(state, task_id);
    return recovered;
  }
  const absl::Status& failed = recovered.status();
  if (absl::IsAlreadyExists(failed)) {
    return absl::UnavailableError(absl::StrCat(
        "task ", task_id, " is being started or destroyed; ask again"));
  }
  if (absl::IsInvalidArgument(failed)) {
    // A record this driver cannot read (another version's, after an
    // upgrade): its run may be alive, so it is not "never started" (the
    // node would start the task again), nor can this driver adopt it.
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id,
                     ": cannot tell whether its run is alive: its start "
                     "record ",
                     driver_common::StartRecordPath(state, task_id),
                     " is not one this driver reads (", failed.message(), ")"));
  }
  if (absl::IsFailedPrecondition(failed)) {
    // Its init is gone without an exit record.
    return absl::NotFoundError(
        absl::StrCat("task ", task_id,
                     " not found: its start record names a run that "
                     "left no trace (",
                     failed.message(), ")"));
  }
  return failed;
}

absl::StatusOr<dv1::TaskHandle> ExecDriver::HandleOf(
    const std::string& task_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(task_id);
    if (it != tasks_.end() && it->second == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "task ", task_id, " is being started or destroyed; ask again"));
    }
  }
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (!found.ok()) return found.status();
  const Task& task = **found;
  dv1::TaskHandle handle;
  handle.set_version(kStateVersion);
  *handle.mutable_config() = task.config;
  handle.set_state(task.IsExited() ? dv1::TASK_STATE_EXITED
                                   : dv1::TASK_STATE_RUNNING);
  handle.set_driver_state(task.state.SerializeAsString());
  return handle;
}

absl::StatusOr<dv1::TaskStatus> ExecDriver::RecoverTask(
    const dv1::TaskHandle& handle) {
  return Recover(handle, /*reserved=*/false);
}

absl::StatusOr<dv1::TaskStatus> ExecDriver::Recover(
    const dv1::TaskHandle& handle, bool reserved) {
  const std::string& id = handle.config().id();
  if (absl::Status status = CheckTaskId(id); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("handle.config.id: ", status.message()));
  }
  const std::string prefix = absl::StrCat("task ", id, ": ");
  ExecTaskState state;
  if (handle.version() != kStateVersion ||
      !state.ParseFromString(handle.driver_state()) || state.init_pid() <= 0 ||
      state.task_dir().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "handle.driver_state is not an exec driver handle of version ",
        kStateVersion));
  }
  if (absl::StatusOr<std::shared_ptr<Task>> known = Find(id); known.ok()) {
    return StatusOf(**known);
  }
  absl::StatusOr<TaskCgroup> cgroup =
      TaskCgroup::Open(mounts_, state.cgroup_parent(), id);
  if (!cgroup.ok()) {
    return absl::Status(cgroup.status().code(),
                        absl::StrCat(prefix, cgroup.status().message()));
  }
  auto task = std::make_shared<Task>(id, *cgroup);
  task->config = handle.config();
  task->state = state;
  task->record_dir = state_dir();
  task->init_pid = state.init_pid();
  task->started_at = absl::FromUnixNanos(state.started_at_unix_nanos());

  // Is the init still the process the handle names?
  auto same_process = [&]() {
    absl::StatusOr<base::ProcStat> stat = ReadProcStat(state.init_pid());
    return stat.ok() && stat->start_time == state.init_start_ticks() &&
           stat->state != 'Z' && stat->state != 'X';
  };
  base::UniqueFd pidfd;
  if (same_process()) {
    pidfd.reset(PidfdOpen(state.init_pid()));
    // Opened after the check: check again, so the pidfd is surely the init.
    if (pidfd.valid() && !same_process()) pidfd.reset();
  }
  if (pidfd.valid()) {
    absl::MutexLock lock(&task->mu);
    task->pidfd = std::move(pidfd);
  } else {
    ExitRecord record;
    if (!ReadExitRecord(state.task_dir(), &record)) {
      absl::StatusOr<base::ProcStat> stat = ReadProcStat(state.init_pid());
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, "its init (pid ", state.init_pid(), ") ",
          stat.ok() ? "was replaced: that pid now belongs to another process"
                    : "is gone",
          ", and it left no exit record in ",
          ExitRecordPath(state.task_dir())));
    }
    dv1::ExitResult result;
    result.set_exit_code(record.exit_code);
    result.set_signal(record.signal);
    *result.mutable_exited_at() = base::ToProtoTimestamp(
        absl::FromUnixNanos(record.exited_at_unix_nanos));
    absl::StatusOr<uint64_t> ooms = task->cgroup.OomKillCount();
    if (ooms.ok() && *ooms > 0 && record.signal == SIGKILL) {
      result.set_oom_killed(true);
    }
    absl::MutexLock lock(&task->mu);
    task->exited = true;
    task->result = result;
    task->completed_at = absl::FromUnixNanos(record.exited_at_unix_nanos);
  }
  if (reserved) {
    absl::MutexLock lock(&mu_);
    tasks_[id] = task;
  } else {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = tasks_.emplace(id, task);
    if (!inserted) {
      if (it->second == nullptr) {
        return absl::AlreadyExistsError(
            absl::StrCat("task ", id, " is being started"));
      }
      return StatusOf(*it->second);
    }
  }
  Watch(task);
  if (!task->IsExited()) stats_.Register(id, task->cgroup.path());
  dv1::TaskEventsResponse event;
  event.set_task_id(id);
  event.set_allocation_id(task->config.allocation_id());
  event.set_message(task->IsExited() ? "recovered (already exited)"
                                     : "recovered");
  PublishTaskEvent(std::move(event));
  return StatusOf(*task);
}

absl::StatusOr<stats::v1::TaskResourceUsage> ExecDriver::TaskStats(
    const std::string& task_id) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Task>& task = *found;
  return stats_.Sample(task_id, task->cgroup.path(), task->in_process_stats);
}

absl::StatusOr<plugin::ExitStatus> ExecDriver::RunExec(
    const plugin::ExecOptions& options, absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(options.task_id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Task>& task = *found;
  // A dup, so that a concurrent DestroyTask cannot close it under us.
  const base::UniqueFd pidfd = task->DupPidfd();
  if (!pidfd.valid() || task->IsExited()) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", options.task_id, " is not running"));
  }
  ExecTarget target;
  target.init_pidfd = pidfd.get();
  target.identity.uid = task->state.uid();
  target.identity.gid = task->state.gid();
  target.identity.groups.assign(task->state.groups().begin(),
                                task->state.groups().end());
  target.identity.cwd = task->state.work_dir();
  target.identity.env.assign(task->state.env().begin(),
                             task->state.env().end());
  target.identity.cgroup_procs = task->cgroup.ProcsFiles();
  target.identity.join_user_namespace = task->state.user_namespace();
  // The task's resource limits, as docker exec inherits the container's.
  absl::StatusOr<std::vector<driver_common::RlimitSpec>> rlimits =
      driver_common::ResolveRlimits(task->config.rlimits());
  if (rlimits.ok()) target.identity.rlimits = *std::move(rlimits);
  if (task->state.isolated()) {
    // The same capabilities, no_new_privs and seccomp filter as the task.
    TaskSpec isolated;
    isolated.task_dir = task->state.task_dir();
    absl::Status resolved = driver_common::ResolveIsolation(
        task->config.isolation(), isolation_defaults_, &isolated);
    if (!resolved.ok()) {
      return absl::Status(
          resolved.code(),
          absl::StrCat("task ", options.task_id, ": ", resolved.message()));
    }
    target.identity.privileges = isolated.privileges;
  }
  absl::StatusOr<plugin::ExitStatus> status =
      RunInTask(options_.init_path, target, options, deadline);
  if (!status.ok() && !absl::IsCancelled(status.status())) {
    return absl::Status(status.status().code(),
                        absl::StrCat("task ", options.task_id, ": ",
                                     status.status().message()));
  }
  return status;
}

absl::Status ExecDriver::AttachTask(plugin::AttachTaskStream* stream) {
  const std::string& task_id = stream->setup().task_id();
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Task>& task = *found;
  if (task->IsExited()) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, " cannot be attached: it has exited"));
  }
  driver_common::AttachTarget target;
  target.task_id = task_id;
  target.socket_path = driver_common::AttachSocketPath(task->state.task_dir());
  target.stdin_open = task->config.stdin_open();
  return driver_common::RelayAttach(target, stream);
}

absl::StatusOr<plugin::ExitStatus> ExecDriver::ExecTaskStreaming(
    const plugin::ExecOptions& options) {
  return RunExec(options, absl::InfiniteFuture());
}

absl::StatusOr<dv1::ExecTaskResponse> ExecDriver::ExecTask(
    const std::string& task_id, const std::vector<std::string>& command,
    absl::Duration timeout, const plugin::CancelToken& cancel) {
  return plugin::ExecTaskThroughStreaming(
      task_id, command, timeout, cancel,
      [this](const plugin::ExecOptions& options, absl::Time deadline) {
        return RunExec(options, deadline);
      });
}

}  // namespace berth::exec_driver
