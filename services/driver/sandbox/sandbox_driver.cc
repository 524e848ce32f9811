#include "services/driver/sandbox/sandbox_driver.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <tuple>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/path.h"
#include "base/process.h"
#include "base/proto_time.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "plugins/sdk/attach.h"
#include "plugins/sdk/config.h"
#include "plugins/sdk/signals.h"
#include "services/agent/boot.h"
#include "services/common/dial.h"
#include "services/common/remove_tree.h"
#include "services/common/stats/host_info.h"
#include "services/common/status.h"
#include "services/driver/common/attach_client.h"
#include "services/driver/common/init_spec.h"
#include "services/driver/common/launcher.h"
#include "services/driver/common/security.h"
#include "services/driver/common/start_record.h"
#include "services/driver/common/task_cgroup.h"
#include "services/driver/common/task_dir.h"
#include "services/driver/common/task_spec.h"
#include "services/driver/common/user_namespace.h"
#include "services/driver/sandbox/agent_client.h"
#include "services/driver/sandbox/agent_libraries.h"
#include "services/driver/sandbox/sandbox_state.pb.h"
#include "services/driver/sandbox/sandbox_task.h"
#include "services/driver/sandbox/shim_launcher.h"

namespace berth::sandbox_driver {

namespace dv1 = ::berth::driver::v1;
namespace pv1 = ::berth::proxy::v1;
namespace av1 = ::berth::agent::v1;
using ::berth::driver_common::MakeDirs;
using ::berth::driver_common::PrepareTaskDirectories;
using ::berth::driver_common::TaskCgroup;

namespace {

// Writes `result` as the task's exit record (through .berth's descriptor,
// following no link the task planted).
absl::Status WriteExitFile(const std::string& task_dir,
                           const dv1::ExitResult& result) {
  driver_common::ExitRecord record;
  record.exit_code = result.exit_code();
  record.signal = result.signal();
  record.exited_at_unix_nanos =
      absl::ToUnixNanos(base::FromProtoTimestamp(result.exited_at()));
  return driver_common::WriteExitRecord(task_dir, record);
}

// Inside a sandbox's own root the agent lives in kAgentDirInRoot: a tmpfs
// holding its binary and berth-agent-boot (bound read-only: their host paths
// are not in the root), its loader and the directories of its libraries at
// the paths the host's loader has them (bound read-only: the root may be an
// image without them, or with its own), and `sock`, the host's
// <task_dir>/.berth, where it makes agent.sock for berth-proxy and the
// driver to dial from the host. berth-agent-boot makes that directory the
// agent's root while it loads, then the agent enters the task's root
// (services/agent/boot.h). The agent unmounts the whole directory from its
// containers' view (--hide_dir), and their processes are in pid namespaces
// without it (--container_namespaces).
constexpr char kAgentDirInRoot[] = "/run/berth-agent";

// What berth-agent keeps of root's capabilities besides the task's (a
// process cannot be given a capability its agent lacks): namespaces and
// mounts (SYS_ADMIN; SYS_CHROOT to join a mount namespace), the processes'
// users (SETUID, SETGID) and capability sets (SETPCAP), signals to any of
// them (KILL), reading and entering what root may (DAC_*, FOWNER), and
// their resource limits above its own (SYS_RESOURCE: TaskConfig.rlimits).
constexpr uint64_t kAgentCapabilities =
    driver_common::CapabilityBit(CAP_SYS_ADMIN) |
    driver_common::CapabilityBit(CAP_SYS_CHROOT) |
    driver_common::CapabilityBit(CAP_SETUID) |
    driver_common::CapabilityBit(CAP_SETGID) |
    driver_common::CapabilityBit(CAP_SETPCAP) |
    driver_common::CapabilityBit(CAP_KILL) |
    driver_common::CapabilityBit(CAP_DAC_OVERRIDE) |
    driver_common::CapabilityBit(CAP_DAC_READ_SEARCH) |
    driver_common::CapabilityBit(CAP_FOWNER) |
    driver_common::CapabilityBit(CAP_SYS_RESOURCE);

// The agent as the program of an init that enters the task's root
// (init->root, already the task's): its directory (above) bound into the
// root, berth-agent-boot as the init's program, the agent's flags, and its
// privileges: the task's capabilities and its own, the task's no_new_privs
// (inherited by every process it starts), no seccomp filter (it makes
// namespaces and mounts; each process loads the task's).
absl::Status PlaceAgentInRoot(const std::string& agent_path,
                              const std::string& boot_path,
                              const AgentLibraries& libraries,
                              const std::string& private_dir,
                              const std::string& sandbox_id,
                              const driver_common::PrivilegeSpec& task,
                              driver_common::InitSpec* init) {
  std::string binaries[2];
  for (auto [name, path, flag, real] :
       {std::tuple{"berth-agent", &agent_path, "--agent_path", &binaries[0]},
        std::tuple{agent::kAgentBootName, &boot_path, "--agent_boot_path",
                   &binaries[1]}}) {
    char* resolved = realpath(path->c_str(), nullptr);
    if (resolved == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, " ", *path, " (", flag, "): ", std::strerror(errno)));
    }
    *real = resolved;
    free(resolved);
  }
  const std::string dir = kAgentDirInRoot;
  auto bind = [&](const std::string& source, const std::string& in_dir,
                  bool read_only) {
    driver_common::MountSpec mount;
    mount.source = source;
    mount.destination = absl::StrCat(dir, in_dir);
    mount.read_only = read_only;
    init->root.mounts.push_back(std::move(mount));
  };
  // Last: no mount the task asks for can cover them.
  driver_common::MountSpec tmpfs;
  tmpfs.kind = driver_common::MountSpec::Kind::kTmpfs;
  tmpfs.destination = dir;
  init->root.mounts.push_back(tmpfs);
  bind(private_dir, "/sock", false);
  bind(binaries[0], "/berth-agent", true);
  bind(binaries[1], absl::StrCat("/", agent::kAgentBootName), true);
  std::string library_path;
  bool interpreter_in_a_dir = false;
  for (const AgentLibraries::Dir& library_dir : libraries.dirs) {
    bind(library_dir.host_path, library_dir.path, true);
    absl::StrAppend(&library_path, library_path.empty() ? "" : ":",
                    library_dir.path);
    interpreter_in_a_dir |=
        base::Dirname(libraries.interpreter) == library_dir.path;
  }
  if (!libraries.interpreter.empty() && !interpreter_in_a_dir) {
    bind(libraries.interpreter_host_path, libraries.interpreter, true);
  }
  init->path = absl::StrCat(dir, "/", agent::kAgentBootName);
  init->args = {init->path,
                dir,
                "/berth-agent",
                absl::StrCat("--socket=", dir, "/sock/agent.sock"),
                absl::StrCat("--sandbox_id=", sandbox_id),
                "--container_namespaces",
                absl::StrCat("--hide_dir=", dir),
                absl::StrCat("--enter_root_fd=", agent::kAgentBootRootFd)};
  // Its root has no ld.so.cache: the loader looks where the host's found
  // each library.
  if (!library_path.empty()) {
    init->env.push_back(absl::StrCat("LD_LIBRARY_PATH=", library_path));
  }
  init->privileges.enabled = true;
  init->privileges.capabilities = task.capabilities | kAgentCapabilities;
  init->privileges.no_new_privs = task.no_new_privs;
  init->privileges.seccomp_filter.clear();
  return absl::OkStatus();
}

// berth-agent-boot where options.agent_boot_path says, else next to the
// agent: in its directory (a runfiles tree), else in that of its real path.
SandboxDriverOptions WithAgentBootPath(SandboxDriverOptions options) {
  if (!options.agent_boot_path.empty() || options.agent_path.empty()) {
    return options;
  }
  std::vector<std::string> candidates = {absl::StrCat(
      base::Dirname(options.agent_path), "/", agent::kAgentBootName)};
  if (char* real = realpath(options.agent_path.c_str(), nullptr)) {
    candidates.push_back(
        absl::StrCat(base::Dirname(real), "/", agent::kAgentBootName));
    free(real);
  }
  options.agent_boot_path = candidates[0];
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0) {
      options.agent_boot_path = candidate;
      break;
    }
  }
  return options;
}

}  // namespace

void FillPrivileges(const driver_common::PrivilegeSpec& privileges,
                    agent::v1::Privileges* out) {
  if (!privileges.enabled) return;
  out->set_enabled(true);
  out->set_capabilities(privileges.capabilities);
  out->set_no_new_privs(privileges.no_new_privs);
  out->set_seccomp_filter(privileges.seccomp_filter);
}

void FillRlimits(const driver_common::TaskSpec& spec,
                 agent::v1::ProcessSpec* out) {
  for (const driver_common::RlimitSpec& limit : spec.rlimits) {
    agent::v1::Rlimit* rlimit = out->add_rlimits();
    rlimit->set_resource(limit.resource);
    rlimit->set_soft(limit.soft);
    rlimit->set_hard(limit.hard);
  }
}

uint64_t StartTicks(pid_t pid) {
  absl::StatusOr<base::ProcStat> stat = base::ReadProcStat(pid);
  return stat.ok() ? stat->start_time : 0;
}

SandboxDriver::SandboxDriver(SandboxDriverOptions options)
    : options_(WithAgentBootPath(std::move(options))),
      state_dir_(options_.state_dir),
      proxy_socket_(options_.proxy_socket),
      mounts_([this]() -> stats::CgroupMounts {
        absl::StatusOr<stats::CgroupMounts> mounts =
            stats::DetectCgroupLayout(options_.cgroup_root);
        return mounts.ok() ? *mounts : stats::CgroupMounts();
      }()),
      mounts_status_(stats::DetectCgroupLayout(options_.cgroup_root).status()),
      cpu_mhz_(stats::HostCpuMhz("/proc").value_or(0)),
      stats_(mounts_, cpu_mhz_, options_.stats_socket) {
  if (!options_.state_dir.empty()) {
    driver_common::RemoveStartRecordLeftovers(options_.state_dir);
  }
  isolation_defaults_.own_root = true;
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

SandboxDriver::~SandboxDriver() {
  // The sandboxes live on (RecoverTask re-adopts them); only the watches go.
  std::map<std::string, std::shared_ptr<Task>> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks = tasks_;
  }
  for (auto& [id, task] : tasks) {
    if (task == nullptr) continue;
    absl::MutexLock lock(&task->mu);
    if (task->shim_pidfd.valid()) watcher_.Forget(task->shim_pidfd.get());
  }
}

plugin::DriverInfo SandboxDriver::Info() const {
  return {kDriverName, kDriverVersion,
          "runs each task in a sandbox of its own: berth-agent in new "
          "namespaces, its stdio through berth-proxy and berth-shim"};
}

plugin::v1::ConfigSchema SandboxDriver::TaskConfigSchema() const {
  return driver_common::DriverConfigSchema();
}

absl::Status SandboxDriver::SetConfig(const google::protobuf::Struct&,
                                      const plugin::v1::NodeContext& node) {
  absl::StatusOr<std::string> dir =
      driver_common::DriverStateDir(node, kDriverName);
  if (!dir.ok()) return dir.status();
  if (!dir->empty() && *dir != state_dir()) {
    // Before any start uses it (a node calls SetConfig again when it
    // reattaches, maybe during a start: the same directory is left alone).
    driver_common::RemoveStartRecordLeftovers(*dir);
    absl::MutexLock lock(&mu_);
    state_dir_ = *std::move(dir);
  }
  if (!node.proxy_socket().empty()) {
    absl::MutexLock lock(&mu_);
    if (node.proxy_socket() != proxy_socket_) {
      proxy_socket_ = node.proxy_socket();
      proxy_.reset();
    }
  }
  if (!node.stats_socket().empty()) stats_.SetSocket(node.stats_socket());
  PublishFingerprint(Probe());
  return absl::OkStatus();
}

dv1::DriverCapabilities SandboxDriver::Capabilities() const {
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

dv1::FingerprintResponse SandboxDriver::Probe() const {
  dv1::FingerprintResponse fingerprint;
  auto& attributes = *fingerprint.mutable_attributes();
  attributes["driver.sandbox.agent"] = options_.agent_path;
  attributes["driver.sandbox.agent_boot"] = options_.agent_boot_path;
  attributes["driver.sandbox.shim"] = options_.shim_path;
  attributes["driver.sandbox.init"] = options_.init_path;
  std::string proxy_socket;
  {
    absl::MutexLock lock(&mu_);
    proxy_socket = proxy_socket_;
  }
  attributes["driver.sandbox.proxy_socket"] = proxy_socket;
  attributes["driver.sandbox.cgroup_parent"] = options_.cgroup_parent;
  auto set = [&](dv1::HealthState health, std::string description) {
    fingerprint.set_health(health);
    fingerprint.set_health_description(std::move(description));
    return fingerprint;
  };
  for (const auto& [name, path, flag] :
       {std::tuple<const char*, std::string, const char*>{
            "berth-agent", options_.agent_path, "--agent_path"},
        {agent::kAgentBootName, options_.agent_boot_path, "--agent_boot_path"},
        {"berth-shim", options_.shim_path, "--shim_path"},
        {"berth-task-init", options_.init_path, "--init_path"}}) {
    if (path.empty() || access(path.c_str(), X_OK) != 0) {
      return set(dv1::HEALTH_STATE_UNHEALTHY,
                 absl::StrCat(name, " not found at \"", path, "\" (", flag,
                              "): ", std::strerror(errno)));
    }
  }
  // It runs inside the task's root, which may hold no loader.
  if (absl::StatusOr<std::string> interpreter =
          ElfInterpreter(options_.agent_boot_path);
      !interpreter.ok() || !interpreter->empty()) {
    return set(
        dv1::HEALTH_STATE_UNHEALTHY,
        absl::StrCat(agent::kAgentBootName, " at \"", options_.agent_boot_path,
                     "\" (--agent_boot_path) is not a static binary: ",
                     interpreter.ok()
                         ? absl::StrCat("it names a loader, ", *interpreter)
                         : interpreter.status().message()));
  }
  if (proxy_socket.empty()) {
    return set(dv1::HEALTH_STATE_UNHEALTHY,
               "no berth-proxy socket configured (NodeContext.proxy_socket "
               "or --proxy_socket)");
  }
  if (geteuid() != 0) {
    return set(dv1::HEALTH_STATE_UNHEALTHY,
               absl::StrCat("berth-driver-sandbox runs as uid ", geteuid(),
                            " and needs root to make namespaces"));
  }
  return set(
      dv1::HEALTH_STATE_HEALTHY,
      absl::StrCat("agent, shim and init found; proxy at ", proxy_socket));
}

absl::StatusOr<AgentLibraries> SandboxDriver::Libraries() {
  struct stat st;
  if (stat(options_.agent_path.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(std::strerror(errno));
  }
  const std::string key =
      absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":",
                   st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
  absl::MutexLock lock(&libraries_mu_);
  if (key != libraries_key_) {
    absl::StatusOr<AgentLibraries> found =
        FindAgentLibraries(options_.agent_path);
    if (!found.ok()) return found.status();
    libraries_ = *std::move(found);
    libraries_key_ = key;
  }
  return libraries_;
}

std::string SandboxDriver::state_dir() const {
  absl::MutexLock lock(&mu_);
  return state_dir_;
}

absl::StatusOr<std::shared_ptr<pv1::ProxyService::Stub>>
SandboxDriver::Proxy() {
  absl::MutexLock lock(&mu_);
  if (proxy_ != nullptr) return proxy_;
  if (proxy_socket_.empty()) {
    return absl::FailedPreconditionError(
        "no berth-proxy socket configured (NodeContext.proxy_socket or "
        "--proxy_socket)");
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(proxy_socket_, absl::Seconds(5));
  if (!channel.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "berth-proxy at ", proxy_socket_, ": ", channel.status().message()));
  }
  proxy_ = std::make_shared<pv1::ProxyService::Stub>(*channel);
  return proxy_;
}

absl::StatusOr<std::shared_ptr<SandboxDriver::Task>> SandboxDriver::Find(
    const std::string& task_id) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end() || it->second == nullptr) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  }
  return it->second;
}

absl::StatusOr<dv1::StartTaskResponse> SandboxDriver::StartTask(
    const dv1::TaskConfig& config) {
  absl::StatusOr<driver_common::TaskSpec> spec =
      driver_common::ResolveTaskSpec(config, state_dir(), isolation_defaults_);
  if (!spec.ok()) return spec.status();
  const std::string id = spec->id;
  const std::string prefix = absl::StrCat("task ", id, ": ");
  if (absl::Status allowed = driver_common::CheckStartAllowed(
          config, state_dir(), seccomp_status_);
      !allowed.ok()) {
    return allowed;
  }
  if (spec->limits.pids_limit != 0 &&
      spec->limits.pids_limit < kMinSandboxPids) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "resources.pids_limit ", spec->limits.pids_limit,
        " is below the ", kMinSandboxPids,
        " a sandbox needs: its init and berth-agent (about 16 processes and "
        "threads) count in it"));
  }
  // Mapped ids; the task's uid, gid and groups are ids inside.
  std::optional<driver_common::UserNamespaceMaps> userns;
  if (driver_common::WantsUserNamespace(config.isolation().user_namespace())) {
    absl::StatusOr<driver_common::UserNamespaceMaps> maps =
        driver_common::ResolveUserNamespace(
            config.isolation().user_namespace());
    absl::Status mapped = maps.ok()
                              ? driver_common::CheckIdentityMapped(
                                    *maps, spec->uid, spec->gid, spec->groups)
                              : maps.status();
    if (!mapped.ok()) {
      return absl::Status(mapped.code(),
                          absl::StrCat(prefix, mapped.message()));
    }
    userns = *std::move(maps);
  }
  absl::StatusOr<std::shared_ptr<pv1::ProxyService::Stub>> proxy = Proxy();
  if (!proxy.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, proxy.status().message()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (tasks_.count(id) > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("task ", id, " already exists"));
    }
    tasks_[id] = nullptr;  // reserved while it starts
  }
  auto task = std::make_shared<Task>();
  task->id = id;
  task->config = config;
  task->spec = *spec;
  std::vector<std::function<void()>> undo;
  absl::Cleanup rollback = [&] {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
    absl::MutexLock lock(&mu_);
    tasks_.erase(id);
  };

  struct stat task_dir_stat;
  const bool task_dir_existed =
      lstat(spec->task_dir.c_str(), &task_dir_stat) == 0;
  if (absl::Status status = PrepareTaskDirectories(*spec, prefix, &undo);
      !status.ok()) {
    return status;
  }
  const std::string private_dir = absl::StrCat(spec->task_dir, "/.berth");
  const std::string log_dir = absl::StrCat(spec->task_dir, "/logs");
  // Whatever a previous task of this directory recorded is not this one's.
  unlink(driver_common::ExitRecordPath(spec->task_dir).c_str());

  // The sandbox's cgroup (the init, the agent and every process of the
  // task), with the task's limits.
  const bool has_limits =
      spec->limits.cpu_shares != 0 || spec->limits.cpu_millicores != 0 ||
      spec->limits.memory_bytes != 0 || spec->limits.pids_limit != 0;
  if (mounts_status_.ok() && mounts_.layout != stats::v1::CGROUP_LAYOUT_NONE) {
    absl::StatusOr<TaskCgroup> cgroup =
        TaskCgroup::Create(mounts_, options_.cgroup_parent, id, spec->limits);
    if (!cgroup.ok()) {
      return absl::Status(cgroup.status().code(),
                          absl::StrCat(prefix, cgroup.status().message()));
    }
    task->cgroup = *cgroup;
    undo.push_back([cgroup = *cgroup, prefix] {
      absl::Status status = cgroup.KillAll(absl::Seconds(5));
      if (status.ok()) status = cgroup.Remove(absl::Seconds(5));
      if (!status.ok()) LOG(WARNING) << prefix << status;
    });
  } else if (has_limits) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, "resources: no usable cgroups at ",
                     options_.cgroup_root, " to apply them"));
  }

  task->agent_socket = absl::StrCat(private_dir, "/agent.sock");
  if (task->agent_socket.size() >= 108) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, "task_dir: the agent's socket path ",
                     task->agent_socket, " is longer than 107 bytes"));
  }
  // The run's attach socket, made before anything of the task runs (the
  // task could otherwise put a link where it goes); the shim serves it.
  const std::string attach_path =
      driver_common::AttachSocketPath(spec->task_dir);
  absl::StatusOr<base::UniqueFd> attach_listener =
      driver_common::ListenAttachSocket(attach_path);
  if (!attach_listener.ok()) {
    return absl::Status(attach_listener.status().code(),
                        absl::StrCat(prefix, "the attach socket ", attach_path,
                                     ": ", attach_listener.status().message()));
  }
  undo.push_back(
      [attach_path] { driver_common::RemoveAttachSocket(attach_path); });

  // The agent, as the program of a berth-task-init. Its log and the shim's
  // are opened before it runs (in a user namespace it owns .berth, and
  // could put a link where a log goes), never through a link.
  const base::UniqueFd init_log(
      open(absl::StrCat(private_dir, "/init.log").c_str(),
           O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!init_log.valid()) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat(prefix, "opening ", private_dir, "/init.log"));
  }
  const base::UniqueFd shim_log(
      open(absl::StrCat(private_dir, "/shim.log").c_str(),
           O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!shim_log.valid()) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat(prefix, "opening ", private_dir, "/shim.log"));
  }
  driver_common::InitSpec init;
  init.path = options_.agent_path;
  init.args = {options_.agent_path,
               absl::StrCat("--socket=", task->agent_socket),
               absl::StrCat("--sandbox_id=", id)};
  init.env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  if (spec->root.enabled) {
    // One empty directory serves every sandbox: each init assembles its
    // root over it in its own mount namespace.
    spec->root.mount_point = absl::StrCat(state_dir(), "/root");
    if (absl::StatusOr<bool> made = MakeDirs(spec->root.mount_point, 0700);
        !made.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, made.status().message()));
    }
    init.root = spec->root;
    absl::StatusOr<AgentLibraries> libraries = Libraries();
    if (!libraries.ok()) {
      return absl::Status(
          libraries.status().code(),
          absl::StrCat(prefix, "berth-agent ", options_.agent_path,
                       " (--agent_path): ", libraries.status().message()));
    }
    absl::Status placed =
        PlaceAgentInRoot(options_.agent_path, options_.agent_boot_path,
                         *libraries, private_dir, id, spec->privileges, &init);
    if (!placed.ok()) {
      return absl::Status(placed.code(),
                          absl::StrCat(prefix, placed.message()));
    }
  }
  init.cwd = "/";
  init.hostname = spec->hostname;
  init.netns = spec->netns_path;
  init.log_dir = absl::StrCat(private_dir, "/agent-logs");
  init.exit_file = absl::StrCat(private_dir, "/agent-exit");
  if (task->cgroup.has_value()) init.cgroup_procs = task->cgroup->ProcsFiles();
  if (absl::StatusOr<bool> made = MakeDirs(init.log_dir, 0700); !made.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, made.status().message()));
  }
  // In a user namespace the agent is the namespace's root: it gets the
  // directories it writes (.berth, where it makes its socket and the init
  // its exit record; agent-logs) and, as descriptors, every bind of its
  // root (its binary, .berth, the task directory, the task's mounts), whose
  // host paths its ids may not search.
  std::vector<base::UniqueFd> passed;
  if (userns.has_value()) {
    absl::Status given = driver_common::GiveTaskDirToNamespace(
        spec->task_dir, !task_dir_existed, spec->uid, spec->gid, *userns,
        {".berth", ".berth/agent-logs"});
    if (!given.ok()) {
      return absl::Status(given.code(),
                          absl::StrCat(prefix, "task_dir: ", given.message()));
    }
    if (absl::Status opened =
            driver_common::OpenForUserNamespace(&init, &passed);
        !opened.ok()) {
      return absl::Status(opened.code(),
                          absl::StrCat(prefix, opened.message()));
    }
  }
  std::vector<int> passed_fds;
  for (const base::UniqueFd& fd : passed) passed_fds.push_back(fd.get());
  const absl::Time started_at = absl::Now();
  absl::StatusOr<driver_common::StartedInit> started = driver_common::StartInit(
      options_.init_path, init, init_log.get(), options_.start_timeout,
      userns ? &*userns : nullptr, passed_fds);
  passed.clear();
  if (!started.ok()) {
    const bool netns =
        absl::StrContains(started.status().message(), "network namespace");
    return absl::Status(
        netns ? absl::StatusCode::kInvalidArgument
              : absl::StatusCode::kFailedPrecondition,
        absl::StrCat(prefix, netns ? "network.namespace_path: " : "",
                     "starting berth-agent ", options_.agent_path, ": ",
                     started.status().message()));
  }
  task->init_pid = started->pid;
  task->state.set_init_pid(started->pid);
  task->state.set_init_start_ticks(StartTicks(started->pid));
  // The task owns it; Teardown, the only one to close it, runs after this
  // function is done with it.
  const int init_pidfd = started->pidfd.get();
  {
    absl::MutexLock lock(&task->mu);
    task->init_pidfd = std::move(started->pidfd);
  }
  undo.push_back([this, task] { Teardown(*task); });

  // Its socket, then the proxy.
  const absl::Time socket_deadline = absl::Now() + options_.start_timeout;
  while (access(task->agent_socket.c_str(), F_OK) != 0) {
    struct pollfd pfd = {init_pidfd, POLLIN, 0};
    if (poll(&pfd, 1, 0) > 0 || absl::Now() > socket_deadline) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, "berth-agent did not make its socket ",
                       task->agent_socket, " (see ", init.log_dir, ")"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  // The socket is bound a moment before the agent listens on it: wait until
  // it takes a connection, or the proxy's Ping may find it refusing.
  if (absl::StatusOr<std::shared_ptr<grpc::Channel>> listening =
          DialUnix(task->agent_socket, socket_deadline - absl::Now());
      !listening.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "berth-agent does not listen on ", task->agent_socket, ": ",
        listening.status().message(), " (see ", init.log_dir, ")"));
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context, kCallTimeout);
    pv1::RegisterSandboxRequest request;
    request.set_sandbox_id(id);
    request.set_agent_address(absl::StrCat("unix:", task->agent_socket));
    pv1::RegisterSandboxResponse response;
    absl::Status status =
        FromGrpcStatus((*proxy)->RegisterSandbox(&context, request, &response));
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat(prefix, "RegisterSandbox: ", status.message()));
    }
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context, kCallTimeout);
    pv1::AllocateTokenRequest request;
    request.set_sandbox_id(id);
    pv1::AllocateTokenResponse response;
    absl::Status status =
        FromGrpcStatus((*proxy)->AllocateToken(&context, request, &response));
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat(prefix, "AllocateToken: ", status.message()));
    }
    task->token = response.token();
  }

  // The shim: the task's stdin is /dev/null, its output goes to the rotated
  // files the shim writes in logs/ (where berth-node reads it); the shim's
  // own stdout and stderr, its messages, to .berth/shim.log.
  const base::UniqueFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat(prefix, "opening /dev/null"));
  }
  ShimOutput output;
  output.log_dir = log_dir;
  output.max_file_bytes = spec->log_max_bytes;
  output.max_files = spec->log_max_files;
  output.attach_fd = attach_listener->get();
  // A terminal without stdin_open still takes no end of file (its
  // program would read one from the terminal): nobody may send stdin.
  output.attach_stdin = config.stdin_open() || config.tty();
  std::string proxy_socket;
  {
    absl::MutexLock lock(&mu_);
    proxy_socket = proxy_socket_;
  }
  absl::StatusOr<Shim> shim =
      StartShim(options_.shim_path, proxy_socket, task->token, null_fd.get(),
                shim_log.get(), shim_log.get(), output);
  if (!shim.ok()) {
    return absl::Status(shim.status().code(),
                        absl::StrCat(prefix, shim.status().message()));
  }
  task->shim_pid = shim->pid;
  task->state.set_shim_pid(shim->pid);
  task->state.set_shim_start_ticks(StartTicks(shim->pid));
  {
    absl::MutexLock lock(&task->mu);
    task->shim_pidfd.reset(shim->pidfd);
  }
  undo.push_back([task] {
    absl::MutexLock lock(&task->mu);
    Shim s{task->shim_pid, task->shim_pidfd.release()};
    KillAndReap(s);  // closes it
  });

  // The handle, but for the process id, kept before the process may start:
  // a driver killed from here on finds the run again (InspectTask).
  task->started_at = started_at;
  SandboxTaskState& state = task->state;
  state.set_agent_socket(task->agent_socket);
  state.set_token(task->token);
  if (task->cgroup.has_value()) state.set_cgroup_parent(options_.cgroup_parent);
  state.set_task_dir(spec->task_dir);
  state.set_work_dir(spec->work_dir);
  state.set_isolated(spec->root.enabled);
  if (spec->root.enabled) state.set_cwd(spec->cwd);
  state.set_user_namespace(userns.has_value());
  state.set_uid(spec->uid);
  state.set_gid(spec->gid);
  for (gid_t group : spec->groups) state.add_groups(group);
  for (const std::string& env : spec->env) state.add_env(env);
  state.set_started_at_unix_nanos(absl::ToUnixNanos(started_at));
  if (absl::Status kept = KeepStartRecord(*task); !kept.ok()) {
    return absl::Status(
        kept.code(),
        absl::StrCat(prefix, "its start record: ", kept.message()));
  }
  undo.push_back([this, id] {
    if (const std::string dir = state_dir(); !dir.empty()) {
      (void)driver_common::RemoveStartRecord(dir, id);
    }
  });

  using StartCut = SandboxDriverOptions::StartCut;
  if (options_.start_cut_for_test == StartCut::kBeforeNewContainer) {
    std::move(rollback).Cancel();
    return absl::AbortedError(absl::StrCat(prefix, "cut before NewContainer"));
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(40));
    pv1::NewContainerRequest request;
    request.set_token(task->token);
    request.set_container_id(id);
    av1::ProcessSpec* process = request.mutable_process();
    process->add_args(spec->path);
    for (size_t i = 1; i < spec->args.size(); ++i) {
      process->add_args(spec->args[i]);
    }
    for (const std::string& env : spec->env) process->add_env(env);
    process->set_cwd(spec->root.enabled ? spec->cwd : spec->work_dir);
    // A terminal (its size from the first attach), its output one stream.
    process->set_terminal(config.tty());
    FillRlimits(*spec, process);
    FillPrivileges(spec->privileges, process->mutable_privileges());
    process->mutable_user()->set_uid(spec->uid);
    process->mutable_user()->set_gid(spec->gid);
    for (gid_t group : spec->groups) {
      process->mutable_user()->add_additional_gids(group);
    }
    pv1::NewContainerResponse response;
    absl::Status status =
        FromGrpcStatus((*proxy)->NewContainer(&context, request, &response));
    if (status.ok() &&
        options_.start_cut_for_test == StartCut::kAfterNewContainer) {
      std::move(rollback).Cancel();
      return absl::AbortedError(
          absl::StrCat(prefix, "cut after NewContainer"));
    }
    if (status.ok() &&
        options_.start_cut_for_test == StartCut::kLoseNewContainerReply) {
      response.Clear();
      status = absl::UnavailableError("the reply was lost (test)");
    }
    const bool bad_input = absl::IsNotFound(status) ||
                           absl::IsInvalidArgument(status) ||
                           absl::IsPermissionDenied(status);
    if (!status.ok() && !bad_input) {
      // The reply may be what was lost (berth-proxy or the shim killed
      // while the agent started the process): the agent knows whether the
      // process started, and a run that did is this task's.
      absl::StatusOr<av1::InspectContainerResponse> container =
          AgentInspectContainer(task->agent_socket, id, kCallTimeout);
      for (int attempt = 1; attempt < 3 && !container.ok() &&
                            !absl::IsNotFound(container.status());
           ++attempt) {
        absl::SleepFor(absl::Milliseconds(200));
        container = AgentInspectContainer(task->agent_socket, id, kCallTimeout);
      }
      if (container.ok() && !container->main_process_id().empty()) {
        LOG(WARNING) << prefix << "NewContainer at berth-proxy failed ("
                     << status.message() << ") after berth-agent started "
                     << "process " << container->main_process_id()
                     << ": the task runs";
        response.set_process_id(container->main_process_id());
        status = absl::OkStatus();
      }
    }
    if (!status.ok()) {
      return absl::Status(
          bad_input ? absl::StatusCode::kInvalidArgument : status.code(),
          absl::StrCat(prefix, bad_input ? "driver_config.command: " : "",
                       "NewContainer: ", status.message()));
    }
    task->process_id = response.process_id();
  }
  state.set_process_id(task->process_id);
  if (absl::Status kept = KeepStartRecord(*task); !kept.ok()) {
    // The record without the process id still finds the run (the agent
    // names it).
    LOG(WARNING) << prefix << "its start record: " << kept;
  }

  std::move(rollback).Cancel();
  {
    absl::MutexLock lock(&mu_);
    tasks_[id] = task;
  }
  WatchShim(task, prefix);

  dv1::TaskEventsResponse event;
  event.set_task_id(id);
  event.set_allocation_id(config.allocation_id());
  event.set_message(
      absl::StrCat("started in a sandbox (shim pid ", task->shim_pid, ")"));
  PublishTaskEvent(std::move(event));

  RegisterStats(*task);

  dv1::StartTaskResponse response;
  *response.mutable_handle() = HandleOfTask(*task);
  return response;
}

dv1::TaskHandle SandboxDriver::HandleOfTask(const Task& task) const {
  dv1::TaskHandle handle;
  handle.set_version(kStateVersion);
  *handle.mutable_config() = task.config;
  handle.set_state(task.IsExited() ? dv1::TASK_STATE_EXITED
                                   : dv1::TASK_STATE_RUNNING);
  handle.set_driver_state(task.state.SerializeAsString());
  return handle;
}

absl::Status SandboxDriver::KeepStartRecord(const Task& task) {
  const std::string dir = state_dir();
  if (dir.empty()) return absl::OkStatus();
  return driver_common::WriteStartRecord(dir, HandleOfTask(task));
}

absl::StatusOr<dv1::TaskHandle> SandboxDriver::HandleOf(
    const std::string& task_id) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  return HandleOfTask(**task);
}

void SandboxDriver::WatchShim(const std::shared_ptr<Task>& task,
                              const std::string& prefix) {
  absl::MutexLock lock(&task->mu);
  absl::Status status = watcher_.Watch(task->shim_pidfd.get(),
                                       [this, task] { OnShimExited(task); });
  if (!status.ok()) {
    LOG(ERROR) << prefix << "cannot watch its shim: " << status;
  }
}

void SandboxDriver::OnShimExited(const std::shared_ptr<Task>& task) {
  siginfo_t info = {};
  bool reaped = false;
  {
    absl::MutexLock lock(&task->mu);
    if (task->exited) return;
    // Only a shim this driver started is its child (not a recovered one).
    if (task->shim_pidfd.valid()) {
      reaped = waitid(static_cast<idtype_t>(P_PIDFD), task->shim_pidfd.get(),
                      &info, WEXITED) == 0;
    }
  }
  // The shim exits once the exit frame came, after all output: the agent
  // knows how the process ended, code and signal apart (the shim's own
  // status makes exit code 130 and SIGINT both 130).
  dv1::ExitResult result;
  absl::StatusOr<av1::ProcessExit> exit =
      AgentWait(task->agent_socket, task->id, task->process_id, kWaitTimeout);
  if (absl::IsDeadlineExceeded(exit.status())) {
    // The shim is gone and the process runs on without its stdio (e.g. a
    // restarted berth-proxy refused the shim's resume): it ends as the
    // proxy ends the process of a shim that went away.
    LOG(WARNING) << "task " << task->id << ": its shim (pid " << task->shim_pid
                 << ") is gone and process " << task->process_id
                 << " runs without stdio: killing it";
    (void)AgentSignal(task->agent_socket, task->id, task->process_id, SIGKILL,
                      kCallTimeout);
    exit =
        AgentWait(task->agent_socket, task->id, task->process_id, kWaitTimeout);
  }
  if (exit.ok()) {
    result = FromProcessExit(*exit);
  } else {
    if (reaped) {
      result = plugin::ToExitResult(ShimExit(info));
    } else {
      result.set_exit_code(255);
    }
    *result.mutable_exited_at() = base::ToProtoTimestamp(absl::Now());
    LOG(WARNING) << "task " << task->id << ": the agent at "
                 << task->agent_socket << " did not say how process "
                 << task->process_id << " ended (" << exit.status()
                 << "); taking the shim's exit: code " << result.exit_code()
                 << ", signal " << result.signal();
  }
  Finish(task, std::move(result));
}

void SandboxDriver::Finish(const std::shared_ptr<Task>& task,
                           dv1::ExitResult result) {
  if (result.signal() == SIGKILL && task->cgroup.has_value()) {
    absl::StatusOr<uint64_t> ooms = task->cgroup->OomKillCount();
    if (ooms.ok() && *ooms > 0) result.set_oom_killed(true);
  }
  // Recorded before the teardown: a driver killed in between still finds
  // how the task ended.
  if (absl::Status written = WriteExitFile(task->spec.task_dir, result);
      !written.ok()) {
    LOG(WARNING) << "task " << task->id << ": " << written
                 << " (a restarted driver will not know how it ended)";
  }
  // The sandbox has no purpose once its task's process has ended.
  Teardown(*task);
  {
    absl::MutexLock lock(&task->mu);
    if (task->exited) return;
    task->exited = true;
    task->result = result;
    task->completed_at = base::FromProtoTimestamp(result.exited_at());
  }
  dv1::TaskEventsResponse event;
  event.set_task_id(task->id);
  event.set_allocation_id(task->config.allocation_id());
  event.set_message(
      result.signal() != 0
          ? absl::StrCat("was killed by ", plugin::SignalName(result.signal()))
          : absl::StrCat("exited with code ", result.exit_code()));
  (*event.mutable_annotations())["exit_code"] =
      absl::StrCat(result.exit_code());
  (*event.mutable_annotations())["signal"] = absl::StrCat(result.signal());
  PublishTaskEvent(std::move(event));
}

void SandboxDriver::Teardown(Task& task) {
  base::UniqueFd init_pidfd;
  {
    absl::MutexLock lock(&task.mu);
    if (task.torn_down) return;
    task.torn_down = true;
    init_pidfd = std::move(task.init_pidfd);
  }
  if (init_pidfd.valid()) {
    struct pollfd pfd = {init_pidfd.get(), POLLIN, 0};
    if (poll(&pfd, 1, 0) == 0) {
      // Ask the agent first; the init's SIGKILL ends whatever is left.
      AgentDestroySandbox(task.agent_socket, task.id, absl::Milliseconds(500),
                          absl::Seconds(3));
      if (poll(&pfd, 1, 1000) == 0) {
        base::PidfdSendSignal(init_pidfd.get(), SIGKILL);
      }
    }
    // A recovered init is not this process's child: waitid cannot wait for
    // it, but its pidfd becomes readable when it exits.
    if (poll(&pfd, 1, 10000) == 0) {
      LOG(WARNING) << "task " << task.id << ": its init (pid " << task.init_pid
                   << ") did not exit after SIGKILL";
    }
    siginfo_t info;
    waitid(static_cast<idtype_t>(P_PIDFD), init_pidfd.get(), &info,
           WEXITED | WNOHANG);
    init_pidfd.reset();
  }
  absl::StatusOr<std::shared_ptr<pv1::ProxyService::Stub>> proxy = Proxy();
  if (proxy.ok()) {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(3));
    pv1::UnregisterSandboxRequest request;
    request.set_sandbox_id(task.id);
    pv1::UnregisterSandboxResponse response;
    (*proxy)->UnregisterSandbox(&context, request, &response);
  }
}

bool SandboxDriver::WaitExited(const std::shared_ptr<Task>& task,
                               absl::Duration timeout) {
  absl::MutexLock lock(&task->mu);
  return task->mu.AwaitWithTimeout(absl::Condition(&task->exited), timeout);
}

absl::StatusOr<dv1::ExitResult> SandboxDriver::WaitTask(
    const std::string& task_id, const plugin::CancelToken& cancel) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  while (!WaitExited(*task, absl::Milliseconds(100))) {
    if (cancel.IsCancelled()) return absl::CancelledError("wait cancelled");
  }
  absl::MutexLock lock(&(*task)->mu);
  return (*task)->result;
}

absl::Status SandboxDriver::ProxySignal(const std::string& task_id,
                                        const std::string& token, int signal) {
  absl::StatusOr<std::shared_ptr<pv1::ProxyService::Stub>> proxy = Proxy();
  if (!proxy.ok()) return proxy.status();
  grpc::ClientContext context;
  SetDeadline(&context, kCallTimeout);
  pv1::SignalRequest request;
  request.set_token(token);
  request.set_signal(signal);
  pv1::SignalResponse response;
  absl::Status status =
      FromGrpcStatus((*proxy)->Signal(&context, request, &response));
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("task ", task_id, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status SandboxDriver::SignalMain(const Task& task, int signal) {
  absl::Status status = ProxySignal(task.id, task.token, signal);
  if (!absl::IsNotFound(status) && !absl::IsUnavailable(status)) {
    return status;
  }
  absl::Status direct = AgentSignal(task.agent_socket, task.id, task.process_id,
                                    signal, kCallTimeout);
  if (!direct.ok()) {
    return absl::Status(
        direct.code(),
        absl::StrCat(status.message(), "; and through its agent at ",
                     task.agent_socket, ": ", direct.message()));
  }
  return absl::OkStatus();
}

absl::Status SandboxDriver::SignalTask(const std::string& task_id, int signal) {
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  if ((*task)->IsExited()) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, " has exited"));
  }
  absl::Status status = SignalMain(**task, signal);
  if (!status.ok() && (*task)->IsExited()) return absl::OkStatus();
  return status;
}

absl::Status SandboxDriver::AttachTask(plugin::AttachTaskStream* stream) {
  const std::string& task_id = stream->setup().task_id();
  absl::StatusOr<std::shared_ptr<Task>> task = Find(task_id);
  if (!task.ok()) return task.status();
  driver_common::AttachTarget target;
  target.task_id = task_id;
  target.socket_path = driver_common::AttachSocketPath((*task)->spec.task_dir);
  target.stdin_open = (*task)->config.stdin_open();
  return driver_common::RelayAttach(target, stream);
}

absl::Status SandboxDriver::StopTask(const std::string& task_id,
                                     absl::Duration timeout, int signal) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Task>& task = *found;
  if (task->IsExited()) return absl::OkStatus();
  absl::Status sent = SignalMain(*task, signal);
  if (!sent.ok() && !task->IsExited()) LOG(WARNING) << sent << "; killing it";
  if (WaitExited(task, timeout)) return absl::OkStatus();
  (void)SignalMain(*task, SIGKILL);
  if (WaitExited(task, absl::Seconds(5))) return absl::OkStatus();
  Teardown(*task);
  if (WaitExited(task, absl::Seconds(10))) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      "task ", task_id, " did not exit after SIGKILL and DestroySandbox"));
}

absl::Status SandboxDriver::RemoveUnknownTask(const std::string& task_id) {
  if (absl::Status valid = driver_common::CheckTaskId(task_id); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DestroyTask: ", valid.message()));
  }
  const std::string prefix = absl::StrCat("task ", task_id, ": ");
  {
    absl::MutexLock lock(&mu_);
    if (auto it = tasks_.find(task_id); it != tasks_.end()) {
      if (it->second != nullptr) {
        return absl::AlreadyExistsError(
            absl::StrCat("task ", task_id, " is known again"));
      }
      // Its StartTask, or InspectTask's recovery of it, is not done: what
      // it makes would be left behind if this went on now.
      return absl::UnavailableError(absl::StrCat(
          "task ", task_id, " is being started or recovered; ask again"));
    }
    tasks_[task_id] = nullptr;  // no StartTask of it meanwhile
  }
  absl::Cleanup release = [&] {
    absl::MutexLock lock(&mu_);
    tasks_.erase(task_id);
  };
  if (mounts_status_.ok() && mounts_.layout != stats::v1::CGROUP_LAYOUT_NONE) {
    absl::StatusOr<TaskCgroup> cgroup =
        TaskCgroup::Open(mounts_, options_.cgroup_parent, task_id);
    if (!cgroup.ok()) {
      return absl::Status(cgroup.status().code(),
                          absl::StrCat(prefix, cgroup.status().message()));
    }
    const std::vector<std::string>& directories = cgroup->directories();
    if (std::any_of(directories.begin(), directories.end(),
                    [](const std::string& directory) {
                      return access(directory.c_str(), F_OK) == 0;
                    })) {
      absl::Status status = cgroup->KillAll(absl::Seconds(5));
      if (status.ok()) status = cgroup->Remove(absl::Seconds(10));
      if (!status.ok()) {
        return absl::Status(
            status.code(),
            absl::StrCat(prefix, "unknown to this driver; removing its cgroup ",
                         cgroup->path(), ": ", status.message()));
      }
      LOG(INFO) << prefix << "unknown to this driver: killed and removed "
                << "its cgroup " << cgroup->path()
                << " (a start a killed driver did not finish)";
    }
  }
  // Its record at berth-proxy, if the killed driver got as far as
  // registering its sandbox (a proxy that is down forgets it when it starts
  // again: its agent's socket is gone).
  if (absl::StatusOr<std::shared_ptr<pv1::ProxyService::Stub>> proxy = Proxy();
      proxy.ok()) {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(3));
    pv1::UnregisterSandboxRequest request;
    request.set_sandbox_id(task_id);
    pv1::UnregisterSandboxResponse response;
    const grpc::Status unregistered =
        (*proxy)->UnregisterSandbox(&context, request, &response);
    if (!unregistered.ok() &&
        unregistered.error_code() != grpc::StatusCode::NOT_FOUND) {
      LOG(WARNING) << prefix << "UnregisterSandbox at berth-proxy: "
                   << unregistered.error_message();
    }
  }
  // The task directory is the node's when it gave one; the default one
  // under the driver's state directory is the driver's.
  if (const std::string state = state_dir(); !state.empty()) {
    if (absl::Status removed = driver_common::RemoveStartRecord(state, task_id);
        !removed.ok()) {
      return absl::Status(removed.code(),
                          absl::StrCat(prefix, removed.message()));
    }
    const std::string task_dir = driver_common::DefaultTaskDir(state, task_id);
    struct stat task_dir_stat;
    if (lstat(task_dir.c_str(), &task_dir_stat) == 0) {
      if (absl::Status removed = RemoveTree(task_dir); !removed.ok()) {
        return absl::Status(removed.code(),
                            absl::StrCat(prefix, removed.message()));
      }
      LOG(INFO) << prefix << "unknown to this driver: removed " << task_dir;
    }
  }
  return absl::OkStatus();
}

absl::Status SandboxDriver::DestroyTask(const std::string& task_id,
                                        bool force) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (absl::IsNotFound(found.status())) {
    absl::Status removed = RemoveUnknownTask(task_id);
    if (absl::IsAlreadyExists(removed)) {
      found = Find(task_id);  // recovered meanwhile: destroyed as known
    } else if (!removed.ok()) {
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
    if (absl::Status status = StopTask(task_id, absl::ZeroDuration(), SIGKILL);
        !status.ok()) {
      return status;
    }
  }
  Teardown(*task);
  {
    absl::MutexLock lock(&task->mu);
    if (task->shim_pidfd.valid()) {
      watcher_.Forget(task->shim_pidfd.get());
      task->shim_pidfd.reset();
    }
  }
  if (task->cgroup.has_value()) {
    absl::Status status = task->cgroup->KillAll(absl::Seconds(5));
    if (status.ok()) status = task->cgroup->Remove(absl::Seconds(10));
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("task ", task_id, ": ",
                                                      status.message()));
    }
  }
  stats_.Unregister(task_id);
  if (absl::Status removed = RemoveTree(task->spec.task_dir); !removed.ok()) {
    return absl::Status(removed.code(), absl::StrCat("task ", task_id, ": ",
                                                     removed.message()));
  }
  if (const std::string dir = state_dir(); !dir.empty()) {
    if (absl::Status removed = driver_common::RemoveStartRecord(dir, task_id);
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

dv1::TaskStatus SandboxDriver::StatusOf(const Task& task) const {
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
  attributes["shim_pid"] = absl::StrCat(task.shim_pid);
  attributes["init_pid"] = absl::StrCat(task.init_pid);
  attributes["process_id"] = task.process_id;
  if (task.cgroup.has_value()) attributes["cgroup"] = task.cgroup->path();
  attributes["agent_socket"] = task.agent_socket;
  if (task.state.user_namespace()) attributes["user_namespace"] = "true";
  attributes["task_dir"] = task.spec.task_dir;
  attributes["stdout"] = absl::StrCat(task.spec.task_dir, "/logs/stdout.log");
  attributes["stderr"] = absl::StrCat(task.spec.task_dir, "/logs/stderr.log");
  return status;
}

absl::StatusOr<dv1::TaskStatus> SandboxDriver::InspectTask(
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
  if (absl::IsNotFound(task.status())) return RecoverFromStartRecord(task_id);
  if (!task.ok()) return task.status();
  return StatusOf(**task);
}

void SandboxDriver::RegisterStats(const Task& task) {
  if (!task.cgroup.has_value()) return;
  stats_.Register(task.id, task.cgroup->path());
}

absl::StatusOr<stats::v1::TaskResourceUsage> SandboxDriver::TaskStats(
    const std::string& task_id) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(task_id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Task>& task = *found;
  if (!task->cgroup.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", task_id, " has no cgroup to measure (no usable cgroups at ",
        options_.cgroup_root, " when it started)"));
  }
  return stats_.Sample(task_id, task->cgroup->path(), task->in_process_stats);
}

}  // namespace berth::sandbox_driver
