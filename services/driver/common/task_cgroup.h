// The cgroup of one task of a built-in driver (an exec task; a sandbox, with
// its init and agent): made under a parent cgroup ("/berth")
// on every hierarchy the host's layout uses, with the task's CPU, memory and
// pids limits; joined by the task's processes through ProcsFiles(); emptied
// with KillAll(); asked how often the kernel OOM-killed in it; removed.
//
//   absl::StatusOr<TaskCgroup> cgroup =
//       TaskCgroup::Create(mounts, "/berth", task_id, limits);
//   // child: write "0" to each of cgroup->ProcsFiles(), then exec
//   cgroup->KillAll(absl::Seconds(10));
//   cgroup->Remove(absl::Seconds(10));
//
// Layouts:
// - V1 and HYBRID: a directory under the v1 mount of each of cpu, cpuacct,
//   memory, pids and freezer that is mounted (co-mounted controllers share
//   one). The hybrid layout's cgroup2 mount is not used.
// - V2: one directory under the cgroup2 mount; +cpu +memory +pids are enabled
//   in cgroup.subtree_control of the root and of every ancestor down to the
//   parent (those of them its cgroup.controllers lists).
// - NONE: FAILED_PRECONDITION.
//
// A TaskCgroup is a value (paths and the layout): copies name the same
// cgroup; nothing is removed when one goes. Methods are thread-compatible.

#ifndef SERVICES_DRIVER_COMMON_TASK_CGROUP_H_
#define SERVICES_DRIVER_COMMON_TASK_CGROUP_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.pb.h"
#include "services/common/stats/cgroup_layout.h"

namespace berth {
namespace driver_common {

// The limits of a task (berth.driver.v1.Resources); 0 leaves a limit alone.
// Errors about them name the field as "resources.<field>".
struct CgroupLimits {
  // Relative CPU weight. v1 cpu.shares; v2 cpu.weight =
  // 1 + ((shares - 2) * 9999) / 262142, shares clamped to [2, 262144].
  uint64_t cpu_shares = 0;
  // Hard CPU limit in thousandths of a core over a 100 ms period. v1
  // cpu.cfs_period_us = 100000 and cpu.cfs_quota_us = millicores * 100; v2
  // cpu.max = "<millicores * 100> 100000". The kernel refuses a quota below
  // 1 ms (millicores < 10): INVALID_ARGUMENT.
  uint64_t cpu_millicores = 0;
  // Memory limit in bytes, swap included. v1 memory.limit_in_bytes and, where
  // the file exists, memory.memsw.limit_in_bytes to the same value; v2
  // memory.max and, where the file exists, memory.swap.max = 0.
  uint64_t memory_bytes = 0;
  // Most processes and threads at once: pids.max.
  uint64_t pids_limit = 0;
  // Only the devices a task's /dev holds may be read or written (null,
  // zero, full, random, urandom, tty, ptmx and the pts terminals); every
  // device node may still be made (mknod), none other opened. v1: the
  // devices controller's devices.deny "a" then one devices.allow line each,
  // where that hierarchy is mounted. v2 has no such files (a BPF device
  // program would be needed): nothing is written there, and the task relies
  // on its /dev and nodev mounts (DeviceRulesApplied says which).
  bool restrict_devices = false;
};

// The devices.allow lines of CgroupLimits::restrict_devices, in order.
inline constexpr const char* kAllowedDeviceRules[] = {
    "c *:* m",   "b *:* m",   "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm",
    "c 1:8 rwm", "c 1:9 rwm", "c 5:0 rwm", "c 5:2 rwm", "c 136:* rwm"};

// Tests only: fixture trees are ordinary directories standing in for cgroup
// file systems. The kernel fills a cgroup directory with its interface files
// when it is made and takes them away with rmdir; on a fixture these do it.
struct CgroupFixtureHooks {
  // Called after each directory Create makes (the task's, and a parent made
  // on the way) with its path: puts in the files the kernel would.
  std::function<void(const std::string& directory)> after_mkdir;
  // Remove everything inside a task directory before its rmdir.
  bool empty_before_rmdir = false;
};

class TaskCgroup {
 public:
  // Makes `<parent>/<task_id>` on every hierarchy the layout uses and applies
  // `limits`. `parent` is a cgroup path relative to each hierarchy's root
  // ("/berth", "berth/node-1", "/" for the root); missing parents are made
  // and kept. Errors:
  // - INVALID_ARGUMENT naming task_id or parent for an empty, ".", ".." or
  //   (task_id) slashed component;
  // - FAILED_PRECONDITION for the NONE layout, and naming the field for a
  //   limit whose controller is not there (not mounted on v1, not enabled or
  //   not available on v2);
  // - ALREADY_EXISTS naming the directory if the task's cgroup exists on any
  //   hierarchy (that directory is left alone);
  // - a failing mkdir or write: the status of its errno (EBUSY is
  //   FAILED_PRECONDITION), naming the file and, for a limit, the field:
  //   "resources.memory_bytes: writing 1048576 to
  //   /sys/fs/cgroup/memory/berth/t1/memory.limit_in_bytes: Device or
  //   resource busy".
  // Any failure removes the task directories this call made before it
  // returns (parents it made stay: other tasks may be using them).
  static absl::StatusOr<TaskCgroup> Create(
      const stats::CgroupMounts& mounts, absl::string_view parent,
      absl::string_view task_id, const CgroupLimits& limits,
      const CgroupFixtureHooks& hooks = CgroupFixtureHooks());

  // The same cgroup, for recovery: nothing is made, changed or checked on
  // disk. Fails only on what Create fails on before touching anything (the
  // NONE layout, an invalid task_id or parent), so that an id read back from
  // a handle can never name a directory outside the parent.
  static absl::StatusOr<TaskCgroup> Open(
      const stats::CgroupMounts& mounts, absl::string_view parent,
      absl::string_view task_id,
      const CgroupFixtureHooks& hooks = CgroupFixtureHooks());

  // "/<parent>/<task_id>", relative to each hierarchy's root: what
  // berth-stats' RegisterTask takes.
  const std::string& path() const { return path_; }
  // The layout the cgroup was made for.
  berth::stats::v1::CgroupLayout layout() const { return layout_; }
  // Every directory of the task's cgroup, one per hierarchy.
  const std::vector<std::string>& directories() const { return directories_; }
  // The cgroup.procs file of each directory: a process joins the task by
  // writing its pid ("0" for itself) to each of them.
  std::vector<std::string> ProcsFiles() const;

  // Whether restrict_devices can be enforced here: a v1 devices hierarchy
  // is mounted. False on v2 (see CgroupLimits::restrict_devices).
  bool DeviceRulesApplied() const;

  // The processes in the cgroup, the union over its hierarchies, sorted and
  // without duplicates. An absent cgroup (or directory) has none.
  absl::StatusOr<std::vector<pid_t>> Pids() const;

  // SIGKILLs every process in the cgroup until it is empty, re-reading the
  // members each round since a process may fork while it is being killed
  // (v2: cgroup.kill first, where it exists). A process is signalled through
  // a pidfd opened before the member list that still names it, so a pid
  // reused outside the cgroup is never hit. DEADLINE_EXCEEDED naming the
  // cgroup and the pids left when `timeout` passes first.
  absl::Status KillAll(absl::Duration timeout) const;

  // How many times the kernel OOM-killed a process in the cgroup: the
  // `oom_kill N` line of memory.oom_control (v1) or memory.events (v2).
  // 0 when the memory controller, its file or the line is absent (kernels
  // before 4.13 do not count); NOT_FOUND naming the directory if the cgroup's
  // memory directory is gone.
  absl::StatusOr<uint64_t> OomKillCount() const;

  // Removes every directory of the cgroup (rmdir), retrying EBUSY until
  // `timeout` (a process that has exited leaves its cgroup a moment later),
  // then DEADLINE_EXCEEDED naming the directory and the pids still in it.
  // Absent directories are fine: removing twice is not an error.
  absl::Status Remove(absl::Duration timeout) const;

 private:
  TaskCgroup() = default;

  // Validates and computes the paths; touches nothing.
  static absl::StatusOr<TaskCgroup> Make(const stats::CgroupMounts& mounts,
                                         absl::string_view parent,
                                         absl::string_view task_id,
                                         const CgroupFixtureHooks& hooks);

  // The directory of the task for `controller` ("cpu", "memory", "pids",
  // ...), or "" if the controller has no hierarchy here.
  std::string ControllerDirectory(absl::string_view controller) const;
  absl::Status ApplyLimits(const CgroupLimits& limits) const;
  absl::Status RemoveDirectories(const std::vector<std::string>& directories,
                                 absl::Duration timeout) const;

  berth::stats::v1::CgroupLayout layout_ = berth::stats::v1::CGROUP_LAYOUT_NONE;
  stats::CgroupMounts mounts_;
  // The parent's components ("berth", "node-1").
  std::vector<std::string> parent_components_;
  std::string path_;
  std::vector<std::string> directories_;
  CgroupFixtureHooks hooks_;
};

}  // namespace driver_common
}  // namespace berth

#endif  // SERVICES_DRIVER_COMMON_TASK_CGROUP_H_
