// A fake berth.agent.v1.AgentService for the proxy's tests (testonly): its
// "processes" are scripts named by their args, producing output with offsets
// on ProcessIo, and it records what it was asked and when.
//
// Scripts (ProcessSpec.args):
//   emit [out:TEXT | err:TEXT]... [exit:N] [signal:N]
//       writes each piece in order, then exits with code N (or signal N);
//   bulk BYTES
//       BYTES bytes of PatternByte(i) to stdout in 64 KiB chunks, exit 0;
//       an attach with a stdout offset resumes from there;
//   cat
//       stdin back to stdout until stdin is closed, exit 0;
//   wait_signal
//       waits for a Signal (or for the stream's end), then exits with it.

#ifndef SERVICES_PROXY_FAKE_AGENT_H_
#define SERVICES_PROXY_FAKE_AGENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/agent/v1/agent.grpc.pb.h"

namespace berth {
namespace proxy {
namespace testing {

// The byte at `offset` of a bulk script's output.
inline char PatternByte(uint64_t offset) {
  return static_cast<char>((offset * 131 + (offset >> 12)) & 0xff);
}

class FakeAgent final : public berth::agent::v1::AgentService::Service {
 public:
  struct Process {
    std::string container_id;
    std::vector<std::string> args;
    bool exec = false;
    absl::Time started_at;
    std::vector<int> signals;
    std::vector<berth::agent::v1::TerminalSize> sizes;  // from Resize
    std::string stdin;
    bool stdin_closed = false;
    // From AckOutput calls, in order.
    std::vector<berth::agent::v1::OutputAck> acks;
    // From ack frames on ProcessIo (the proxy sends none).
    std::vector<berth::agent::v1::OutputAck> stream_acks;
    // AckOutput calls of this process in flight at once, at most.
    int max_acks_in_flight = 0;
    uint64_t stdout_written = 0;  // bytes whose Write returned
    bool attached = false;
    bool io_done = false;
  };

  // While held, AckOutput calls wait (recorded first) until released.
  void HoldAcks(bool hold) ABSL_LOCKS_EXCLUDED(mu_);
  // The next `n` AckOutput calls fail UNAVAILABLE (recorded first).
  void FailAcks(int n) ABSL_LOCKS_EXCLUDED(mu_);

  // While held, NewContainer and ExecCmd start their process (recorded, as
  // always) and then wait to answer until released or until the call is
  // cancelled (its caller died).
  void HoldStartAnswers(bool hold) ABSL_LOCKS_EXCLUDED(mu_);

  // Every process started, by process id.
  std::map<std::string, Process> processes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `timeout` for `condition` on the processes.
  bool Await(const std::function<bool(const std::map<std::string, Process>&)>&
                 condition,
             absl::Duration timeout = absl::Seconds(30))
      ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status Ping(grpc::ServerContext* context,
                    const berth::agent::v1::PingRequest* request,
                    berth::agent::v1::PingResponse* response) override;
  grpc::Status NewContainer(
      grpc::ServerContext* context,
      const berth::agent::v1::NewContainerRequest* request,
      berth::agent::v1::NewContainerResponse* response) override;
  grpc::Status ExecCmd(grpc::ServerContext* context,
                       const berth::agent::v1::ExecCmdRequest* request,
                       berth::agent::v1::ExecCmdResponse* response) override;
  grpc::Status Signal(grpc::ServerContext* context,
                      const berth::agent::v1::SignalRequest* request,
                      berth::agent::v1::SignalResponse* response) override;
  grpc::Status Resize(grpc::ServerContext* context,
                      const berth::agent::v1::ResizeRequest* request,
                      berth::agent::v1::ResizeResponse* response) override;
  grpc::Status AckOutput(
      grpc::ServerContext* context,
      const berth::agent::v1::AckOutputRequest* request,
      berth::agent::v1::AckOutputResponse* response) override;
  grpc::Status ProcessIo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<berth::agent::v1::ProcessIoResponse,
                               berth::agent::v1::ProcessIoRequest>* stream)
      override;

 private:
  grpc::Status Start(const std::string& container_id,
                     const std::string& process_id,
                     const berth::agent::v1::ProcessSpec& spec, bool exec,
                     int32_t* pid) ABSL_LOCKS_EXCLUDED(mu_);
  // The wait of HoldStartAnswers.
  void AwaitStartAnswer(grpc::ServerContext* context) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  int32_t next_pid_ ABSL_GUARDED_BY(mu_) = 100;
  std::map<std::string, Process> processes_ ABSL_GUARDED_BY(mu_);
  bool hold_acks_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_start_answers_ ABSL_GUARDED_BY(mu_) = false;
  int fail_acks_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> acks_in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace proxy
}  // namespace berth

#endif  // SERVICES_PROXY_FAKE_AGENT_H_
