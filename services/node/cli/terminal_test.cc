#include "services/node/cli/terminal.h"

#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>

#include "gtest/gtest.h"

namespace berth::cli {
namespace {

class PtyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct winsize size = {};
    size.ws_row = 24;
    size.ws_col = 80;
    ASSERT_EQ(openpty(&master_, &slave_, nullptr, nullptr, &size), 0);
  }
  void TearDown() override {
    close(master_);
    close(slave_);
  }
  bool Canonical() const {
    struct termios settings;
    EXPECT_EQ(tcgetattr(slave_, &settings), 0);
    return (settings.c_lflag & ICANON) != 0 && (settings.c_lflag & ECHO) != 0;
  }
  int master_ = -1;
  int slave_ = -1;
};

TEST_F(PtyTest, RawWhileAliveRestoredAfter) {
  ASSERT_TRUE(Canonical());
  {
    absl::StatusOr<std::unique_ptr<RawTerminal>> raw =
        RawTerminal::Enter(slave_);
    ASSERT_TRUE(raw.ok()) << raw.status();
    EXPECT_FALSE(Canonical());
    EXPECT_FALSE(RawTerminal::Enter(slave_).ok());  // one at a time
  }
  EXPECT_TRUE(Canonical());
}

TEST_F(PtyTest, RestoredWhenASignalKills) {
  ASSERT_TRUE(Canonical());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<RawTerminal>> raw =
        RawTerminal::Enter(slave_);
    if (!raw.ok()) _exit(3);
    raise(SIGTERM);
    _exit(4);  // not reached: SIGTERM's default action ends the process
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_TRUE(Canonical());
}

TEST_F(PtyTest, NotATerminal) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_FALSE(RawTerminal::Enter(fds[0]).ok());
  EXPECT_FALSE(TerminalSizeOf(fds[0]).has_value());
  close(fds[0]);
  close(fds[1]);
}

TEST_F(PtyTest, SizeAndWindowChange) {
  std::optional<driver::v1::TerminalSize> size = TerminalSizeOf(slave_);
  ASSERT_TRUE(size.has_value());
  EXPECT_EQ(size->rows(), 24u);
  EXPECT_EQ(size->columns(), 80u);

  absl::StatusOr<std::unique_ptr<SignalPipe>> signals =
      SignalPipe::Install({SIGWINCH, SIGUSR1});
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_FALSE(SignalPipe::Install({SIGUSR1}).ok());  // one watcher each
  EXPECT_TRUE((*signals)->Drain().empty());
  raise(SIGWINCH);
  raise(SIGUSR1);
  EXPECT_EQ((*signals)->Drain(), (std::vector<int>{SIGWINCH, SIGUSR1}));
  EXPECT_TRUE((*signals)->Drain().empty());
  signals->reset();
  // Back to their former actions: another pipe may watch them.
  EXPECT_TRUE(SignalPipe::Install({SIGUSR1}).ok());
}

}  // namespace
}  // namespace berth::cli
