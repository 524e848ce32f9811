// What StartTask is asked, checked and resolved before anything is made: the
// program found on the task's PATH, the user and groups looked up, the
// working directory placed inside the task directory, the limits and the
// network checked. Every error is INVALID_ARGUMENT (or FAILED_PRECONDITION
// for what the node must fix) naming the task and the field, e.g.
//   task web-1: driver_config.command: "nginx" is not on the task's PATH
//   (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)

#ifndef SERVICES_DRIVER_COMMON_TASK_SPEC_H_
#define SERVICES_DRIVER_COMMON_TASK_SPEC_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "services/driver/common/task_cgroup.h"

namespace berth::driver_common {

// The schema of the driver_config that ResolveTaskSpec reads (command, args,
// work_dir), which both built-in drivers take.
plugin::v1::ConfigSchema DriverConfigSchema();

// The PATH a task gets when its environment has none.
inline constexpr char kDefaultPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Below this a task cannot even start its init and a shell.
inline constexpr uint64_t kMinMemoryBytes = 4 << 20;
// The init and the program.
inline constexpr uint64_t kMinPids = 2;

inline constexpr uint64_t kDefaultLogFileBytes = 10 << 20;
inline constexpr uint32_t kDefaultLogFiles = 4;

struct TaskSpec {
  std::string id;
  // Absolute path of the program; args[0] is the command as given.
  std::string path;
  std::vector<std::string> args;
  // "NAME=value", TaskConfig.env plus PATH, HOME and BERTH_* where unset.
  std::vector<std::string> env;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  // Absolute; inside task_dir.
  std::string task_dir;
  std::string work_dir;
  // Empty for the host's network namespace.
  std::string netns_path;
  std::string hostname;
  CgroupLimits limits;
  uint64_t log_max_bytes = kDefaultLogFileBytes;
  uint32_t log_max_files = kDefaultLogFiles;
};

// Where a task's files go when the node gives it no directory.
std::string DefaultTaskDir(const std::string& state_dir,
                           const std::string& task_id);

// Checks and resolves `task` (whose driver_config passed the schema).
// `state_dir` is the driver's, for a task without task_dir.
absl::StatusOr<TaskSpec> ResolveTaskSpec(const driver::v1::TaskConfig& task,
                                         const std::string& state_dir);

// A task id usable as a file and cgroup name: 1-128 of [A-Za-z0-9._-], not
// starting with '.'. INVALID_ARGUMENT naming task.id otherwise.
absl::Status CheckTaskId(const std::string& id);

// The user `user` names (a name or a number): uid, primary gid, supplementary
// groups and home. An unknown name is INVALID_ARGUMENT naming `field`.
struct ResolvedUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string home;
  std::string name;
};
absl::StatusOr<ResolvedUser> ResolveUser(const std::string& user,
                                         const std::string& field);
absl::StatusOr<gid_t> ResolveGroup(const std::string& group,
                                   const std::string& field);

// `command` as execve needs it: a path with a '/' is taken as it is
// (relative to `work_dir`), a bare name is looked up on `path_env`. The file
// must exist, be a regular file and be executable.
absl::StatusOr<std::string> FindProgram(const std::string& command,
                                        const std::string& path_env,
                                        const std::string& work_dir,
                                        const std::string& field);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_TASK_SPEC_H_
