#include "services/proxy/fake_agent.h"

#include <signal.h>

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace proxy {
namespace testing {
namespace {

namespace agentpb = ::berth::agent::v1;

constexpr uint64_t kBulkChunk = 64 * 1024;

}  // namespace

std::map<std::string, FakeAgent::Process> FakeAgent::processes() const {
  absl::MutexLock lock(&mu_);
  return processes_;
}

bool FakeAgent::Await(
    const std::function<bool(const std::map<std::string, Process>&)>& condition,
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto met = [&]() {
    mu_.AssertHeld();
    return condition(processes_);
  };
  return mu_.AwaitWithTimeout(absl::Condition(&met), timeout);
}

grpc::Status FakeAgent::Ping(grpc::ServerContext*, const agentpb::PingRequest*,
                             agentpb::PingResponse* response) {
  response->set_agent_version("fake-agent-1");
  return grpc::Status::OK;
}

grpc::Status FakeAgent::Start(const std::string& container_id,
                              const std::string& process_id,
                              const agentpb::ProcessSpec& spec, bool exec,
                              int32_t* pid) {
  absl::MutexLock lock(&mu_);
  if (process_id.empty() || processes_.count(process_id) != 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("bad process_id ", process_id));
  }
  Process& process = processes_[process_id];
  process.container_id = container_id;
  process.args.assign(spec.args().begin(), spec.args().end());
  process.exec = exec;
  process.started_at = absl::Now();
  *pid = next_pid_++;
  return grpc::Status::OK;
}

void FakeAgent::HoldStartAnswers(bool hold) {
  absl::MutexLock lock(&mu_);
  hold_start_answers_ = hold;
}

void FakeAgent::AwaitStartAnswer(grpc::ServerContext* context) {
  absl::MutexLock lock(&mu_);
  // In steps, to notice a caller that went away.
  while (hold_start_answers_ && !context->IsCancelled()) {
    auto released = [this]() {
      mu_.AssertHeld();
      return !hold_start_answers_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&released), absl::Milliseconds(50));
  }
}

grpc::Status FakeAgent::NewContainer(
    grpc::ServerContext* context, const agentpb::NewContainerRequest* request,
    agentpb::NewContainerResponse* response) {
  int32_t pid = 0;
  grpc::Status status = Start(request->container_id(), request->process_id(),
                              request->process(), /*exec=*/false, &pid);
  AwaitStartAnswer(context);
  response->set_pid(pid);
  return status;
}

grpc::Status FakeAgent::ExecCmd(grpc::ServerContext* context,
                                const agentpb::ExecCmdRequest* request,
                                agentpb::ExecCmdResponse* response) {
  int32_t pid = 0;
  grpc::Status status = Start(request->container_id(), request->process_id(),
                              request->process(), /*exec=*/true, &pid);
  AwaitStartAnswer(context);
  response->set_pid(pid);
  return status;
}

grpc::Status FakeAgent::Signal(grpc::ServerContext*,
                               const agentpb::SignalRequest* request,
                               agentpb::SignalResponse*) {
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(request->process_id());
  if (it == processes_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no process ", request->process_id()));
  }
  it->second.signals.push_back(request->signal());
  return grpc::Status::OK;
}

grpc::Status FakeAgent::Resize(grpc::ServerContext*,
                               const agentpb::ResizeRequest* request,
                               agentpb::ResizeResponse*) {
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(request->process_id());
  if (it == processes_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no process ", request->process_id()));
  }
  it->second.sizes.push_back(request->size());
  return grpc::Status::OK;
}

void FakeAgent::HoldAcks(bool hold) {
  absl::MutexLock lock(&mu_);
  hold_acks_ = hold;
}

void FakeAgent::FailAcks(int n) {
  absl::MutexLock lock(&mu_);
  fail_acks_ = n;
}

grpc::Status FakeAgent::AckOutput(grpc::ServerContext* context,
                                  const agentpb::AckOutputRequest* request,
                                  agentpb::AckOutputResponse*) {
  if (context->deadline() == std::chrono::system_clock::time_point::max()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a deadline is required");
  }
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(request->process_id());
  if (it == processes_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no process ", request->process_id()));
  }
  agentpb::OutputAck ack;
  ack.set_stdout_offset(request->stdout_offset());
  ack.set_stderr_offset(request->stderr_offset());
  it->second.acks.push_back(ack);
  if (fail_acks_ > 0) {
    --fail_acks_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake agent: failed");
  }
  int& in_flight = acks_in_flight_[request->process_id()];
  ++in_flight;
  it->second.max_acks_in_flight =
      std::max(it->second.max_acks_in_flight, in_flight);
  auto released = [this]() {
    mu_.AssertHeld();
    return !hold_acks_;
  };
  mu_.Await(absl::Condition(&released));
  --acks_in_flight_[request->process_id()];
  return grpc::Status::OK;
}

grpc::Status FakeAgent::ProcessIo(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<agentpb::ProcessIoResponse,
                             agentpb::ProcessIoRequest>* stream) {
  // As berth-agent: no call without a deadline (the end-to-end test found
  // the proxy opening this stream without one).
  if (context->deadline() == std::chrono::system_clock::time_point::max()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a deadline is required");
  }
  agentpb::ProcessIoRequest request;
  if (!stream->Read(&request) || !request.has_attach()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "attach first");
  }
  const std::string process_id = request.attach().process_id();
  std::vector<std::string> args;
  {
    absl::MutexLock lock(&mu_);
    auto it = processes_.find(process_id);
    if (it == processes_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no process ", process_id));
    }
    it->second.attached = true;
    args = it->second.args;
  }
  // Requests: stdin, stdin close and acks, recorded, until the proxy
  // half-closes or the call ends.
  std::thread reader([this, stream, process_id] {
    agentpb::ProcessIoRequest in;
    while (stream->Read(&in)) {
      absl::MutexLock lock(&mu_);
      Process& p = processes_[process_id];
      if (in.has_stdin()) p.stdin += in.stdin();
      if (in.has_stdin_close()) p.stdin_closed = true;
      if (in.has_ack()) p.stream_acks.push_back(in.ack());
    }
    absl::MutexLock lock(&mu_);
    processes_[process_id].stdin_closed = true;
    processes_[process_id].io_done = true;
  });
  // A resumed attach goes on from its offsets (only bulk output can be
  // made again from any offset).
  uint64_t out_offset = request.attach().stdout_offset();
  uint64_t err_offset = request.attach().stderr_offset();
  auto write = [&](bool err, const std::string& data) {
    agentpb::ProcessIoResponse response;
    agentpb::OutputChunk* chunk =
        err ? response.mutable_stderr_chunk() : response.mutable_stdout_chunk();
    uint64_t& offset = err ? err_offset : out_offset;
    chunk->set_offset(offset);
    chunk->set_data(data);
    offset += data.size();
    bool ok = stream->Write(response);
    if (ok && !err) {
      absl::MutexLock lock(&mu_);
      processes_[process_id].stdout_written = out_offset;
    }
    return ok;
  };
  agentpb::ProcessExit exit;
  bool ok = true;
  const std::string script = args.empty() ? "" : args[0];
  if (script == "emit") {
    for (size_t i = 1; i < args.size() && ok; ++i) {
      const std::string& a = args[i];
      int n = 0;
      if (absl::StartsWith(a, "out:")) ok = write(false, a.substr(4));
      if (absl::StartsWith(a, "err:")) ok = write(true, a.substr(4));
      if (absl::StartsWith(a, "exit:") && absl::SimpleAtoi(a.substr(5), &n)) {
        exit.set_exit_code(n);
      }
      if (absl::StartsWith(a, "signal:") && absl::SimpleAtoi(a.substr(7), &n)) {
        exit.set_signal(n);
      }
    }
  } else if (script == "bulk") {
    uint64_t total = 0;
    if (args.size() > 1 && !absl::SimpleAtoi(args[1], &total)) total = 0;
    std::string data;
    for (uint64_t at = out_offset; at < total && ok; at += data.size()) {
      data.resize(std::min(kBulkChunk, total - at));
      for (size_t i = 0; i < data.size(); ++i) data[i] = PatternByte(at + i);
      ok = write(false, data);
    }
  } else if (script == "cat") {
    size_t sent = 0;
    while (ok) {
      std::string more;
      bool closed = false;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [&]() {
          mu_.AssertHeld();
          const Process& p = processes_[process_id];
          return p.stdin.size() > sent || p.stdin_closed;
        };
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(50));
        const Process& p = processes_[process_id];
        more = p.stdin.substr(sent);
        closed = p.stdin_closed;
      }
      if (context->IsCancelled()) ok = false;
      if (!more.empty()) {
        sent += more.size();
        ok = ok && write(false, more);
      }
      if (closed && more.empty()) break;
    }
  } else if (script == "wait_signal") {
    while (ok) {
      absl::MutexLock lock(&mu_);
      auto signalled = [&]() {
        mu_.AssertHeld();
        const Process& p = processes_[process_id];
        return !p.signals.empty() || p.io_done;
      };
      mu_.AwaitWithTimeout(absl::Condition(&signalled), absl::Milliseconds(50));
      const Process& p = processes_[process_id];
      if (!p.signals.empty()) {
        exit.set_signal(p.signals.front());
        break;
      }
      if (p.io_done || context->IsCancelled()) ok = false;
    }
  } else {
    write(true, absl::StrCat("fake agent: no script ", script, "\n"));
    exit.set_exit_code(127);
  }
  if (ok) {
    agentpb::ProcessIoResponse response;
    *response.mutable_exit() = exit;
    ok = stream->Write(response);
  }
  if (!ok) context->TryCancel();
  reader.join();
  return ok ? grpc::Status::OK
            : grpc::Status(grpc::StatusCode::CANCELLED, "stream gone");
}

}  // namespace testing
}  // namespace proxy
}  // namespace berth
