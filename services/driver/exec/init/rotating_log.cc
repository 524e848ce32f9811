#include "services/driver/exec/init/rotating_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

namespace berth::exec_driver {

RotatingLog::RotatingLog(std::string dir, std::string name, uint64_t max_bytes,
                         uint32_t max_rotated)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      max_bytes_(max_bytes == 0 ? 1 : max_bytes),
      max_rotated_(max_rotated) {}

RotatingLog::~RotatingLog() {
  if (fd_ >= 0) close(fd_);
}

std::string RotatingLog::CurrentPath() const {
  return dir_ + "/" + name_ + ".log";
}

std::string RotatingLog::RotatedPath(uint32_t index) const {
  return CurrentPath() + "." + std::to_string(index);
}

bool RotatingLog::Open() {
  fd_ = open(CurrentPath().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
             0640);
  if (fd_ < 0) return false;
  struct stat st;
  if (fstat(fd_, &st) != 0) return false;
  size_ = static_cast<uint64_t>(st.st_size);
  return true;
}

bool RotatingLog::Rotate() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (max_rotated_ == 0) {
    fd_ = open(CurrentPath().c_str(),
               O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
    size_ = 0;
    return fd_ >= 0;
  }
  for (uint32_t i = max_rotated_; i > 1; --i) {
    if (rename(RotatedPath(i - 1).c_str(), RotatedPath(i).c_str()) != 0 &&
        errno != ENOENT) {
      return false;
    }
  }
  if (rename(CurrentPath().c_str(), RotatedPath(1).c_str()) != 0 &&
      errno != ENOENT) {
    return false;
  }
  size_ = 0;
  fd_ = open(CurrentPath().c_str(),
             O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
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

}  // namespace berth::exec_driver
