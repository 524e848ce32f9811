#include "services/proxy/proxy_service.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "services/common/stream_log.h"
#include "services/common/unix_socket.h"
#include "services/proxy/token.h"

namespace berth {
namespace proxy {
namespace {

namespace agentpb = ::berth::agent::v1;
namespace pb = ::berth::proxy::v1;

// After a failed AckOutput to an agent, the next try.
constexpr absl::Duration kAckRetryDelay = absl::Milliseconds(500);

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

using AgentStub = agentpb::AgentService::Stub;

// A unary call to an agent with everything it needs kept alive until done.
// Its callback holds it; it goes when the callback has been destroyed.
template <typename Req, typename Resp>
struct AgentCall {
  AgentCall(InFlight& calls, std::shared_ptr<AgentStub> agent,
            absl::Duration timeout)
      : ticket(calls.Enter()), stub(std::move(agent)) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  // First, so that it is released last, after the context and the channel:
  // Stop returns only when no call can touch the proxy or gRPC any more.
  InFlight::Ticket ticket;
  std::shared_ptr<AgentStub> stub;
  grpc::ClientContext context;
  Req request;
  Resp response;
};

}  // namespace

std::optional<std::string> AgentGone(const std::string& target) {
  if (!absl::StartsWith(target, "unix:")) return std::nullopt;
  const std::string socket = target.substr(5);
  absl::StatusOr<SocketPathState> agent = ProbeSocketPath(socket);
  if (!agent.ok() || *agent == SocketPathState::kLive) return std::nullopt;
  return absl::StrCat("its agent's socket ", socket,
                      *agent == SocketPathState::kAbsent
                          ? " is gone"
                          : " has no agent listening on it");
}

absl::StatusOr<std::string> AgentTarget(const std::string& agent_address) {
  std::string path = agent_address;
  if (absl::StartsWith(path, "unix:")) path = path.substr(5);
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "agent_address is empty: expected \"unix:PATH\" or a socket path");
  }
  return absl::StrCat("unix:", path);
}

// The shim's Connect stream. Reactions go to the service, under its mutex;
// the fields below are guarded by the service's mu_.
class ProxyServiceImpl::ShimReactor
    : public grpc::ServerBidiReactor<pb::ConnectRequest, pb::ConnectResponse> {
 public:
  ShimReactor(ProxyServiceImpl* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override { service_->OnShimRead(this, ok); }
  void OnWriteDone(bool ok) override { service_->OnShimWriteDone(this, ok); }
  void OnCancel() override { service_->OnShimCancel(this); }
  void OnDone() override {
    service_->OnShimDone(this);
    delete this;
  }

  // Queues `response` (at most the hello's answer and one chunk or the exit
  // are ever queued); `chunk` says the agent's stream reads on once written.
  void Send(pb::ConnectResponse response, bool chunk, bool last) {
    if (finished_) return;
    out_.push_back(Out{std::move(response), chunk, last});
    if (!writing_) WriteNext();
  }
  void WriteNext() {
    writing_ = true;
    StartWrite(&out_.front().response);
  }
  void End(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  struct Out {
    pb::ConnectResponse response;
    bool chunk = false;
    bool last = false;
  };

  ProxyServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  pb::ConnectRequest request_;
  std::deque<Out> out_;
  bool writing_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  std::shared_ptr<Session> session_;  // set by the hello
};

// The agent's ProcessIo stream of one process.
class ProxyServiceImpl::AgentIoReactor
    : public grpc::ClientBidiReactor<agentpb::ProcessIoRequest,
                                     agentpb::ProcessIoResponse> {
 public:
  AgentIoReactor(ProxyServiceImpl* service, std::shared_ptr<Session> session)
      : ticket_(service->calls_.Enter()),
        service_(service),
        session_(std::move(session)) {}

  void Begin(AgentStub* stub, const agentpb::ProcessIoAttach& attach) {
    // The agent refuses a call without a deadline; a process's I/O lasts as
    // long as the process, which a year bounds generously.
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::hours(24 * 365));
    stub->async()->ProcessIo(&context_, this);
    *out_.mutable_attach() = attach;
    writing_ = true;
    StartWrite(&out_);
    StartRead(&in_);
    StartCall();
  }
  void Cancel() {
    cancelled_by_proxy_ = true;
    context_.TryCancel();
  }

  void OnReadDone(bool ok) override { service_->OnAgentRead(this, ok); }
  void OnWriteDone(bool ok) override { service_->OnAgentWriteDone(this, ok); }
  void OnDone(const grpc::Status& status) override {
    service_->OnAgentDone(this, status);
    delete this;
  }

  // First, so that it is released last, after the context (see AgentCall).
  InFlight::Ticket ticket_;
  ProxyServiceImpl* const service_;
  const std::shared_ptr<Session> session_;
  grpc::ClientContext context_;
  agentpb::ProcessIoRequest out_;
  // Stdin (or its close) read from the shim while out_ was in flight.
  agentpb::ProcessIoRequest held_;
  bool has_held_ = false;
  agentpb::ProcessIoResponse in_;
  bool writing_ = false;
  bool attached_ = false;  // the attach was written
  bool writes_done_pending_ = false;
  bool cancelled_by_proxy_ = false;
  bool done_ = false;
};

// A NewContainer or ExecCmd: told when its caller gives up.
class ProxyServiceImpl::StartReactor : public grpc::ServerUnaryReactor {
 public:
  StartReactor(ProxyServiceImpl* service, std::string token)
      : service_(service), token_(std::move(token)) {}
  void OnCancel() override { service_->OnStartCancelled(this, token_); }
  void OnDone() override { delete this; }

 private:
  ProxyServiceImpl* const service_;
  const std::string token_;
};

ProxyServiceImpl::ProxyServiceImpl(ProxyOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      timer_(clock_) {}

ProxyServiceImpl::~ProxyServiceImpl() {
  // Calls that RPCs started between Stop and the server's shutdown.
  calls_.AwaitNone();
}

absl::Status ProxyServiceImpl::Restore() {
  if (options_.state_dir.empty()) return absl::OkStatus();
  absl::StatusOr<StateStore> store = StateStore::Open(options_.state_dir);
  if (!store.ok()) return store.status();
  StateStore::State state = store->Load();
  absl::MutexLock lock(&mu_);
  store_ = std::move(*store);
  for (const StateStore::SandboxRecord& record : state.sandboxes) {
    // A sandbox whose agent's socket is gone (its task directory removed,
    // e.g. by a DestroyTask whose UnregisterSandbox found this proxy down)
    // or that nobody listens on (its agent ended; the directory is not
    // removed yet) cannot come back: an agent never serves again on the
    // socket of one that ended. Its record goes, and its processes' below.
    if (std::optional<std::string> dead = AgentGone(record.target)) {
      store_->RemoveSandbox(record.sandbox_id);
      LOG(INFO) << "forgot sandbox " << record.sandbox_id << ": " << *dead;
      continue;
    }
    Sandbox& sandbox = sandboxes_[record.sandbox_id];
    sandbox.id = record.sandbox_id;
    sandbox.target = record.target;
    sandbox.stub = agentpb::AgentService::NewStub(
        grpc::CreateChannel(record.target, grpc::InsecureChannelCredentials()));
    LOG(INFO) << "restored sandbox " << record.sandbox_id << " (agent at "
              << record.target << ")";
  }
  for (const StateStore::SessionRecord& record : state.sessions) {
    auto sandbox = sandboxes_.find(record.sandbox_id);
    if (sandbox == sandboxes_.end()) {
      store_->RemoveSession(record.process_id);
      continue;
    }
    auto session = std::make_shared<Session>();
    session->token = record.token;
    session->prefix = TokenPrefix(record.token);
    session->sandbox_id = record.sandbox_id;
    session->claimed = true;
    session->restored = true;
    session->persisted = true;
    session->started = true;
    session->container_id = record.container_id;
    session->process_id = record.process_id;
    sessions_[record.token] = session;
    sandbox->second.tokens.insert(record.token);
    uint64_t n = 0;
    size_t dash = record.process_id.rfind('-');
    if (dash != std::string::npos &&
        absl::SimpleAtoi(record.process_id.substr(dash + 1), &n) &&
        n >= next_process_) {
      next_process_ = n + 1;
    }
    LOG(INFO) << "restored process " << record.process_id << " of sandbox "
              << record.sandbox_id << ", waiting for its shim (token "
              << session->prefix << ") to resume";
    // A shim that does not come back within a token's lifetime is gone:
    // its process gets SIGHUP, as when a shim goes away.
    session->expiry_timer = timer_.Schedule(
        clock_->Now() + options_.default_token_ttl, [this, t = record.token] {
          absl::MutexLock lock(&mu_);
          if (stopping_) return;  // the next proxy decides
          auto it = sessions_.find(t);
          if (it == sessions_.end() || !it->second->restored) return;
          std::shared_ptr<Session> session = it->second;
          LOG(INFO) << "the shim with token " << session->prefix
                    << " did not come back: SIGHUP to process "
                    << session->process_id;
          SignalProcess(session, SIGHUP, nullptr);
          session->expiry_timer = 0;
          DropSession(session);
        });
  }
  return absl::OkStatus();
}

void ProxyServiceImpl::Stop() {
  std::map<std::string, std::string> targets;
  {
    absl::MutexLock lock(&mu_);
    StopLocked();
    for (const auto& [id, sandbox] : sandboxes_) targets[id] = sandbox.target;
  }
  // Without mu_: the callbacks still to come take it.
  calls_.AwaitNone();
  // A sandbox whose agent has gone since it was restored (its
  // UnregisterSandbox found the proxy down, and the agent still served when
  // the proxy came back) is forgotten now, record and all, rather than left
  // for the next start. Probed without mu_ (a connect each).
  std::map<std::string, std::string> dead;
  for (const auto& [id, target] : targets) {
    if (std::optional<std::string> why = AgentGone(target)) dead[id] = *why;
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [id, why] : dead) {
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end() || it->second.target != targets[id]) continue;
    ForgetSandbox(id, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   absl::StrCat("sandbox ", id, ": ", why)));
  }
}

void ProxyServiceImpl::StopLocked() {
  stopping_ = true;
  grpc::Status status(grpc::StatusCode::UNAVAILABLE,
                      "berth-proxy is shutting down");
  for (auto& [token, session] : sessions_) {
    if (session->pending != nullptr) {
      timer_.Cancel(session->pending->timer_id);
      session->pending->reactor->Finish(status);
      session->pending.reset();
    }
    if (session->shim != nullptr) session->shim->End(status);
    if (session->io != nullptr) session->io->Cancel();
  }
  auto drained = [this]() {
    mu_.AssertHeld();
    return live_agent_streams_ == 0;
  };
  mu_.Await(absl::Condition(&drained));
}

// --- Sandboxes -------------------------------------------------------------

grpc::ServerUnaryReactor* ProxyServiceImpl::RegisterSandbox(
    grpc::CallbackServerContext* context,
    const pb::RegisterSandboxRequest* request,
    pb::RegisterSandboxResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->sandbox_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "sandbox_id is empty"));
    return reactor;
  }
  absl::StatusOr<std::string> target = AgentTarget(request->agent_address());
  if (!target.ok()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 std::string(target.status().message())));
    return reactor;
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   "berth-proxy is shutting down"));
      return reactor;
    }
    auto it = sandboxes_.find(request->sandbox_id());
    if (it != sandboxes_.end() && it->second.target != *target) {
      reactor->Finish(grpc::Status(
          grpc::StatusCode::ALREADY_EXISTS,
          absl::StrCat("sandbox ", request->sandbox_id(),
                       " is registered with agent ", it->second.target)));
      return reactor;
    }
  }
  std::shared_ptr<AgentStub> stub = agentpb::AgentService::NewStub(
      grpc::CreateChannel(*target, grpc::InsecureChannelCredentials()));
  auto call =
      std::make_shared<AgentCall<agentpb::PingRequest, agentpb::PingResponse>>(
          calls_, stub, options_.ping_timeout);
  std::string sandbox_id = request->sandbox_id();
  stub->async()->Ping(
      &call->context, &call->request, &call->response,
      [this, call, reactor, response, sandbox_id,
       target = *target](grpc::Status status) {
        if (!status.ok()) {
          LOG(WARNING) << "agent of sandbox " << sandbox_id << " at " << target
                       << " does not answer: " << status.error_message();
          reactor->Finish(grpc::Status(
              grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("agent of sandbox ", sandbox_id, " at ", target,
                           " does not answer: ", status.error_message())));
          return;
        }
        {
          absl::MutexLock lock(&mu_);
          Sandbox& sandbox = sandboxes_[sandbox_id];
          if (sandbox.stub == nullptr) {
            sandbox.id = sandbox_id;
            sandbox.target = target;
            sandbox.stub = call->stub;
          }
          if (store_.has_value()) {
            absl::Status saved = store_->PutSandbox({sandbox_id, target});
            if (!saved.ok()) {
              LOG(WARNING) << "sandbox " << sandbox_id
                           << " will not survive a restart: " << saved;
            }
          }
        }
        LOG(INFO) << "sandbox " << sandbox_id << " registered, agent at "
                  << target << " version " << call->response.agent_version();
        response->set_agent_version(call->response.agent_version());
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* ProxyServiceImpl::UnregisterSandbox(
    grpc::CallbackServerContext* context,
    const pb::UnregisterSandboxRequest* request,
    pb::UnregisterSandboxResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  {
    absl::MutexLock lock(&mu_);
    ForgetSandbox(request->sandbox_id(),
                  grpc::Status(grpc::StatusCode::UNAVAILABLE,
                               absl::StrCat("sandbox ", request->sandbox_id(),
                                            " was unregistered")));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

std::shared_ptr<ProxyServiceImpl::AgentStub> ProxyServiceImpl::StubOf(
    const std::string& sandbox_id) {
  auto it = sandboxes_.find(sandbox_id);
  if (it == sandboxes_.end()) return nullptr;
  return it->second.stub;
}

void ProxyServiceImpl::ForgetSandbox(const std::string& sandbox_id,
                                     const grpc::Status& status) {
  auto it = sandboxes_.find(sandbox_id);
  if (it == sandboxes_.end()) return;
  for (const std::string& token : it->second.tokens) {
    auto s = sessions_.find(token);
    if (s == sessions_.end()) continue;
    std::shared_ptr<Session> session = s->second;
    if (session->pending != nullptr) {
      timer_.Cancel(session->pending->timer_id);
      session->pending->reactor->Finish(status);
      session->pending.reset();
    }
    if (session->expiry_timer != 0) timer_.Cancel(session->expiry_timer);
    if (session->shim != nullptr) session->shim->End(status);
    if (session->io != nullptr) session->io->Cancel();
    if (session->persisted && store_.has_value()) {
      store_->RemoveSession(session->process_id);
    }
    sessions_.erase(s);
  }
  sandboxes_.erase(it);
  if (store_.has_value()) store_->RemoveSandbox(sandbox_id);
  LOG(INFO) << "sandbox " << sandbox_id
            << " forgotten: " << status.error_message();
}

// --- Tokens ----------------------------------------------------------------

grpc::ServerUnaryReactor* ProxyServiceImpl::AllocateToken(
    grpc::CallbackServerContext* context,
    const pb::AllocateTokenRequest* request,
    pb::AllocateTokenResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Duration ttl = request->has_ttl() ? FromProto(request->ttl())
                                          : options_.default_token_ttl;
  if (ttl <= absl::ZeroDuration()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "ttl must be positive"));
    return reactor;
  }
  absl::StatusOr<std::string> token = NewToken();
  if (!token.ok()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                                 std::string(token.status().message())));
    return reactor;
  }
  absl::MutexLock lock(&mu_);
  auto sandbox = sandboxes_.find(request->sandbox_id());
  if (sandbox == sandboxes_.end()) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND,
                     absl::StrCat("sandbox_id ", request->sandbox_id(),
                                  " is not registered")));
    return reactor;
  }
  auto session = std::make_shared<Session>();
  session->token = *token;
  session->prefix = TokenPrefix(*token);
  session->sandbox_id = request->sandbox_id();
  session->expiry_timer =
      timer_.Schedule(clock_->Now() + ttl, [this, t = *token] {
        absl::MutexLock lock(&mu_);
        auto it = sessions_.find(t);
        if (it == sessions_.end()) return;
        std::shared_ptr<Session> session = it->second;
        if (session->claimed || session->pending != nullptr) return;
        LOG(INFO) << "token " << session->prefix << " of sandbox "
                  << session->sandbox_id << " expired unclaimed";
        DropSession(session);
      });
  sessions_[*token] = session;
  sandbox->second.tokens.insert(*token);
  VLOG(1) << "token " << session->prefix << " allocated for sandbox "
          << session->sandbox_id;
  response->set_token(*token);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void ProxyServiceImpl::DropSession(const std::shared_ptr<Session>& session) {
  if (session->expiry_timer != 0) timer_.Cancel(session->expiry_timer);
  session->expiry_timer = 0;
  if (session->persisted && store_.has_value()) {
    store_->RemoveSession(session->process_id);
    session->persisted = false;
  }
  auto sandbox = sandboxes_.find(session->sandbox_id);
  if (sandbox != sandboxes_.end()) sandbox->second.tokens.erase(session->token);
  auto it = sessions_.find(session->token);
  if (it != sessions_.end() && it->second == session) sessions_.erase(it);
}

// --- Starting processes ----------------------------------------------------

absl::Duration ProxyServiceImpl::ShimTimeout(
    const google::protobuf::Duration& d) const {
  absl::Duration timeout = FromProto(d);
  return timeout > absl::ZeroDuration() ? timeout
                                        : options_.default_shim_timeout;
}

// NewContainer and ExecCmd: the same request and response fields, held
// until the token's shim has connected.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* ProxyServiceImpl::HoldStart(bool exec,
                                                      const Request* request,
                                                      Response* response) {
  grpc::ServerUnaryReactor* reactor = new StartReactor(this, request->token());
  auto pending = std::make_unique<PendingStart>();
  pending->exec = exec;
  pending->container_id = request->container_id();
  pending->spec = request->process();
  pending->fill = [response](const std::string& process_id, int32_t pid) {
    response->set_process_id(process_id);
    response->set_pid(pid);
  };
  StartWhenShimConnected(reactor, std::move(pending), request->token(),
                         request->shim_timeout());
  return reactor;
}

grpc::ServerUnaryReactor* ProxyServiceImpl::NewContainer(
    grpc::CallbackServerContext* /*context*/,
    const pb::NewContainerRequest* request,
    pb::NewContainerResponse* response) {
  return HoldStart(/*exec=*/false, request, response);
}

grpc::ServerUnaryReactor* ProxyServiceImpl::ExecCmd(
    grpc::CallbackServerContext* /*context*/, const pb::ExecCmdRequest* request,
    pb::ExecCmdResponse* response) {
  return HoldStart(/*exec=*/true, request, response);
}

void ProxyServiceImpl::StartWhenShimConnected(
    grpc::ServerUnaryReactor* reactor, std::unique_ptr<PendingStart> pending,
    const std::string& token, const google::protobuf::Duration& shim_timeout) {
  if (pending->container_id.empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "container_id is empty"));
    return;
  }
  if (pending->spec.args().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "process.args is empty"));
    return;
  }
  pending->reactor = reactor;
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("unknown or expired token ", TokenPrefix(token))));
    return;
  }
  std::shared_ptr<Session> session = it->second;
  if (session->pending != nullptr || session->starting || session->started) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("token ", session->prefix, " already has a process")));
    return;
  }
  session->pending = std::move(pending);
  if (session->claimed) {
    StartProcess(session);
    return;
  }
  absl::Duration timeout = ShimTimeout(shim_timeout);
  LOG(INFO) << "waiting for shim to register itself with token "
            << session->prefix << " (timeout in "
            << absl::StrFormat("%g", absl::ToDoubleSeconds(timeout))
            << " seconds)";
  // The id is known only after Schedule returns: the callback looks it up.
  session->pending->timer_id =
      timer_.Schedule(clock_->Now() + timeout,
                      [this, token] { OnShimTimeout(token, /*timer_id=*/0); });
}

void ProxyServiceImpl::OnShimTimeout(const std::string& token,
                                     uint64_t /*timer_id*/) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) return;
  std::shared_ptr<Session> session = it->second;
  if (session->pending == nullptr || session->claimed) return;
  std::string message =
      absl::StrCat("timeout waiting for shim with token ", session->prefix);
  LOG(WARNING) << message << " (sandbox " << session->sandbox_id
               << "); token released";
  session->pending->reactor->Finish(
      grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, message));
  session->pending.reset();
  DropSession(session);
}

void ProxyServiceImpl::OnStartCancelled(grpc::ServerUnaryReactor* reactor,
                                        const std::string& token) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) return;
  std::shared_ptr<Session> session = it->second;
  if (session->pending == nullptr || session->pending->reactor != reactor) {
    return;
  }
  LOG(INFO) << "the wait for the shim with token " << session->prefix
            << " was cancelled by its caller; token released";
  timer_.Cancel(session->pending->timer_id);
  reactor->Finish(
      grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the caller"));
  session->pending.reset();
  DropSession(session);
}

void ProxyServiceImpl::StartProcess(const std::shared_ptr<Session>& session) {
  PendingStart& pending = *session->pending;
  timer_.Cancel(pending.timer_id);
  std::shared_ptr<AgentStub> stub = StubOf(session->sandbox_id);
  if (stub == nullptr) {
    pending.reactor->Finish(grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("sandbox ", session->sandbox_id, " is not registered")));
    session->pending.reset();
    return;
  }
  session->starting = true;
  session->container_id = pending.container_id;
  session->process_id = absl::StrCat(session->prefix, "-", next_process_++);
  // The record goes first, with the process id the agent is given: a proxy
  // killed after the agent started the process (before or after its answer)
  // then still knows the token, so that the shim resumes with the next
  // proxy. A start the agent refuses removes it (OnProcessStarted); one the
  // agent never got fails the shim's resume (OnAgentDone: NOT_FOUND).
  if (store_.has_value()) {
    absl::Status saved =
        store_->PutSession({session->token, session->sandbox_id,
                            session->container_id, session->process_id});
    if (saved.ok()) {
      session->persisted = true;
    } else {
      LOG(WARNING) << "process " << session->process_id
                   << " will not survive a restart of the proxy: " << saved;
    }
  }
  if (options_.die_during_start_for_test &&
      options_.die_during_start_for_test(
          ProxyOptions::StartStep::kBeforeAgentCall)) {
    pending.reactor->Finish(grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        "test: berth-proxy died before asking the agent to start process " +
            session->process_id));
    session->pending.reset();
    return;
  }
  std::shared_ptr<Session> s = session;
  std::unique_ptr<PendingStart> owned = std::move(session->pending);
  // std::function needs a copyable callable: share the pending start.
  auto shared_pending =
      std::make_shared<std::unique_ptr<PendingStart>>(std::move(owned));
  if (!(*shared_pending)->exec) {
    auto call = std::make_shared<
        AgentCall<agentpb::NewContainerRequest, agentpb::NewContainerResponse>>(
        calls_, stub, options_.agent_call_timeout);
    call->request.set_container_id(session->container_id);
    call->request.set_process_id(session->process_id);
    *call->request.mutable_process() = (*shared_pending)->spec;
    stub->async()->NewContainer(
        &call->context, &call->request, &call->response,
        [this, call, s, shared_pending](grpc::Status status) {
          OnProcessStarted(s, std::move(*shared_pending), status,
                           call->response.pid());
        });
  } else {
    auto call = std::make_shared<
        AgentCall<agentpb::ExecCmdRequest, agentpb::ExecCmdResponse>>(
        calls_, stub, options_.agent_call_timeout);
    call->request.set_container_id(session->container_id);
    call->request.set_process_id(session->process_id);
    *call->request.mutable_process() = (*shared_pending)->spec;
    stub->async()->ExecCmd(
        &call->context, &call->request, &call->response,
        [this, call, s, shared_pending](grpc::Status status) {
          OnProcessStarted(s, std::move(*shared_pending), status,
                           call->response.pid());
        });
  }
}

void ProxyServiceImpl::OnProcessStarted(const std::shared_ptr<Session>& session,
                                        std::unique_ptr<PendingStart> pending,
                                        const grpc::Status& status,
                                        int32_t pid) {
  absl::MutexLock lock(&mu_);
  if (options_.die_during_start_for_test &&
      options_.die_during_start_for_test(
          ProxyOptions::StartStep::kAfterAgentAnswer)) {
    pending->reactor->Finish(grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        "test: berth-proxy died before acting on the agent's answer to "
        "starting process " +
            session->process_id));
    return;
  }
  session->starting = false;
  if (!status.ok()) {
    LOG(WARNING) << "agent of sandbox " << session->sandbox_id
                 << " did not start process " << session->process_id << ": "
                 << status.error_message();
    grpc::Status failed(
        status.error_code(),
        absl::StrCat("sandbox ", session->sandbox_id, ": starting process ",
                     session->process_id, ": ", status.error_message()));
    pending->reactor->Finish(failed);
    if (session->shim != nullptr) session->shim->End(failed);
    // Its record too: the agent has no such process for a shim to resume.
    DropSession(session);
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // Its agent is gone: so is the sandbox.
      ForgetSandbox(session->sandbox_id,
                    grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 absl::StrCat("sandbox ", session->sandbox_id,
                                              ": its agent is gone (",
                                              status.error_message(), ")")));
    }
    return;
  }
  session->started = true;
  std::shared_ptr<AgentStub> stub = StubOf(session->sandbox_id);
  const bool known = stub != nullptr && sessions_.count(session->token) != 0;
  if (known && stopping_ && session->persisted) {
    // The proxy is shutting down (its shims were told so) and the process
    // was started meanwhile: it lives on, and its shim resumes with the
    // next proxy from the record written before the start.
    LOG(INFO) << "process " << session->process_id << " (pid " << pid
              << ") started in container " << session->container_id
              << " of sandbox " << session->sandbox_id
              << " while the proxy stops; its shim resumes with the next one";
    pending->fill(session->process_id, pid);
    pending->reactor->Finish(grpc::Status::OK);
    return;
  }
  bool alive = known && !stopping_;
  if (!alive) {
    // The shim or the sandbox went away while the agent started it.
    if (stub != nullptr) SignalProcess(session, SIGHUP, nullptr);
    pending->reactor->Finish(
        grpc::Status(grpc::StatusCode::ABORTED,
                     absl::StrCat("the shim with token ", session->prefix,
                                  " went away while process ",
                                  session->process_id, " started")));
    return;
  }
  LOG(INFO) << "process " << session->process_id << " (pid " << pid
            << ") started in container " << session->container_id
            << " of sandbox " << session->sandbox_id;
  // The data path: the agent's stream of this process, joined to the shim's.
  AttachIo(session, 0, 0);
  pending->fill(session->process_id, pid);
  pending->reactor->Finish(grpc::Status::OK);
}

void ProxyServiceImpl::AttachIo(const std::shared_ptr<Session>& session,
                                uint64_t stdout_offset,
                                uint64_t stderr_offset) {
  std::shared_ptr<AgentStub> stub = StubOf(session->sandbox_id);
  auto* io = new AgentIoReactor(this, session);
  session->io = io;
  session->stdout_next = stdout_offset;
  session->stderr_next = stderr_offset;
  ++live_agent_streams_;
  agentpb::ProcessIoAttach attach;
  attach.set_container_id(session->container_id);
  attach.set_process_id(session->process_id);
  attach.set_stdout_offset(stdout_offset);
  attach.set_stderr_offset(stderr_offset);
  io->Begin(stub.get(), attach);
}

grpc::ServerUnaryReactor* ProxyServiceImpl::AckOutput(
    grpc::CallbackServerContext* context, const pb::AckOutputRequest* request,
    pb::AckOutputResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Session> session = StartedSession(request->token());
  if (session == nullptr) {
    reactor->Finish(NoProcessFor(request->token()));
    return reactor;
  }
  session->ack_stdout = std::max(session->ack_stdout, request->stdout_offset());
  session->ack_stderr = std::max(session->ack_stderr, request->stderr_offset());
  ForwardAck(session);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void ProxyServiceImpl::ForwardAck(const std::shared_ptr<Session>& session) {
  if (session->ack_in_flight || stopping_ || !session->started) return;
  if (session->ack_stdout <= session->ack_sent_stdout &&
      session->ack_stderr <= session->ack_sent_stderr) {
    return;
  }
  std::shared_ptr<AgentStub> stub = StubOf(session->sandbox_id);
  if (stub == nullptr) return;
  auto call = std::make_shared<
      AgentCall<agentpb::AckOutputRequest, agentpb::AckOutputResponse>>(
      calls_, stub, options_.agent_call_timeout);
  call->request.set_container_id(session->container_id);
  call->request.set_process_id(session->process_id);
  call->request.set_stdout_offset(session->ack_stdout);
  call->request.set_stderr_offset(session->ack_stderr);
  session->ack_sent_stdout = session->ack_stdout;
  session->ack_sent_stderr = session->ack_stderr;
  session->ack_in_flight = true;
  stub->async()->AckOutput(&call->context, &call->request, &call->response,
                           [this, call, session](grpc::Status status) {
                             OnAckForwarded(session, status,
                                            call->request.stdout_offset(),
                                            call->request.stderr_offset());
                           });
}

void ProxyServiceImpl::OnAckForwarded(const std::shared_ptr<Session>& session,
                                      const grpc::Status& status,
                                      uint64_t stdout_offset,
                                      uint64_t stderr_offset) {
  absl::MutexLock lock(&mu_);
  session->ack_in_flight = false;
  const bool live = sessions_.count(session->token) != 0;
  if (!status.ok() && !session->exited && live) {
    LOG(WARNING) << "acknowledging output of process " << session->process_id
                 << " up to stdout " << stdout_offset << ", stderr "
                 << stderr_offset << ": " << status.error_message();
    // The agent still holds that output, and its window may be full, so
    // that no more output (and no more acks) come: send it again, later.
    session->ack_sent_stdout = 0;
    session->ack_sent_stderr = 0;
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
        status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      timer_.Schedule(clock_->Now() + kAckRetryDelay, [this, session] {
        absl::MutexLock lock(&mu_);
        if (sessions_.count(session->token) != 0) ForwardAck(session);
      });
    }
    return;
  }
  if (live) ForwardAck(session);
}

// --- Signal and Resize from drivers ----------------------------------------

void ProxyServiceImpl::SignalProcess(const std::shared_ptr<Session>& session,
                                     int signal,
                                     std::function<void(grpc::Status)> done) {
  std::shared_ptr<AgentStub> stub = StubOf(session->sandbox_id);
  if (stub == nullptr) {
    if (done) {
      done(grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("sandbox ", session->sandbox_id, " is not registered")));
    }
    return;
  }
  auto call = std::make_shared<
      AgentCall<agentpb::SignalRequest, agentpb::SignalResponse>>(
      calls_, stub, options_.agent_call_timeout);
  call->request.set_container_id(session->container_id);
  call->request.set_process_id(session->process_id);
  call->request.set_signal(signal);
  std::string process_id = session->process_id;
  stub->async()->Signal(
      &call->context, &call->request, &call->response,
      [call, done = std::move(done), process_id, signal](grpc::Status status) {
        if (!status.ok()) {
          LOG(WARNING) << "signal " << signal << " to process " << process_id
                       << ": " << status.error_message();
        }
        if (done) done(status);
      });
}

void ProxyServiceImpl::ResizeProcess(const Session& session,
                                     std::shared_ptr<AgentStub> stub,
                                     const agentpb::TerminalSize& size,
                                     std::function<void(grpc::Status)> done) {
  auto call = std::make_shared<
      AgentCall<agentpb::ResizeRequest, agentpb::ResizeResponse>>(
      calls_, stub, options_.agent_call_timeout);
  call->request.set_container_id(session.container_id);
  call->request.set_process_id(session.process_id);
  *call->request.mutable_size() = size;
  stub->async()->Resize(
      &call->context, &call->request, &call->response,
      [call, done = std::move(done)](grpc::Status status) { done(status); });
}

std::shared_ptr<ProxyServiceImpl::Session> ProxyServiceImpl::StartedSession(
    const std::string& token) {
  auto it = sessions_.find(token);
  if (it == sessions_.end() || !it->second->started) return nullptr;
  return it->second;
}

grpc::Status ProxyServiceImpl::NoProcessFor(const std::string& token) {
  return grpc::Status(
      grpc::StatusCode::NOT_FOUND,
      absl::StrCat("no process for token ", TokenPrefix(token)));
}

grpc::ServerUnaryReactor* ProxyServiceImpl::Signal(
    grpc::CallbackServerContext* context, const pb::SignalRequest* request,
    pb::SignalResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Session> session = StartedSession(request->token());
  if (session == nullptr) {
    reactor->Finish(NoProcessFor(request->token()));
    return reactor;
  }
  SignalProcess(session, request->signal(),
                [reactor](grpc::Status status) { reactor->Finish(status); });
  return reactor;
}

grpc::ServerUnaryReactor* ProxyServiceImpl::Resize(
    grpc::CallbackServerContext* context, const pb::ResizeRequest* request,
    pb::ResizeResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Session> session = StartedSession(request->token());
  std::shared_ptr<AgentStub> stub =
      session == nullptr ? nullptr : StubOf(session->sandbox_id);
  if (stub == nullptr) {
    reactor->Finish(NoProcessFor(request->token()));
    return reactor;
  }
  ResizeProcess(*session, stub, request->size(),
                [reactor](grpc::Status status) { reactor->Finish(status); });
  return reactor;
}

// --- The shim's stream -----------------------------------------------------

grpc::ServerBidiReactor<pb::ConnectRequest, pb::ConnectResponse>*
ProxyServiceImpl::Connect(grpc::CallbackServerContext* context) {
  absl::MutexLock lock(&mu_);
  return new ShimReactor(this, context);
}

void ProxyServiceImpl::OnShimRead(ShimReactor* shim, bool ok) {
  absl::MutexLock lock(&mu_);
  if (!ok) return;  // half-closed or gone: output still flows down
  if (shim->finished_) return;
  std::shared_ptr<Session> session = shim->session_;
  if (session == nullptr) {
    // The hello.
    if (!shim->request_.has_hello()) {
      shim->End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "the first request must be the hello"));
      return;
    }
    const pb::ShimHello& hello = shim->request_.hello();
    std::string prefix = TokenPrefix(hello.token());
    auto it = sessions_.find(hello.token());
    if (it != sessions_.end() && it->second->restored && hello.resume() &&
        it->second->shim == nullptr && StubOf(it->second->sandbox_id)) {
      // Back after the proxy's restart: on from the offsets the shim has.
      session = it->second;
      session->restored = false;
      session->shim = shim;
      shim->session_ = session;
      LOG(INFO) << "shim with token " << prefix << " resumed process "
                << session->process_id << " at stdout " << hello.stdout_offset()
                << ", stderr " << hello.stderr_offset();
      pb::ConnectResponse connected;
      connected.mutable_connected()->set_process_id(session->process_id);
      shim->Send(std::move(connected), /*chunk=*/false, /*last=*/false);
      AttachIo(session, hello.stdout_offset(), hello.stderr_offset());
      return;
    }
    if (it == sessions_.end() || it->second->claimed) {
      LOG(WARNING) << "shim presented an unknown, expired or already used "
                      "token "
                   << prefix;
      shim->End(grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          absl::StrCat("unknown, expired or already used token ", prefix)));
      return;
    }
    session = it->second;
    session->claimed = true;
    if (session->expiry_timer != 0) timer_.Cancel(session->expiry_timer);
    session->expiry_timer = 0;
    session->shim = shim;
    shim->session_ = session;
    LOG(INFO) << "shim with token " << prefix << " connected (sandbox "
              << session->sandbox_id << ")";
    pb::ConnectResponse connected;
    connected.mutable_connected()->set_process_id(session->process_id);
    shim->Send(std::move(connected), /*chunk=*/false, /*last=*/false);
    if (session->pending != nullptr) StartProcess(session);
    // Further requests are read once the agent's stream is attached.
    return;
  }
  AgentIoReactor* io = session->io;
  const pb::ConnectRequest& request = shim->request_;
  auto read_on = [shim] {
    if (!shim->finished_) shim->StartRead(&shim->request_);
  };
  switch (request.frame_case()) {
    case pb::ConnectRequest::kAck:
      // Out of band, and read on at once: the agent reads no more of the
      // process's stream while stdin waits for the process, which may be
      // blocked on output only this ack lets the agent read.
      session->ack_stdout =
          std::max(session->ack_stdout, request.ack().stdout_offset());
      session->ack_stderr =
          std::max(session->ack_stderr, request.ack().stderr_offset());
      ForwardAck(session);
      read_on();
      return;
    case pb::ConnectRequest::kStdin:
    case pb::ConnectRequest::kStdinClose: {
      if (io == nullptr || session->exited) {
        read_on();
        return;
      }
      agentpb::ProcessIoRequest frame;
      if (request.has_stdin()) {
        frame.set_stdin(request.stdin());
      } else {
        frame.mutable_stdin_close();
      }
      if (io->writing_) {
        // One frame in flight, this one held: read on once the agent took
        // the first (OnAgentWriteDone).
        io->held_ = std::move(frame);
        io->has_held_ = true;
        return;
      }
      io->out_ = std::move(frame);
      io->writing_ = true;
      io->StartWrite(&io->out_);
      // Read on meanwhile, so that acks still reach the agent while it
      // waits for the process to take this stdin.
      read_on();
      return;
    }
    case pb::ConnectRequest::kSignal:
      if (StubOf(session->sandbox_id) == nullptr) {
        read_on();
        return;
      }
      SignalProcess(session, request.signal(),
                    [this, session, shim](grpc::Status) {
                      absl::MutexLock lock(&mu_);
                      // Read on unless the shim has gone meanwhile.
                      if (session->shim == shim && !shim->finished_) {
                        shim->StartRead(&shim->request_);
                      }
                    });
      return;
    case pb::ConnectRequest::kResize: {
      std::shared_ptr<AgentStub> stub = StubOf(session->sandbox_id);
      if (stub == nullptr) {
        read_on();
        return;
      }
      ResizeProcess(*session, stub, request.resize(),
                    [this, session, shim](grpc::Status) {
                      absl::MutexLock lock(&mu_);
                      if (session->shim == shim && !shim->finished_) {
                        shim->StartRead(&shim->request_);
                      }
                    });
      return;
    }
    default:
      read_on();
      return;
  }
}

void ProxyServiceImpl::OnShimWriteDone(ShimReactor* shim, bool ok) {
  absl::MutexLock lock(&mu_);
  ShimReactor::Out done = std::move(shim->out_.front());
  shim->out_.pop_front();
  shim->writing_ = false;
  if (shim->finished_) {
    shim->out_.clear();  // no write after Finish
    return;
  }
  if (!ok) {
    // The stream is broken; OnCancel/OnDone follow.
    shim->out_.clear();
    shim->End(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the shim's stream broke"));
    return;
  }
  if (done.last) {
    shim->End(grpc::Status::OK);
    return;
  }
  if (!shim->out_.empty()) shim->WriteNext();
  if (done.chunk && shim->session_ != nullptr) {
    AgentIoReactor* io = shim->session_->io;
    if (io != nullptr && !io->done_) io->StartRead(&io->in_);
  }
}

void ProxyServiceImpl::OnShimCancel(ShimReactor* shim) {
  absl::MutexLock lock(&mu_);
  shim->cancelled_ = true;
  shim->End(grpc::Status::CANCELLED);
}

void ProxyServiceImpl::OnShimDone(ShimReactor* shim) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Session> session = shim->session_;
  if (shim->cancelled_) {
    LogStreamEnd("berth.proxy.v1.ProxyService/Connect", grpc::Status::CANCELLED,
                 /*caller_cancelled=*/true);
  }
  if (session == nullptr || session->shim != shim) return;
  session->shim = nullptr;
  if (stopping_) return;
  if (session->started && !session->exited) {
    LOG(INFO) << "shim with token " << session->prefix
              << " went away: SIGHUP to process " << session->process_id;
    SignalProcess(session, SIGHUP, nullptr);
  }
  if (session->io != nullptr) session->io->Cancel();
  // The token is dead: a shim that went away cannot come back with it.
  DropSession(session);
}

// --- The agent's stream ----------------------------------------------------

void ProxyServiceImpl::OnAgentRead(AgentIoReactor* io, bool ok) {
  absl::MutexLock lock(&mu_);
  if (!ok) return;  // the stream ends: OnAgentDone
  Session& session = *io->session_;
  ShimReactor* shim = session.shim;
  agentpb::ProcessIoResponse& in = io->in_;
  pb::ConnectResponse out;
  switch (in.frame_case()) {
    case agentpb::ProcessIoResponse::kStdoutChunk:
      session.stdout_next =
          in.stdout_chunk().offset() + in.stdout_chunk().data().size();
      out.mutable_stdout()->set_offset(in.stdout_chunk().offset());
      out.mutable_stdout()->set_data(
          std::move(*in.mutable_stdout_chunk()->mutable_data()));
      break;
    case agentpb::ProcessIoResponse::kStderrChunk:
      session.stderr_next =
          in.stderr_chunk().offset() + in.stderr_chunk().data().size();
      out.mutable_stderr()->set_offset(in.stderr_chunk().offset());
      out.mutable_stderr()->set_data(
          std::move(*in.mutable_stderr_chunk()->mutable_data()));
      break;
    case agentpb::ProcessIoResponse::kStdout:
      out.mutable_stdout()->set_offset(session.stdout_next);
      session.stdout_next += in.stdout().size();
      out.mutable_stdout()->set_data(std::move(*in.mutable_stdout()));
      break;
    case agentpb::ProcessIoResponse::kStderr:
      out.mutable_stderr()->set_offset(session.stderr_next);
      session.stderr_next += in.stderr().size();
      out.mutable_stderr()->set_data(std::move(*in.mutable_stderr()));
      break;
    case agentpb::ProcessIoResponse::kExit:
      session.exited = true;
      LOG(INFO) << "process " << session.process_id << " exited with code "
                << in.exit().exit_code() << ", signal " << in.exit().signal();
      *out.mutable_exit() = in.exit();
      if (shim != nullptr) {
        shim->Send(std::move(out), /*chunk=*/false, /*last=*/true);
      }
      // Nothing more goes up: half-close, and read on for the stream's end.
      if (io->writing_) {
        io->writes_done_pending_ = true;
      } else {
        io->StartWritesDone();
      }
      io->StartRead(&io->in_);
      return;
    default:
      io->StartRead(&io->in_);
      return;
  }
  if (shim == nullptr || shim->finished_) return;  // going away
  shim->Send(std::move(out), /*chunk=*/true, /*last=*/false);
}

void ProxyServiceImpl::OnAgentWriteDone(AgentIoReactor* io, bool ok) {
  absl::MutexLock lock(&mu_);
  io->writing_ = false;
  const bool attach_written = !io->attached_;
  io->attached_ = true;
  if (!ok) return;  // the stream failed: OnAgentDone
  if (io->writes_done_pending_) {
    io->writes_done_pending_ = false;
    io->has_held_ = false;
    io->StartWritesDone();
    return;
  }
  if (io->session_->exited) return;
  ShimReactor* shim = io->session_->shim;
  const bool shim_live = shim != nullptr && !shim->finished_;
  if (io->has_held_) {
    io->out_ = std::move(io->held_);
    io->has_held_ = false;
    io->writing_ = true;
    io->StartWrite(&io->out_);
    if (shim_live) shim->StartRead(&shim->request_);  // held nothing now
    return;
  }
  // After the attach the shim's requests are read; after stdin the shim's
  // stream is being read already.
  if (attach_written && shim_live) shim->StartRead(&shim->request_);
}

void ProxyServiceImpl::OnAgentDone(AgentIoReactor* io,
                                   const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  io->done_ = true;
  --live_agent_streams_;
  std::shared_ptr<Session> session = io->session_;
  if (session->io == io) session->io = nullptr;
  if (stopping_) return;  // the process lives on, for the next proxy
  if (session->exited || io->cancelled_by_proxy_) {
    if (session->shim == nullptr) DropSession(session);
    return;
  }
  const std::string& sandbox_id = session->sandbox_id;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL: {
      // Its agent is gone: so is every process of the sandbox.
      std::string message = absl::StrCat(
          "sandbox ", sandbox_id, ": its agent is gone (the stream of process ",
          session->process_id, " ended: ", status.error_message(), ")");
      LOG(WARNING) << message;
      if (session->shim != nullptr) {
        session->shim->End(
            grpc::Status(grpc::StatusCode::UNAVAILABLE, message));
      }
      ForgetSandbox(sandbox_id,
                    grpc::Status(grpc::StatusCode::UNAVAILABLE, message));
      DropSession(session);
      return;
    }
    case grpc::StatusCode::NOT_FOUND: {
      // The agent does not have the process: after a restart of the proxy,
      // one whose start the agent never got (the proxy died after writing
      // its record and before the call reached the agent). The shim is told
      // it is gone, not left waiting; the session and its record go.
      std::string message = absl::StrCat(
          "sandbox ", sandbox_id, ": process ", session->process_id,
          " is gone: its agent does not have it (", status.error_message(),
          ")");
      LOG(WARNING) << message;
      // The record goes before the shim hears of it.
      DropSession(session);
      if (session->shim != nullptr) {
        session->shim->End(grpc::Status(grpc::StatusCode::NOT_FOUND, message));
      }
      return;
    }
    default: {
      std::string message =
          absl::StrCat("sandbox ", sandbox_id, ": the stream of process ",
                       session->process_id, " ended without an exit: ",
                       status.ok() ? "OK" : status.error_message());
      LOG(WARNING) << message;
      if (session->shim != nullptr) {
        session->shim->End(grpc::Status(
            status.ok() ? grpc::StatusCode::INTERNAL : status.error_code(),
            message));
      }
      DropSession(session);
      return;
    }
  }
}

}  // namespace proxy
}  // namespace berth
