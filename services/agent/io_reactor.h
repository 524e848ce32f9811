// One ProcessIo call of agent/v1 (agent_service.h): attaches to a process
// (process.h) at the output offsets it gives, sends the process's output
// from its windows with offsets, one message in flight, and its exit last;
// passes stdin (read on once the process took it), its close and
// acknowledgements to the process.

#ifndef SERVICES_AGENT_IO_REACTOR_H_
#define SERVICES_AGENT_IO_REACTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "berth/agent/v1/agent.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "services/agent/process.h"

namespace berth::agent {

// One ProcessIo call. Before the attach, its state is guarded by its own
// mu_; once attached, by the process's mu (the I/O thread drives writes).
class IoReactor : public grpc::ServerBidiReactor<v1::ProcessIoRequest,
                                                 v1::ProcessIoResponse> {
 public:
  // The process a stream attaches to, by container and process id; an
  // error (NOT_FOUND, INVALID_ARGUMENT) goes to the caller as it is.
  using FindProcess = std::function<absl::StatusOr<std::shared_ptr<Process>>(
      const std::string& container_id, const std::string& process_id)>;

  // Deletes itself when the call is done.
  IoReactor(grpc::CallbackServerContext* context, FindProcess find);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Once attached, with the attached process's mu held; `p` is that
  // process (process_, which only Attach sets, under both locks).
  void MaybeWrite(Process& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu);
  void FinishAttached(Process& p, const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu);
  void ResumeReading();
  // Output up to these offsets was acknowledged (in the stream or by
  // AckOutput): nothing before them needs sending.
  void Acked(Process& p, uint64_t stdout_offset, uint64_t stderr_offset)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu);
  bool finished() const { return finished_; }

 private:
  void Attach();

  const FindProcess find_;
  v1::ProcessIoRequest request_;
  v1::ProcessIoResponse response_;

  absl::Mutex mu_;
  std::shared_ptr<Process> process_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool pre_finished_ = false;  // Finish called before any attach

  // Guarded by process_->mu once attached.
  bool writing_ = false;
  bool finished_ = false;
  bool read_paused_ = false;
  std::optional<grpc::Status> pending_finish_;
  uint64_t out_sent_ = 0;
  uint64_t err_sent_ = 0;
  bool err_next_ = false;
};

}  // namespace berth::agent

#endif  // SERVICES_AGENT_IO_REACTOR_H_
