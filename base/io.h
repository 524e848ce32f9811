// Reading and writing whole buffers on file descriptors, and non-blocking
// set-up.

#ifndef BASE_IO_H_
#define BASE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::base {

// Writes all of `data` to `fd`, retrying partial writes and EINTR (and
// waiting with poll(2) on EAGAIN, for a non-blocking descriptor). Errors
// say "writing WHAT: strerror".
absl::Status WriteAll(int fd, absl::string_view data,
                      absl::string_view what = "a file descriptor");

// Reads `fd` to its end (EINTR and EAGAIN retried), at most `max_bytes`
// (more is an OUT_OF_RANGE error naming `what`).
absl::StatusOr<std::string> ReadAll(
    int fd, absl::string_view what = "a file descriptor",
    size_t max_bytes = size_t{64} << 20);

// The whole content of the file at `path`.
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     size_t max_bytes = size_t{64} << 20);

// Sets O_NONBLOCK on `fd`.
absl::Status SetNonBlocking(int fd);

}  // namespace berth::base

#endif  // BASE_IO_H_
