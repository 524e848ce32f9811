// A task's stdout or stderr kept in files of bounded size: NAME.log is
// written until it would pass max_bytes, then NAME.log.1 ... NAME.log.N
// shift up by one (NAME.log.N is dropped), NAME.log becomes NAME.log.1 and a
// new NAME.log starts. The newest bytes are always in NAME.log; reading
// NAME.log.N ... NAME.log.1, NAME.log in that order gives the kept output in
// order. A file is never larger than max_bytes: a write is split at the
// boundary.
//
// Used by berth-task-init, so libc and libstdc++ only.

#ifndef SERVICES_DRIVER_EXEC_INIT_ROTATING_LOG_H_
#define SERVICES_DRIVER_EXEC_INIT_ROTATING_LOG_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace berth::exec_driver {

class RotatingLog {
 public:
  // `max_rotated` files NAME.log.1 ... are kept besides NAME.log (0 keeps
  // none: NAME.log is truncated when full). max_bytes 0 means 1.
  RotatingLog(std::string dir, std::string name, uint64_t max_bytes,
              uint32_t max_rotated);
  ~RotatingLog();
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;

  // Opens (appending to) NAME.log. False with errno set on failure.
  bool Open();

  // Writes all of `data`, rotating as needed. False with errno set when a
  // write, rename or open failed (the bytes not written are lost).
  bool Write(const char* data, size_t size);

  // NAME.log's path.
  std::string CurrentPath() const;

 private:
  bool Rotate();
  std::string RotatedPath(uint32_t index) const;

  const std::string dir_;
  const std::string name_;
  const uint64_t max_bytes_;
  const uint32_t max_rotated_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace berth::exec_driver

#endif  // SERVICES_DRIVER_EXEC_INIT_ROTATING_LOG_H_
