// Starting programs and running them to completion with their output
// captured, within a deadline: the plugin host's launch, the CNI plugins
// berth-netns runs, the conformance suite's runs of a driver by hand.

#ifndef BASE_SUBPROCESS_H_
#define BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth::base {

// Starts `binary` (not looked up on PATH) with `args` (argv[1...]), stdin
// from `stdin_fd` (/dev/null when -1), stdout and stderr into the
// descriptors given, exactly `env` ("KEY=VALUE") as its environment, in a
// process group of its own, with every signal at its default disposition
// and an empty mask, and no other descriptor open. While exec fails with
// ETXTBSY (the binary being installed, or its write descriptor copied into
// another thread's child) it tries `etxtbsy_retries` more times, 20, 40, ...
// ms apart. Errors name the binary.
absl::StatusOr<pid_t> Spawn(const std::string& binary,
                            const std::vector<std::string>& args,
                            std::vector<std::string> env, int stdin_fd,
                            int stdout_fd, int stderr_fd,
                            int etxtbsy_retries = 0);

struct SubprocessOptions {
  std::vector<std::string> args;
  // The whole environment ("KEY=VALUE").
  std::vector<std::string> env;
  // Written to its stdin, which is then closed (empty: /dev/null).
  std::string stdin_data;
  // At the deadline its process group is killed (SIGKILL).
  absl::Duration timeout = absl::Seconds(30);
  // Kept of each output; the rest is read and dropped.
  size_t max_stdout = size_t{1} << 20;
  size_t max_stderr = size_t{1} << 20;
  int etxtbsy_retries = 0;
};

struct SubprocessResult {
  // The wait status; meaningful unless timed_out.
  int wait_status = 0;
  // It was still running at the deadline and was killed.
  bool timed_out = false;
  std::string stdout_data;
  std::string stderr_data;
  // More than max_stdout / max_stderr came.
  bool stdout_truncated = false;
  bool stderr_truncated = false;

  bool exited() const;
  // Its exit code, when it exited; -1 otherwise.
  int exit_code() const;
  // The signal that killed it, or 0.
  int signal() const;
  // "exited with code 1", "was killed by signal 11 (Segmentation fault)",
  // "did not exit within the deadline (killed)".
  std::string Describe() const;
};

// Runs `binary` (as Spawn) to its end. Once it has exited, what it left in
// its process group is killed, and its output is read until both pipes are
// closed or the deadline passes (a process that made a session of its own
// may hold them), so that nothing started here outlives the call but such a
// process. Errors (it could not be started, poll failed) name the binary.
absl::StatusOr<SubprocessResult> RunSubprocess(
    const std::string& binary, const SubprocessOptions& options);

// This process's environment ("KEY=VALUE") without the variables whose
// names start with `drop_prefix` (none dropped when empty).
std::vector<std::string> EnvironmentWithout(const std::string& drop_prefix);

}  // namespace berth::base

#endif  // BASE_SUBPROCESS_H_
