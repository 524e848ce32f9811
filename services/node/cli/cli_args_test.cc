#include "services/node/cli/cli_args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<FlagSpec> kSpecs = {
    {"name", 0, "NAME", "name"},
    {"env", 'e', "K=V", "env", true},
    {"interactive", 'i', "", "stdin"},
    {"tty", 't', "", "tty"},
    {"publish", 'p', "PORTS", "ports", true},
    {"help", 'h', "", "help"},
};

TEST(ParseArgsTest, LongFlagsWithEqualsOrSeparateValue) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(kSpecs, {"--name=web", "--env", "A=1", "x"},
                PositionalMode::kInterspersed);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Value("name"), "web");
  EXPECT_THAT(parsed->Values("env"), ElementsAre("A=1"));
  EXPECT_THAT(parsed->positional, ElementsAre("x"));
}

TEST(ParseArgsTest, ShortClusterAndAttachedValue) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(kSpecs, {"-it", "-p8080:80", "-e", "B=2", "-eC=3"},
                PositionalMode::kInterspersed);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->Has("interactive"));
  EXPECT_TRUE(parsed->Has("tty"));
  EXPECT_THAT(parsed->Values("publish"), ElementsAre("8080:80"));
  EXPECT_THAT(parsed->Values("env"), ElementsAre("B=2", "C=3"));
}

TEST(ParseArgsTest, NonRepeatedFlagKeepsTheLastValue) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(
      kSpecs, {"--name", "a", "--name", "b"}, PositionalMode::kInterspersed);
  ASSERT_TRUE(parsed.ok());
  EXPECT_THAT(parsed->Values("name"), ElementsAre("b"));
}

TEST(ParseArgsTest, StopAtFirstKeepsTheCommandsFlags) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(kSpecs, {"-i", "/bin/sh", "-c", "echo --name"},
                PositionalMode::kStopAtFirst);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->Has("interactive"));
  EXPECT_FALSE(parsed->Has("name"));
  EXPECT_THAT(parsed->positional, ElementsAre("/bin/sh", "-c", "echo --name"));
}

TEST(ParseArgsTest, DoubleDashEndsFlags) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(
      kSpecs, {"web", "--", "--help", "-x"}, PositionalMode::kInterspersed);
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->Has("help"));
  EXPECT_THAT(parsed->positional, ElementsAre("web", "--help", "-x"));
  EXPECT_EQ(parsed->positional_before_dash_dash, 1u);
}

// Where "--" was: `berth run -- CMD` (none before it) against
// `berth run IMAGE CMD` (no "--" ending the flags at all).
TEST(ParseArgsTest, CountsThePositionalArgumentsBeforeDoubleDash) {
  absl::StatusOr<ParsedArgs> first = ParseArgs(
      kSpecs, {"-i", "--", "/bin/sh", "--"}, PositionalMode::kStopAtFirst);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->positional_before_dash_dash, 0u);
  EXPECT_THAT(first->positional, ElementsAre("/bin/sh", "--"));
  absl::StatusOr<ParsedArgs> none = ParseArgs(
      kSpecs, {"-i", "busybox", "--", "ls"}, PositionalMode::kStopAtFirst);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->positional_before_dash_dash, std::nullopt);
  EXPECT_THAT(none->positional, ElementsAre("busybox", "--", "ls"));
}

TEST(ParseArgsTest, ErrorsNameTheFlag) {
  EXPECT_THAT(
      std::string(ParseArgs(kSpecs, {"--nope"}, PositionalMode::kInterspersed)
                      .status()
                      .message()),
      HasSubstr("unknown flag --nope"));
  EXPECT_THAT(
      std::string(ParseArgs(kSpecs, {"-iz"}, PositionalMode::kInterspersed)
                      .status()
                      .message()),
      HasSubstr("unknown flag -z in -iz"));
  EXPECT_THAT(
      std::string(ParseArgs(kSpecs, {"--name"}, PositionalMode::kInterspersed)
                      .status()
                      .message()),
      HasSubstr("flag --name needs a value"));
  EXPECT_THAT(std::string(ParseArgs(kSpecs, {"--tty=yes"},
                                    PositionalMode::kInterspersed)
                              .status()
                              .message()),
              HasSubstr("flag --tty takes no value"));
}

TEST(FormatFlagHelpTest, ListsEveryFlagAligned) {
  const std::string help = FormatFlagHelp(kSpecs);
  EXPECT_THAT(help, HasSubstr("  -e, --env=K=V"));
  EXPECT_THAT(help, HasSubstr("      --name=NAME"));
  EXPECT_THAT(help, HasSubstr("  -h, --help"));
}

const std::vector<FlagSpec> kAliasSpecs = {
    {"cpus", 0, "CPUS", "CPU limit", false, {"cpu"}, "Resources"},
    {"pids-limit",
     0,
     "N",
     "Processes",
     false,
     {"pids", "max-pids"},
     "Resources"},
    {"name", 0, "NAME", "Task name", false, {}, "Options"},
    {"env", 'e', "K=V", "env", true, {"environment"}, "Options"},
    {"help", 'h', "", "help"},
};

TEST(ParseArgsTest, AnAliasIsTheSameFlag) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(
      kAliasSpecs, {"--cpu=2", "--pids", "10", "--environment", "A=1", "-eB=2"},
      PositionalMode::kInterspersed);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Value("cpus"), "2");
  EXPECT_FALSE(parsed->Has("cpu"));
  EXPECT_EQ(parsed->Value("pids-limit"), "10");
  // A repeated flag keeps the values of both spellings, in order.
  EXPECT_THAT(parsed->Values("env"), ElementsAre("A=1", "B=2"));
  EXPECT_EQ(parsed->FlagName("cpus"), "--cpu");
  EXPECT_EQ(parsed->FlagName("pids-limit"), "--pids");
  EXPECT_EQ(parsed->FlagName("name"), "--name");
}

TEST(ParseArgsTest, TheLastSpellingIsTheOneNamed) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(kAliasSpecs, {"--cpu", "1", "--cpus", "3", "--max-pids=4"},
                PositionalMode::kInterspersed);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->Values("cpus"), ElementsAre("3"));
  EXPECT_EQ(parsed->FlagName("cpus"), "--cpus");
  EXPECT_EQ(parsed->FlagName("pids-limit"), "--max-pids");
}

TEST(ParseArgsTest, AliasErrorsNameTheSpellingTyped) {
  EXPECT_EQ(ParseArgs(kAliasSpecs, {"--cpu"}, PositionalMode::kInterspersed)
                .status()
                .message(),
            "flag --cpu needs a value (CPUS)");
  EXPECT_EQ(ParseArgs(kAliasSpecs, {"--cpux=1"}, PositionalMode::kInterspersed)
                .status()
                .message(),
            "unknown flag --cpux");
}

TEST(FormatFlagHelpTest, AliasesFollowTheHelp) {
  const std::string help = FormatFlagHelp(kAliasSpecs);
  EXPECT_THAT(help, HasSubstr("--cpus=CPUS"));
  EXPECT_THAT(help, HasSubstr("CPU limit (alias --cpu)\n"));
  EXPECT_THAT(help, HasSubstr("Processes (alias --pids, --max-pids)\n"));
  EXPECT_THAT(help, Not(HasSubstr("--cpu=")));
}

TEST(FormatFlagHelpTest, GroupsInTheOrderOfTheirFirstFlag) {
  EXPECT_EQ(FormatFlagHelp(kAliasSpecs),
            "Resources:\n"
            "      --cpus=CPUS      CPU limit (alias --cpu)\n"
            "      --pids-limit=N   Processes (alias --pids, --max-pids)\n"
            "\n"
            "Options:\n"
            "      --name=NAME      Task name\n"
            "  -e, --env=K=V        env (alias --environment)\n"
            "\n"
            "Flags:\n"
            "  -h, --help           help\n");
  // Without groups: no headings, as before.
  EXPECT_EQ(
      FormatFlagHelp({{"all", 'a', "", "Every task"}, {"json", 0, "", "JSON"}}),
      "  -a, --all    Every task\n"
      "      --json   JSON\n");
}

}  // namespace
}  // namespace berth::cli
