// The sandbox driver's calls to a sandbox's berth-agent (berth.agent.v1), on
// its socket in the task directory, from outside the sandbox: how a process
// ended, a signal to it, the end of the sandbox. The process's stdio and its
// start go through berth-proxy instead (ARCHITECTURE.md, "A sandboxed
// task"); the driver asks the agent directly where the proxy cannot answer
// (the shim's 128+N exit status is ambiguous) or may have forgotten the
// sandbox. Each call dials the socket anew, within 1 s: the agent outlives
// the driver, and a recovered task has nothing else to hold on to.

#ifndef SERVICES_DRIVER_SANDBOX_AGENT_CLIENT_H_
#define SERVICES_DRIVER_SANDBOX_AGENT_CLIENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/agent/v1/agent.pb.h"
#include "berth/driver/v1/driver.pb.h"

namespace berth::sandbox_driver {

// How the agent's process `process_id` of container `container_id` ended,
// waiting at most `timeout` (DEADLINE_EXCEEDED while it runs).
absl::StatusOr<agent::v1::ProcessExit> AgentWait(
    const std::string& socket, const std::string& container_id,
    const std::string& process_id, absl::Duration timeout);

// Sends `signal` to the agent's process `process_id` of container
// `container_id`, the call taking at most `timeout`.
absl::Status AgentSignal(const std::string& socket,
                         const std::string& container_id,
                         const std::string& process_id, int signal,
                         absl::Duration timeout);

// The agent's main process of container `container_id` and whether it has
// exited (NOT_FOUND when the agent never started the container), the call
// taking at most `timeout`.
absl::StatusOr<agent::v1::InspectContainerResponse> AgentInspectContainer(
    const std::string& socket, const std::string& container_id,
    absl::Duration timeout);

// Asks the agent to end its sandbox (SIGTERM to every process, SIGKILL after
// `grace`), the call taking at most `timeout`. Best effort, for a teardown
// that kills the sandbox's init next: an agent that cannot be reached is not
// asked, and a call that fails is only logged (VLOG 1, naming `task_id`).
void AgentDestroySandbox(const std::string& socket, const std::string& task_id,
                         absl::Duration grace, absl::Duration timeout);

// The driver's ExitResult of how the agent says a process ended; exited_at
// is now when the agent gave no time.
driver::v1::ExitResult FromProcessExit(const agent::v1::ProcessExit& exit);

}  // namespace berth::sandbox_driver

#endif  // SERVICES_DRIVER_SANDBOX_AGENT_CLIENT_H_
