#include "plugins/sdk/testing.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "plugins/sdk/handshake.h"
#include "services/common/dial.h"

extern char** environ;

namespace berth::plugin::testing {
absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const std::string& path,
                                                    absl::Duration timeout) {
  return DialUnix(path, timeout);
}

absl::StatusOr<std::unique_ptr<PluginProcess>> PluginProcess::Launch(
    const Options& options) {
  if (options.stderr_path.empty()) {
    return absl::InvalidArgumentError("PluginProcess: stderr_path is required");
  }
  // Everything the child needs, made before fork.
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!absl::StartsWith(*entry, "BERTH_PLUGIN_")) {
      env_strings.push_back(*entry);
    }
  }
  if (options.with_cookie) {
    env_strings.push_back(
        absl::StrCat(kMagicCookieKey, "=", kMagicCookieValue));
  }
  if (!options.socket_dir.empty()) {
    env_strings.push_back(absl::StrCat(kSocketDirEnv, "=", options.socket_dir));
  }
  env_strings.push_back(absl::StrCat(kProtocolVersionsEnv, "=1"));
  for (const auto& [key, value] : options.env) {
    env_strings.push_back(absl::StrCat(key, "=", value));
  }
  std::vector<char*> envp;
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings = {options.binary};
  arg_strings.insert(arg_strings.end(), options.args.begin(),
                     options.args.end());
  std::vector<char*> argv;
  for (std::string& arg : arg_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const int err_fd = open(options.stderr_path.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err_fd < 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("open ", options.stderr_path));
  }
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    const int err = errno;
    close(err_fd);
    return absl::ErrnoToStatus(err, "pipe2");
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(err_fd);
    close(out[0]);
    close(out[1]);
    return absl::ErrnoToStatus(err, "fork");
  }
  if (pid == 0) {
    // The test may block signals; the plugin starts with none blocked.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(err_fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(err_fd);
  close(out[1]);
  return std::unique_ptr<PluginProcess>(new PluginProcess(pid, out[0]));
}

PluginProcess::~PluginProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
  close(stdout_fd_);
}

absl::StatusOr<std::string> PluginProcess::ReadStdoutLine(
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t newline = stdout_buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = stdout_buffer_.substr(0, newline);
      stdout_buffer_.erase(0, newline + 1);
      return line;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no line on the plugin's stdout within ",
          absl::FormatDuration(timeout), "; got \"", stdout_buffer_, "\""));
    }
    pollfd fd = {stdout_fd_, POLLIN, 0};
    const int ready = poll(&fd, 1, absl::ToInt64Milliseconds(left) + 1);
    if (ready < 0 && errno != EINTR) return absl::ErrnoToStatus(errno, "poll");
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(stdout_fd_, buffer, sizeof(buffer));
    if (n < 0 && errno != EINTR) return absl::ErrnoToStatus(errno, "read");
    if (n == 0) {
      return absl::OutOfRangeError(absl::StrCat(
          "the plugin's stdout ended; got \"", stdout_buffer_, "\""));
    }
    if (n > 0) stdout_buffer_.append(buffer, n);
  }
}

absl::StatusOr<int> PluginProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      return status;
    }
    if (done < 0 && errno != EINTR)
      return absl::ErrnoToStatus(errno, "waitpid");
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("plugin process ", pid_, " still runs after ",
                       absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

void PluginProcess::Kill(int signal) {
  if (!reaped_) kill(pid_, signal);
}

}  // namespace berth::plugin::testing
