#include "plugins/sdk/child_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/io.h"
#include "base/process.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "gtest/gtest.h"
#include "plugins/sdk/cancel.h"
#include "plugins/sdk/exec.h"

namespace berth::plugin {
namespace {

using ::berth::base::UniqueFd;

// Not a timing assertion: a pump that would hang (a wrong end-of-file
// character, stdin no longer read) ends here instead, and the test fails on
// its DEADLINE_EXCEEDED.
constexpr absl::Duration kSafetyNet = absl::Seconds(20);

// Stdin as a caller sends it: `data`, then its end. `before_end` runs
// before the end is returned; with `hold_open` the end is held back until
// Close (a caller that never half-closes).
class FakeStdin : public ExecStdin {
 public:
  explicit FakeStdin(std::string data, std::function<void()> before_end = {},
                     bool hold_open = false)
      : data_(std::move(data)),
        before_end_(std::move(before_end)),
        hold_open_(hold_open) {}

  size_t Read(char* buffer, size_t size) override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return 0;
      if (offset_ < data_.size()) {
        const size_t n = std::min(size, data_.size() - offset_);
        data_.copy(buffer, n, offset_);
        offset_ += n;
        return n;
      }
      ended_ = true;
    }
    if (before_end_) std::exchange(before_end_, nullptr)();
    absl::MutexLock lock(&mu_);
    if (hold_open_) mu_.Await(absl::Condition(&closed_));
    return 0;
  }

  void Close() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  // All of it was read, up to its end, before any Close.
  bool ended() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return ended_;
  }

 private:
  absl::Mutex mu_;
  const std::string data_;
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> before_end_;  // the reader's thread only
  const bool hold_open_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

// Output gathered; Write fails once `fail_after` bytes came.
class StringOutput : public ExecOutput {
 public:
  explicit StringOutput(size_t fail_after = SIZE_MAX)
      : fail_after_(fail_after) {}

  bool Write(absl::string_view data) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    data_.append(data.data(), data.size());
    return data_.size() < fail_after_;
  }

  std::string data() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return data_;
  }

 private:
  const size_t fail_after_;
  absl::Mutex mu_;
  std::string data_ ABSL_GUARDED_BY(mu_);
};

// Resizes from a caller: one pending slot, an eventfd readable while full.
class FakeResizes : public ResizeEvents {
 public:
  FakeResizes() : event_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  void Put(TerminalSize size) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    pending_ = size;
    const uint64_t one = 1;
    (void)!write(event_fd_.get(), &one, sizeof(one));
  }

  std::optional<TerminalSize> TakeLatest() override ABSL_LOCKS_EXCLUDED(mu_) {
    std::optional<TerminalSize> taken;
    {
      absl::MutexLock lock(&mu_);
      taken.swap(pending_);
      uint64_t count;
      (void)!read(event_fd_.get(), &count, sizeof(count));
    }
    if (taken.has_value() && !taken_.HasBeenNotified()) taken_.Notify();
    return taken;
  }

  bool WaitUntil(absl::Time) override { return false; }
  int fd() override { return event_fd_.get(); }

  // Blocks until a size was taken.
  void WaitTaken() { taken_.WaitForNotification(); }

 private:
  const UniqueFd event_fd_;
  absl::Mutex mu_;
  std::optional<TerminalSize> pending_ ABSL_GUARDED_BY(mu_);
  absl::Notification taken_;
};

// How a pumped command went.
struct Outcome {
  absl::Status pumped;
  int wait_status = -1;
  bool killed = false;  // ChildIoOptions::kill was called
  int exits_seen = 0;   // ChildIoOptions::on_exit calls
};

std::string TempPath(const std::string& name) {
  const char* dir = getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// `size` bytes of every value, not repeating with any short period.
std::string Pattern(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string data(size, '\0');
  for (char& c : data) c = static_cast<char>(random());
  return data;
}

std::string WriteTempFile(const std::string& name, const std::string& data) {
  const std::string path = TempPath(name);
  const UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  EXPECT_TRUE(fd.valid()) << path;
  EXPECT_TRUE(base::WriteAll(fd.get(), data).ok());
  return path;
}

int OpenDescriptors() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count;
}

// Runs `script` under /bin/sh with stdin, stdout and stderr from `theirs`
// (closed here once it has them), pumps `options` with `stdio` (the
// driver's ends) and reaps it. `child` is completed with the command's
// pidfd (unless `use_pidfd` is false: then has_exited, by waitid), on_exit
// and kill (SIGKILL to its process group).
Outcome Run(const std::string& script, std::vector<UniqueFd> theirs,
            ChildStdio stdio, const ExecOptions& options, ChildIoOptions child,
            bool use_pidfd = true) {
  Outcome outcome;
  const int fds[3] = {theirs[0].get(), theirs[theirs.size() > 1 ? 1 : 0].get(),
                      theirs[theirs.size() > 2 ? 2 : 0].get()};
  absl::StatusOr<pid_t> pid =
      base::Spawn("/bin/sh", {"-c", script}, {"PATH=/usr/bin:/bin"}, fds[0],
                  fds[1], fds[2]);
  theirs.clear();
  if (!pid.ok()) {
    outcome.pumped = pid.status();
    return outcome;
  }
  const UniqueFd pidfd(base::PidfdOpen(*pid));
  if (use_pidfd) {
    child.exit_fd = pidfd.get();
  } else {
    child.has_exited = [pid = *pid] {
      siginfo_t info = {};
      return waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
             info.si_pid == pid;
    };
  }
  child.on_exit = [&outcome] { ++outcome.exits_seen; };
  child.kill = [&outcome, pid = *pid] {
    outcome.killed = true;
    kill(-pid, SIGKILL);
  };
  outcome.pumped = PumpChildIo(options, std::move(stdio), child);
  // Whatever it left in its process group goes too.
  kill(-*pid, SIGKILL);
  while (waitpid(*pid, &outcome.wait_status, 0) < 0 && errno == EINTR) {
  }
  return outcome;
}

// `script` on three pipes.
Outcome RunOnPipes(const std::string& script, const ExecOptions& options,
                   ChildIoOptions child = {}, bool use_pidfd = true) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return {absl::ErrnoToStatus(errno, "pipe")};
  if (pipe2(out, O_CLOEXEC) != 0) return {absl::ErrnoToStatus(errno, "pipe")};
  if (pipe2(err, O_CLOEXEC) != 0) return {absl::ErrnoToStatus(errno, "pipe")};
  std::vector<UniqueFd> theirs;
  theirs.emplace_back(in[0]);
  theirs.emplace_back(out[1]);
  theirs.emplace_back(err[1]);
  ChildStdio stdio;
  stdio.stdin_fd = UniqueFd(in[1]);
  stdio.stdout_fd = UniqueFd(out[0]);
  stdio.stderr_fd = UniqueFd(err[0]);
  return Run(script, std::move(theirs), std::move(stdio), options,
             std::move(child), use_pidfd);
}

// `script` on a pseudo-terminal whose slave `configure` may set up first.
// `probe`, if given, receives a dup of the master, to ask it afterwards.
Outcome RunOnTerminal(const std::string& script, const ExecOptions& options,
                      const std::function<void(int slave)>& configure = {},
                      UniqueFd* probe = nullptr, ChildIoOptions child = {}) {
  int master, slave;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
    return {absl::ErrnoToStatus(errno, "openpty")};
  }
  fcntl(master, F_SETFD, FD_CLOEXEC);
  fcntl(slave, F_SETFD, FD_CLOEXEC);
  std::vector<UniqueFd> theirs;
  theirs.emplace_back(slave);
  ChildStdio stdio;
  stdio.terminal = UniqueFd(master);
  if (configure) configure(slave);
  if (probe != nullptr) *probe = UniqueFd(fcntl(master, F_DUPFD_CLOEXEC, 0));
  return Run(script, std::move(theirs), std::move(stdio), options,
             std::move(child));
}

bool ExitedWith(int wait_status, int code) {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == code;
}

bool Killed(int wait_status) {
  return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL;
}

ChildIoOptions WithSafetyNet() {
  ChildIoOptions child;
  child.deadline = absl::Now() + kSafetyNet;
  return child;
}

// ---- Pipes ----

TEST(ChildIoTest, PipesCarryStdinInThenItsEndAndStdoutAndStderrOut) {
  FakeStdin in("hello\n");
  StringOutput out, err;
  ExecOptions options;
  options.in = &in;
  options.out = &out;
  options.err = &err;
  // cat ends only at the end of its stdin: the pipe was closed.
  const Outcome outcome =
      RunOnPipes("cat; echo err >&2; exit 3", options, WithSafetyNet());
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_TRUE(ExitedWith(outcome.wait_status, 3));
  EXPECT_EQ(out.data(), "hello\n");
  EXPECT_EQ(err.data(), "err\n");
  EXPECT_TRUE(in.ended());
  EXPECT_FALSE(outcome.killed);
  EXPECT_EQ(outcome.exits_seen, 1);
}

TEST(ChildIoTest, WithoutStdinThePipeEndsAtOnce) {
  StringOutput out;
  ExecOptions options;
  options.out = &out;  // no in, no err (stderr read and dropped)
  const Outcome outcome =
      RunOnPipes("cat; echo done; echo dropped >&2", options, WithSafetyNet());
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_TRUE(ExitedWith(outcome.wait_status, 0));
  EXPECT_EQ(out.data(), "done\n");
}

TEST(ChildIoTest, SeveralMebibytesEachWayIntact) {
  const std::string in_data = Pattern(8 << 20, 1);
  const std::string err_data = Pattern(6 << 20, 2);
  const std::string file = WriteTempFile("err_data", err_data);
  FakeStdin in(in_data);
  StringOutput out, err;
  ExecOptions options;
  options.in = &in;
  options.out = &out;
  options.err = &err;
  const Outcome outcome = RunOnPipes(absl::StrCat("cat; cat '", file, "' >&2"),
                                     options, WithSafetyNet());
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_TRUE(ExitedWith(outcome.wait_status, 0));
  EXPECT_TRUE(out.data() == in_data) << out.data().size() << " bytes";
  EXPECT_TRUE(err.data() == err_data) << err.data().size() << " bytes";
}

TEST(ChildIoTest, ACommandThatClosesItsStdinKeepsItsOutputAndStdinIsDrained) {
  // The command closes its stdin at once and, before it ends, waits for the
  // whole of stdin to have been read from the caller: writes to it fail
  // (EPIPE) while 8 MiB are still to come, and its output goes on.
  const std::string fifo = TempPath("stdin_read");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  FakeStdin in(Pattern(8 << 20, 3), [&fifo] {
    const UniqueFd fd(open(fifo.c_str(), O_WRONLY | O_CLOEXEC));
    (void)base::WriteAll(fd.get(), "all read\n");
  });
  StringOutput out;
  ExecOptions options;
  options.in = &in;
  options.out = &out;
  const Outcome outcome =
      RunOnPipes(absl::StrCat("exec 0<&-; echo closed; read line < '", fifo,
                              "'; echo \"$line\""),
                 options, WithSafetyNet());
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_TRUE(ExitedWith(outcome.wait_status, 0));
  EXPECT_EQ(out.data(), "closed\nall read\n");
  EXPECT_TRUE(in.ended());
}

TEST(ChildIoTest, ResizesGoToTheCallbackWithoutATerminal) {
  FakeResizes resizes;
  resizes.Put({40, 120});
  FakeStdin in("", [&resizes] { resizes.WaitTaken(); });
  ExecOptions options;
  options.in = &in;
  options.resizes = &resizes;
  std::vector<TerminalSize> applied;
  ChildIoOptions child = WithSafetyNet();
  child.resize = [&applied](const TerminalSize& size) {
    applied.push_back(size);
  };
  const Outcome outcome = RunOnPipes("cat", options, std::move(child));
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0], (TerminalSize{40, 120}));
}

TEST(ChildIoTest, ResizesAreLeftAloneOnPipesWithoutACallback) {
  FakeResizes resizes;
  resizes.Put({40, 120});
  ExecOptions options;
  options.resizes = &resizes;
  const Outcome outcome = RunOnPipes("echo hi", options, WithSafetyNet());
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_EQ(resizes.TakeLatest(), (TerminalSize{40, 120}));
}

TEST(ChildIoTest, WithoutAnExitFdHasExitedIsAsked) {
  StringOutput out;
  ExecOptions options;
  options.out = &out;
  const Outcome outcome =
      RunOnPipes("echo hi", options, WithSafetyNet(), /*use_pidfd=*/false);
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_EQ(out.data(), "hi\n");
  EXPECT_EQ(outcome.exits_seen, 1);
}

TEST(ChildIoTest, OutputHeldOpenByWhatItLeftIsWaitedForTheGraceOnly) {
  StringOutput out;
  ExecOptions options;
  options.out = &out;
  ChildIoOptions child = WithSafetyNet();
  child.drain_grace = absl::Milliseconds(100);
  // The sleep keeps stdout open long after the shell ended.
  const Outcome outcome =
      RunOnPipes("sleep 1000 & echo done", options, std::move(child));
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_TRUE(ExitedWith(outcome.wait_status, 0));
  EXPECT_EQ(out.data(), "done\n");
  EXPECT_FALSE(outcome.killed);
}

// ---- The end before the command's ----

TEST(ChildIoTest, CancelKillsTheCommand) {
  CancelToken cancel;
  // The caller cancels once the command runs, and never ends stdin.
  FakeStdin in(
      "", [&cancel] { cancel.Cancel(); }, /*hold_open=*/true);
  ExecOptions options;
  options.in = &in;
  options.cancel = &cancel;
  const Outcome outcome = RunOnPipes("sleep 1000", options);
  EXPECT_TRUE(absl::IsCancelled(outcome.pumped)) << outcome.pumped;
  EXPECT_TRUE(outcome.killed);
  EXPECT_TRUE(Killed(outcome.wait_status));
  EXPECT_EQ(outcome.exits_seen, 0);
}

TEST(ChildIoTest, TheDeadlineKillsTheCommand) {
  ChildIoOptions child;
  child.deadline = absl::Now();
  const Outcome outcome = RunOnPipes("sleep 1000", ExecOptions(), child);
  EXPECT_TRUE(absl::IsDeadlineExceeded(outcome.pumped)) << outcome.pumped;
  EXPECT_TRUE(outcome.killed);
  EXPECT_TRUE(Killed(outcome.wait_status));
}

TEST(ChildIoTest, ACallerGoneKillsTheCommand) {
  StringOutput out(/*fail_after=*/1);
  ExecOptions options;
  options.out = &out;
  const Outcome outcome = RunOnPipes("yes", options, WithSafetyNet());
  EXPECT_TRUE(absl::IsUnavailable(outcome.pumped)) << outcome.pumped;
  EXPECT_TRUE(outcome.killed);
  EXPECT_TRUE(Killed(outcome.wait_status));
}

// ---- Descriptors ----

TEST(ChildIoTest, NoDescriptorIsLeftOpen) {
  const int before = OpenDescriptors();
  {
    FakeStdin in("x");
    StringOutput out;
    ExecOptions options;
    options.in = &in;
    options.out = &out;
    ASSERT_TRUE(RunOnPipes("cat", options, WithSafetyNet()).pumped.ok());
  }
  {
    CancelToken cancel;
    FakeStdin in(
        "", [&cancel] { cancel.Cancel(); }, /*hold_open=*/true);
    ExecOptions options;
    options.in = &in;
    options.cancel = &cancel;
    ASSERT_TRUE(absl::IsCancelled(RunOnPipes("sleep 1000", options).pumped));
  }
  {
    StringOutput out;
    ExecOptions options;
    options.out = &out;
    ASSERT_TRUE(RunOnTerminal("echo hi", options).pumped.ok());
  }
  EXPECT_EQ(OpenDescriptors(), before);
}

TEST(ChildIoTest, PipesAndATerminalTogetherAreRefusedAndClosed) {
  const int before = OpenDescriptors();
  int in[2], master, slave;
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  close(in[0]);
  close(slave);
  ChildStdio stdio;
  stdio.stdin_fd = UniqueFd(in[1]);
  stdio.terminal = UniqueFd(master);
  ChildIoOptions child;
  bool killed = false;
  child.exit_fd = 0;
  child.kill = [&killed] { killed = true; };
  const absl::Status status =
      PumpChildIo(ExecOptions(), std::move(stdio), child);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(killed);
  EXPECT_EQ(OpenDescriptors(), before);
}

// ---- A terminal ----

TEST(ChildIoTest, TerminalStdinEndIsTheTerminalsOwnVeof) {
  FakeStdin in("hello\n");
  StringOutput out;
  ExecOptions options;
  options.in = &in;
  options.out = &out;
  options.tty = true;
  // Not ^D: the pump must read VEOF from the terminal. cat ends only at an
  // end of file; the echo says it did.
  const Outcome outcome = RunOnTerminal(
      "cat; echo after-eof", options,
      [](int slave) {
        struct termios attributes;
        ASSERT_EQ(tcgetattr(slave, &attributes), 0);
        attributes.c_cc[VEOF] = 1;  // ^A
        attributes.c_lflag &= ~ECHO;
        ASSERT_EQ(tcsetattr(slave, TCSANOW, &attributes), 0);
      },
      nullptr, WithSafetyNet());
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_TRUE(ExitedWith(outcome.wait_status, 0));
  EXPECT_EQ(out.data(), "hello\r\nafter-eof\r\n");
  EXPECT_TRUE(in.ended());
}

TEST(ChildIoTest, SeveralMebibytesIntactFromATerminal) {
  const std::string data = Pattern(4 << 20, 4);
  const std::string file = WriteTempFile("terminal_data", data);
  StringOutput out;
  ExecOptions options;
  options.out = &out;
  options.tty = true;
  const Outcome outcome = RunOnTerminal(
      absl::StrCat("cat '", file, "'"), options,
      [](int slave) {
        struct termios attributes;
        ASSERT_EQ(tcgetattr(slave, &attributes), 0);
        cfmakeraw(&attributes);  // bytes as they are: no \n to \r\n
        ASSERT_EQ(tcsetattr(slave, TCSANOW, &attributes), 0);
      },
      nullptr, WithSafetyNet());
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  EXPECT_TRUE(ExitedWith(outcome.wait_status, 0));
  EXPECT_TRUE(out.data() == data) << out.data().size() << " bytes";
}

TEST(ChildIoTest, ResizesAreAppliedToTheTerminal) {
  FakeResizes resizes;
  resizes.Put({30, 100});
  // Stdin ends (and cat with it) only once the size was taken; the pump
  // applies it before it can see cat end.
  FakeStdin in("", [&resizes] { resizes.WaitTaken(); });
  ExecOptions options;
  options.in = &in;
  options.resizes = &resizes;
  options.tty = true;
  UniqueFd probe;
  const Outcome outcome = RunOnTerminal(
      "cat", options,
      [](int slave) {
        ASSERT_TRUE(SetTerminalSize(slave, {24, 80}).ok());
      },
      &probe, WithSafetyNet());
  ASSERT_TRUE(outcome.pumped.ok()) << outcome.pumped;
  struct winsize window = {};
  ASSERT_EQ(ioctl(probe.get(), TIOCGWINSZ, &window), 0);
  EXPECT_EQ(window.ws_row, 30);
  EXPECT_EQ(window.ws_col, 100);
}

TEST(ChildIoTest, SetTerminalSizeSkipsZeroByZero) {
  int master, slave;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  const UniqueFd master_fd(master), slave_fd(slave);
  ASSERT_TRUE(SetTerminalSize(master, {24, 80}).ok());
  ASSERT_TRUE(SetTerminalSize(master, {0, 0}).ok());
  struct winsize window = {};
  ASSERT_EQ(ioctl(slave, TIOCGWINSZ, &window), 0);
  EXPECT_EQ(window.ws_row, 24);
  EXPECT_EQ(window.ws_col, 80);
  EXPECT_FALSE(SetTerminalSize(-1, {24, 80}).ok());
}

}  // namespace
}  // namespace berth::plugin
