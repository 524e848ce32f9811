// Starting processes for the mock driver: tasks through a monitor that
// records their exit status in a file, and exec'd commands with pipes or a
// terminal.
//
// A task is launched as
//   plugin --fork--> monitor (setsid; stdio /dev/null; every other fd closed)
//                      --fork+exec--> task (setsid: its own session and
//                                           process group; stdin /dev/null,
//                                           stdout and stderr pipes to the
//                                           monitor)
// The monitor copies the task's stdout and stderr into rotated files
// (plugins/sdk/rotating_log.h: <log dir>/stdout.log, stderr.log) while it
// waits for the task. When the task's main process exits, the monitor kills
// what is left of its process group, copies what is still in the pipes
// (until both end, at most kDrainAfterExit), writes the raw wait status to
// the exit file (atomically: a temporary file renamed) and exits. Neither
// depends on the plugin: killing the plugin leaves both running, and the
// output and the exit status survive it.

#ifndef PLUGINS_EXAMPLES_MOCK_DRIVER_LAUNCHER_H_
#define PLUGINS_EXAMPLES_MOCK_DRIVER_LAUNCHER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/process.h"
#include "plugins/sdk/exec.h"

namespace berth::mock {

// A program to exec, with every string and pointer made before fork (the
// child of a threaded process must not allocate).
class ExecSpec {
 public:
  ExecSpec(std::string path, std::vector<std::string> argv,
           std::vector<std::string> env, std::string cwd);
  ExecSpec(const ExecSpec&) = delete;
  ExecSpec& operator=(const ExecSpec&) = delete;

  const char* path() const { return path_.c_str(); }
  char* const* argv() const { return argv_pointers_.data(); }
  char* const* envp() const { return env_pointers_.data(); }
  const char* cwd() const { return cwd_.c_str(); }

  // A network namespace file to join (setns) before exec; empty for the
  // plugin's own.
  void set_netns(std::string path) { netns_ = std::move(path); }
  const std::string& netns() const { return netns_; }

 private:
  std::string path_;
  std::vector<std::string> argv_;
  std::vector<std::string> env_;
  std::string cwd_;
  std::string netns_;
  std::vector<char*> argv_pointers_;
  std::vector<char*> env_pointers_;
};

// The path of `program`: itself if it holds a '/', else the first
// executable file of that name in the directories of PATH in `env`
// ("KEY=VALUE" strings; a default PATH if none). INVALID_ARGUMENT naming
// `field` and the program if there is none.
absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::vector<std::string>& env,
                                           absl::string_view field);

// How long a monitor still copies output after the task's main process
// exited and its process group was killed (a process that left the group
// may hold the pipes), before it records the exit.
inline constexpr absl::Duration kDrainAfterExit = absl::Milliseconds(500);

struct MonitorSpec {
  // Where the task's output goes: <log_dir>/stdout.log and stderr.log
  // (appended to), rotated at log_max_file_bytes keeping log_max_files
  // rotated files (both as plugin::ResolveLogLimits gives them).
  std::string log_dir;
  uint64_t log_max_file_bytes = 0;
  uint32_t log_max_files = 0;
  // Where the monitor writes the exit status.
  std::string exit_path;
  // Kill the task (SIGKILL to its process group) after this long; zero for
  // never.
  absl::Duration run_for = absl::ZeroDuration();
};

struct MonitoredPids {
  pid_t monitor = 0;
  pid_t task = 0;
};

// Starts `exec` through a monitor. Returns once the task has exec'd (or
// failed to: then nothing is left running and the error names the program,
// or the output file the monitor could not open)
// and `before_release` has run: the monitor does not wait for (reap) the
// task before that, so /proc/<task> is there for it to read.
absl::StatusOr<MonitoredPids> LaunchMonitored(
    const ExecSpec& exec, const MonitorSpec& monitor,
    const std::function<void(const MonitoredPids&)>& before_release);

// What a monitor wrote.
struct ExitRecord {
  int wait_status = 0;
  pid_t monitor_pid = 0;
  absl::Time exited_at;
  bool run_for_expired = false;
};

std::string FormatExitRecord(const ExitRecord& record);
absl::StatusOr<ExitRecord> ParseExitRecord(absl::string_view content);
// NOT_FOUND if there is no file at `path`.
absl::StatusOr<ExitRecord> ReadExitRecord(const std::string& path);

// An exec'd command (ExecTask, ExecTaskStreaming): its own session and
// process group; a terminal (master in `terminal`) or pipes. The fds are
// non-blocking and close-on-exec; -1 where there is none.
// Its descriptors are ints that CloseChild closes (not base::UniqueFd) until
// mock_driver.cc, being rewritten, takes owned ones.
struct Child {
  pid_t pid = 0;
  int pidfd = -1;
  int terminal = -1;  // pty master: stdin, and stdout+stderr
  int stdin_fd = -1;  // pipes
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Starts `exec` with a terminal of `size` (when `tty`) or pipes. Errors
// name the program.
absl::StatusOr<Child> SpawnChild(const ExecSpec& exec, bool tty,
                                 plugin::TerminalSize size);

// Closes the child's fds (not the process).
void CloseChild(Child& child);

// pidfd_open(2) and pidfd_send_signal(2): base/process.h.
using ::berth::base::PidfdOpen;
using ::berth::base::PidfdSendSignal;

// ExitStatus of a wait status.
plugin::ExitStatus ToExitStatus(int wait_status);

}  // namespace berth::mock

#endif  // PLUGINS_EXAMPLES_MOCK_DRIVER_LAUNCHER_H_
