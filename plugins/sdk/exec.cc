#include "plugins/sdk/exec.h"

#include "absl/time/clock.h"
#include "plugins/sdk/proto_time.h"

namespace berth::plugin {

driver::v1::ExitResult ToExitResult(const ExitStatus& status) {
  driver::v1::ExitResult result;
  result.set_exit_code(status.exit_code);
  result.set_signal(status.signal);
  result.set_oom_killed(status.oom_killed);
  *result.mutable_exited_at() = ToProtoTimestamp(absl::Now());
  return result;
}

}  // namespace berth::plugin
