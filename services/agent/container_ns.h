// A container's own pid and mount namespaces, which hold its processes and
// not the agent: none of them can signal or ptrace the agent (it has no pid
// in their namespace) or reach its socket (the directory it is in is
// unmounted in their view).
//
// Each namespace pair belongs to a holder: a forked copy of the agent that is
// PID 1 of the new pid namespace. It keeps nothing of the agent (every
// descriptor closed, no capabilities, not dumpable) and only reaps the
// orphans of the container. The container's processes are children of the
// agent made inside the holder's namespaces (SpawnInContainer below), so that
// they are not PID 1 themselves: a signal reaches them as it would anywhere
// (PID 1 of a pid namespace ignores every signal it has no handler for, even
// SIGTERM from the agent). Killing the holder kills every process of the
// container, as the end of a pid namespace's init does.

#ifndef SERVICES_AGENT_CONTAINER_NS_H_
#define SERVICES_AGENT_CONTAINER_NS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"

namespace berth::agent {

struct ContainerNamespaces {
  // The holder's pid (in the agent's pid namespace) and a pidfd of it: the
  // namespaces to join, and what to kill at the end of the container.
  pid_t holder_pid = -1;
  base::UniqueFd holder_pidfd;
  // Its pid and mount namespaces, opened while it could still be (a
  // process that is not dumpable is only reached through /proc or a pidfd
  // with CAP_SYS_PTRACE, which the agent does not keep).
  base::UniqueFd pid_ns;
  base::UniqueFd mount_ns;
};

// Forks the holder into a new pid namespace; it makes a mount namespace of
// its own (every mount private), unmounts `hide_dir` from it when not empty
// (MNT_DETACH: what is mounted below goes too), mounts /proc of the new pid
// namespace (again masking what was masked in the agent's: each mount below
// /proc is made again, a directory as an empty read-only tmpfs, a file as
// /dev/null, proc's own read-only binds as read-only binds), drops its
// capabilities and waits for orphans. Returns once it is ready, or failed:
// FAILED_PRECONDITION naming the step. `*forked` says whether a child was
// made, which the caller reaps (also after an error).
//
// Needs CAP_SYS_ADMIN. Changes the calling thread's namespace for children
// for the length of the fork only.
absl::StatusOr<ContainerNamespaces> StartContainerNamespaces(
    const std::string& hide_dir, bool* forked);

// The pid namespace the calling thread's next children are made in, for as
// long as this lives: the holder's (its pid_ns), then the agent's own again.
// The agent cannot go on with a thread that makes children elsewhere: a
// failure to return is fatal. A child forked meanwhile calls InChild():
// its destructor then does nothing (pids cannot tell: the child may have
// the agent's pid number in its own namespace).
class ChildrenInPidNamespace {
 public:
  // Check ok() before forking: false with errno set.
  explicit ChildrenInPidNamespace(int pid_ns);
  ~ChildrenInPidNamespace();
  ChildrenInPidNamespace(const ChildrenInPidNamespace&) = delete;
  ChildrenInPidNamespace& operator=(const ChildrenInPidNamespace&) = delete;
  bool ok() const { return entered_; }
  void InChild() { entered_ = false; }

 private:
  bool entered_ = false;
};

}  // namespace berth::agent

#endif  // SERVICES_AGENT_CONTAINER_NS_H_
