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
#include "services/common/test_util.h"

namespace berth::plugin::host::testing {

// The generic helpers live in //services/common:test_util.
using ::berth::testing::CapturingLogSink;
using ::berth::testing::ShortTempDir;

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

}  // namespace berth::plugin::host::testing

#endif  // PLUGINS_HOST_TESTING_TEST_UTIL_H_
