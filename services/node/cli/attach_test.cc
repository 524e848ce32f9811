// `berth run -i/-t` and `berth attach` against a FakeNodeService: the
// AttachTask requests (setup, stdin, stdin_close, resizes), the output, the
// exit codes, the detach keys, raw mode on a pty.

#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/node/v1/node.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/node/cli/cli_test_fixture.h"
#include "services/node/cli/commands.h"
#include "services/node/cli/fake_node_service.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;
namespace nodepb = ::berth::node::v1;
using ::berth::cli::testing::CliResult;
using ::berth::cli::testing::CliTest;
using ::berth::cli::testing::FakeNodeService;
using ::berth::cli::testing::MemFile;
using ::berth::cli::testing::ReadBack;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kRunId[] = "00112233445566778899aabbccddeeff";
constexpr char kWebId[] = "aaaabbbbccccddddeeeeffff00001111";

nodepb::Task RunningTask(const std::string& id, const std::string& name,
                         bool stdin_open, bool tty) {
  nodepb::Task task;
  task.set_id(id);
  task.mutable_spec()->set_name(name);
  task.mutable_spec()->set_stdin_open(stdin_open);
  task.mutable_spec()->set_tty(tty);
  task.set_state(nodepb::TASK_STATE_RUNNING);
  return task;
}

nodepb::Task Outcome(int exit_code, const std::string& id = kRunId) {
  nodepb::Task task;
  task.set_id(id);
  task.set_state(nodepb::TASK_STATE_EXITED);
  task.mutable_exit_result()->set_exit_code(exit_code);
  return task;
}

driverpb::AttachTaskResponse Stdout(const std::string& data) {
  driverpb::AttachTaskResponse response;
  response.set_stdout(data);
  return response;
}

driverpb::AttachTaskResponse Stderr(const std::string& data) {
  driverpb::AttachTaskResponse response;
  response.set_stderr(data);
  return response;
}

driverpb::ExitResult Exit(int code) {
  driverpb::ExitResult exit;
  exit.set_exit_code(code);
  return exit;
}

// The stdin bytes the requests carried, in order.
std::string SentStdin(const std::vector<driverpb::AttachTaskRequest>& all) {
  std::string data;
  for (const auto& request : all) {
    if (request.has_stdin()) data += request.stdin();
  }
  return data;
}

bool ClosedStdin(const std::vector<driverpb::AttachTaskRequest>& all) {
  for (const auto& request : all) {
    if (request.has_stdin_close()) return true;
  }
  return false;
}

class AttachTest : public CliTest {
 protected:
  // Like Run, with stdin a pipe that gets `chunks` one at a time: each once
  // the fake has received what came before it (as typed, not one read).
  CliResult RunTyped(const std::vector<std::string>& args,
                     const std::vector<std::string>& chunks) {
    int pipe_fds[2];
    EXPECT_EQ(pipe(pipe_fds), 0);
    const int out = MemFile("stdout");
    const int err = MemFile("stderr");
    std::atomic<bool> done{false};
    std::thread typist([&] {
      std::string typed;
      for (const std::string& chunk : chunks) {
        berth::testing::WaitFor(
            [&] { return done || SentStdin(fake_.attach_requests()) == typed; },
            absl::Seconds(10));
        EXPECT_EQ(write(pipe_fds[1], chunk.data(), chunk.size()),
                  static_cast<ssize_t>(chunk.size()));
        typed += chunk;
      }
    });
    CliResult result;
    result.code = RunCli(args, Environment(pipe_fds[0], out, err));
    done = true;
    typist.join();
    close(pipe_fds[1]);
    close(pipe_fds[0]);
    result.out = ReadBack(out);
    result.err = ReadBack(err);
    close(out);
    close(err);
    return result;
  }
};

// --- berth run -i / -t

TEST_F(AttachTest, RunInteractivePassesStdinAndExitsWithTheTasksCode) {
  fake_.SetRunOutcome(Outcome(3));
  fake_.SetAttachScript({Stdout("before attach\n"), Stderr("to stderr\n")},
                        Exit(99));
  CliResult result =
      Run({"run", "-i", "--rm", "--", "/bin/cat"}, "hello from stdin\n");
  EXPECT_EQ(result.code, 3) << result.err;
  EXPECT_EQ(result.out, "before attach\nhello from stdin\n");
  EXPECT_EQ(result.err, "to stderr\n");
  ASSERT_EQ(fake_.run_requests().size(), 1u);
  EXPECT_TRUE(fake_.run_requests()[0].spec().stdin_open());
  EXPECT_FALSE(fake_.run_requests()[0].spec().tty());
  std::vector<driverpb::AttachTaskRequest> requests = fake_.attach_requests();
  ASSERT_FALSE(requests.empty());
  ASSERT_TRUE(requests[0].has_setup());
  EXPECT_EQ(requests[0].setup().task_id(), kRunId);
  EXPECT_TRUE(requests[0].setup().stdin());
  EXPECT_FALSE(requests[0].setup().has_terminal_size());
  EXPECT_EQ(SentStdin(requests), "hello from stdin\n");
  // The end of stdin closes the task's.
  EXPECT_TRUE(requests.back().has_stdin_close());
  // --rm: removed once ended. No log following on this path.
  ASSERT_EQ(fake_.remove_requests().size(), 1u);
  EXPECT_EQ(fake_.remove_requests()[0].task_id(), kRunId);
  EXPECT_THAT(fake_.logs_requests(), IsEmpty());
}

TEST_F(AttachTest, RunInteractiveKilledBySignalExits128PlusIt) {
  nodepb::Task killed = Outcome(0);
  killed.mutable_exit_result()->set_signal(9);
  fake_.SetRunOutcome(killed);
  CliResult result = Run({"run", "-i", "--", "/bin/cat"}, "");
  EXPECT_EQ(result.code, 137) << result.err;
  EXPECT_TRUE(ClosedStdin(fake_.attach_requests()));
  EXPECT_THAT(fake_.remove_requests(), IsEmpty());
}

TEST_F(AttachTest, RunThatFailedToStartExits125) {
  nodepb::Task failed;
  failed.set_id(kRunId);
  failed.set_state(nodepb::TASK_STATE_FAILED);
  failed.set_error("no such file: /nope");
  fake_.SetRunOutcome(failed);
  CliResult result = Run({"run", "-i", "--rm", "--", "/nope"}, "x");
  EXPECT_EQ(result.code, 125);
  EXPECT_THAT(result.err, HasSubstr("failed to start: no such file: /nope"));
  EXPECT_EQ(fake_.remove_requests().size(), 1u);
}

TEST_F(AttachTest, DetachKeysLeaveTheTaskRunning) {
  CliResult result =
      RunTyped({"run", "-i", "--rm", "--name", "shell", "--", "/bin/sh"},
               {"echo hi\n", "\x10\x11never sent"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr("berth: detached from shell"));
  EXPECT_THAT(result.err, HasSubstr("not removed"));
  EXPECT_THAT(result.err, HasSubstr("berth attach shell"));
  std::vector<driverpb::AttachTaskRequest> requests = fake_.attach_requests();
  EXPECT_EQ(SentStdin(requests), "echo hi\n");
  EXPECT_FALSE(ClosedStdin(requests));
  // The call was ended by berth; the task was neither stopped nor removed.
  EXPECT_TRUE(
      berth::testing::WaitFor([&] { return fake_.attach_cancelled(); }));
  EXPECT_THAT(fake_.stop_requests(), IsEmpty());
  EXPECT_THAT(fake_.remove_requests(), IsEmpty());
}

TEST_F(AttachTest, OtherDetachKeysAndACutShortSequence) {
  // ctrl-p alone is passed on (one byte late); ctrl-a detaches.
  CliResult result =
      RunTyped({"run", "-i", "--detach-keys", "ctrl-a", "--", "/bin/sh"},
               {"a\x10z", "\x01"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(SentStdin(fake_.attach_requests()), "a\x10z");
  EXPECT_THAT(result.err, HasSubstr("detached from 00112233"));

  // The default keys cut short by the end of stdin: sent, then closed.
  fake_.SetRunOutcome(Outcome(0, std::string(32, '2')));
  result = Run({"run", "-i", "--", "/bin/cat"}, "x\x10");
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "x\x10");

  // Empty keys: detaching off, the sequence reaches the task.
  fake_.SetRunOutcome(Outcome(0, std::string(32, '3')));
  result = Run({"run", "-i", "--detach-keys=", "--", "/bin/cat"}, "\x10\x11");
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "\x10\x11");
}

TEST_F(AttachTest, ATaskThatEndedBeforeTheAttachShowsItsLogs) {
  // As a node whose task ended before its first attach might answer.
  fake_.SetRunOutcome(Outcome(6));
  fake_.SetAttachHandler(
      [&](grpc::ServerContext*, FakeNodeService::AttachStream*) {
        fake_.EndRun(kRunId);
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "task is not running");
      });
  nodepb::TaskLogsResponse chunk;
  chunk.set_stream(nodepb::LOG_STREAM_STDOUT);
  chunk.set_data("quick\n");
  fake_.SetLogs(kRunId, {chunk});
  CliResult result = Run({"run", "-i", "--", "/bin/echo", "quick"});
  EXPECT_EQ(result.code, 6) << result.err;
  EXPECT_EQ(result.out, "quick\n");
  EXPECT_EQ(result.err, "");
}

TEST_F(AttachTest, BadDetachKeysAreUsageErrors) {
  CliResult result =
      Run({"run", "-i", "--detach-keys", "ctrl-p,foo", "--", "/bin/sh"});
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err,
              HasSubstr("berth run: --detach-keys \"ctrl-p,foo\": \"foo\" is "
                        "not a key"));
  EXPECT_THAT(fake_.run_requests(), IsEmpty());

  fake_.AddTask(RunningTask(kWebId, "web", true, false));
  result = Run({"attach", "--detach-keys", "ctrl-1", "web"});
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err,
              HasSubstr("berth attach: --detach-keys \"ctrl-1\": \"ctrl-1\""));
  EXPECT_THAT(fake_.attach_requests(), IsEmpty());
}

TEST_F(AttachTest, RunInteractiveTtyNeedsATerminal) {
  CliResult result = Run({"run", "-it", "--", "/bin/sh"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err,
            "berth: run -i -t: stdin is not a terminal (leave out -t)\n");
  EXPECT_THAT(fake_.run_requests(), IsEmpty());
  // -it -d starts it all the same: attached to later.
  result = Run({"run", "-it", "-d", "--", "/bin/sh"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, absl::StrCat(kRunId, "\n"));
  ASSERT_EQ(fake_.run_requests().size(), 1u);
  EXPECT_TRUE(fake_.run_requests()[0].spec().stdin_open());
  EXPECT_TRUE(fake_.run_requests()[0].spec().tty());
  EXPECT_THAT(fake_.attach_requests(), IsEmpty());
}

TEST_F(AttachTest, RunWithoutInteractiveFlagsFollowsTheLogs) {
  CliResult result = Run({"run", "--", "/bin/true"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(fake_.attach_requests(), IsEmpty());
  EXPECT_FALSE(fake_.logs_requests().empty());
}

// -it on a pty: raw mode while attached, restored after; the size in the
// setup and a resize on SIGWINCH; Ctrl-D and Ctrl-C are bytes for the task.
TEST_F(AttachTest, RunTtyRawModeSizeResizeAndExitCode) {
  struct winsize size = {};
  size.ws_row = 24;
  size.ws_col = 80;
  int master = -1;
  int slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, &size), 0);
  auto canonical = [slave] {
    struct termios settings;
    tcgetattr(slave, &settings);
    return (settings.c_lflag & ICANON) != 0;
  };
  ASSERT_TRUE(canonical());
  fake_.SetRunOutcome(Outcome(4));

  std::atomic<bool> raw_during_attach{false};
  std::atomic<bool> resized{false};
  fake_.SetAttachHandler(
      [&](grpc::ServerContext*, FakeNodeService::AttachStream* stream) {
        driverpb::AttachTaskRequest request;
        if (!stream->Read(&request)) return grpc::Status::CANCELLED;
        fake_.RecordAttachRequest(request);
        raw_during_attach = !canonical();
        stream->Write(Stdout("# "));
        std::string typed;
        while (stream->Read(&request)) {
          fake_.RecordAttachRequest(request);
          if (request.has_resize()) resized = true;
          typed += request.stdin();
          if (absl::StrContains(typed, "\x04"))
            break;  // Ctrl-D: the shell ends
        }
        driverpb::AttachTaskResponse exit;
        *exit.mutable_exit() = fake_.EndRun(kRunId);
        stream->Write(exit);
        return grpc::Status::OK;
      });

  const int out = MemFile("stdout");
  const int err = MemFile("stderr");
  int code = -1;
  std::thread cli([&] {
    code = RunCli({"run", "-it", "--rm", "--", "/bin/sh"},
                  Environment(slave, out, err));
  });
  ASSERT_TRUE(berth::testing::WaitFor(
      [&] { return !fake_.attach_requests().empty(); }));
  size.ws_row = 30;
  size.ws_col = 100;
  ASSERT_EQ(ioctl(master, TIOCSWINSZ, &size), 0);
  kill(getpid(), SIGWINCH);
  ASSERT_TRUE(berth::testing::WaitFor([&] { return resized.load(); }));
  // In raw mode Ctrl-C is a byte like any other; then Ctrl-D.
  ASSERT_EQ(write(master, "ls\r\x03\x04", 5), 5);
  cli.join();

  EXPECT_EQ(code, 4) << ReadBack(err);
  EXPECT_EQ(ReadBack(out), "# ");
  EXPECT_TRUE(raw_during_attach);
  EXPECT_TRUE(canonical());  // restored
  std::vector<driverpb::AttachTaskRequest> requests = fake_.attach_requests();
  ASSERT_GE(requests.size(), 2u);
  ASSERT_TRUE(requests[0].has_setup());
  EXPECT_TRUE(requests[0].setup().stdin());
  EXPECT_EQ(requests[0].setup().terminal_size().rows(), 24u);
  EXPECT_EQ(requests[0].setup().terminal_size().columns(), 80u);
  bool saw_resize = false;
  for (const auto& request : requests) {
    if (!request.has_resize()) continue;
    saw_resize = true;
    EXPECT_EQ(request.resize().rows(), 30u);
    EXPECT_EQ(request.resize().columns(), 100u);
  }
  EXPECT_TRUE(saw_resize);
  EXPECT_EQ(SentStdin(requests), "ls\r\x03\x04");
  EXPECT_FALSE(ClosedStdin(requests));  // Ctrl-D is no end of stdin
  ASSERT_EQ(fake_.run_requests().size(), 1u);
  EXPECT_TRUE(fake_.run_requests()[0].spec().tty());
  EXPECT_EQ(fake_.remove_requests().size(), 1u);
  close(out);
  close(err);
  close(master);
  close(slave);
}

// --- berth attach

TEST_F(AttachTest, AttachPassesStdinAndExitsWithTheTasksCode) {
  fake_.AddTask(RunningTask(kWebId, "web", /*stdin_open=*/true, false));
  fake_.SetAttachScript({Stdout("new output\n")}, Exit(9));
  CliResult result = Run({"attach", "web"}, "typed\n");
  EXPECT_EQ(result.code, 9) << result.err;
  EXPECT_EQ(result.out, "new output\ntyped\n");
  std::vector<driverpb::AttachTaskRequest> requests = fake_.attach_requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests[0].setup().task_id(), kWebId);
  EXPECT_TRUE(requests[0].setup().stdin());
  EXPECT_EQ(SentStdin(requests), "typed\n");
  EXPECT_TRUE(ClosedStdin(requests));
  EXPECT_THAT(fake_.remove_requests(), IsEmpty());
}

TEST_F(AttachTest, AttachDetachKeysExitZero) {
  fake_.AddTask(RunningTask(kWebId, "web", true, false));
  CliResult result =
      RunTyped({"attach", "--detach-keys", "ctrl-x,q", "web"}, {"a", "\x18q"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(SentStdin(fake_.attach_requests()), "a");
  EXPECT_EQ(result.err,
            "berth: detached from web; berth attach web to come back\n");
  EXPECT_TRUE(
      berth::testing::WaitFor([&] { return fake_.attach_cancelled(); }));
}

TEST_F(AttachTest, AttachNoStdinOrATaskWithoutStdinIsOutputOnly) {
  fake_.AddTask(RunningTask(kWebId, "web", true, false));
  fake_.SetAttachScript({Stdout("out\n")}, Exit(0));
  CliResult result = Run({"attach", "--no-stdin", "web"}, "ignored");
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "out\n");
  EXPECT_FALSE(fake_.attach_requests()[0].setup().stdin());
  EXPECT_EQ(SentStdin(fake_.attach_requests()), "");

  fake_.AddTask(RunningTask(std::string(32, 'c'), "quiet", false, false));
  fake_.SetAttachScript({Stdout("log line\n")}, Exit(2));
  result = Run({"attach", "quiet"}, "ignored");
  EXPECT_EQ(result.code, 2) << result.err;
  EXPECT_EQ(result.out, "log line\n");
  EXPECT_FALSE(fake_.attach_requests().back().setup().stdin());
}

TEST_F(AttachTest, AttachErrorsAreOneLine) {
  nodepb::Task exited = RunningTask(kWebId, "done", true, false);
  exited.set_state(nodepb::TASK_STATE_EXITED);
  fake_.AddTask(exited);
  CliResult result = Run({"attach", "done"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err,
            absl::StrCat("berth: task ", kWebId, " is not running\n"));

  result = Run({"attach", "nope"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err, "berth: no task \"nope\"\n");

  result = Run({"attach"});
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr("a TASK is required"));
  result = Run({"attach", "a", "b"});
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr("unexpected argument \"b\""));
}

}  // namespace
}  // namespace berth::cli
