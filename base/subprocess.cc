#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/io.h"
#include "base/process.h"
#include "base/unique_fd.h"

extern char** environ;

namespace berth::base {
namespace {

absl::Status MakePipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  return absl::OkStatus();
}

// An output pipe being read.
struct Output {
  UniqueFd fd;
  std::string* data;
  size_t max;
  bool* truncated;
};

// Reads what is there (the pipe is non-blocking); closes it at its end or
// on an error.
void Drain(Output& output) {
  char buffer[16384];
  while (output.fd) {
    const ssize_t n = read(output.fd.get(), buffer, sizeof(buffer));
    if (n > 0) {
      const size_t room =
          output.max - std::min(output.max, output.data->size());
      const size_t keep = std::min(static_cast<size_t>(n), room);
      output.data->append(buffer, keep);
      if (keep < static_cast<size_t>(n)) *output.truncated = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    output.fd.reset();  // its end, or an error
  }
}

void Reap(pid_t pid, int* wait_status) {
  while (waitpid(pid, wait_status, 0) < 0 && errno == EINTR) {
  }
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
  if (err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot run ", binary));
  }
  return pid;
}

bool SubprocessResult::exited() const {
  return !timed_out && WIFEXITED(wait_status);
}

int SubprocessResult::exit_code() const {
  return exited() ? WEXITSTATUS(wait_status) : -1;
}

int SubprocessResult::signal() const {
  return !timed_out && WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
}

std::string SubprocessResult::Describe() const {
  if (timed_out) return "did not exit within the deadline (killed)";
  return DescribeWaitStatus(wait_status);
}

absl::StatusOr<SubprocessResult> RunSubprocess(
    const std::string& binary, const SubprocessOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  SubprocessResult result;
  // stdin: the data in a pipe (a CNI configuration is small; a larger one
  // than the pipe holds would need a writer thread), or /dev/null.
  UniqueFd stdin_read;
  if (!options.stdin_data.empty()) {
    UniqueFd stdin_write;
    if (absl::Status s = MakePipe(&stdin_read, &stdin_write); !s.ok()) return s;
    // Written whole before the program starts, so writing can neither
    // block nor raise SIGPIPE: the pipe must hold it. It holds 64 KiB, or
    // one page when the user's pipe quota is spent: grown when need be.
    const size_t size = options.stdin_data.size();
    if (size > 4096 &&
        fcntl(stdin_write.get(), F_GETPIPE_SZ) < static_cast<int>(size)) {
      fcntl(stdin_write.get(), F_SETPIPE_SZ,
            static_cast<int>(std::min(size, size_t{1} << 30)));
      if (fcntl(stdin_write.get(), F_GETPIPE_SZ) < static_cast<int>(size)) {
        return absl::ResourceExhaustedError(
            absl::StrCat("a pipe cannot hold the ", size,
                         " bytes of the stdin of ", binary));
      }
    }
    if (absl::Status s = WriteAll(stdin_write.get(), options.stdin_data,
                                  absl::StrCat("the stdin of ", binary));
        !s.ok()) {
      return s;
    }
  }
  Output out{UniqueFd(), &result.stdout_data, options.max_stdout,
             &result.stdout_truncated};
  Output err{UniqueFd(), &result.stderr_data, options.max_stderr,
             &result.stderr_truncated};
  UniqueFd out_write, err_write;
  for (auto [output, write_end] :
       {std::pair{&out, &out_write}, std::pair{&err, &err_write}}) {
    if (absl::Status s = MakePipe(&output->fd, write_end); !s.ok()) return s;
    if (absl::Status s = SetNonBlocking(output->fd.get()); !s.ok()) return s;
  }
  absl::StatusOr<pid_t> spawned =
      Spawn(binary, options.args, options.env, stdin_read.get(),
            out_write.get(), err_write.get(), options.etxtbsy_retries);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  stdin_read.reset();
  out_write.reset();
  err_write.reset();

  // Its exit is seen through a pidfd; without one (an old kernel), by
  // polling waitpid every 10 ms.
  UniqueFd pidfd(PidfdOpen(pid));
  bool reaped = false;
  while (!reaped || out.fd || err.fd) {
    if (!reaped && waitpid(pid, &result.wait_status, WNOHANG) == pid) {
      reaped = true;
      pidfd.reset();
      kill(-pid, SIGKILL);  // what it left in its process group
      continue;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      if (!reaped) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        Reap(pid, &result.wait_status);
      }
      break;
    }
    pollfd fds[3];
    int count = 0;
    if (out.fd) fds[count++] = {out.fd.get(), POLLIN, 0};
    if (err.fd) fds[count++] = {err.fd.get(), POLLIN, 0};
    if (pidfd) fds[count++] = {pidfd.get(), POLLIN, 0};
    int wait_ms = static_cast<int>(
        std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000));
    if (!reaped && !pidfd) wait_ms = std::min(wait_ms, 10);
    if (poll(fds, count, wait_ms) < 0 && errno != EINTR) {
      const int error = errno;
      kill(-pid, SIGKILL);
      if (!reaped) Reap(pid, &result.wait_status);
      return absl::ErrnoToStatus(error,
                                 absl::StrCat("poll on the pipes of ", binary));
    }
    Drain(out);
    Drain(err);
  }
  Drain(out);
  Drain(err);
  return result;
}

std::vector<std::string> EnvironmentWithout(const std::string& drop_prefix) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (!drop_prefix.empty() && absl::StartsWith(*entry, drop_prefix)) {
      continue;
    }
    env.emplace_back(*entry);
  }
  return env;
}

}  // namespace berth::base
