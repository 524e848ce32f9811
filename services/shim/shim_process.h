// berth-shim's binary as a subprocess, for tests (testonly): pipes for its
// stdio, its environment and an inherited token descriptor, its memory.

#ifndef SERVICES_SHIM_SHIM_PROCESS_H_
#define SERVICES_SHIM_SHIM_PROCESS_H_

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth {
namespace shim {
namespace testing {

using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;

struct Memory {
  int64_t rss_kb = -1;
  int64_t pss_kb = -1;
  // Private_Clean + Private_Dirty: what each more shim adds.
  int64_t private_kb = -1;
  int64_t anonymous_kb = -1;
  int threads = -1;
};

class ShimProcess {
 public:
  struct Options {
    std::vector<std::string> args;           // after the binary
    std::vector<std::string> env;            // besides PATH
    std::optional<std::string> token_on_fd;  // given as fd 5
    int stdin_fd = -1;   // instead of a pipe (e.g. a terminal)
    int attach_fd = -1;  // given as fd 3 (e.g. a listening socket)
    // If set, stdout is read only once it is notified (until then the
    // shim's writes block once the pipe is full).
    absl::Notification* hold_stdout = nullptr;
  };

  explicit ShimProcess(Options options) {
    std::vector<std::string> argv = {RunfilePath("services/shim/berth-shim")};
    argv.insert(argv.end(), options.args.begin(), options.args.end());
    std::vector<std::string> env = options.env;
    env.push_back("PATH=/usr/bin:/bin");
    int in[2], out[2], err[2], token[2] = {-1, -1};
    CHECK_EQ(pipe2(in, O_CLOEXEC), 0);
    CHECK_EQ(pipe2(out, O_CLOEXEC), 0);
    CHECK_EQ(pipe2(err, O_CLOEXEC), 0);
    if (options.token_on_fd.has_value()) {
      CHECK_EQ(pipe2(token, O_CLOEXEC), 0);
      CHECK_EQ(write(token[1], options.token_on_fd->data(),
                     options.token_on_fd->size()),
               static_cast<ssize_t>(options.token_on_fd->size()));
      close(token[1]);
      struct stat st;
      CHECK_EQ(fstat(token[0], &st), 0);
      token_pipe_ = absl::StrCat("pipe:[", st.st_ino, "]");
    }
    const int child_stdin = options.stdin_fd >= 0 ? options.stdin_fd : in[0];
    std::vector<char*> c_argv, c_env;
    for (std::string& arg : argv) c_argv.push_back(arg.data());
    c_argv.push_back(nullptr);
    for (std::string& var : env) c_env.push_back(var.data());
    c_env.push_back(nullptr);
    pid_ = fork();
    CHECK_GE(pid_, 0);
    if (pid_ == 0) {
      dup2(child_stdin, 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      if (token[0] >= 0) dup2(token[0], 5);
      if (options.attach_fd == 3) {
        fcntl(3, F_SETFD, 0);  // dup2 onto itself keeps close-on-exec
      } else if (options.attach_fd >= 0) {
        dup2(options.attach_fd, 3);
      }
      execve(c_argv[0], c_argv.data(), c_env.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    if (token[0] >= 0) close(token[0]);
    if (options.stdin_fd >= 0) {
      close(in[1]);
    } else {
      stdin_ = in[1];
    }
    stdout_read_end_ = out[0];
    out_reader_ = std::thread([this, fd = out[0], hold = options.hold_stdout] {
      if (hold != nullptr) hold->WaitForNotification();
      Drain(fd, /*is_out=*/true);
    });
    err_reader_ =
        std::thread([this, fd = err[0]] { Drain(fd, /*is_out=*/false); });
  }

  ~ShimProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    CloseStdin();
  }

  pid_t pid() const { return pid_; }

  // Whether the stdin pipe is empty: the shim has read what was written.
  bool StdinTaken() const {
    int queued = 0;
    return stdin_ >= 0 && ioctl(stdin_, FIONREAD, &queued) == 0 && queued == 0;
  }

  // Whether the shim's stdout pipe is full, so that its next write blocks.
  // Only while stdout is held (Options::hold_stdout).
  bool StdoutFull() const {
    // A second write end of the same pipe, to ask poll whether there is room.
    const int writer =
        open(absl::StrCat("/proc/self/fd/", stdout_read_end_).c_str(),
             O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (writer < 0) return false;
    pollfd pfd = {writer, POLLOUT, 0};
    const bool full = poll(&pfd, 1, 0) == 0;
    close(writer);
    return full;
  }

  void WriteStdin(const std::string& data) {
    ASSERT_EQ(write(stdin_, data.data(), data.size()),
              static_cast<ssize_t>(data.size()));
  }
  void CloseStdin() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }

  // Waits (at most 60 s, then kills) and returns the exit code, or -signal.
  int Wait() {
    if (pid_ <= 0) return status_;
    int status = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "berth-shim did not exit within 60s; killing it";
        kill(pid_, SIGKILL);
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    pid_ = -1;
    out_reader_.join();
    err_reader_.join();
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return status_;
  }

  // What the shim wrote so far (all of it after Wait).
  std::string out() const {
    absl::MutexLock lock(&mu_);
    return out_;
  }
  std::string err() const {
    absl::MutexLock lock(&mu_);
    return err_;
  }

  std::string Proc(absl::string_view file) const {
    return ReadFileOrEmpty(absl::StrCat("/proc/", pid_, "/", file));
  }

  // Whether any descriptor of the shim is the pipe the token came in.
  bool HoldsTokenPipe() const {
    const std::string fd_dir = absl::StrCat("/proc/", pid_, "/fd");
    DIR* dir = opendir(fd_dir.c_str());
    if (dir == nullptr) return false;
    bool found = false;
    while (const dirent* entry = readdir(dir)) {
      char target[256];
      const ssize_t n =
          readlink(absl::StrCat(fd_dir, "/", entry->d_name).c_str(), target,
                   sizeof(target));
      if (n > 0 && std::string(target, n) == token_pipe_) found = true;
    }
    closedir(dir);
    return found;
  }

  Memory MeasureMemory() const {
    Memory memory;
    for (absl::string_view line : absl::StrSplit(Proc("smaps_rollup"), '\n')) {
      std::vector<absl::string_view> fields =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      int64_t kb = 0;
      if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &kb)) continue;
      if (fields[0] == "Rss:") memory.rss_kb = kb;
      if (fields[0] == "Pss:") memory.pss_kb = kb;
      if (fields[0] == "Anonymous:") memory.anonymous_kb = kb;
      if (fields[0] == "Private_Clean:" || fields[0] == "Private_Dirty:") {
        memory.private_kb = std::max<int64_t>(memory.private_kb, 0) + kb;
      }
    }
    for (absl::string_view line : absl::StrSplit(Proc("status"), '\n')) {
      if (absl::ConsumePrefix(&line, "Threads:")) {
        (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line),
                               &memory.threads);
      }
    }
    return memory;
  }

 private:
  void Drain(int fd, bool is_out) {
    char buffer[64 * 1024];
    while (true) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      absl::MutexLock lock(&mu_);
      (is_out ? out_ : err_).append(buffer, static_cast<size_t>(n));
    }
    close(fd);
  }

  pid_t pid_ = -1;
  int status_ = -1;
  int stdin_ = -1;
  std::string token_pipe_ = "none";
  int stdout_read_end_ = -1;  // the reader thread's; closed by it
  mutable absl::Mutex mu_;
  std::string out_ ABSL_GUARDED_BY(mu_);
  std::string err_ ABSL_GUARDED_BY(mu_);
  std::thread out_reader_, err_reader_;
};

}  // namespace testing
}  // namespace shim
}  // namespace berth

#endif  // SERVICES_SHIM_SHIM_PROCESS_H_
