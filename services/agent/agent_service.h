// berth-agent's service (agent/v1): runs inside a sandbox, starts the
// processes of its containers (with pipes or a pseudo-terminal), signals,
// resizes and waits for them, reaps every child, and carries each process's
// I/O on one ProcessIo stream with offsets, acknowledgements and a bounded
// window of unacknowledged output (output_window.h).
//
// Every call must carry a deadline: one without is INVALID_ARGUMENT "a
// deadline is required" (deadline.h).
//
// The pieces: spawn.h starts a process, process.h is a process and the
// thread that moves its I/O, io_reactor.h is a ProcessIo stream; this file
// holds the containers, reaps every child and answers the calls.

#ifndef SERVICES_AGENT_AGENT_SERVICE_H_
#define SERVICES_AGENT_AGENT_SERVICE_H_

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "services/agent/container_ns.h"
#include "services/agent/process.h"

namespace berth::agent {

inline constexpr char kAgentVersion[] = "0.1.0";

struct AgentOptions {
  // Names the sandbox in logs.
  std::string sandbox_id;
  // Unacknowledged output kept per stream (stdout, stderr) of a process;
  // when it is full the agent stops reading that pipe.
  size_t output_window_bytes = 1 << 20;
  // Each container's processes in pid and mount namespaces of their own
  // that the agent is not in (container_ns.h): they can neither signal nor
  // ptrace it. Needs CAP_SYS_ADMIN. The container ends (every process of it
  // killed) when its main process does.
  bool container_namespaces = false;
  // With container_namespaces: a mount point (the directory of the agent's
  // socket) unmounted from the containers' view.
  std::string hide_dir;
  // Called once, after the first DestroySandbox has killed every process
  // and its answer has been sent; berth-agent then shuts down and exits 0.
  // May be empty.
  std::function<void()> on_destroyed;
};

// Thread-safe. Construct before serving; becomes the reaper of every child
// of this process (PID 1 of the sandbox, else a child subreaper), so do not
// wait for children of the process elsewhere while it lives. Ignores
// SIGPIPE in the process (its children get the default). The destructor
// kills every process it started (SIGKILL to their process groups).
class AgentServiceImpl final
    : public v1::AgentService::WithCallbackMethod_ProcessIo<
          v1::AgentService::WithCallbackMethod_DestroySandbox<
              v1::AgentService::Service>> {
 public:
  explicit AgentServiceImpl(AgentOptions options);
  ~AgentServiceImpl() override;

  AgentServiceImpl(const AgentServiceImpl&) = delete;
  AgentServiceImpl& operator=(const AgentServiceImpl&) = delete;

  grpc::Status Ping(grpc::ServerContext* context,
                    const v1::PingRequest* request,
                    v1::PingResponse* response) override;
  grpc::Status NewContainer(grpc::ServerContext* context,
                            const v1::NewContainerRequest* request,
                            v1::NewContainerResponse* response) override;
  grpc::Status ExecCmd(grpc::ServerContext* context,
                       const v1::ExecCmdRequest* request,
                       v1::ExecCmdResponse* response) override;
  grpc::Status Signal(grpc::ServerContext* context,
                      const v1::SignalRequest* request,
                      v1::SignalResponse* response) override;
  grpc::Status Resize(grpc::ServerContext* context,
                      const v1::ResizeRequest* request,
                      v1::ResizeResponse* response) override;
  grpc::ServerBidiReactor<v1::ProcessIoRequest, v1::ProcessIoResponse>*
  ProcessIo(grpc::CallbackServerContext* context) override;
  // Acknowledges output out of band (never queued behind stdin).
  grpc::Status AckOutput(grpc::ServerContext* context,
                         const v1::AckOutputRequest* request,
                         v1::AckOutputResponse* response) override;
  grpc::Status WaitProcess(grpc::ServerContext* context,
                           const v1::WaitProcessRequest* request,
                           v1::WaitProcessResponse* response) override;
  // The container's main process and whether it has exited: for a caller
  // that lost NewContainer's reply.
  grpc::Status InspectContainer(
      grpc::ServerContext* context, const v1::InspectContainerRequest* request,
      v1::InspectContainerResponse* response) override;
  // Kills on a thread of its own; on_destroyed runs once the answer is
  // sent, so that a server shutting down then has no call in flight.
  grpc::ServerUnaryReactor* DestroySandbox(
      grpc::CallbackServerContext* context,
      const v1::DestroySandboxRequest* request,
      v1::DestroySandboxResponse* response) override;

 private:
  struct Container {
    std::string first_process_id;
    // With container_namespaces: the holder of its namespaces.
    ContainerNamespaces namespaces;
    absl::flat_hash_map<std::string, std::shared_ptr<Process>> processes;
  };

  // Starts `spec` as process `process_id` of `container_id`, registered in
  // containers_ (the container is made when `new_container`).
  absl::StatusOr<pid_t> Start(const std::string& container_id,
                              const std::string& process_id,
                              const v1::ProcessSpec& spec, bool new_container)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::shared_ptr<Process>> Find(const std::string& container_id,
                                                const std::string& process_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // SIGTERM to every running process group, SIGKILL after `grace` (at once
  // when zero), then waits (up to a few seconds) until all were reaped.
  void KillAll(absl::Duration grace) ABSL_LOCKS_EXCLUDED(mu_);
  // Reaps every child; records the exits of the processes it started.
  void ReapLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // SIGKILL to the holder of `container_id`'s namespaces, if it has one:
  // every process of the container ends.
  void KillContainer(const std::string& container_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentOptions options_;
  const absl::Time started_at_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Container> containers_ ABSL_GUARDED_BY(mu_);
  // Processes started and not reaped yet, by pid.
  absl::flat_hash_map<pid_t, std::shared_ptr<Process>> running_
      ABSL_GUARDED_BY(mu_);
  // Counts children started: the reaper waits for a change when it has none.
  uint64_t spawn_generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_reaper_ ABSL_GUARDED_BY(mu_) = false;
  bool destroyed_ ABSL_GUARDED_BY(mu_) = false;
  // Threads of DestroySandbox calls, joined by the destructor.
  std::vector<std::thread> destroyers_ ABSL_GUARDED_BY(mu_);
  std::thread reaper_;
};

}  // namespace berth::agent

#endif  // SERVICES_AGENT_AGENT_SERVICE_H_
