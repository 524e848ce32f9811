// Helpers for the tests of //plugins/host.

#ifndef PLUGINS_HOST_TESTING_TEST_UTIL_H_
#define PLUGINS_HOST_TESTING_TEST_UTIL_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "plugins/host/plugin_process.h"

namespace berth::plugin::host::testing {

// A directory with a short path ("/tmp/berth-XXXXXX"), short enough for Unix
// sockets; removed with everything in it when the object goes.
class ShortTempDir {
 public:
  ShortTempDir();
  ~ShortTempDir();
  ShortTempDir(const ShortTempDir&) = delete;
  ShortTempDir& operator=(const ShortTempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(absl::string_view name) const;
  // The names of the entries in the directory (not "." and "..").
  std::vector<std::string> Entries() const;

 private:
  std::string path_;
};

// The fake plugin binary (//plugins/host/testing:fake_plugin) in runfiles.
std::string FakePluginPath();

// LaunchOptions for the fake plugin named `name` with `args`, its socket in
// `socket_dir`.
LaunchOptions FakePluginOptions(const std::string& socket_dir,
                                const std::string& name,
                                std::vector<std::string> args = {});

// The processes whose parent is this process, zombies included, from /proc.
std::vector<pid_t> ChildProcesses();

// Whether /proc/PID exists.
bool ProcessExists(pid_t pid);

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

}  // namespace berth::plugin::host::testing

#endif  // PLUGINS_HOST_TESTING_TEST_UTIL_H_
