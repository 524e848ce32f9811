#include "services/agent/agent_service.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "services/agent/container_ns.h"
#include "services/agent/deadline.h"
#include "services/agent/io_reactor.h"
#include "services/agent/spawn.h"
#include "services/common/status.h"

namespace berth::agent {

// --- AgentServiceImpl.

AgentServiceImpl::AgentServiceImpl(AgentOptions options)
    : options_(std::move(options)), started_at_(absl::Now()) {
  // A process that closed its stdin must not kill the agent through a write
  // to that pipe (EPIPE is handled); children get the default back.
  signal(SIGPIPE, SIG_IGN);
  if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    PLOG(WARNING) << "becoming a child subreaper";
  }
  reaper_ = std::thread([this] { ReapLoop(); });
}

AgentServiceImpl::~AgentServiceImpl() {
  std::vector<std::thread> destroyers;
  {
    absl::MutexLock lock(&mu_);
    destroyers.swap(destroyers_);
  }
  for (std::thread& thread : destroyers) thread.join();
  KillAll(absl::ZeroDuration());
  {
    absl::MutexLock lock(&mu_);
    stop_reaper_ = true;
  }
  // The reaper may be blocked in waitpid for a child we do not know (an
  // orphan we inherited): a child that exits at once wakes it.
  const pid_t waker = fork();
  if (waker == 0) _exit(0);
  reaper_.join();
  if (waker > 0) waitpid(waker, nullptr, 0);
  std::vector<std::shared_ptr<Process>> processes;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, container] : containers_) {
      for (auto& [pid, process] : container.processes) {
        processes.push_back(process);
      }
    }
    containers_.clear();
  }
  for (const std::shared_ptr<Process>& process : processes) {
    {
      absl::MutexLock lock(&process->mu);
      process->stopping = true;
      process->Wake();
    }
    if (process->io_thread.joinable()) process->io_thread.join();
  }
}

void AgentServiceImpl::ReapLoop() {
  while (true) {
    uint64_t generation;
    {
      absl::MutexLock lock(&mu_);
      if (stop_reaper_) return;
      generation = spawn_generation_;
    }
    // Look first (WNOWAIT), reap under the process's lock: Signal never
    // sends to a pid that was reaped and may have been reused.
    siginfo_t info = {};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT | __WALL) == 0 &&
        info.si_pid > 0) {
      const pid_t pid = info.si_pid;
      std::shared_ptr<Process> process;
      {
        absl::MutexLock lock(&mu_);
        auto it = running_.find(pid);
        if (it != running_.end()) process = it->second;
      }
      if (process != nullptr) {
        process->ReapAndRecord();
        absl::MutexLock lock(&mu_);
        running_.erase(pid);
        // The main process's end is its container's, as a pid namespace's
        // init's is.
        auto container = containers_.find(process->container_id);
        if (container != containers_.end() &&
            container->second.first_process_id == process->process_id) {
          KillContainer(process->container_id);
        }
      } else {
        waitpid(pid, nullptr, __WALL);
        VLOG(1) << "reaped pid " << pid;
      }
      continue;
    }
    if (errno == EINTR) continue;
    // No children: wait until one is started, or until the end.
    absl::MutexLock lock(&mu_);
    const auto changed = [this, generation]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stop_reaper_ || spawn_generation_ != generation;
    };
    mu_.Await(absl::Condition(&changed));
  }
}

absl::StatusOr<std::shared_ptr<Process>> AgentServiceImpl::Find(
    const std::string& container_id, const std::string& process_id) {
  if (container_id.empty()) {
    return absl::InvalidArgumentError("container_id is empty");
  }
  if (process_id.empty()) {
    return absl::InvalidArgumentError("process_id is empty");
  }
  absl::MutexLock lock(&mu_);
  auto container = containers_.find(container_id);
  if (container == containers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("container \"", container_id, "\" not found"));
  }
  auto process = container->second.processes.find(process_id);
  if (process == container->second.processes.end()) {
    return absl::NotFoundError(absl::StrCat("process \"", process_id,
                                            "\" not found in container \"",
                                            container_id, "\""));
  }
  return process->second;
}

absl::StatusOr<pid_t> AgentServiceImpl::Start(const std::string& container_id,
                                              const std::string& process_id,
                                              const v1::ProcessSpec& spec,
                                              bool new_container) {
  if (container_id.empty()) {
    return absl::InvalidArgumentError("container_id is empty");
  }
  if (process_id.empty()) {
    return absl::InvalidArgumentError("process_id is empty");
  }
  if (absl::Status valid = ValidateProcessSpec(spec); !valid.ok()) {
    return valid;
  }

  absl::MutexLock lock(&mu_);
  if (destroyed_) {
    return absl::FailedPreconditionError("the sandbox is being destroyed");
  }
  auto container = containers_.find(container_id);
  if (new_container && container != containers_.end()) {
    return absl::AlreadyExistsError(
        absl::StrCat("container \"", container_id, "\" already exists"));
  }
  if (!new_container) {
    if (container == containers_.end()) {
      return absl::NotFoundError(
          absl::StrCat("container \"", container_id, "\" not found"));
    }
    if (container->second.processes.contains(process_id)) {
      return absl::AlreadyExistsError(absl::StrCat(
          ProcessName(container_id, process_id), " already exists"));
    }
  }

  base::UniqueFd wake_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd.valid()) return absl::ErrnoToStatus(errno, "eventfd");
  std::optional<ContainerNamespaces> namespaces;
  SpawnPlace place;
  if (options_.container_namespaces) {
    if (new_container) {
      bool forked = false;
      absl::StatusOr<ContainerNamespaces> made =
          StartContainerNamespaces(options_.hide_dir, &forked);
      if (forked) ++spawn_generation_;  // the reaper reaps the holder
      if (!made.ok()) {
        return absl::Status(made.status().code(),
                            absl::StrCat("container \"", container_id,
                                         "\": ", made.status().message()));
      }
      namespaces = *std::move(made);
      place.holder_pidfd = namespaces->holder_pidfd.get();
      place.pid_ns = namespaces->pid_ns.get();
      place.mount_ns = namespaces->mount_ns.get();
    } else {
      place.holder_pidfd = container->second.namespaces.holder_pidfd.get();
      place.pid_ns = container->second.namespaces.pid_ns.get();
      place.mount_ns = container->second.namespaces.mount_ns.get();
    }
  }
  bool forked = false;
  absl::StatusOr<SpawnedProcess> spawned = SpawnProcess(spec, &forked, place);
  // The reaper now has a child to wait for (one that did not execute too:
  // it reaps it, not in running_).
  if (forked) ++spawn_generation_;
  if (!spawned.ok()) {
    if (namespaces.has_value()) {
      base::PidfdSendSignal(namespaces->holder_pidfd.get(), SIGKILL);
    }
    if (!new_container && absl::IsFailedPrecondition(spawned.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "container \"", container_id, "\": ", spawned.status().message()));
    }
    return spawned.status();
  }
  const bool terminal = spec.terminal();
  const pid_t pid = spawned->pid;
  auto process = std::make_shared<Process>(container_id, process_id,
                                           options_.output_window_bytes);
  process->terminal = terminal;
  process->pid = pid;
  process->wake_fd = std::move(wake_fd);
  {
    absl::MutexLock process_lock(&process->mu);
    process->in_fd = std::move(spawned->in_fd);
    process->out_fd = std::move(spawned->out_fd);
    process->err_fd = std::move(spawned->err_fd);
    if (terminal) process->err.Close();  // stdout and stderr are one
  }
  process->io_thread = std::thread([p = process.get()] { p->IoLoop(); });
  Container& target = containers_[container_id];
  if (new_container) target.first_process_id = process_id;
  if (namespaces.has_value()) target.namespaces = *std::move(namespaces);
  target.processes[process_id] = process;
  running_[pid] = process;
  LOG(INFO) << "sandbox " << options_.sandbox_id << ": started "
            << ProcessName(container_id, process_id) << " (" << spec.args(0)
            << ") as pid " << pid << (terminal ? " with a terminal" : "");
  return pid;
}

void AgentServiceImpl::KillContainer(const std::string& container_id) {
  auto container = containers_.find(container_id);
  if (container == containers_.end() ||
      !container->second.namespaces.holder_pidfd.valid()) {
    return;
  }
  // Through the pidfd: the holder may have been reaped, its pid reused.
  base::PidfdSendSignal(container->second.namespaces.holder_pidfd.get(),
                        SIGKILL);
}

void AgentServiceImpl::KillAll(absl::Duration grace) {
  const auto signal_all = [this](int sig) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [pid, process] : running_) {
      kill(-pid, sig);  // its process group (setsid)
      kill(pid, sig);
    }
  };
  const auto none_running = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return running_.empty();
  };
  absl::MutexLock lock(&mu_);
  if (grace > absl::ZeroDuration()) {
    signal_all(SIGTERM);
    mu_.AwaitWithTimeout(absl::Condition(&none_running), grace);
  }
  signal_all(SIGKILL);
  for (const auto& [id, container] : containers_) KillContainer(id);
  if (getpid() == 1) kill(-1, SIGKILL);  // everything in the sandbox
  if (!mu_.AwaitWithTimeout(absl::Condition(&none_running),
                            absl::Seconds(10))) {
    LOG(ERROR) << "sandbox " << options_.sandbox_id << ": " << running_.size()
               << " processes still not reaped after SIGKILL";
  }
}

// --- The calls.

grpc::Status AgentServiceImpl::Ping(grpc::ServerContext* context,
                                    const v1::PingRequest* /*request*/,
                                    v1::PingResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  response->set_agent_version(kAgentVersion);
  const absl::Duration uptime = absl::Now() - started_at_;
  const int64_t nanos = absl::ToInt64Nanoseconds(uptime);
  response->mutable_uptime()->set_seconds(nanos / 1000000000);
  response->mutable_uptime()->set_nanos(
      static_cast<int32_t>(nanos % 1000000000));
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::NewContainer(
    grpc::ServerContext* context, const v1::NewContainerRequest* request,
    v1::NewContainerResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<pid_t> pid =
      Start(request->container_id(), request->process_id(), request->process(),
            /*new_container=*/true);
  if (!pid.ok()) return ToGrpcStatus(pid.status());
  response->set_pid(*pid);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::ExecCmd(grpc::ServerContext* context,
                                       const v1::ExecCmdRequest* request,
                                       v1::ExecCmdResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<pid_t> pid =
      Start(request->container_id(), request->process_id(), request->process(),
            /*new_container=*/false);
  if (!pid.ok()) return ToGrpcStatus(pid.status());
  response->set_pid(*pid);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::Signal(grpc::ServerContext* context,
                                      const v1::SignalRequest* request,
                                      v1::SignalResponse* /*response*/) {
  if (!HasDeadline(*context)) return NoDeadline();
  if (request->signal() <= 0 || request->signal() >= NSIG) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("signal ", request->signal(), " is not a signal"));
  }
  absl::StatusOr<std::shared_ptr<Process>> process =
      Find(request->container_id(), request->process_id());
  if (!process.ok()) return ToGrpcStatus(process.status());
  absl::MutexLock lock(&(*process)->mu);
  if ((*process)->exited) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat((*process)->name(), " has exited"));
  }
  // Not reaped yet (the reaper takes the process's lock to record the
  // exit), so the pid is still ours.
  if (kill((*process)->pid, request->signal()) != 0) {
    return ToGrpcStatus(absl::ErrnoToStatus(
        errno, absl::StrCat("signalling ", (*process)->name())));
  }
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::Resize(grpc::ServerContext* context,
                                      const v1::ResizeRequest* request,
                                      v1::ResizeResponse* /*response*/) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<std::shared_ptr<Process>> process =
      Find(request->container_id(), request->process_id());
  if (!process.ok()) return ToGrpcStatus(process.status());
  absl::MutexLock lock(&(*process)->mu);
  if (!(*process)->terminal) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat((*process)->name(), " has no terminal"));
  }
  if (!(*process)->in_fd.valid()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat((*process)->name(), " has ended"));
  }
  SetWindowSize((*process)->in_fd.get(), request->size());
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<v1::ProcessIoRequest, v1::ProcessIoResponse>*
AgentServiceImpl::ProcessIo(grpc::CallbackServerContext* context) {
  return new IoReactor(context, [this](const std::string& container_id,
                                       const std::string& process_id) {
    return Find(container_id, process_id);
  });
}

grpc::Status AgentServiceImpl::AckOutput(grpc::ServerContext* context,
                                         const v1::AckOutputRequest* request,
                                         v1::AckOutputResponse* /*response*/) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<std::shared_ptr<Process>> found =
      Find(request->container_id(), request->process_id());
  if (!found.ok()) return ToGrpcStatus(found.status());
  Process& process = **found;
  absl::MutexLock lock(&process.mu);
  absl::Status status = process.out.Ack(request->stdout_offset());
  if (status.ok()) status = process.err.Ack(request->stderr_offset());
  if (!status.ok()) {
    return ToGrpcStatus(absl::OutOfRangeError(
        absl::StrCat(process.name(), ": ", status.message())));
  }
  process.Wake();  // there may be room to read again
  if (process.reactor != nullptr) {
    process.reactor->Acked(process, request->stdout_offset(),
                           request->stderr_offset());
  }
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::WaitProcess(
    grpc::ServerContext* context, const v1::WaitProcessRequest* request,
    v1::WaitProcessResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<std::shared_ptr<Process>> found =
      Find(request->container_id(), request->process_id());
  if (!found.ok()) return ToGrpcStatus(found.status());
  Process& process = **found;
  const absl::Time deadline = Deadline(*context);
  absl::MutexLock lock(&process.mu);
  // In steps, to notice a cancelled call (or a server shutting down).
  while (!process.exited) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    if (absl::Now() >= deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          absl::StrCat(process.name(), " is still running"));
    }
    process.mu.AwaitWithDeadline(
        absl::Condition(&process.exited),
        std::min(deadline, absl::Now() + absl::Milliseconds(200)));
  }
  *response->mutable_exit() = process.exit;
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::InspectContainer(
    grpc::ServerContext* context, const v1::InspectContainerRequest* request,
    v1::InspectContainerResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  if (request->container_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "container_id is empty");
  }
  std::shared_ptr<Process> main;
  {
    absl::MutexLock lock(&mu_);
    auto container = containers_.find(request->container_id());
    if (container == containers_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("container \"", request->container_id(),
                                       "\" not found"));
    }
    response->set_main_process_id(container->second.first_process_id);
    auto process =
        container->second.processes.find(container->second.first_process_id);
    if (process != container->second.processes.end()) main = process->second;
  }
  if (main != nullptr) {
    absl::MutexLock lock(&main->mu);
    response->set_exited(main->exited);
  }
  return grpc::Status::OK;
}

namespace {

// Answers a DestroySandbox call; runs `on_done` after the answer is sent.
class DestroyReactor : public grpc::ServerUnaryReactor {
 public:
  explicit DestroyReactor(std::function<void()> on_done)
      : on_done_(std::move(on_done)) {}
  void OnDone() override {
    if (on_done_) on_done_();
    delete this;
  }

 private:
  const std::function<void()> on_done_;
};

}  // namespace

grpc::ServerUnaryReactor* AgentServiceImpl::DestroySandbox(
    grpc::CallbackServerContext* context,
    const v1::DestroySandboxRequest* request,
    v1::DestroySandboxResponse* /*response*/) {
  if (!HasDeadline(*context)) {
    auto* reactor = new DestroyReactor(nullptr);
    reactor->Finish(NoDeadline());
    return reactor;
  }
  absl::Duration grace = absl::Seconds(5);
  if (request->has_timeout()) {
    grace = absl::Seconds(request->timeout().seconds()) +
            absl::Nanoseconds(request->timeout().nanos());
  }
  // Keep time to answer before the caller's deadline.
  grace = std::max(absl::ZeroDuration(),
                   std::min(grace, Deadline(*context) - absl::Now() -
                                       absl::Milliseconds(500)));
  absl::MutexLock lock(&mu_);
  const bool first = !destroyed_;
  destroyed_ = true;
  auto* reactor = new DestroyReactor(first ? options_.on_destroyed
                                           : std::function<void()>());
  LOG(INFO) << "sandbox " << options_.sandbox_id
            << ": destroying, SIGKILL after " << grace;
  // Not on gRPC's callback thread: the grace may take seconds.
  destroyers_.emplace_back([this, reactor, grace] {
    KillAll(grace);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace berth::agent
