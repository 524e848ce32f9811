// SandboxDriver::RecoverTask: a task of an earlier driver, from its handle.
// The sandbox (init, agent, the task's process) and the shim outlive the
// driver; the task is re-adopted if they still run, else reported with how
// it ended: from the exit record a driver wrote, or from the agent.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/process.h"
#include "base/proto_time.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "services/common/status.h"
#include "services/common/unix_socket.h"
#include "services/driver/common/init_spec.h"
#include "services/driver/common/start_record.h"
#include "services/driver/common/task_cgroup.h"
#include "services/driver/common/task_dir.h"
#include "services/driver/common/task_spec.h"
#include "services/driver/sandbox/agent_client.h"
#include "services/driver/sandbox/sandbox_driver.h"
#include "services/driver/sandbox/sandbox_state.pb.h"
#include "services/driver/sandbox/sandbox_task.h"

namespace berth::sandbox_driver {

namespace dv1 = ::berth::driver::v1;
namespace pv1 = ::berth::proxy::v1;
namespace av1 = ::berth::agent::v1;
using ::berth::driver_common::TaskCgroup;

namespace {

// Whether `pid` is still the live process that started at `start_ticks`.
bool SameLiveProcess(pid_t pid, uint64_t start_ticks) {
  if (pid <= 0 || start_ticks == 0) return false;
  absl::StatusOr<base::ProcStat> stat = base::ReadProcStat(pid);
  return stat.ok() && stat->start_time == start_ticks && stat->state != 'Z' &&
         stat->state != 'X';
}

// A pidfd of `pid` if it is still the process that started at
// `start_ticks` (checked again after opening), else none.
base::UniqueFd OpenIfSame(pid_t pid, uint64_t start_ticks) {
  if (!SameLiveProcess(pid, start_ticks)) return base::UniqueFd();
  base::UniqueFd pidfd(base::PidfdOpen(pid));
  if (pidfd.valid() && !SameLiveProcess(pid, start_ticks)) {
    return base::UniqueFd();
  }
  if (pidfd.valid()) fcntl(pidfd.get(), F_SETFD, FD_CLOEXEC);
  return pidfd;
}

}  // namespace

absl::StatusOr<dv1::TaskStatus> SandboxDriver::RecoverTask(
    const dv1::TaskHandle& handle) {
  return Recover(handle, /*reserved=*/false);
}

absl::StatusOr<dv1::TaskStatus> SandboxDriver::Recover(
    const dv1::TaskHandle& handle, bool reserved) {
  const std::string& id = handle.config().id();
  if (absl::Status status = driver_common::CheckTaskId(id); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("handle.config.id: ", status.message()));
  }
  const std::string prefix = absl::StrCat("task ", id, ": ");
  SandboxTaskState state;
  if (handle.version() != kStateVersion ||
      !state.ParseFromString(handle.driver_state()) || state.init_pid() <= 0 ||
      state.task_dir().empty() || state.agent_socket().empty() ||
      state.process_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix,
        "handle.driver_state is not a sandbox driver handle of version ",
        kStateVersion));
  }
  if (absl::StatusOr<std::shared_ptr<Task>> known = Find(id); known.ok()) {
    return StatusOf(**known);
  }
  auto task = std::make_shared<Task>();
  task->id = id;
  task->config = handle.config();
  task->spec.id = id;
  task->spec.task_dir = state.task_dir();
  task->spec.work_dir = state.work_dir();
  task->spec.uid = state.uid();
  task->spec.gid = state.gid();
  task->spec.groups.assign(state.groups().begin(), state.groups().end());
  task->spec.env.assign(state.env().begin(), state.env().end());
  if (state.isolated()) {
    // What exec'd commands get: the task's privileges, its root's cwd.
    absl::Status resolved = driver_common::ResolveIsolation(
        task->config.isolation(), isolation_defaults_, &task->spec);
    if (!resolved.ok()) {
      return absl::Status(resolved.code(),
                          absl::StrCat("task ", id, ": ", resolved.message()));
    }
    task->spec.cwd = state.cwd();
  }
  // What exec'd commands get of the task's limits.
  absl::StatusOr<std::vector<driver_common::RlimitSpec>> rlimits =
      driver_common::ResolveRlimits(task->config.rlimits());
  if (!rlimits.ok()) {
    return absl::Status(
        rlimits.status().code(),
        absl::StrCat("task ", id, ": ", rlimits.status().message()));
  }
  task->spec.rlimits = *std::move(rlimits);
  task->agent_socket = state.agent_socket();
  task->token = state.token();
  task->process_id = state.process_id();
  task->shim_pid = state.shim_pid();
  task->init_pid = state.init_pid();
  task->started_at = absl::FromUnixNanos(state.started_at_unix_nanos());
  task->state = state;
  if (!state.cgroup_parent().empty()) {
    absl::StatusOr<TaskCgroup> cgroup =
        TaskCgroup::Open(mounts_, state.cgroup_parent(), id);
    if (!cgroup.ok()) {
      return absl::Status(cgroup.status().code(),
                          absl::StrCat(prefix, cgroup.status().message()));
    }
    task->cgroup = *cgroup;
  }

  // How it ended, if it has: recorded by a driver that saw it end, else
  // asked of the agent, which outlives the shim and the driver.
  std::optional<dv1::ExitResult> ended;
  driver_common::ExitRecord record;
  base::UniqueFd init_pidfd =
      OpenIfSame(state.init_pid(), state.init_start_ticks());
  const bool init_alive = init_pidfd.valid();
  {
    absl::MutexLock lock(&task->mu);
    task->init_pidfd = std::move(init_pidfd);
  }
  if (driver_common::ReadExitRecord(state.task_dir(), &record)) {
    dv1::ExitResult result;
    result.set_exit_code(record.exit_code);
    result.set_signal(record.signal);
    *result.mutable_exited_at() = base::ToProtoTimestamp(
        absl::FromUnixNanos(record.exited_at_unix_nanos));
    ended = result;
  } else if (!init_alive) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, "its sandbox's init (pid ", state.init_pid(),
                     ") is gone and it left no exit record in ",
                     driver_common::ExitRecordPath(state.task_dir())));
  } else {
    // The sandbox lives. The proxy may have forgotten it (restarted without
    // its state): registering again is harmless when it has not.
    absl::StatusOr<std::shared_ptr<pv1::ProxyService::Stub>> proxy = Proxy();
    if (proxy.ok()) {
      grpc::ClientContext context;
      SetDeadline(&context, kCallTimeout);
      pv1::RegisterSandboxRequest request;
      request.set_sandbox_id(id);
      request.set_agent_address(absl::StrCat("unix:", task->agent_socket));
      pv1::RegisterSandboxResponse response;
      absl::Status status = FromGrpcStatus(
          (*proxy)->RegisterSandbox(&context, request, &response));
      if (!status.ok()) {
        LOG(WARNING) << prefix << "registering its sandbox again: " << status;
      }
    } else {
      LOG(WARNING) << prefix << proxy.status();
    }
    base::UniqueFd shim_pidfd =
        OpenIfSame(state.shim_pid(), state.shim_start_ticks());
    if (shim_pidfd.valid()) {
      absl::MutexLock lock(&task->mu);
      task->shim_pidfd = std::move(shim_pidfd);
    } else {
      // The shim is gone, most likely after the process ended while no
      // driver ran. A shim that was this process's child is a zombie:
      // reap it.
      if (const base::UniqueFd zombie(base::PidfdOpen(state.shim_pid()));
          zombie.valid() &&
          StartTicks(state.shim_pid()) == state.shim_start_ticks()) {
        siginfo_t info;
        waitid(static_cast<idtype_t>(P_PIDFD), zombie.get(), &info,
               WEXITED | WNOHANG);
      }
      absl::StatusOr<av1::ProcessExit> exit =
          AgentWait(task->agent_socket, id, task->process_id, absl::Seconds(1));
      if (absl::IsDeadlineExceeded(exit.status())) {
        // Running without its shim, so without stdio: ended as the proxy
        // ends the process of a shim that went away.
        LOG(WARNING) << prefix << "its shim (pid " << state.shim_pid()
                     << ") is gone and process " << task->process_id
                     << " runs without stdio: killing it";
        (void)AgentSignal(task->agent_socket, id, task->process_id, SIGKILL,
                          kCallTimeout);
        exit =
            AgentWait(task->agent_socket, id, task->process_id, kWaitTimeout);
      }
      if (!exit.ok()) {
        Teardown(*task);
        return absl::FailedPreconditionError(
            absl::StrCat(prefix, "its shim (pid ", state.shim_pid(),
                         ") is gone and its agent at ", task->agent_socket,
                         " does not say how process ", task->process_id,
                         " ended: ", exit.status().message()));
      }
      ended = FromProcessExit(*exit);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = tasks_.emplace(id, task);
    if (!inserted) {
      if (it->second == nullptr && reserved) {
        it->second = task;  // the caller's reservation
      } else if (it->second == nullptr) {
        return absl::AlreadyExistsError(
            absl::StrCat("task ", id, " is being started"));
      } else {
        return StatusOf(*it->second);
      }
    }
  }
  if (ended.has_value()) {
    Finish(task, *ended);
  } else {
    RegisterStats(*task);
    WatchShim(task, prefix);
  }
  dv1::TaskEventsResponse event;
  event.set_task_id(id);
  event.set_allocation_id(task->config.allocation_id());
  event.set_message(task->IsExited() ? "recovered (already exited)"
                                     : "recovered");
  PublishTaskEvent(std::move(event));
  return StatusOf(*task);
}

absl::StatusOr<dv1::TaskStatus> SandboxDriver::RecoverFromStartRecord(
    const std::string& task_id) {
  const absl::Status unknown =
      absl::NotFoundError(absl::StrCat("task ", task_id, " not found"));
  const std::string dir = state_dir();
  if (dir.empty() || !driver_common::CheckTaskId(task_id).ok()) return unknown;
  // The id is held meanwhile: a StartTask or DestroyTask of it waits (is
  // answered UNAVAILABLE) rather than racing the recovery.
  {
    absl::MutexLock lock(&mu_);
    if (auto it = tasks_.find(task_id); it != tasks_.end()) {
      if (it->second != nullptr) return StatusOf(*it->second);
      return absl::UnavailableError(absl::StrCat(
          "task ", task_id, " is being started or destroyed; ask again"));
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
  absl::StatusOr<dv1::TaskHandle> handle =
      driver_common::ReadStartRecord(dir, task_id);
  if (absl::IsNotFound(handle.status())) return unknown;
  const std::string prefix = absl::StrCat("task ", task_id, ": ");
  SandboxTaskState state;
  if (!handle.ok() || handle->version() != kStateVersion ||
      !state.ParseFromString(handle->driver_state())) {
    const std::string why =
        handle.ok() ? absl::StrCat("not a sandbox driver handle of version ",
                                   kStateVersion)
                    : std::string(handle.status().message());
    // Not "never started": a record it cannot read may be of a run.
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "its start record ",
        driver_common::StartRecordPath(dir, task_id), " cannot be used (", why,
        "): whether it ran cannot be told"));
  }
  if (state.process_id().empty()) {
    // Killed while it asked for the process: the agent says whether it
    // started it. Only the agent's NOT_FOUND, or an agent that is gone
    // (its socket absent or refusing), means it did not.
    absl::StatusOr<av1::InspectContainerResponse> container =
        absl::NotFoundError("no agent socket in the record");
    if (!state.agent_socket().empty()) {
      container =
          AgentInspectContainer(state.agent_socket(), task_id, kCallTimeout);
      if (!container.ok() && !absl::IsNotFound(container.status())) {
        absl::StatusOr<SocketPathState> agent =
            ProbeSocketPath(state.agent_socket());
        if (!agent.ok() || *agent == SocketPathState::kLive) {
          return absl::UnavailableError(absl::StrCat(
              prefix, "its start was cut off and berth-agent at ",
              state.agent_socket(), " does not say yet whether it started: ",
              container.status().message(), "; ask again"));
        }
      }
    }
    if (!container.ok() || container->main_process_id().empty()) {
      LOG(INFO) << prefix << "a start cut off before its process started ("
                << (container.ok() ? "no main process"
                                   : container.status().ToString())
                << ")";
      return absl::NotFoundError(absl::StrCat(
          "task ", task_id,
          " not found: a start of it was cut off before its process started"));
    }
    state.set_process_id(container->main_process_id());
    handle->set_driver_state(state.SerializeAsString());
    if (absl::Status kept = driver_common::WriteStartRecord(dir, *handle);
        !kept.ok()) {
      LOG(WARNING) << prefix << kept;
    }
  }
  absl::StatusOr<dv1::TaskStatus> recovered =
      Recover(*handle, /*reserved=*/true);
  if (!recovered.ok()) {
    LOG(WARNING) << prefix << "its start was cut off and its run cannot be "
                 << "recovered: " << recovered.status();
    return absl::NotFoundError(
        absl::StrCat("task ", task_id, " not found: its start was cut off and ",
                     recovered.status().message()));
  }
  LOG(INFO) << prefix << "recovered the run a start cut off had begun";
  return recovered;
}

}  // namespace berth::sandbox_driver
