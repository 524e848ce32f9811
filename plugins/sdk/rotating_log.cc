#include "plugins/sdk/rotating_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace berth::plugin {
namespace {

// The most digits a uint32_t has.
constexpr size_t kMaxIndexDigits = 10;

}  // namespace

std::string TaskLogDir(const std::string& task_dir) {
  return task_dir + "/" + kLogDirName;
}

LogLimits ResolveLogLimits(uint64_t max_file_bytes, uint32_t max_files) {
  LogLimits limits;
  if (max_file_bytes != 0) limits.max_file_bytes = max_file_bytes;
  if (max_files != 0) limits.max_files = max_files;
  return limits;
}

RotatingLog::RotatingLog(const std::string& dir, const std::string& name,
                         uint64_t max_bytes, uint32_t max_rotated)
    : RotatingLog(dir, -1, name, max_bytes, max_rotated) {}

RotatingLog::RotatingLog(int dir_fd, const std::string& name,
                         uint64_t max_bytes, uint32_t max_rotated)
    : RotatingLog(std::string(),
                  dir_fd < 0 ? -1 : fcntl(dir_fd, F_DUPFD_CLOEXEC, 0), name,
                  max_bytes, max_rotated) {}

RotatingLog::RotatingLog(const std::string& dir, int dir_fd,
                         const std::string& name, uint64_t max_bytes,
                         uint32_t max_rotated)
    : dir_path_(dir),
      current_name_(name + ".log"),
      current_path_(dir.empty() ? current_name_ : dir + "/" + current_name_),
      max_bytes_(max_bytes == 0 ? 1 : max_bytes),
      max_rotated_(max_rotated),
      from_name_(current_name_.size() + 2 + kMaxIndexDigits, '\0'),
      to_name_(current_name_.size() + 2 + kMaxIndexDigits, '\0'),
      dir_fd_(dir_fd) {}

RotatingLog::~RotatingLog() {
  if (fd_ >= 0) close(fd_);
  if (dir_fd_ >= 0) close(dir_fd_);
}

const char* RotatingLog::RotatedName(std::string* buffer, uint32_t index) {
  // Overwrites the buffer in place (no allocation): the name, '.', the
  // index, '\0'.
  char* out = &(*buffer)[0];
  std::copy(current_name_.begin(), current_name_.end(), out);
  out += current_name_.size();
  *out++ = '.';
  char digits[kMaxIndexDigits];
  size_t count = 0;
  do {
    digits[count++] = static_cast<char>('0' + index % 10);
    index /= 10;
  } while (index > 0);
  while (count > 0) *out++ = digits[--count];
  *out = '\0';
  return buffer->c_str();
}

int RotatingLog::OpenCurrent(int flags) const {
  // O_NOFOLLOW: a symbolic link planted at NAME.log (by whoever may write in
  // the directory) is refused (ELOOP), never followed by a writer that may
  // be root. The name is one component, so nothing else is resolved.
  // O_NONBLOCK (no effect on a regular file): a FIFO planted there fails
  // (ENXIO) instead of blocking the writer until someone reads it.
  return openat(dir_fd_, current_name_.c_str(),
                O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
                    O_NONBLOCK | flags,
                0640);
}

bool RotatingLog::Open() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (current_name_.size() == 4 ||
      current_name_.find('/') != std::string::npos) {
    errno = EINVAL;  // empty or not one component
    return false;
  }
  if (dir_fd_ < 0) {
    if (dir_path_.empty()) {
      errno = EBADF;
      return false;
    }
    // Taken once and kept: later rotations go to this directory, whatever
    // is renamed or planted at its path meanwhile.
    dir_fd_ =
        open(dir_path_.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd_ < 0) return false;
  }
  fd_ = OpenCurrent(0);
  if (fd_ < 0) return false;
  struct stat st;
  if (fstat(fd_, &st) != 0) {
    const int error = errno;
    close(fd_);
    fd_ = -1;
    errno = error;
    return false;
  }
  size_ = static_cast<uint64_t>(st.st_size);
  return true;
}

bool RotatingLog::Rotate() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (max_rotated_ == 0) {
    fd_ = OpenCurrent(O_TRUNC);
    size_ = 0;
    return fd_ >= 0;
  }
  // renameat(2) replaces a link planted at the new name, never follows it.
  for (uint32_t i = max_rotated_; i > 1; --i) {
    if (renameat(dir_fd_, RotatedName(&from_name_, i - 1), dir_fd_,
                 RotatedName(&to_name_, i)) != 0 &&
        errno != ENOENT) {
      return false;
    }
  }
  if (renameat(dir_fd_, current_name_.c_str(), dir_fd_,
               RotatedName(&to_name_, 1)) != 0 &&
      errno != ENOENT) {
    return false;
  }
  size_ = 0;
  fd_ = OpenCurrent(O_TRUNC);
  return fd_ >= 0;
}

bool RotatingLog::Write(const char* data, size_t size) {
  while (size > 0) {
    if (fd_ < 0 && !Open()) return false;
    if (size_ >= max_bytes_ && !Rotate()) return false;
    const size_t room =
        static_cast<size_t>(std::min<uint64_t>(max_bytes_ - size_, size));
    const ssize_t written = write(fd_, data, room);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += written;
    size -= static_cast<size_t>(written);
    size_ += static_cast<uint64_t>(written);
  }
  return true;
}

}  // namespace berth::plugin
