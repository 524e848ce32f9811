#include "services/driver/common/start_record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "glog/logging.h"

namespace berth::driver_common {

namespace {

constexpr char kTempSuffix[] = ".tmp";
// A handle carries a task's whole configuration: generous, but bounded.
constexpr size_t kMaxRecordBytes = size_t{16} << 20;

std::string StartsDir(const std::string& state_dir) {
  return absl::StrCat(state_dir, "/starts");
}

}  // namespace

std::string StartRecordPath(const std::string& state_dir,
                            const std::string& task_id) {
  return absl::StrCat(StartsDir(state_dir), "/", task_id);
}

absl::Status WriteStartRecord(const std::string& state_dir,
                              const driver::v1::TaskHandle& handle) {
  const std::string dir = StartsDir(state_dir);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("making ", dir));
  }
  const std::string path = StartRecordPath(state_dir, handle.config().id());
  // ".<id>.tmp": no task id starts with a dot, so no record is ever taken
  // for a temporary file, nor one for a record (an id may end in ".tmp").
  const std::string temp = absl::StrCat(StartsDir(state_dir), "/.",
                                        handle.config().id(), kTempSuffix);
  std::string bytes;
  if (!handle.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("encoding ", path));
  }
  {
    const base::UniqueFd fd(
        open(temp.c_str(),
             O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) {
      return absl::ErrnoToStatus(errno, absl::StrCat("opening ", temp));
    }
    if (absl::Status written = base::WriteAll(fd.get(), bytes, temp);
        !written.ok()) {
      unlink(temp.c_str());
      return written;
    }
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("renaming ", temp));
  }
  return absl::OkStatus();
}

absl::StatusOr<driver::v1::TaskHandle> ReadStartRecord(
    const std::string& state_dir, const std::string& task_id) {
  const std::string path = StartRecordPath(state_dir, task_id);
  const base::UniqueFd fd(
      open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no start record ", path));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  }
  absl::StatusOr<std::string> bytes =
      base::ReadAll(fd.get(), path, kMaxRecordBytes);
  if (!bytes.ok()) return bytes.status();
  driver::v1::TaskHandle handle;
  if (!handle.ParseFromString(*bytes)) {
    return absl::DataLossError(
        absl::StrCat("start record ", path, " does not parse"));
  }
  if (handle.config().id() != task_id) {
    return absl::DataLossError(absl::StrCat(
        "start record ", path, " is of task \"", handle.config().id(), "\""));
  }
  return handle;
}

absl::Status RemoveStartRecord(const std::string& state_dir,
                               const std::string& task_id) {
  const std::string path = StartRecordPath(state_dir, task_id);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
  }
  return absl::OkStatus();
}

void RemoveStartRecordLeftovers(const std::string& state_dir) {
  const std::string dir = StartsDir(state_dir);
  DIR* stream = opendir(dir.c_str());
  if (stream == nullptr) return;
  while (const struct dirent* entry = readdir(stream)) {
    if (entry->d_name[0] != '.' ||
        !absl::EndsWith(entry->d_name, kTempSuffix)) {
      continue;
    }
    if (unlinkat(dirfd(stream), entry->d_name, 0) == 0) {
      LOG(INFO) << "removed " << dir << "/" << entry->d_name
                << ", a start record a killed driver did not finish";
    }
  }
  closedir(stream);
}

}  // namespace berth::driver_common
