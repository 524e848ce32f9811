// An owning file descriptor: closed when the object goes (or is reset), so
// that no error path leaks one and no descriptor is closed twice.

#ifndef BASE_UNIQUE_FD_H_
#define BASE_UNIQUE_FD_H_

#include <utility>

namespace berth::base {

class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes ownership of `fd` (-1: none).
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Closes the descriptor held (if any) and holds `fd` instead. close(2) is
  // not retried on EINTR: on Linux the descriptor is gone either way.
  void reset(int fd = -1);
  // Gives the descriptor up without closing it.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

}  // namespace berth::base

#endif  // BASE_UNIQUE_FD_H_
