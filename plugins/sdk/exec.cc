#include "plugins/sdk/exec.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "plugins/sdk/proto_time.h"

namespace berth::plugin {
namespace {

// ExecTask's side of an exec: output gathered in a string.
class StringOutput : public ExecOutput {
 public:
  bool Write(absl::string_view data) override {
    absl::MutexLock lock(&mu_);
    data_.append(data.data(), data.size());
    return true;
  }
  std::string Take() {
    absl::MutexLock lock(&mu_);
    return std::move(data_);
  }

 private:
  absl::Mutex mu_;
  std::string data_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<driver::v1::ExecTaskResponse> ExecTaskThroughStreaming(
    const std::string& task_id, const std::vector<std::string>& command,
    absl::Duration timeout, const CancelToken& cancel, const RunExecFn& run) {
  StringOutput out, err;
  ExecOptions options;
  options.task_id = task_id;
  options.command = command;
  options.out = &out;
  options.err = &err;
  options.cancel = &cancel;
  const absl::Time deadline = timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + timeout;
  absl::StatusOr<ExitStatus> status = run(options, deadline);
  if (!status.ok()) return status.status();
  driver::v1::ExecTaskResponse response;
  response.set_stdout(out.Take());
  response.set_stderr(err.Take());
  *response.mutable_result() = ToExitResult(*status);
  return response;
}

driver::v1::ExitResult ToExitResult(const ExitStatus& status) {
  driver::v1::ExitResult result;
  result.set_exit_code(status.exit_code);
  result.set_signal(status.signal);
  result.set_oom_killed(status.oom_killed);
  *result.mutable_exited_at() = ToProtoTimestamp(absl::Now());
  return result;
}

}  // namespace berth::plugin
