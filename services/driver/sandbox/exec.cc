// Exec in a sandboxed task (ExecTask, ExecTaskStreaming): a token of the
// task's sandbox and a berth-shim of its own, whose stdio are pipes pumped to
// and from the SDK's streams, then berth-proxy's ExecCmd; resizes, a cancel
// and the deadline go through the proxy; how the command ended comes from
// the agent (ARCHITECTURE.md, "berth exec").

#include "plugins/sdk/exec.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "plugins/sdk/child_io.h"
#include "services/common/status.h"
#include "services/driver/sandbox/agent_client.h"
#include "services/driver/sandbox/sandbox_driver.h"
#include "services/driver/sandbox/sandbox_task.h"
#include "services/driver/sandbox/shim_launcher.h"

namespace berth::sandbox_driver {

namespace dv1 = ::berth::driver::v1;
namespace pv1 = ::berth::proxy::v1;
namespace av1 = ::berth::agent::v1;

absl::StatusOr<plugin::ExitStatus> SandboxDriver::RunExec(
    const plugin::ExecOptions& options, absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<Task>> found = Find(options.task_id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Task>& task = *found;
  const std::string prefix = absl::StrCat("task ", options.task_id, ": ");
  if (task->IsExited()) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", options.task_id, " is not running"));
  }
  absl::StatusOr<std::shared_ptr<pv1::ProxyService::Stub>> proxy = Proxy();
  if (!proxy.ok()) return proxy.status();
  std::string token;
  {
    grpc::ClientContext context;
    SetDeadline(&context, kCallTimeout);
    pv1::AllocateTokenRequest request;
    request.set_sandbox_id(task->id);
    pv1::AllocateTokenResponse response;
    absl::Status status =
        FromGrpcStatus((*proxy)->AllocateToken(&context, request, &response));
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat(prefix, "AllocateToken: ", status.message()));
    }
    token = response.token();
  }

  // The shim's stdio: pipes, pumped to and from the SDK's streams.
  plugin::ChildStdio ours;
  base::UniqueFd their_in, their_out, their_err;
  if (options.in != nullptr) {
    int in[2];
    if (pipe2(in, O_CLOEXEC) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat(prefix, "pipe"));
    }
    their_in.reset(in[0]);
    ours.stdin_fd.reset(in[1]);
  } else {
    their_in.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(prefix, "pipe"));
  }
  ours.stdout_fd.reset(out[0]);
  their_out.reset(out[1]);
  if (pipe2(err, O_CLOEXEC) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(prefix, "pipe"));
  }
  ours.stderr_fd.reset(err[0]);
  their_err.reset(err[1]);
  std::string proxy_socket;
  {
    absl::MutexLock lock(&mu_);
    proxy_socket = proxy_socket_;
  }
  absl::StatusOr<Shim> started =
      StartShim(options_.shim_path, proxy_socket, token, their_in.get(),
                their_out.get(), their_err.get());
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat(prefix, started.status().message()));
  }
  Shim shim = *started;
  absl::Cleanup reap = [&shim] { KillAndReap(shim); };
  their_in.reset();
  their_out.reset();
  their_err.reset();

  std::string process_id;
  {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(40));
    pv1::ExecCmdRequest request;
    request.set_token(token);
    request.set_container_id(task->id);
    av1::ProcessSpec* process = request.mutable_process();
    for (const std::string& arg : options.command) process->add_args(arg);
    for (const std::string& env : task->spec.env) process->add_env(env);
    // In the task's root (spec.cwd) when it has one.
    process->set_cwd(task->spec.cwd.empty() ? task->spec.work_dir
                                            : task->spec.cwd);
    FillPrivileges(task->spec.privileges, process->mutable_privileges());
    FillRlimits(task->spec, process);
    process->mutable_user()->set_uid(task->spec.uid);
    process->mutable_user()->set_gid(task->spec.gid);
    for (gid_t group : task->spec.groups) {
      process->mutable_user()->add_additional_gids(group);
    }
    if (options.tty) {
      process->set_terminal(true);
      process->mutable_terminal_size()->set_rows(options.terminal_size.rows);
      process->mutable_terminal_size()->set_columns(
          options.terminal_size.columns);
    }
    pv1::ExecCmdResponse response;
    absl::Status status =
        FromGrpcStatus((*proxy)->ExecCmd(&context, request, &response));
    if (!status.ok()) {
      const bool bad_input =
          absl::IsNotFound(status) || absl::IsInvalidArgument(status);
      return absl::Status(
          bad_input ? absl::StatusCode::kInvalidArgument : status.code(),
          absl::StrCat(prefix, "ExecCmd ", options.command[0], ": ",
                       status.message()));
    }
    process_id = response.process_id();
  }

  // Until the shim exits and its output ended; resizes, a cancel and the
  // deadline go through the proxy.
  plugin::ChildIoOptions child;
  child.exit_fd = shim.pidfd;
  child.kill = [&] { (void)ProxySignal(task->id, token, SIGKILL); };
  if (options.tty) {
    child.resize = [&](const plugin::TerminalSize& size) {
      grpc::ClientContext context;
      SetDeadline(&context, kCallTimeout);
      pv1::ResizeRequest request;
      request.set_token(token);
      request.mutable_size()->set_rows(size.rows);
      request.mutable_size()->set_columns(size.columns);
      pv1::ResizeResponse response;
      (*proxy)->Resize(&context, request, &response);
    };
  }
  child.deadline = deadline;
  absl::Status failure = plugin::PumpChildIo(options, std::move(ours), child);
  if (absl::IsCancelled(failure) || absl::IsUnavailable(failure)) {
    failure = absl::CancelledError(absl::StrCat(prefix, "exec cancelled"));
  } else if (absl::IsDeadlineExceeded(failure)) {
    failure = absl::DeadlineExceededError(
        absl::StrCat(prefix, "exec of ", options.command[0], " timed out"));
  } else if (!failure.ok()) {
    failure =
        absl::Status(failure.code(), absl::StrCat(prefix, failure.message()));
  }
  siginfo_t info = {};
  waitid(static_cast<idtype_t>(P_PIDFD), shim.pidfd, &info, WEXITED);
  close(shim.pidfd);
  shim.pidfd = -1;
  if (!failure.ok()) return failure;
  // How it ended, from the agent (the shim's 128+N is ambiguous).
  absl::StatusOr<av1::ProcessExit> exit =
      AgentWait(task->agent_socket, task->id, process_id, kWaitTimeout);
  if (!exit.ok()) {
    LOG(WARNING) << prefix << "the agent did not say how exec'd process "
                 << process_id << " ended (" << exit.status()
                 << "); taking its shim's exit status";
    return ShimExit(info);
  }
  plugin::ExitStatus status;
  status.exit_code = exit->exit_code();
  status.signal = exit->signal();
  return status;
}

absl::StatusOr<plugin::ExitStatus> SandboxDriver::ExecTaskStreaming(
    const plugin::ExecOptions& options) {
  return RunExec(options, absl::InfiniteFuture());
}

absl::StatusOr<dv1::ExecTaskResponse> SandboxDriver::ExecTask(
    const std::string& task_id, const std::vector<std::string>& command,
    absl::Duration timeout, const plugin::CancelToken& cancel) {
  return plugin::ExecTaskThroughStreaming(
      task_id, command, timeout, cancel,
      [this](const plugin::ExecOptions& options, absl::Time deadline) {
        return RunExec(options, deadline);
      });
}

}  // namespace berth::sandbox_driver
