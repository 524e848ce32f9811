// berth.proxy.v1.ProxyService: sandboxes, tokens, and the stdio of every
// sandboxed process between its shim and its sandbox's agent.
//
// Everything is asynchronous (gRPC's callback API): a NewContainer or
// ExecCmd waiting for its shim is an entry in a map and a timer, not a parked
// thread, so other calls go on meanwhile. A process is started on the agent
// only once its shim is connected; then the shim's Connect stream and the
// agent's ProcessIo stream for that process are joined, with at most one
// message in flight per direction, so each process has its own back-pressure.

#ifndef SERVICES_PROXY_PROXY_SERVICE_H_
#define SERVICES_PROXY_PROXY_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/agent/v1/agent.grpc.pb.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/proxy/clock.h"
#include "services/proxy/in_flight.h"
#include "services/proxy/state_store.h"
#include "services/proxy/timer.h"

namespace berth {
namespace proxy {

struct ProxyOptions {
  // How long an unclaimed token lives when AllocateToken gives no ttl.
  absl::Duration default_token_ttl = absl::Seconds(60);
  // How long NewContainer/ExecCmd wait for the shim when they give no
  // shim_timeout.
  absl::Duration default_shim_timeout = absl::Seconds(30);
  // Deadline of the Ping of RegisterSandbox.
  absl::Duration ping_timeout = absl::Seconds(2);
  // Deadline of each unary call to an agent.
  absl::Duration agent_call_timeout = absl::Seconds(10);
  // Where sandboxes and token bindings are kept across a restart; empty:
  // nowhere.
  std::string state_dir;
  // What tokens' lifetimes, the waits for shims and the retries of acks are
  // measured by (the deadlines of gRPC calls are real time); not owned, and
  // must outlive the service. Null: the real clock.
  Clock* clock = nullptr;

  // Tests only: plays a kill -9 of the proxy in the middle of a start. Asked
  // (with the proxy's lock held: it must not call the proxy) just before an
  // agent is asked to start a process, and when the agent has answered,
  // before the proxy acts on the answer; true: the proxy does nothing more
  // for that start, as if it had died there (no call to the agent / its
  // answer ignored, no record written or removed, no stream opened), and
  // the caller of NewContainer or ExecCmd gets UNAVAILABLE.
  enum class StartStep { kBeforeAgentCall, kAfterAgentAnswer };
  std::function<bool(StartStep)> die_during_start_for_test;
};

// "unix:PATH" or a bare path -> the gRPC target "unix:PATH"; an empty address
// is INVALID_ARGUMENT naming agent_address.
absl::StatusOr<std::string> AgentTarget(const std::string& agent_address);

// Why the agent at `target` ("unix:PATH") can never serve again (its socket
// is gone, or nobody listens on it: an agent never serves again on the
// socket of one that ended); nullopt when it may (it listens, or the probe
// failed otherwise).
std::optional<std::string> AgentGone(const std::string& target);

class ProxyServiceImpl final
    : public berth::proxy::v1::ProxyService::CallbackService {
 public:
  explicit ProxyServiceImpl(ProxyOptions options);
  // Call Stop() first.
  ~ProxyServiceImpl() override;

  // Loads what options.state_dir holds from before a restart: its sandboxes
  // and started processes, whose shims may then reconnect with
  // ShimHello.resume. Call once, before serving. Without a state_dir it does
  // nothing.
  absl::Status Restore() ABSL_LOCKS_EXCLUDED(mu_);

  // Before the server shuts down: fails the calls waiting for a shim, ends
  // every shim's stream with UNAVAILABLE (the processes keep running: this
  // is not a shim going away) and cancels the agents' streams, then waits
  // until those and every call to an agent are gone. Last, forgets the
  // sandboxes whose agent is gone (AgentGone), their records too.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::ServerUnaryReactor* RegisterSandbox(
      grpc::CallbackServerContext* context,
      const berth::proxy::v1::RegisterSandboxRequest* request,
      berth::proxy::v1::RegisterSandboxResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterSandbox(
      grpc::CallbackServerContext* context,
      const berth::proxy::v1::UnregisterSandboxRequest* request,
      berth::proxy::v1::UnregisterSandboxResponse* response) override;
  grpc::ServerUnaryReactor* AllocateToken(
      grpc::CallbackServerContext* context,
      const berth::proxy::v1::AllocateTokenRequest* request,
      berth::proxy::v1::AllocateTokenResponse* response) override;
  grpc::ServerUnaryReactor* NewContainer(
      grpc::CallbackServerContext* context,
      const berth::proxy::v1::NewContainerRequest* request,
      berth::proxy::v1::NewContainerResponse* response) override;
  grpc::ServerUnaryReactor* ExecCmd(
      grpc::CallbackServerContext* context,
      const berth::proxy::v1::ExecCmdRequest* request,
      berth::proxy::v1::ExecCmdResponse* response) override;
  grpc::ServerUnaryReactor* Signal(
      grpc::CallbackServerContext* context,
      const berth::proxy::v1::SignalRequest* request,
      berth::proxy::v1::SignalResponse* response) override;
  grpc::ServerUnaryReactor* Resize(
      grpc::CallbackServerContext* context,
      const berth::proxy::v1::ResizeRequest* request,
      berth::proxy::v1::ResizeResponse* response) override;
  grpc::ServerBidiReactor<berth::proxy::v1::ConnectRequest,
                          berth::proxy::v1::ConnectResponse>*
  Connect(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* AckOutput(
      grpc::CallbackServerContext* context,
      const berth::proxy::v1::AckOutputRequest* request,
      berth::proxy::v1::AckOutputResponse* response) override;

 private:
  class ShimReactor;
  class AgentIoReactor;
  class StartReactor;
  using AgentStub = berth::agent::v1::AgentService::Stub;

  struct Sandbox {
    std::string id;
    std::string target;  // "unix:PATH"
    std::shared_ptr<AgentStub> stub;
    std::set<std::string> tokens;
  };

  // A NewContainer or ExecCmd waiting for its shim.
  struct PendingStart {
    bool exec = false;
    std::string container_id;
    berth::agent::v1::ProcessSpec spec;
    grpc::ServerUnaryReactor* reactor = nullptr;
    // Fills the caller's response with the process id and pid.
    std::function<void(const std::string&, int32_t)> fill;
    uint64_t timer_id = 0;
  };

  // One token and, once started, its process.
  struct Session {
    std::string token;
    std::string prefix;
    std::string sandbox_id;
    bool claimed = false;  // a shim connected with it
    // Loaded from the state directory: its shim may come back with resume.
    bool restored = false;
    bool persisted = false;  // has a record in the state directory
    uint64_t expiry_timer = 0;
    std::unique_ptr<PendingStart> pending;
    bool starting = false;  // the agent was asked to start the process
    bool started = false;
    bool exited = false;
    std::string container_id;
    std::string process_id;
    ShimReactor* shim = nullptr;
    AgentIoReactor* io = nullptr;
    // Offsets of the next output bytes, for agents that send no offsets.
    uint64_t stdout_next = 0;
    uint64_t stderr_next = 0;
    // The shim's acknowledgements, forwarded to the agent by AckOutput, out
    // of band (never queued behind stdin the process has not read): the
    // latest offsets the shim acknowledged, those of the last AckOutput
    // sent, and whether one is in flight (at most one per process; the
    // latest offsets go when it completes).
    uint64_t ack_stdout = 0;
    uint64_t ack_stderr = 0;
    uint64_t ack_sent_stdout = 0;
    uint64_t ack_sent_stderr = 0;
    bool ack_in_flight = false;
  };

  absl::Duration ShimTimeout(const google::protobuf::Duration& d) const;
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* HoldStart(bool exec, const Request* request,
                                      Response* response);
  void StartWhenShimConnected(grpc::ServerUnaryReactor* reactor,
                              std::unique_ptr<PendingStart> pending,
                              const std::string& token,
                              const google::protobuf::Duration& shim_timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnShimTimeout(const std::string& token, uint64_t timer_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The caller of a NewContainer/ExecCmd gave up: a wait for the shim ends
  // (and the token is released); a start under way goes on.
  void OnStartCancelled(grpc::ServerUnaryReactor* reactor,
                        const std::string& token) ABSL_LOCKS_EXCLUDED(mu_);
  void StartProcess(const std::shared_ptr<Session>& session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnProcessStarted(const std::shared_ptr<Session>& session,
                        std::unique_ptr<PendingStart> pending,
                        const grpc::Status& status, int32_t pid)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the token; finishes nothing.
  // Opens the agent's ProcessIo stream of the session's process.
  void AttachIo(const std::shared_ptr<Session>& session, uint64_t stdout_offset,
                uint64_t stderr_offset) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropSession(const std::shared_ptr<Session>& session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends every shim and wait of the sandbox with `status`, cancels its
  // streams and forgets it.
  void ForgetSandbox(const std::string& sandbox_id, const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SignalProcess(const std::shared_ptr<Session>& session, int signal,
                     std::function<void(grpc::Status)> done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks the agent behind `stub` to resize the process's terminal; `done`
  // gets its answer (without mu_ held).
  void ResizeProcess(const Session& session, std::shared_ptr<AgentStub> stub,
                     const berth::agent::v1::TerminalSize& size,
                     std::function<void(grpc::Status)> done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<AgentStub> StubOf(const std::string& sandbox_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session of `token` once its process has started; nullptr otherwise
  // (NoProcessFor says so to the caller).
  std::shared_ptr<Session> StartedSession(const std::string& token)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static grpc::Status NoProcessFor(const std::string& token);
  // Sends the shim's latest acknowledged offsets to the agent (AckOutput)
  // unless one is in flight or they did not advance.
  void ForwardAck(const std::shared_ptr<Session>& session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An AckOutput to the agent completed; a failed one is sent again (after
  // a delay when the agent was slow or unreachable).
  void OnAckForwarded(const std::shared_ptr<Session>& session,
                      const grpc::Status& status, uint64_t stdout_offset,
                      uint64_t stderr_offset) ABSL_LOCKS_EXCLUDED(mu_);

  // Reactions of the streams, all under mu_.
  void OnShimRead(ShimReactor* shim, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  void OnShimWriteDone(ShimReactor* shim, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  void OnShimCancel(ShimReactor* shim) ABSL_LOCKS_EXCLUDED(mu_);
  void OnShimDone(ShimReactor* shim) ABSL_LOCKS_EXCLUDED(mu_);
  void OnAgentRead(AgentIoReactor* io, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  void OnAgentWriteDone(AgentIoReactor* io, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  void OnAgentDone(AgentIoReactor* io, const grpc::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);

  const ProxyOptions options_;
  Clock* const clock_;

  absl::Mutex mu_;
  std::optional<StateStore> store_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_process_ ABSL_GUARDED_BY(mu_) = 1;
  int live_agent_streams_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Sandbox> sandboxes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Session>> sessions_
      ABSL_GUARDED_BY(mu_);
  // Calls to agents and agent streams in flight (see AgentCall).
  InFlight calls_;
  // Last, so that it goes first: its callbacks use everything above. On
  // clock_.
  Timer timer_;
};

}  // namespace proxy
}  // namespace berth

#endif  // SERVICES_PROXY_PROXY_SERVICE_H_
