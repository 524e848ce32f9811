// What berth-node finds of its own at start that it has no record of: after
// its state directory was wiped (or lost) while its driver plugins and tasks
// still ran. It never adopts them (their records are gone): it removes them,
// so that it is never stuck unhealthy behind them.
//
// - A plugin: a live socket at <runtime_dir>/plugins/<name>.sock that the
//   node did not reattach to. Its process (found by SO_PEERCRED on a
//   connection to the socket) is stopped; the node then launches a fresh
//   plugin (PluginManager).
// - A task: a cgroup under one of the plugins' cgroup parents (each
//   `--cgroup_parent=` of their arguments), on any cgroup hierarchy, named
//   by no task of the store. Its processes are killed, its cgroup removed.
// - A sandbox task's shim: a berth-shim whose --task_log_dir is the logs
//   directory of a task of this node's state directory that the store does
//   not have. It is killed.

#ifndef SERVICES_NODE_ORPHANS_H_
#define SERVICES_NODE_ORPHANS_H_

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth::node {

// The pid of the process listening on Unix socket `path` (SO_PEERCRED of a
// connection to it). NOT_FOUND when nobody listens; errors name the path.
absl::StatusOr<pid_t> SocketPeerPid(const std::string& path);

// Stops the process that listens on `path` (a plugin the node has no record
// of): SIGTERM, then SIGKILL if it is still there after `grace`; waits until
// it is gone (its pidfd). OK when nobody listens. A listener of another uid
// than this process's (and not root's when this process is root) is refused:
// FAILED_PRECONDITION naming the socket, the pid and the uid.
absl::Status StopSocketOwner(const std::string& path, absl::Duration grace);

// Each `--cgroup_parent=X` (or `--cgroup_parent X`) of `args`, without its
// leading slashes; "" and "/" are ignored.
std::vector<std::string> CgroupParentsOf(const std::vector<std::string>& args);

// The mount points of the cgroup hierarchies (v1 and v2) of `mountinfo`
// (the text of /proc/self/mountinfo).
std::vector<std::string> CgroupMountPoints(const std::string& mountinfo);

struct OrphanTasksRemoved {
  // The task ids whose cgroups went.
  std::set<std::string> tasks;
  int processes_killed = 0;
};

// Under each of `mount_points` / each of `parents`: every child cgroup whose
// name is not in `known` is emptied (its processes and its descendants'
// SIGKILLed until none is left, within `timeout`) and removed, deepest
// first. Errors name the cgroup left behind (others are still removed).
absl::StatusOr<OrphanTasksRemoved> RemoveOrphanTaskCgroups(
    const std::vector<std::string>& mount_points,
    const std::vector<std::string>& parents, const std::set<std::string>& known,
    absl::Duration timeout = absl::Seconds(10));

// Kills (SIGKILL) each berth-shim whose command line has
// --task_log_dir=<tasks_dir>/<ID>/logs for an ID not in `known`. Returns the
// pids killed.
std::vector<pid_t> KillOrphanShims(const std::string& tasks_dir,
                                   const std::set<std::string>& known);

}  // namespace berth::node

#endif  // SERVICES_NODE_ORPHANS_H_
