// Helpers for the tests of drivers built on the SDK (testonly).

#ifndef PLUGINS_SDK_TESTING_H_
#define PLUGINS_SDK_TESTING_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "grpcpp/channel.h"
#include "services/common/test_util.h"

namespace berth::plugin::testing {

// The generic helpers live in //services/common:test_util.
using ::berth::testing::CapturingLogSink;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;

// An insecure channel to the Unix socket `path`, once connected (DialUnix).
absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(
    const std::string& path, absl::Duration timeout = absl::Seconds(30));

// A plugin binary launched the way a host launches it: the magic cookie (if
// `with_cookie`), BERTH_PLUGIN_SOCKET_DIR and BERTH_PLUGIN_PROTOCOL_VERSIONS=1
// in its environment (on top of this process's, minus any BERTH_PLUGIN_*),
// stdout on a pipe, stderr into `stderr_path`. Killed (SIGKILL) and reaped
// when the object goes if it still runs.
class PluginProcess {
 public:
  struct Options {
    std::string binary;
    std::vector<std::string> args;
    std::string socket_dir;
    bool with_cookie = true;
    std::string stderr_path;  // required
    std::vector<std::pair<std::string, std::string>> env;
  };

  static absl::StatusOr<std::unique_ptr<PluginProcess>> Launch(
      const Options& options);
  ~PluginProcess();
  PluginProcess(const PluginProcess&) = delete;
  PluginProcess& operator=(const PluginProcess&) = delete;

  // The next line on the plugin's stdout, without its newline. DEADLINE_
  // EXCEEDED after `timeout`; OUT_OF_RANGE at the end of stdout.
  absl::StatusOr<std::string> ReadStdoutLine(
      absl::Duration timeout = absl::Seconds(30));

  // Waits for the process to end and returns its wait status;
  // DEADLINE_EXCEEDED after `timeout` (it keeps running).
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(30));

  void Kill(int signal);
  pid_t pid() const { return pid_; }

 private:
  PluginProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  const pid_t pid_;
  const int stdout_fd_;
  std::string stdout_buffer_;
  bool reaped_ = false;
};

}  // namespace berth::plugin::testing

#endif  // PLUGINS_SDK_TESTING_H_
