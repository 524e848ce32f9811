// Helpers for the tests of berth's services and plugins (testonly): short
// temporary directories for sockets, bounded waits and a glog capture.

#ifndef SERVICES_COMMON_TEST_UTIL_H_
#define SERVICES_COMMON_TEST_UTIL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace berth {
namespace testing {

// A directory with a short path ("/tmp/berth-XXXXXX"): Bazel's TEST_TMPDIR
// is too long for a Unix socket path (108 bytes). Removed with everything in
// it when the object goes.
class ShortTempDir {
 public:
  ShortTempDir();
  ~ShortTempDir();
  ShortTempDir(const ShortTempDir&) = delete;
  ShortTempDir& operator=(const ShortTempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Join(absl::string_view name) const;
  // The names of the entries in the directory (not "." and "..").
  std::vector<std::string> Entries() const;

 private:
  std::string path_;
};

// Polls `condition` every few milliseconds until it is true (returns true) or
// `timeout` has passed (returns false).
bool WaitFor(const std::function<bool()>& condition,
             absl::Duration timeout = absl::Seconds(30));

// The permission bits of `path` (lstat), or -1 if it cannot be stat'ed.
int FileMode(const std::string& path);

// Whether something is at `path` (lstat).
bool PathExists(const std::string& path);

// A file of the test's runfiles, by its path in the workspace
// ("plugins/examples/mock_driver/mock_driver").
std::string RunfilePath(absl::string_view workspace_path);

// The whole content of a file; empty if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// Captures the glog messages of at least `min_severity` while it lives.
class CapturingLogSink : public google::LogSink {
 public:
  struct Entry {
    google::LogSeverity severity;
    std::string message;
  };

  explicit CapturingLogSink(google::LogSeverity min_severity);
  ~CapturingLogSink() override;

  std::vector<Entry> entries() const ABSL_LOCKS_EXCLUDED(mu_);
  // The messages, one per entry.
  std::vector<std::string> messages() const ABSL_LOCKS_EXCLUDED(mu_);

  using google::LogSink::send;
  void send(google::LogSeverity severity, const char* full_filename,
            const char* base_filename, int line,
            const google::LogMessageTime& time, const char* message,
            size_t message_len) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const google::LogSeverity min_severity_;
  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace berth

#endif  // SERVICES_COMMON_TEST_UTIL_H_
