// The scripts of `berth completion` run by the shells themselves: bash
// non-interactively (COMP_WORDS, COMP_CWORD and COMP_LINE set, _berth
// called, COMPREPLY read) and zsh 5.9 interactively under zpty (the line
// typed with a Tab, the matches compadd got). Task and image names come from
// a FakeNodeService through the berth binary, as a user's shell gets them.

#include "services/node/cli/completion.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "berth/image/v1/image.pb.h"
#include "berth/node/v1/node.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/node/cli/cli_test_fixture.h"
#include "services/node/cli/command_table.h"
#include "services/node/cli/fake_node_service.h"

namespace berth::cli {
namespace {

namespace nodepb = ::berth::node::v1;
using ::berth::cli::testing::FakeNodeTest;
using ::testing::Contains;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

struct ShellResult {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs `argv` with `env` (and no stdin), in `cwd`; its output. Bounded by
// timeout(1) so that a hung shell fails the test instead of stalling it.
ShellResult RunProgram(const std::vector<std::string>& argv,
                       const std::vector<std::string>& env,
                       const std::string& cwd) {
  std::vector<std::string> full = {"/usr/bin/timeout", "60"};
  full.insert(full.end(), argv.begin(), argv.end());
  int out_pipe[2];
  int err_pipe[2];
  EXPECT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(err_pipe, O_CLOEXEC), 0);
  std::vector<char*> args;
  for (std::string& arg : full) args.push_back(arg.data());
  args.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  std::vector<char*> envp;
  for (std::string& entry : env_copy) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  ShellResult result;
  // The outputs are small: stdout then stderr, each to its end.
  for (auto [fd, text] : {std::pair{out_pipe[0], &result.out},
                          std::pair{err_pipe[0], &result.err}}) {
    char buffer[4096];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) text->append(buffer, n);
    close(fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return result;
}

// ' quoted for a shell.
std::string Quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// Each of `words` as a zsh test line's result ("RESULT: a b c").
std::vector<std::string> Sorted(std::vector<std::string> words) {
  std::sort(words.begin(), words.end());
  return words;
}

class CompletionTest : public FakeNodeTest {
 protected:
  void SetUp() override {
    FakeNodeTest::SetUp();
    if (HasFatalFailure()) return;

    for (const auto& [id, name, state] :
         std::vector<std::tuple<std::string, std::string, nodepb::TaskState>>{
             {"aaaabbbbccccddddeeeeffff00001111", "web",
              nodepb::TASK_STATE_RUNNING},
             {"1234567890ab1234567890ab12345678", "db",
              nodepb::TASK_STATE_EXITED}}) {
      nodepb::Task task;
      task.set_id(id);
      task.mutable_spec()->set_name(name);
      task.set_state(state);
      fake_.AddTask(task);
    }
    for (const char* name :
         {"docker.io/library/busybox:latest", "docker.io/library/busybox:1.36",
          "registry.example:5000/team/app:1"}) {
      image::v1::Image image;
      image.set_name(name);
      image.set_config_digest(absl::StrCat("sha256:", std::string(64, 'a')));
      images_.AddImage(image);
    }

    berth_ = berth::testing::RunfilePath("services/node/cli/berth");
    for (const char* shell : {"bash", "zsh"}) {
      absl::StatusOr<std::string> script = CompletionScript(shell);
      ASSERT_TRUE(script.ok()) << script.status();
      std::ofstream(dir_.Join(absl::StrCat("berth.", shell))) << *script;
    }
    // A directory of files for the host-file cases.
    ASSERT_EQ(mkdir(dir_.Join("work").c_str(), 0755), 0);
    std::ofstream(dir_.Join("work/hostfile")) << "x";
  }

  std::vector<std::string> Environment(const std::string& socket) const {
    const std::string bin_dir = berth_.substr(0, berth_.rfind('/'));
    return {absl::StrCat("PATH=", bin_dir, ":/usr/bin:/bin"),
            absl::StrCat("BERTH_NODE_SOCKET=", socket), "HOME=" + dir_.path(),
            "TERM=xterm", "LANG=C"};
  }

  // The words bash offers for `words`, the last being completed. With
  // `line`, COMP_LINE is it (the words then split as bash splits them, at
  // ':' and '=' too).
  ShellResult Bash(const std::vector<std::string>& words,
                   const std::string& line = "",
                   const std::string& socket = "") {
    std::vector<std::string> quoted;
    for (const std::string& word : words) quoted.push_back(Quote(word));
    // The berth binary as the command word, so that the script runs it.
    quoted[0] = Quote(berth_);
    std::string script =
        absl::StrCat("source ", Quote(dir_.Join("berth.bash")), "\n",
                     "COMP_WORDS=(", absl::StrJoin(quoted, " "), ")\n",
                     "COMP_CWORD=", words.size() - 1, "\n");
    if (!line.empty()) {
      // The line as typed, with the same command word.
      absl::string_view rest = line;
      EXPECT_TRUE(absl::ConsumePrefix(&rest, words[0]));
      const std::string typed = absl::StrCat(berth_, rest);
      absl::StrAppend(&script, "COMP_LINE=", Quote(typed), "\n",
                      "COMP_POINT=", typed.size(), "\n");
    }
    absl::StrAppend(
        &script,
        "_berth\n"
        "if ((${#COMPREPLY[@]})); then printf '%s\\n' \"${COMPREPLY[@]}\"; "
        "fi\n");
    return RunProgram({"/bin/bash", "--norc", "--noprofile", "-c", script},
                      Environment(socket.empty() ? socket_path_ : socket),
                      dir_.Join("work"));
  }

  std::vector<std::string> BashWords(const std::vector<std::string>& words,
                                     const std::string& line = "") {
    ShellResult result = Bash(words, line);
    EXPECT_EQ(result.code, 0) << result.err;
    EXPECT_EQ(result.err, "");
    return Lines(result.out);
  }

  // The matches zsh offers for each of `lines` typed with a Tab, sorted.
  std::vector<std::vector<std::string>> Zsh(
      const std::vector<std::string>& lines) {
    std::ofstream(dir_.Join("driver.zsh")) << kZshDriver;
    std::vector<std::string> argv = {
        "/usr/bin/zsh", "-f", dir_.Join("driver.zsh"), dir_.Join("berth.zsh")};
    argv.insert(argv.end(), lines.begin(), lines.end());
    ShellResult result =
        RunProgram(argv, Environment(socket_path_), dir_.Join("work"));
    EXPECT_EQ(result.code, 0) << result.out << result.err;
    std::vector<std::vector<std::string>> matches;
    for (const std::string& line : Lines(result.out)) {
      absl::string_view rest = line;
      if (!absl::ConsumePrefix(&rest, "RESULT:")) continue;
      matches.push_back(
          Sorted(absl::StrSplit(rest, ' ', absl::SkipWhitespace())));
    }
    EXPECT_EQ(matches.size(), lines.size()) << result.out << result.err;
    matches.resize(lines.size());
    return matches;
  }

  // Types each line and a Tab in an interactive zsh under zpty, with the
  // script loaded after compinit, and prints what compadd was given. Each
  // wait runs until the prompt after the sentinel: typed before zle is back,
  // the line would meet the tty in cooked mode, where ^U erases it unseen.
  static constexpr char kZshDriver[] = R"zsh(
zmodload zsh/zpty || exit 3
script=$1; shift
zpty z zsh -f -i
zpty -w z "PS1='Z''P> '; bindkey -e; autoload -Uz compinit; compinit -u -D; source ${(q)script}"
zpty -w z 'compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
  local -a hits; builtin compadd -A hits "$@"; local ret=$?
  local hit; for hit in $hits; do print -rn -- "<<$hit>>"; done
  return ret
}'
zpty -w z 'print -r -- ZZ${x}READY'
zpty -r -m z out '*ZZREADY*ZP> *' || exit 4
for line in "$@"; do
  zpty -w -n z "$line"$'\t'
  zpty -w z $'\C-e\C-u''print -r -- ZZ${x}END'
  zpty -r -m z out '*ZZEND*ZP> *' || exit 5
  matches=(${(f)"$(print -r -- $out | grep -o '<<[^>]*>>' | sed 's/^<<//; s/>>$//')"})
  print -r -- "RESULT: ${(j: :)${(u)matches}}"
done
zpty -d z
)zsh";

  std::string berth_;
};

// --- The generator.

TEST(PositionalsTest, FromTheSynopsis) {
  const Positionals run = PositionalsOf(*FindCommand("run"));
  EXPECT_THAT(run.kinds,
              ElementsAre(ArgKind::kImage, ArgKind::kFile, ArgKind::kFile));
  EXPECT_TRUE(run.last_repeats);
  EXPECT_TRUE(run.dash_dash_command);
  const Positionals stop = PositionalsOf(*FindCommand("stop"));
  EXPECT_THAT(stop.kinds, ElementsAre(ArgKind::kTask));
  EXPECT_TRUE(stop.last_repeats);
  EXPECT_FALSE(stop.dash_dash_command);
  const Positionals logs = PositionalsOf(*FindCommand("logs"));
  EXPECT_THAT(logs.kinds, ElementsAre(ArgKind::kTask));
  EXPECT_FALSE(logs.last_repeats);
  EXPECT_THAT(PositionalsOf(*FindCommand("exec")).kinds,
              ElementsAre(ArgKind::kTask, ArgKind::kFile, ArgKind::kFile));
  EXPECT_THAT(PositionalsOf(*FindCommand("image tag")).kinds,
              ElementsAre(ArgKind::kImage, ArgKind::kNone));
  EXPECT_THAT(PositionalsOf(*FindCommand("image import")).kinds,
              ElementsAre(ArgKind::kFile));
  EXPECT_THAT(PositionalsOf(*FindCommand("ps")).kinds, IsEmpty());
  const Positionals completion = PositionalsOf(*FindCommand("completion"));
  EXPECT_THAT(completion.kinds, ElementsAre(ArgKind::kWord));
  EXPECT_THAT(completion.words, ElementsAre("bash", "zsh"));
}

TEST(CompletionScriptTest, EveryCommandAndFlagIsInBothScripts) {
  const std::string bash = *CompletionScript("bash");
  const std::string zsh = *CompletionScript("zsh");
  for (const CommandInfo& command : Commands()) {
    EXPECT_THAT(bash,
                ::testing::HasSubstr(absl::StrCat("'", command.name, "')")));
    for (const FlagSpec& flag : command.flags) {
      const std::string form = absl::StrCat("--", flag.name);
      EXPECT_THAT(bash, ::testing::HasSubstr(absl::StrCat("['", form, "']")))
          << command.name << " " << form;
      EXPECT_THAT(zsh, ::testing::HasSubstr(form))
          << command.name << " " << form;
    }
  }
  EXPECT_FALSE(CompletionScript("fish").ok());
}

TEST_F(CompletionTest, ScriptsAreValidShell) {
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"/bin/bash", "-n", dir_.Join("berth.bash")},
           {"/usr/bin/zsh", "-n", dir_.Join("berth.zsh")}}) {
    ShellResult result =
        RunProgram(argv, Environment(socket_path_), dir_.path());
    EXPECT_EQ(result.code, 0) << argv[0] << ": " << result.err;
    EXPECT_EQ(result.err, "");
  }
}

// --- bash.

TEST_F(CompletionTest, BashCommands) {
  std::vector<std::string> all = BashWords({"berth", ""});
  for (const char* word : {"run", "ps", "attach", "completion", "image", "node",
                           "images", "pull", "rmi", "help"}) {
    EXPECT_THAT(all, Contains(word));
  }
  EXPECT_THAT(BashWords({"berth", "r"}), ElementsAre("run", "rm", "rmi"));
  EXPECT_THAT(BashWords({"berth", "image", "i"}),
              ElementsAre("import", "inspect"));
  EXPECT_THAT(BashWords({"berth", "node", ""}), ElementsAre("status"));
  EXPECT_THAT(BashWords({"berth", "help", "image", "p"}),
              ElementsAre("pull", "prune"));
  EXPECT_THAT(BashWords({"berth", "--socket", "/x", "st"}),
              ElementsAre("stats", "stop"));
  EXPECT_THAT(BashWords({"berth", "--v"}), ElementsAre("--version"));
  EXPECT_THAT(BashWords({"berth", "completion", ""}),
              ElementsAre("bash", "zsh"));
}

TEST_F(CompletionTest, BashFlagsAndTheirValues) {
  std::vector<std::string> health = BashWords({"berth", "run", "--he"});
  EXPECT_THAT(health, Contains("--health-cmd"));
  EXPECT_THAT(health, Contains("--health-interval"));
  EXPECT_THAT(health, Contains("--help"));
  EXPECT_THAT(health, Each(StartsWith("--he")));
  EXPECT_THAT(BashWords({"berth", "ps", "--f"}),
              ElementsAre("--filter", "--format"));
  EXPECT_THAT(BashWords({"berth", "images", "--d"}), ElementsAre("--digests"));
  EXPECT_THAT(BashWords({"berth", "run", "--pull", ""}),
              ElementsAre("missing", "always", "never"));
  EXPECT_THAT(BashWords({"berth", "ps", "-f", "health=u"}),
              ElementsAre("health=unhealthy"));
  // As bash splits them: "--pull" "=" "a", the words after '=' replaced.
  EXPECT_THAT(
      BashWords({"berth", "run", "--pull", "=", "a"}, "berth run --pull=a"),
      ElementsAre("always"));
  EXPECT_THAT(BashWords({"berth", "ps", "--filter", "status", "=", "ex"},
                        "berth ps --filter status=ex"),
              ElementsAre("exited"));
  // A FILE value: the host's files.
  EXPECT_THAT(BashWords({"berth", "run", "--env-file", "host"}),
              ElementsAre("hostfile"));
  // After the first argument of run and exec come the command's own words.
  EXPECT_THAT(BashWords({"berth", "run", "-d", "busybox", "--he"}), IsEmpty());
}

TEST_F(CompletionTest, BashTaskNamesFromTheNode) {
  EXPECT_THAT(BashWords({"berth", "stop", ""}), ElementsAre("web", "db"));
  EXPECT_THAT(BashWords({"berth", "stop", "web", "d"}), ElementsAre("db"));
  EXPECT_THAT(BashWords({"berth", "logs", "--tail", "5", "w"}),
              ElementsAre("web"));
  // logs takes one TASK; exec's command follows its TASK.
  EXPECT_THAT(BashWords({"berth", "logs", "web", ""}), IsEmpty());
  EXPECT_THAT(BashWords({"berth", "exec", "-it", ""}),
              ElementsAre("web", "db"));
  EXPECT_THAT(BashWords({"berth", "exec", "-it", "web", "host"}),
              ElementsAre("hostfile"));
  EXPECT_THAT(BashWords({"berth", "attach", "--no-stdin", "w"}),
              ElementsAre("web"));
  // ps -a --format '{{.Names}}' was what the script asked.
  ASSERT_FALSE(fake_.list_requests().empty());
  EXPECT_TRUE(fake_.list_requests().back().all());
}

TEST_F(CompletionTest, BashImageNamesFromTheNode) {
  EXPECT_THAT(BashWords({"berth", "run", ""}),
              ElementsAre("busybox:1.36", "busybox:latest",
                          "registry.example:5000/team/app:1"));
  // A flag's value is skipped: 64m is not the image.
  EXPECT_THAT(BashWords({"berth", "run", "-m", "64m", "-it", "bu"}),
              ElementsAre("busybox:1.36", "busybox:latest"));
  EXPECT_THAT(BashWords({"berth", "rmi", "reg"}),
              ElementsAre("registry.example:5000/team/app:1"));
  EXPECT_THAT(BashWords({"berth", "image", "tag", "b"}),
              ElementsAre("busybox:1.36", "busybox:latest"));
  EXPECT_THAT(BashWords({"berth", "image", "tag", "busybox", ""}), IsEmpty());
  // bash splits "busybox:l" at ':': what follows it is replaced.
  EXPECT_THAT(BashWords({"berth", "image", "inspect", "busybox", ":", "l"},
                        "berth image inspect busybox:l"),
              ElementsAre("latest"));
  EXPECT_THAT(BashWords({"berth", "run", "busybox", ":"}, "berth run busybox:"),
              ElementsAre("1.36", "latest"));
  // run -- COMMAND runs a host command: files, not images.
  EXPECT_THAT(BashWords({"berth", "run", "--rm", "--", "host"}),
              ElementsAre("hostfile"));
}

TEST_F(CompletionTest, BashIsQuietWhenTheNodeIsDown) {
  ShellResult result =
      Bash({"berth", "stop", ""}, "", dir_.Join("nothing.sock"));
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "");
  // The line's --socket is passed on.
  ShellResult with_socket =
      Bash({"berth", "--socket", socket_path_, "stop", "w"}, "",
           dir_.Join("nothing.sock"));
  EXPECT_EQ(with_socket.out, "web\n") << with_socket.err;
}

// --- zsh.

TEST_F(CompletionTest, ZshLoadsUnderCompinit) {
  ShellResult result = RunProgram(
      {"/usr/bin/zsh", "-f", "-c",
       absl::StrCat("autoload -Uz compinit && compinit -u -D && source ",
                    Quote(dir_.Join("berth.zsh")),
                    " && print -r -- ${_comps[berth]} "
                    "${+functions[_berth_command]}")},
      Environment(socket_path_), dir_.path());
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "_berth 1\n");
  EXPECT_EQ(result.err, "");
}

TEST_F(CompletionTest, ZshCompletesInATerminal) {
  const std::vector<std::vector<std::string>> matches = Zsh({
      "berth r",
      "berth run --health-r",
      "berth stop ",
      "berth image rm bu",
      "berth image ",
      "berth ps --filter=health=u",
      "berth completion ",
  });
  EXPECT_THAT(matches[0], ElementsAre("rm", "rmi", "run"));
  EXPECT_THAT(matches[1], ElementsAre("--health-retries"));
  EXPECT_THAT(matches[2], ElementsAre("db", "web"));
  EXPECT_THAT(matches[3], ElementsAre("busybox:1.36", "busybox:latest"));
  EXPECT_THAT(matches[4],
              UnorderedElementsAre("import", "inspect", "list", "ls", "prune",
                                   "pull", "remove", "rm", "tag"));
  EXPECT_THAT(matches[5], ElementsAre("health=unhealthy"));
  EXPECT_THAT(matches[6], ElementsAre("bash", "zsh"));
}

}  // namespace
}  // namespace berth::cli
