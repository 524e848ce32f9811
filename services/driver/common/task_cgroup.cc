#include "services/driver/common/task_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "glog/logging.h"

namespace berth {
namespace driver_common {
namespace {

namespace pb = ::berth::stats::v1;

// The v1 hierarchies a task gets a directory in, in this order.
constexpr const char* kV1Controllers[] = {"cpu",  "cpuacct", "memory",
                                          "pids", "freezer", "devices"};
// The controllers enabled for tasks on v2.
constexpr const char* kV2Controllers[] = {"cpu", "memory", "pids"};

constexpr uint64_t kCpuPeriodMicros = 100000;

bool IsV1(pb::CgroupLayout layout) {
  return layout == pb::CGROUP_LAYOUT_V1 || layout == pb::CGROUP_LAYOUT_HYBRID;
}

std::string ErrnoText(int error) {
  char buffer[256];
  // GNU strerror_r: returns the message, which may or may not be in buffer.
  return strerror_r(error, buffer, sizeof(buffer));
}

// The status of a failed system call on `what`. EBUSY means the cgroup's
// state forbids it (processes in it, a limit below its usage): not a
// transient unavailability.
absl::Status ErrnoStatus(int error, absl::string_view what) {
  const absl::StatusCode code = error == EBUSY
                                    ? absl::StatusCode::kFailedPrecondition
                                    : absl::ErrnoToStatusCode(error);
  return absl::Status(code, absl::StrCat(what, ": ", ErrnoText(error)));
}

absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// Writes `value` with one write(2), as the cgroup file systems want it.
// No O_CREAT: a cgroup file that is not there is an error.
absl::Status WriteCgroupFile(const std::string& path, absl::string_view value) {
  const std::string what = absl::StrCat("writing ", value, " to ", path);
  const base::UniqueFd fd(open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, what);
  const ssize_t written = write(fd.get(), value.data(), value.size());
  if (written < 0) return ErrnoStatus(errno, what);
  if (static_cast<size_t>(written) != value.size()) {
    return absl::InternalError(absl::StrCat(what, ": short write of ", written,
                                            " of ", value.size(), " bytes"));
  }
  return absl::OkStatus();
}

// The whole file; NOT_FOUND if it is not there.
absl::StatusOr<std::string> ReadCgroupFile(const std::string& path) {
  const base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("reading ", path));
  std::string content;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("reading ", path));
    }
    if (n == 0) break;
    content.append(buffer, n);
  }
  return content;
}

// The pids listed in a cgroup.procs file (one per line).
absl::Status ReadProcs(const std::string& path, std::set<pid_t>* pids) {
  absl::StatusOr<std::string> content = ReadCgroupFile(path);
  if (absl::IsNotFound(content.status())) return absl::OkStatus();
  if (!content.ok()) return content.status();
  for (absl::string_view line :
       absl::StrSplit(*content, '\n', absl::SkipWhitespace())) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(line, &pid) || pid <= 0) {
      return absl::InternalError(
          absl::StrCat("unexpected line \"", line, "\" in ", path));
    }
    pids->insert(pid);
  }
  return absl::OkStatus();
}

// Tests only (CgroupFixtureHooks::empty_before_rmdir): what the kernel's
// rmdir of a cgroup takes away by itself.
void RemoveContents(const std::string& directory) {
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return;
  while (struct dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = absl::StrCat(directory, "/", name);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      RemoveContents(path);
      rmdir(path.c_str());
    } else {
      unlink(path.c_str());
    }
  }
  closedir(dir);
}

// mkdir that accepts an existing directory; calls the fixture hook on
// directories it made.
absl::Status MakeParent(const std::string& path,
                        const CgroupFixtureHooks& hooks) {
  if (mkdir(path.c_str(), 0755) != 0) {
    if (errno == EEXIST) return absl::OkStatus();
    return ErrnoStatus(errno, absl::StrCat("making the parent cgroup ", path));
  }
  if (hooks.after_mkdir) hooks.after_mkdir(path);
  return absl::OkStatus();
}

// v2: from the root down to the parent, makes each missing directory and
// enables in its cgroup.subtree_control those of kV2Controllers that its
// cgroup.controllers lists and that are not enabled yet.
absl::Status EnableV2Controllers(const std::string& root,
                                 const std::vector<std::string>& components,
                                 const CgroupFixtureHooks& hooks) {
  std::string dir = root;
  for (size_t level = 0; level <= components.size(); ++level) {
    if (level > 0) {
      absl::StrAppend(&dir, "/", components[level - 1]);
      absl::Status made = MakeParent(dir, hooks);
      if (!made.ok()) return made;
    }
    const std::string controllers_file = dir + "/cgroup.controllers";
    absl::StatusOr<std::string> available = ReadCgroupFile(controllers_file);
    if (!available.ok()) return available.status();
    const std::string subtree_file = dir + "/cgroup.subtree_control";
    absl::StatusOr<std::string> enabled = ReadCgroupFile(subtree_file);
    if (!enabled.ok()) return enabled.status();
    const absl::flat_hash_set<absl::string_view> available_set =
        absl::StrSplit(*available, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    const absl::flat_hash_set<absl::string_view> enabled_set =
        absl::StrSplit(*enabled, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    std::vector<std::string> missing;
    for (const char* controller : kV2Controllers) {
      if (available_set.contains(controller) &&
          !enabled_set.contains(controller)) {
        missing.push_back(absl::StrCat("+", controller));
      }
    }
    if (missing.empty()) continue;
    absl::Status status =
        WriteCgroupFile(subtree_file, absl::StrJoin(missing, " "));
    if (!status.ok()) {
      return WithPrefix(status, "enabling controllers for tasks");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateComponent(absl::string_view field, absl::string_view value,
                               absl::string_view component) {
  if (component.empty() || component == "." || component == ".." ||
      absl::StrContains(component, '\0') ||
      absl::StrContains(component, '\n')) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", value, "\" is not a valid cgroup name component"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TaskCgroup> TaskCgroup::Make(const stats::CgroupMounts& mounts,
                                            absl::string_view parent,
                                            absl::string_view task_id,
                                            const CgroupFixtureHooks& hooks) {
  if (task_id.empty() || absl::StrContains(task_id, '/')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task_id: \"", task_id, "\" cannot name a cgroup (empty or has /)"));
  }
  absl::Status valid = ValidateComponent("task_id", task_id, task_id);
  if (!valid.ok()) return valid;
  TaskCgroup cgroup;
  for (absl::string_view component :
       absl::StrSplit(parent, '/', absl::SkipEmpty())) {
    valid = ValidateComponent("parent cgroup", parent, component);
    if (!valid.ok()) return valid;
    cgroup.parent_components_.emplace_back(component);
  }
  for (const std::string& component : cgroup.parent_components_) {
    absl::StrAppend(&cgroup.path_, "/", component);
  }
  absl::StrAppend(&cgroup.path_, "/", task_id);
  cgroup.layout_ = mounts.layout;
  cgroup.mounts_ = mounts;
  cgroup.hooks_ = hooks;
  if (IsV1(mounts.layout)) {
    absl::flat_hash_set<std::string> seen;
    for (const char* controller : kV1Controllers) {
      const std::string mount = mounts.V1Mount(controller);
      if (mount.empty() || !seen.insert(mount).second) continue;
      cgroup.directories_.push_back(mount + cgroup.path_);
    }
    if (cgroup.directories_.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make the cgroup of task ", task_id,
                       ": none of the cgroup v1 controllers ",
                       absl::StrJoin(kV1Controllers, ", "), " is mounted"));
    }
  } else if (mounts.layout == pb::CGROUP_LAYOUT_V2 && !mounts.v2.empty()) {
    cgroup.directories_.push_back(mounts.v2 + cgroup.path_);
  } else {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make the cgroup of task ", task_id,
                     ": no cgroup hierarchy is mounted (layout ",
                     pb::CgroupLayout_Name(mounts.layout), ")"));
  }
  return cgroup;
}

absl::StatusOr<TaskCgroup> TaskCgroup::Create(const stats::CgroupMounts& mounts,
                                              absl::string_view parent,
                                              absl::string_view task_id,
                                              const CgroupLimits& limits,
                                              const CgroupFixtureHooks& hooks) {
  absl::StatusOr<TaskCgroup> cgroup = Make(mounts, parent, task_id, hooks);
  if (!cgroup.ok()) return cgroup.status();

  // The parents, kept whatever happens next.
  if (cgroup->layout_ == pb::CGROUP_LAYOUT_V2) {
    absl::Status status =
        EnableV2Controllers(mounts.v2, cgroup->parent_components_, hooks);
    if (!status.ok()) return status;
  } else {
    for (const std::string& directory : cgroup->directories_) {
      std::string dir = directory.substr(
          0, directory.size() - cgroup->path_.size());  // the mount
      for (const std::string& component : cgroup->parent_components_) {
        absl::StrAppend(&dir, "/", component);
        absl::Status status = MakeParent(dir, hooks);
        if (!status.ok()) return status;
      }
    }
  }

  std::vector<std::string> made;
  auto fail = [&](absl::Status status) -> absl::Status {
    absl::Status removed = cgroup->RemoveDirectories(made, absl::Seconds(5));
    if (!removed.ok()) {
      LOG(WARNING) << "task " << task_id << ": after " << status
                   << ", cannot remove its cgroup: " << removed;
      return absl::Status(
          status.code(),
          absl::StrCat(status.message(),
                       "; then removing what was made: ", removed.message()));
    }
    return status;
  };
  for (const std::string& directory : cgroup->directories_) {
    if (mkdir(directory.c_str(), 0755) != 0) {
      const int error = errno;
      if (error == EEXIST) {
        return fail(absl::AlreadyExistsError(absl::StrCat(
            "the cgroup of task ", task_id, " already exists: ", directory)));
      }
      return fail(ErrnoStatus(
          error, absl::StrCat("making the cgroup directory ", directory)));
    }
    made.push_back(directory);
    if (hooks.after_mkdir) hooks.after_mkdir(directory);
  }
  absl::Status status = cgroup->ApplyLimits(limits);
  if (!status.ok()) return fail(status);
  VLOG(1) << "task " << task_id << ": made cgroup " << cgroup->path_ << " in "
          << absl::StrJoin(cgroup->directories_, ", ");
  return cgroup;
}

absl::StatusOr<TaskCgroup> TaskCgroup::Open(const stats::CgroupMounts& mounts,
                                            absl::string_view parent,
                                            absl::string_view task_id,
                                            const CgroupFixtureHooks& hooks) {
  return Make(mounts, parent, task_id, hooks);
}

std::string TaskCgroup::ControllerDirectory(
    absl::string_view controller) const {
  if (layout_ == pb::CGROUP_LAYOUT_V2) return mounts_.v2 + path_;
  const std::string mount = mounts_.V1Mount(controller);
  return mount.empty() ? std::string() : mount + path_;
}

absl::Status TaskCgroup::ApplyLimits(const CgroupLimits& limits) const {
  const bool v2 = layout_ == pb::CGROUP_LAYOUT_V2;
  // Writes one limit file of `controller`, which must be there.
  auto write = [&](absl::string_view field, absl::string_view controller,
                   absl::string_view file,
                   absl::string_view value) -> absl::Status {
    const std::string prefix = absl::StrCat("resources.", field);
    const std::string dir = ControllerDirectory(controller);
    if (dir.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, ": no cgroup v1 ", controller,
                       " hierarchy is mounted on this host"));
    }
    const std::string path = absl::StrCat(dir, "/", file);
    if (!Exists(path)) {
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, ": the ", controller, " controller is not available in ", dir,
          " (no ", file, ")"));
    }
    return WithPrefix(WriteCgroupFile(path, value), prefix);
  };
  // Writes a file that only some kernels or configurations have.
  auto write_if_there =
      [&](absl::string_view field, absl::string_view controller,
          absl::string_view file, absl::string_view value) -> absl::Status {
    const std::string path =
        absl::StrCat(ControllerDirectory(controller), "/", file);
    if (!Exists(path)) return absl::OkStatus();
    return WithPrefix(WriteCgroupFile(path, value),
                      absl::StrCat("resources.", field));
  };

  absl::Status status;
  if (limits.cpu_shares != 0) {
    if (v2) {
      const uint64_t shares =
          std::min<uint64_t>(std::max<uint64_t>(limits.cpu_shares, 2), 262144);
      const uint64_t weight = 1 + ((shares - 2) * 9999) / 262142;
      status = write("cpu_shares", "cpu", "cpu.weight", absl::StrCat(weight));
    } else {
      status = write("cpu_shares", "cpu", "cpu.shares",
                     absl::StrCat(limits.cpu_shares));
    }
    if (!status.ok()) return status;
  }
  if (limits.cpu_millicores != 0) {
    if (limits.cpu_millicores >
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("resources.cpu_millicores: ", limits.cpu_millicores,
                       " is too large"));
    }
    const uint64_t quota = limits.cpu_millicores * kCpuPeriodMicros / 1000;
    if (v2) {
      status = write("cpu_millicores", "cpu", "cpu.max",
                     absl::StrCat(quota, " ", kCpuPeriodMicros));
    } else {
      status = write("cpu_millicores", "cpu", "cpu.cfs_period_us",
                     absl::StrCat(kCpuPeriodMicros));
      if (status.ok()) {
        status = write("cpu_millicores", "cpu", "cpu.cfs_quota_us",
                       absl::StrCat(quota));
      }
    }
    if (!status.ok()) return status;
  }
  if (limits.memory_bytes != 0) {
    const std::string bytes = absl::StrCat(limits.memory_bytes);
    if (v2) {
      status = write("memory_bytes", "memory", "memory.max", bytes);
      if (status.ok()) {
        status =
            write_if_there("memory_bytes", "memory", "memory.swap.max", "0");
      }
    } else {
      // memsw (memory + swap) may not be below the memory limit: the memory
      // limit first, while memsw is still unlimited.
      status = write("memory_bytes", "memory", "memory.limit_in_bytes", bytes);
      if (status.ok()) {
        status = write_if_there("memory_bytes", "memory",
                                "memory.memsw.limit_in_bytes", bytes);
      }
    }
    if (!status.ok()) return status;
  }
  if (limits.pids_limit != 0) {
    status = write("pids_limit", "pids", "pids.max",
                   absl::StrCat(limits.pids_limit));
    if (!status.ok()) return status;
  }
  if (limits.restrict_devices && DeviceRulesApplied()) {
    status = write("devices", "devices", "devices.deny", "a");
    for (const char* rule : kAllowedDeviceRules) {
      if (!status.ok()) break;
      status = write("devices", "devices", "devices.allow", rule);
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

bool TaskCgroup::DeviceRulesApplied() const {
  return layout_ != pb::CGROUP_LAYOUT_V2 &&
         !ControllerDirectory("devices").empty();
}

std::vector<std::string> TaskCgroup::ProcsFiles() const {
  std::vector<std::string> files;
  files.reserve(directories_.size());
  for (const std::string& directory : directories_) {
    files.push_back(directory + "/cgroup.procs");
  }
  return files;
}

absl::StatusOr<std::vector<pid_t>> TaskCgroup::Pids() const {
  std::set<pid_t> pids;
  for (const std::string& directory : directories_) {
    absl::Status status = ReadProcs(directory + "/cgroup.procs", &pids);
    if (!status.ok()) return status;
  }
  return std::vector<pid_t>(pids.begin(), pids.end());
}

absl::Status TaskCgroup::KillAll(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  if (layout_ == pb::CGROUP_LAYOUT_V2) {
    for (const std::string& directory : directories_) {
      const std::string kill_file = directory + "/cgroup.kill";
      if (!Exists(kill_file)) continue;  // before Linux 5.14
      absl::Status status = WriteCgroupFile(kill_file, "1");
      if (!status.ok() && Exists(directory)) {
        LOG(WARNING) << "cgroup " << path_ << ": " << status
                     << "; signalling its processes one by one";
      }
    }
  }
  absl::Duration pause = absl::Milliseconds(1);
  bool signalled = false;
  while (true) {
    absl::StatusOr<std::vector<pid_t>> pids = Pids();
    if (!pids.ok()) return pids.status();
    if (pids->empty()) return absl::OkStatus();
    if (signalled && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("cgroup ", path_, " still has processes after ",
                       absl::FormatDuration(timeout), " of SIGKILL: pids ",
                       absl::StrJoin(*pids, ", ")));
    }
    // A pidfd first, then the member list again: a pid still listed after
    // its pidfd was opened is the process the pidfd holds, so the signal
    // cannot reach a process that reused the pid outside the cgroup.
    std::vector<std::pair<pid_t, base::UniqueFd>> pidfds;
    bool have_pidfd = true;
    for (pid_t pid : *pids) {
      base::UniqueFd fd(base::PidfdOpen(pid));
      if (fd.valid()) {
        pidfds.emplace_back(pid, std::move(fd));
      } else if (errno == ENOSYS) {
        have_pidfd = false;  // before Linux 5.3
        pidfds.emplace_back(pid, base::UniqueFd());
      }
    }
    absl::StatusOr<std::vector<pid_t>> still = Pids();
    for (auto& [pid, fd] : pidfds) {
      if (still.ok() && std::binary_search(still->begin(), still->end(), pid)) {
        if (fd.valid()) {
          base::PidfdSendSignal(fd.get(), SIGKILL);
        } else if (!have_pidfd) {
          kill(pid, SIGKILL);
        }
      }
      fd.reset();
    }
    if (!still.ok()) return still.status();
    signalled = true;
    absl::SleepFor(std::max(absl::ZeroDuration(),
                            std::min(pause, deadline - absl::Now())));
    pause = std::min(pause * 2, absl::Milliseconds(50));
  }
}

absl::StatusOr<uint64_t> TaskCgroup::OomKillCount() const {
  const std::string dir = ControllerDirectory("memory");
  if (dir.empty()) return 0;
  const std::string path = absl::StrCat(
      dir, "/",
      layout_ == pb::CGROUP_LAYOUT_V2 ? "memory.events" : "memory.oom_control");
  absl::StatusOr<std::string> content = ReadCgroupFile(path);
  if (absl::IsNotFound(content.status())) {
    if (!Exists(dir)) {
      return absl::NotFoundError(
          absl::StrCat("the cgroup directory ", dir, " is gone"));
    }
    return 0;  // the memory controller is not enabled here
  }
  if (!content.ok()) return content.status();
  for (absl::string_view line :
       absl::StrSplit(*content, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() != 2 || fields[0] != "oom_kill") continue;
    uint64_t count = 0;
    if (!absl::SimpleAtoi(fields[1], &count)) {
      return absl::InternalError(
          absl::StrCat("unexpected line \"", line, "\" in ", path));
    }
    return count;
  }
  return 0;  // before Linux 4.13
}

absl::Status TaskCgroup::Remove(absl::Duration timeout) const {
  return RemoveDirectories(directories_, timeout);
}

absl::Status TaskCgroup::RemoveDirectories(
    const std::vector<std::string>& directories, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status first_error;
  for (const std::string& directory : directories) {
    absl::Duration pause = absl::Milliseconds(1);
    while (true) {
      if (hooks_.empty_before_rmdir) RemoveContents(directory);
      if (rmdir(directory.c_str()) == 0 || errno == ENOENT) break;
      const int error = errno;
      if (error == EBUSY && absl::Now() < deadline) {
        absl::SleepFor(std::min(pause, deadline - absl::Now()));
        pause = std::min(pause * 2, absl::Milliseconds(50));
        continue;
      }
      absl::Status status;
      if (error == EBUSY) {
        std::set<pid_t> pids;
        ReadProcs(directory + "/cgroup.procs", &pids).IgnoreError();
        status = absl::DeadlineExceededError(absl::StrCat(
            "removing the cgroup directory ", directory, ": ", ErrnoText(error),
            " for ", absl::FormatDuration(timeout),
            pids.empty() ? std::string(" (no process in it)")
                         : absl::StrCat(" (pids ", absl::StrJoin(pids, ", "),
                                        " in it)")));
      } else {
        status = ErrnoStatus(
            error, absl::StrCat("removing the cgroup directory ", directory));
      }
      if (first_error.ok()) first_error = status;
      break;
    }
  }
  return first_error;
}

}  // namespace driver_common
}  // namespace berth
