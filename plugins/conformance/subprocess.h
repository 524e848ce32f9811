// Running a program to completion with its output captured, within a
// deadline: how the suite starts a driver by hand (without the launch
// handshake) to see it refuse.

#ifndef PLUGINS_CONFORMANCE_SUBPROCESS_H_
#define PLUGINS_CONFORMANCE_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth::conformance {

struct ProcessResult {
  // The process exited (rather than being killed by a signal).
  bool exited = false;
  // Its exit code, when it exited.
  int exit_code = 0;
  // The signal that killed it, when it did not exit.
  int signal = 0;
  // It was still running at the deadline and was killed (SIGKILL).
  bool timed_out = false;
  std::string stdout_data;
  std::string stderr_data;

  // "exited with code 1", "was killed by signal 11", "did not exit within
  // the deadline".
  std::string Describe() const;
};

// Runs `binary` with `args` and exactly the environment `env` ("KEY=VALUE"),
// stdin /dev/null, in a process group of its own, capturing stdout and
// stderr (each up to 1 MiB; more is read and dropped). At `timeout` the
// process group is killed. Returns once the process has ended and been
// reaped, and its output pipes are closed or the deadline passed: nothing
// started here outlives the call (but what the program put into a session
// of its own). Errors name the binary.
absl::StatusOr<ProcessResult> RunProcess(const std::string& binary,
                                         const std::vector<std::string>& args,
                                         const std::vector<std::string>& env,
                                         absl::Duration timeout);

// This process's environment without the variables whose names start with
// `drop_prefix`, as "KEY=VALUE" strings.
std::vector<std::string> EnvironmentWithout(const std::string& drop_prefix);

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_SUBPROCESS_H_
