// Internal to the sandbox driver's own files (sandbox_driver.cc, recovery.cc,
// exec.cc): a task as the driver keeps it, and what those files share.

#ifndef SERVICES_DRIVER_SANDBOX_SANDBOX_TASK_H_
#define SERVICES_DRIVER_SANDBOX_SANDBOX_TASK_H_

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"
#include "berth/driver/v1/driver.pb.h"
#include "grpcpp/client_context.h"
#include "services/driver/common/task_cgroup.h"
#include "services/driver/common/task_spec.h"
#include "services/driver/common/task_stats_source.h"
#include "services/driver/sandbox/sandbox_driver.h"
#include "services/driver/sandbox/sandbox_state.pb.h"

namespace berth::sandbox_driver {

// Version 2: driver_state is a SandboxTaskState (version 1 had none).
inline constexpr uint32_t kStateVersion = 2;
// The deadline of a call to berth-proxy or an agent.
inline constexpr absl::Duration kCallTimeout = absl::Seconds(10);
// How long the agent is given to say how a process whose shim has exited
// ended (it has: the shim exits after the exit frame).
inline constexpr absl::Duration kWaitTimeout = absl::Seconds(5);

inline void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// `privileges` as the agent takes them (nothing when not enabled).
void FillPrivileges(const driver_common::PrivilegeSpec& privileges,
                    agent::v1::Privileges* out);

// The task's resolved rlimits as the agent takes them (TaskConfig.rlimits,
// for its process and every exec, as runc gives an exec the container's).
void FillRlimits(const driver_common::TaskSpec& spec,
                 agent::v1::ProcessSpec* out);

// Field 22 of /proc/PID/stat; 0 when it cannot be read.
uint64_t StartTicks(pid_t pid);

struct SandboxDriver::Task {
  std::string id;
  driver::v1::TaskConfig config;
  driver_common::TaskSpec spec;
  std::string agent_socket;
  std::string token;
  // The agent's id of the task's process (its container is the task id).
  std::string process_id;
  pid_t shim_pid = -1;
  pid_t init_pid = -1;
  absl::Time started_at;
  // What the handle carries.
  SandboxTaskState state;
  // None when the host has no usable cgroups.
  std::optional<driver_common::TaskCgroup> cgroup;

  driver_common::InProcessStats in_process_stats;

  mutable absl::Mutex mu;
  base::UniqueFd init_pidfd ABSL_GUARDED_BY(mu);
  base::UniqueFd shim_pidfd ABSL_GUARDED_BY(mu);
  bool exited ABSL_GUARDED_BY(mu) = false;
  bool torn_down ABSL_GUARDED_BY(mu) = false;
  driver::v1::ExitResult result ABSL_GUARDED_BY(mu);
  absl::Time completed_at ABSL_GUARDED_BY(mu);

  bool IsExited() const {
    absl::MutexLock lock(&mu);
    return exited;
  }
};

}  // namespace berth::sandbox_driver

#endif  // SERVICES_DRIVER_SANDBOX_SANDBOX_TASK_H_
