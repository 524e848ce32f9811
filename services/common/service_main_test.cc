// Tests of InitService and WaitForShutdownSignal through example_server, a
// service in miniature, run as a child process.

#include "services/common/service_main.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

extern char** environ;

namespace berth {
namespace {

using ::berth::testing::FileMode;
using ::berth::testing::PathExists;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ExampleServer() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/",
                      workspace ? workspace : "berth",
                      "/services/common/example_server");
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// example_server running with its stdout and stderr in files.
class Child {
 public:
  Child(const ShortTempDir& dir, const std::vector<std::string>& args) {
    static int serial = 0;
    ++serial;
    stdout_path_ = dir.Join(absl::StrCat("stdout.", serial));
    stderr_path_ = dir.Join(absl::StrCat("stderr.", serial));
    std::vector<std::string> argv_storage = {ExampleServer()};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : argv_storage) argv.push_back(arg.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, stdout_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    // A clean signal state, whatever this test process has.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const int error =
        posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    EXPECT_EQ(error, 0) << argv[0] << ": " << std::strerror(error);
    if (error != 0) pid_ = -1;
  }

  ~Child() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Whether it is still running (reaps it if not).
  bool Running() {
    if (pid_ <= 0 || exited_) return false;
    if (waitpid(pid_, &wait_status_, WNOHANG) == pid_) exited_ = true;
    return !exited_;
  }

  // Waits (bounded) for it to exit; returns its exit code, or -1 after a
  // signal or if it did not exit.
  int Wait() {
    if (!WaitFor([this] { return !Running(); })) {
      ADD_FAILURE() << "example_server did not exit";
      return -1;
    }
    return WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : -1;
  }

  // Waits (bounded) until stderr contains `text`, while it runs.
  bool WaitForStderr(const std::string& text) {
    return WaitFor([&] {
             return absl::StrContains(ReadFile(stderr_path_), text) ||
                    !Running();
           }) &&
           absl::StrContains(ReadFile(stderr_path_), text);
  }

  void Signal(int signal) { ASSERT_EQ(kill(pid_, signal), 0); }

  std::string Stdout() const { return ReadFile(stdout_path_); }
  std::string Stderr() const { return ReadFile(stderr_path_); }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int wait_status_ = 0;
  std::string stdout_path_;
  std::string stderr_path_;
};

TEST(ServiceMainTest, HelpExitsZeroAndPrintsUsage) {
  ShortTempDir dir;
  for (const char* flag : {"--help", "-h"}) {
    SCOPED_TRACE(flag);
    Child child(dir, {flag});
    EXPECT_EQ(child.Wait(), 0) << child.Stderr();
    EXPECT_THAT(child.Stdout(),
                AllOf(HasSubstr("usage: example_server --socket=PATH"),
                      HasSubstr("--socket"), HasSubstr("--grace"),
                      HasSubstr("--verbosity"), Not(HasSubstr("--flagfile"))));
  }
}

TEST(ServiceMainTest, HelpfullExitsZeroAndListsAllFlags) {
  ShortTempDir dir;
  Child child(dir, {"--helpfull"});
  EXPECT_EQ(child.Wait(), 0) << child.Stderr();
  EXPECT_THAT(child.Stdout(),
              AllOf(HasSubstr("--socket"), HasSubstr("--flagfile")));
}

TEST(ServiceMainTest, VersionExitsZero) {
  ShortTempDir dir;
  Child child(dir, {"--version"});
  EXPECT_EQ(child.Wait(), 0) << child.Stderr();
  EXPECT_EQ(child.Stdout(), "example_server 0.1.0\n");
}

TEST(ServiceMainTest, DashesInFlagNamesAreUnderscores) {
  ShortTempDir dir;
  Child child(dir, {"--only-check-args", "--socket=/run/x-y.sock"});
  EXPECT_EQ(child.Wait(), 0) << child.Stderr();
}

TEST(ServiceMainTest, BadUsageExitsNonZero) {
  ShortTempDir dir;
  Child unknown(dir, {"--no-such-flag"});
  EXPECT_NE(unknown.Wait(), 0);
  EXPECT_THAT(unknown.Stderr(), HasSubstr("no_such_flag"));

  Child no_socket(dir, {});
  EXPECT_EQ(no_socket.Wait(), 2);
  EXPECT_THAT(no_socket.Stderr(), HasSubstr("--socket is required"));

  Child positional(dir, {"--socket", dir.Join("s.sock"), "extra"});
  EXPECT_EQ(positional.Wait(), 2);
  EXPECT_THAT(positional.Stderr(), HasSubstr("extra"));
}

// A value a client supplies, logged: its newline cannot forge a second log
// line, nor its ESC reach a terminal; the line keeps glog's prefix.
TEST(ServiceMainTest, ControlCharactersInALoggedValueAreEscaped) {
  ShortTempDir dir;
  Child child(dir,
              {"--socket", dir.Join("s.sock"),
               "x\nE1202 00:00:00.000000 1 forged.cc:1] forged\r\x1b[31m"});
  EXPECT_EQ(child.Wait(), 2);
  const std::string err = child.Stderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
  EXPECT_THAT(err,
              ::testing::MatchesRegex(
                  "E[0-9]+ [0-9:.]+ +[0-9]+ example_server_main.cc:[0-9]+\\] "
                  "unexpected argument .*\n"));
  EXPECT_THAT(err, HasSubstr("unexpected argument x\\nE1202 00:00:00.000000 1 "
                             "forged.cc:1] forged\\r\\x1b[31m; see --help\n"));
}

TEST(EscapeControlCharactersTest, EscapesWhatCouldEndALineOrDriveATerminal) {
  using internal::EscapeControlCharacters;
  EXPECT_EQ(EscapeControlCharacters("plain text: a-b_c /x=1"),
            "plain text: a-b_c /x=1");
  EXPECT_EQ(EscapeControlCharacters("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeControlCharacters("\x1b[2J\x7f"), "\\x1b[2J\\x7f");
  EXPECT_EQ(EscapeControlCharacters(std::string("a\0b", 3)), "a\\x00b");
  // Valid UTF-8 stays; C1 controls (CSI is U+009B) and stray bytes do not.
  EXPECT_EQ(
      EscapeControlCharacters("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(EscapeControlCharacters("\xc2\x9b"
                                    "31m"),
            "\\u009b31m");
  EXPECT_EQ(EscapeControlCharacters("\x9b\xff\xc3"), "\\x9b\\xff\\xc3");
  // Overlong and surrogate forms are not UTF-8.
  EXPECT_EQ(EscapeControlCharacters("\xc0\x8a"), "\\xc0\\x8a");
  EXPECT_EQ(EscapeControlCharacters("\xed\xa0\x80"), "\\xed\\xa0\\x80");
}

class ServeUntilSignalTest : public ::testing::TestWithParam<int> {};

TEST_P(ServeUntilSignalTest, ServesThenShutsDownCleanly) {
  const int signal = GetParam();
  ShortTempDir dir;
  const std::string socket = dir.Join("run/berth/ex.sock");
  Child server(dir, {"--socket", socket, "--grace=2s"});
  ASSERT_TRUE(server.WaitForStderr("serving on " + socket)) << server.Stderr();

  struct stat st = {};
  ASSERT_EQ(lstat(socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600);
  EXPECT_EQ(FileMode(dir.Join("run")), 0750);
  EXPECT_EQ(FileMode(dir.Join("run/berth")), 0750);

  // A second instance on the same socket fails, naming it, and takes nothing.
  Child second(dir, {"--socket=" + socket});
  EXPECT_NE(second.Wait(), 0);
  EXPECT_THAT(second.Stderr(),
              AllOf(HasSubstr(socket), HasSubstr("in use by another process")));
  struct stat after = {};
  ASSERT_EQ(lstat(socket.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, st.st_ino);
  EXPECT_TRUE(server.Running());

  server.Signal(signal);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
  EXPECT_FALSE(PathExists(socket));
  EXPECT_THAT(
      server.Stderr(),
      HasSubstr(signal == SIGTERM ? "received SIGTERM" : "received SIGINT"));
}

INSTANTIATE_TEST_SUITE_P(Signals, ServeUntilSignalTest,
                         ::testing::Values(SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGTERM ? "SIGTERM" : "SIGINT";
                         });

std::vector<std::string> Normalize(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  std::vector<char*> result = internal::NormalizeFlagSpellings(
      static_cast<int>(argv.size()), argv.data());
  return std::vector<std::string>(result.begin(), result.end());
}

TEST(NormalizeFlagSpellingsTest, RewritesOnlyFlagNames) {
  EXPECT_THAT(Normalize({"/bin/x-y", "--foo-bar=a-b", "-one-dash", "--no-thing",
                         "--plain", "pos-arg", "-", "-h", "--",
                         "--after-dashes", "-h"}),
              ElementsAre("/bin/x-y", "--foo_bar=a-b", "-one_dash",
                          "--no_thing", "--plain", "pos-arg", "-", "--help",
                          "--", "--after-dashes", "-h"));
}

}  // namespace
}  // namespace berth
