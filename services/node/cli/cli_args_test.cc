#include "services/node/cli/cli_args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace berth::cli
