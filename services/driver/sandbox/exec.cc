// Exec in a sandboxed task (ExecTask, ExecTaskStreaming): a token of the
// task's sandbox and a berth-shim of its own, whose stdio are pipes pumped to
// and from the SDK's streams, then berth-proxy's ExecCmd; resizes, a cancel
// and the deadline go through the proxy; how the command ended comes from
// the agent (ARCHITECTURE.md, "berth exec").

#include "plugins/sdk/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/agent/v1/agent.pb.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
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
  int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  absl::Cleanup close_pipes = [&] {
    for (int* p : {in_pipe, out_pipe, err_pipe}) {
      for (int i = 0; i < 2; ++i) {
        if (p[i] >= 0) close(p[i]);
      }
    }
  };
  if (options.in != nullptr) {
    if (pipe2(in_pipe, O_CLOEXEC) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat(prefix, "pipe"));
    }
  } else {
    in_pipe[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(prefix, "pipe"));
  }
  std::string proxy_socket;
  {
    absl::MutexLock lock(&mu_);
    proxy_socket = proxy_socket_;
  }
  absl::StatusOr<Shim> started =
      StartShim(options_.shim_path, proxy_socket, token, in_pipe[0],
                out_pipe[1], err_pipe[1]);
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat(prefix, started.status().message()));
  }
  Shim shim = *started;
  absl::Cleanup reap = [&shim] { KillAndReap(shim); };
  for (int* fd : {&in_pipe[0], &out_pipe[1], &err_pipe[1]}) {
    close(*fd);
    *fd = -1;
  }

  std::atomic<bool> output_failed{false};
  auto pump_out = [&output_failed](int fd, plugin::ExecOutput* output) {
    char buffer[plugin::kMaxExecFrameBytes];
    while (true) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!output_failed && output != nullptr &&
          !output->Write(absl::string_view(buffer, n))) {
        output_failed = true;
      }
    }
  };
  std::thread out_thread(pump_out, out_pipe[0], options.out);
  std::thread err_thread(pump_out, err_pipe[0], options.err);
  std::thread in_thread;
  if (options.in != nullptr) {
    // The thread owns the write end: the command sees EOF when stdin ends.
    const int fd = in_pipe[1];
    in_pipe[1] = -1;
    in_thread = std::thread([&options, fd] {
      absl::Cleanup close_fd = [fd] { close(fd); };
      char buffer[plugin::kMaxExecFrameBytes];
      while (true) {
        const size_t n = options.in->Read(buffer, sizeof(buffer));
        if (n == 0) break;
        size_t done = 0;
        while (done < n) {
          const ssize_t w = write(fd, buffer + done, n - done);
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) return;
          done += static_cast<size_t>(w);
        }
      }
    });
  }
  auto close_stdin = [&] {
    if (options.in != nullptr) options.in->Close();
    if (in_thread.joinable()) in_thread.join();
  };
  absl::Cleanup join = [&] {
    close_stdin();
    out_thread.join();
    err_thread.join();
  };

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
    process->set_cwd(task->spec.work_dir);
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

  // Until the shim exits: resizes, cancellation and the deadline.
  bool killed = false;
  absl::Status failure;
  while (true) {
    struct pollfd pfd = {shim.pidfd, POLLIN, 0};
    if (poll(&pfd, 1, 50) > 0) break;
    if (options.tty && options.resizes != nullptr) {
      if (std::optional<plugin::TerminalSize> size =
              options.resizes->TakeLatest();
          size.has_value()) {
        grpc::ClientContext context;
        SetDeadline(&context, kCallTimeout);
        pv1::ResizeRequest request;
        request.set_token(token);
        request.mutable_size()->set_rows(size->rows);
        request.mutable_size()->set_columns(size->columns);
        pv1::ResizeResponse response;
        (*proxy)->Resize(&context, request, &response);
      }
    }
    if (killed) continue;
    const bool cancelled =
        (options.cancel != nullptr && options.cancel->IsCancelled()) ||
        output_failed;
    if (cancelled || absl::Now() >= deadline) {
      failure =
          cancelled
              ? absl::CancelledError(absl::StrCat(prefix, "exec cancelled"))
              : absl::DeadlineExceededError(absl::StrCat(
                    prefix, "exec of ", options.command[0], " timed out"));
      (void)ProxySignal(task->id, token, SIGKILL);
      killed = true;
    }
  }
  siginfo_t info = {};
  waitid(static_cast<idtype_t>(P_PIDFD), shim.pidfd, &info, WEXITED);
  close(shim.pidfd);
  shim.pidfd = -1;
  std::move(join).Invoke();
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
