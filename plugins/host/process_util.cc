#include "plugins/host/process_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace berth::plugin::host::internal {

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view content) {
  // "PID (COMM) STATE PPID ...": COMM may hold anything, so the fields after
  // it start after the last ')'.
  const size_t paren = content.rfind(')');
  if (paren == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed /proc stat line \"", content, "\""));
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(content.substr(paren + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
  ProcStat stat;
  if (fields.size() < 20 || fields[0].size() != 1 ||
      !absl::SimpleAtoi(fields[19], &stat.start_time)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed /proc stat line \"", content, "\""));
  }
  stat.state = fields[0][0];
  return stat;
}

absl::StatusOr<ProcStat> ReadProcStat(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ESRCH) {
      return absl::NotFoundError(absl::StrCat("no process ", pid));
    }
    return ErrnoError(err, absl::StrCat("cannot open ", path));
  }
  std::string content;
  char buffer[1024];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      content.append(buffer, n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int err = errno;
    close(fd);
    if (n < 0) {
      // A process that went between open and read gives ESRCH.
      if (err == ESRCH) {
        return absl::NotFoundError(absl::StrCat("no process ", pid));
      }
      return ErrnoError(err, absl::StrCat("cannot read ", path));
    }
    break;
  }
  return ParseProcStat(content);
}

int PidfdOpen(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

int PidfdSendSignal(int pidfd, int signal) {
  return static_cast<int>(
      syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    const char* name = strsignal(signal);
    return absl::StrCat("was killed by signal ", signal, " (",
                        name != nullptr ? name : "unknown", ")");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

absl::Status ErrnoError(int err, absl::string_view what) {
  // Appends ": " and strerror(err) itself.
  return absl::ErrnoToStatus(err, what);
}

namespace {

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> result;
  result.reserve(strings.size() + 1);
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

}  // namespace

absl::StatusOr<pid_t> Spawn(const std::string& binary,
                            const std::vector<std::string>& args,
                            std::vector<std::string> env, int stdin_fd,
                            int stdout_fd, int stderr_fd, int etxtbsy_retries) {
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv = CStrings(argv_strings);
  std::vector<char*> envp = CStrings(env);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd < 0) {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                     O_RDONLY, 0);
  } else {
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, STDIN_FILENO);
  }
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stderr_fd, STDERR_FILENO);
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                      POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  int err = 0;
  for (int attempt = 0;; ++attempt) {
    err = posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(),
                      envp.data());
    if (err != ETXTBSY || attempt >= etxtbsy_retries) break;
    absl::SleepFor(absl::Milliseconds(20 * (attempt + 1)));
  }
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return ErrnoError(err, absl::StrCat("cannot run ", binary));
  return pid;
}

}  // namespace berth::plugin::host::internal
