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
    : current_path_(dir + "/" + name + ".log"),
      max_bytes_(max_bytes == 0 ? 1 : max_bytes),
      max_rotated_(max_rotated),
      from_path_(current_path_.size() + 2 + kMaxIndexDigits, '\0'),
      to_path_(current_path_.size() + 2 + kMaxIndexDigits, '\0') {}

RotatingLog::~RotatingLog() {
  if (fd_ >= 0) close(fd_);
}

const char* RotatingLog::RotatedPath(std::string* buffer, uint32_t index) {
  // Overwrites the buffer in place (no allocation): the path, '.', the
  // index, '\0'.
  char* out = &(*buffer)[0];
  std::copy(current_path_.begin(), current_path_.end(), out);
  out += current_path_.size();
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
  // be root.
  return open(current_path_.c_str(),
              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | flags,
              0640);
}

bool RotatingLog::Open() {
  if (fd_ >= 0) close(fd_);
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
  for (uint32_t i = max_rotated_; i > 1; --i) {
    if (rename(RotatedPath(&from_path_, i - 1), RotatedPath(&to_path_, i)) !=
            0 &&
        errno != ENOENT) {
      return false;
    }
  }
  if (rename(current_path_.c_str(), RotatedPath(&to_path_, 1)) != 0 &&
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
