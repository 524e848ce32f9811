#include "plugins/sdk/testing.h"

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "plugins/sdk/handshake.h"

extern char** environ;

namespace berth::plugin::testing {
namespace {

int RemoveOne(const char* path, const struct stat*, int, struct FTW*) {
  if (remove(path) != 0) {
    ADD_FAILURE() << "cannot remove " << path << ": " << std::strerror(errno);
  }
  return 0;
}

}  // namespace

ShortTempDir::ShortTempDir() {
  char templ[] = "/tmp/berth-XXXXXX";
  if (mkdtemp(templ) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return;
  }
  path_ = templ;
}

ShortTempDir::~ShortTempDir() {
  if (path_.empty()) return;
  nftw(
      path_.c_str(),
      [](const char* path, const struct stat*, int type, struct FTW*) {
        if (type == FTW_D || type == FTW_DP) chmod(path, 0700);
        return 0;
      },
      16, FTW_PHYS);
  nftw(path_.c_str(), RemoveOne, 16, FTW_DEPTH | FTW_PHYS);
}

std::string ShortTempDir::Join(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string RunfilePath(absl::string_view workspace_path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "berth", "/",
                      workspace_path);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const std::string& path,
                                                    absl::Duration timeout) {
  // Not DialUnix: its channels share gRPC's global subchannel pool, so a
  // channel to a plugin launched again on the same socket path can get the
  // dead connection to the previous one ("Broken pipe").
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(absl::StrCat("unix:", path),
                                grpc::InsecureChannelCredentials(), arguments);
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to ", path, " within ", absl::FormatDuration(timeout)));
  }
  return channel;
}

CapturingLogSink::CapturingLogSink(google::LogSeverity min_severity)
    : min_severity_(min_severity) {
  google::AddLogSink(this);
}

CapturingLogSink::~CapturingLogSink() { google::RemoveLogSink(this); }

std::vector<CapturingLogSink::Entry> CapturingLogSink::entries() const {
  absl::MutexLock lock(&mu_);
  return entries_;
}

void CapturingLogSink::send(google::LogSeverity severity, const char*,
                            const char*, int, const google::LogMessageTime&,
                            const char* message, size_t message_len) {
  if (severity < min_severity_) return;
  absl::MutexLock lock(&mu_);
  entries_.push_back({severity, std::string(message, message_len)});
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
