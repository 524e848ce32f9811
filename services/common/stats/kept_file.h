// Files the collectors keep open and re-read with pread, and the parsing of
// the small text files cgroup and proc file systems serve.
//
// Re-reading a kept descriptor with pread(fd, buf, n, 0) is about 4x cheaper
// than open + read + close on this machine (services/stats/README.md,
// "Benchmarks": 14.6 us raw pread against 61.3 us raw open+read+parse for a
// cgroup's eight v1 files).

#ifndef SERVICES_COMMON_STATS_KEPT_FILE_H_
#define SERVICES_COMMON_STATS_KEPT_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/unique_fd.h"

namespace berth {
namespace stats {

// A file held open for re-reading from its start. Move-only; closes on
// destruction. Reads go into one buffer per thread, which stays in the CPU's
// cache however many files a sampler goes through (a buffer per file would
// be 32 MB of cold memory for 1000 tasks of 8 files).
class KeptFile {
 public:
  // Opens `path` read-only. NOT_FOUND naming the path when nothing is there;
  // other errors name the path and the errno text.
  static absl::StatusOr<KeptFile> Open(std::string path);

  KeptFile() = default;
  KeptFile(KeptFile&& other) noexcept = default;
  KeptFile& operator=(KeptFile&& other) noexcept = default;
  KeptFile(const KeptFile&) = delete;
  KeptFile& operator=(const KeptFile&) = delete;

  // The whole content, read with pread from offset 0. The view is into this
  // thread's read buffer: it stays valid until the thread's next Read of any
  // KeptFile. A file whose cgroup or
  // process has gone (ENODEV, ENOENT, ESRCH) reads as NOT_FOUND naming the
  // path.
  absl::StatusOr<absl::string_view> Read();

  bool is_open() const { return fd_.valid(); }
  const std::string& path() const { return path_; }

 private:
  KeptFile(base::UniqueFd fd, std::string path)
      : fd_(std::move(fd)), path_(std::move(path)) {}

  base::UniqueFd fd_;
  std::string path_;
};

// Opens `path` if it is there: an absent file (ENOENT) is not an error and
// gives a KeptFile that is not open; other errors are.
absl::StatusOr<KeptFile> OpenIfPresent(std::string path);

// Watches whether a directory still exists, for trees whose files stay
// readable after removal (regular files in test fixtures). On cgroupfs and
// procfs a removed cgroup or process already makes every read fail, so no
// check is made there and Gone() costs nothing.
class DirWatch {
 public:
  // NOT_FOUND naming the path when it is not there.
  static absl::StatusOr<DirWatch> Open(const std::string& path);

  DirWatch() = default;
  DirWatch(DirWatch&& other) noexcept = default;
  DirWatch& operator=(DirWatch&& other) noexcept = default;
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // Whether the directory was removed since Open.
  bool Gone() const;

 private:
  base::UniqueFd fd_;
  bool needs_check_ = false;
};

// A single unsigned number and optional whitespace, e.g. memory.current.
// INVALID_ARGUMENT naming `what` otherwise; "max" is not a number.
absl::StatusOr<uint64_t> ParseSingleNumber(absl::string_view content,
                                           absl::string_view what);

// Reads a file that holds one number (memory.current, cpuacct.usage, ...)
// into `value`. A file that is not open (absent on this kernel) leaves
// `value` unset and is not an error.
absl::Status ReadSingleNumber(KeptFile& file, std::optional<uint64_t>* value);

// The same for a limit file (pids.max, memory.max): "max" leaves `value`
// unset, as a file that is not open does.
absl::Status ReadLimit(KeptFile& file, std::optional<uint64_t>* value);

// One key of a flat-keyed file and where its value goes.
struct KeyedField {
  absl::string_view key;
  std::optional<uint64_t>* value;
};

// Looks up keys in a flat-keyed file: lines of a key, blanks (spaces or
// tabs) and an unsigned number, possibly followed by more (cpu.stat,
// memory.stat and cpuacct.stat are "key value"; /proc/PID/status is
// "VmRSS:\t  1234 kB", whose key is "VmRSS:"). Each field's value is set
// when its key's line is there with a number, and left as it is otherwise.
// Keys match whole. Stops reading once every field is set.
void ParseFlatKeyed(absl::string_view content,
                    absl::Span<const KeyedField> fields);

}  // namespace stats
}  // namespace berth

#endif  // SERVICES_COMMON_STATS_KEPT_FILE_H_
