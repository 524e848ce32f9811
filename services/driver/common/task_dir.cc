#include "services/driver/common/task_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/beneath.h"
#include "base/path.h"
#include "services/common/remove_tree.h"
#include "services/driver/common/exit_file.h"

namespace berth::driver_common {
namespace {

constexpr char kPrivateDirName[] = ".berth";

// `path` with "." and empty components dropped; "" unless it is absolute
// and free of "..".
std::string CleanAbsolute(const std::string& path) {
  if (path.empty() || path[0] != '/') return "";
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == "..") return "";
    if (part != ".") parts.push_back(part);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

}  // namespace

absl::StatusOr<bool> MakeDirs(const std::string& path, mode_t mode) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " exists and is not a directory"));
    }
    return false;
  }
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    absl::StatusOr<bool> parent = MakeDirs(path.substr(0, slash), 0755);
    if (!parent.ok()) return parent.status();
  }
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
  }
  return true;
}

absl::Status PrepareTaskDirectories(const TaskSpec& spec,
                                    const std::string& prefix,
                                    std::vector<std::function<void()>>* undo) {
  absl::StatusOr<bool> made_dir = MakeDirs(spec.task_dir, 0755);
  if (!made_dir.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, "task_dir: ", made_dir.status().message()));
  }
  const std::string private_dir = absl::StrCat(spec.task_dir, "/.berth");
  const std::string log_dir = absl::StrCat(spec.task_dir, "/logs");
  if (*made_dir) {
    undo->push_back([dir = spec.task_dir] { (void)RemoveTree(dir); });
    if (chown(spec.task_dir.c_str(), spec.uid, spec.gid) != 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat(prefix, "chown ", spec.task_dir));
    }
  } else {
    undo->push_back([private_dir, log_dir] {
      (void)RemoveTree(private_dir);
      (void)RemoveTree(log_dir);
    });
  }
  for (const auto& [dir, mode] :
       {std::pair<std::string, mode_t>{private_dir, 0700}, {log_dir, 0755}}) {
    absl::StatusOr<bool> made = MakeDirs(dir, mode);
    if (!made.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, made.status().message()));
    }
    // MakeDirs' stat follows a link the task may have planted there; the
    // driver and the init write into these as root.
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, "task_dir: ", dir, " is not a directory (a link?)"));
    }
  }
  absl::StatusOr<bool> made_work_dir = MakeDirs(spec.work_dir, 0755);
  if (!made_work_dir.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "driver_config.work_dir: ", made_work_dir.status().message()));
  }
  if (*made_work_dir) chown(spec.work_dir.c_str(), spec.uid, spec.gid);
  return absl::OkStatus();
}

std::string ExitRecordPath(const std::string& task_dir) {
  return absl::StrCat(task_dir, "/", kPrivateDirName, "/", kExitRecordName);
}

bool ReadExitRecord(const std::string& task_dir, ExitRecord* record) {
  absl::StatusOr<std::string> content = base::ReadFileBeneath(
      task_dir, absl::StrCat(kPrivateDirName, "/", kExitRecordName),
      kMaxExitRecordBytes);
  return content.ok() && DecodeExitRecord(*content, record);
}

absl::Status WriteExitRecord(const std::string& task_dir,
                             const ExitRecord& record) {
  absl::StatusOr<base::UniqueFd> dir =
      base::OpenBeneath(task_dir, kPrivateDirName, O_PATH | O_DIRECTORY);
  if (!dir.ok()) return dir.status();
  if (!WriteExitRecordAt(dir->get(), kExitRecordName, record)) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("writing ", ExitRecordPath(task_dir)));
  }
  return absl::OkStatus();
}

absl::Status CheckTaskDirInside(const std::string& task_dir,
                                const std::string& state_dir) {
  const std::string state = CleanAbsolute(state_dir);
  if (state.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task_dir \"", task_dir,
        "\" cannot be checked: the node gave no absolute state directory "
        "(node.state_dir \"",
        state_dir, "\")"));
  }
  const std::string dir = CleanAbsolute(task_dir);
  if (dir.empty() || dir.size() <= state.size() ||
      !absl::StartsWith(dir, state == "/" ? "/" : absl::StrCat(state, "/"))) {
    return absl::InvalidArgumentError(
        absl::StrCat("task_dir \"", task_dir,
                     "\" is not an absolute path without \"..\" "
                     "below the node's state directory ",
                     state));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DriverStateDir(const plugin::v1::NodeContext& node,
                                           absl::string_view driver_name) {
  if (node.state_dir().empty()) return std::string();
  if (node.state_dir()[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "node.state_dir \"", node.state_dir(), "\" is not an absolute path"));
  }
  const std::string dir = absl::StrCat(node.state_dir(), "/", driver_name);
  // Traversable, not listable: tasks running as other users reach their own
  // directories below it.
  absl::StatusOr<bool> made = MakeDirs(dir, 0711);
  if (!made.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node.state_dir: ", made.status().message()));
  }
  return dir;
}

absl::Status CheckStartAllowed(const driver::v1::TaskConfig& task,
                               const std::string& driver_state_dir,
                               const absl::Status& default_filter) {
  const std::string prefix = absl::StrCat("task ", task.id(), ": ");
  if (!task.task_dir().empty()) {
    // Only inside berth's state directory (the parent of the driver's own):
    // never a directory elsewhere that root would then fill.
    if (absl::Status inside = CheckTaskDirInside(
            task.task_dir(), base::Dirname(driver_state_dir));
        !inside.ok()) {
      return absl::Status(inside.code(),
                          absl::StrCat(prefix, inside.message()));
    }
  }
  const driver::v1::SeccompProfileType seccomp =
      task.isolation().seccomp().type();
  if (!default_filter.ok() && !task.isolation().privileged() &&
      seccomp != driver::v1::SECCOMP_PROFILE_TYPE_UNCONFINED &&
      seccomp != driver::v1::SECCOMP_PROFILE_TYPE_CUSTOM) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix,
                     "isolation.seccomp: the driver has no default "
                     "filter (",
                     default_filter.message(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace berth::driver_common
