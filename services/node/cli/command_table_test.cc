#include "services/node/cli/command_table.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/node/cli/cli_args.h"

namespace berth::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(CommandTableTest, EveryCommandIsFoundListedAndHasHelp) {
  std::set<std::string> names;
  const std::string top = TopUsage();
  for (const CommandInfo& command : Commands()) {
    EXPECT_TRUE(names.insert(command.name).second)
        << command.name << " is in the table twice";
    EXPECT_EQ(FindCommand(command.name), &command) << command.name;
    // `berth --help` has a line for it, which a command added to the table
    // alone would lack.
    EXPECT_THAT(top, HasSubstr(absl::StrCat("\n  ", command.name, " ")))
        << command.name;
    const std::string usage = CommandUsage(command);
    EXPECT_THAT(usage, StartsWith(absl::StrCat("usage: berth ", command.name,
                                               " ", command.synopsis, "\n")));
    EXPECT_THAT(usage, HasSubstr(command.description));
    EXPECT_THAT(usage, HasSubstr("-h, --help")) << command.name;
  }
  EXPECT_EQ(names.size(), 19);
}

TEST(CommandTableTest, DockerSpellingsAreAliases) {
  EXPECT_EQ(FindCommand("images"), FindCommand("image ls"));
  EXPECT_EQ(FindCommand("image list"), FindCommand("image ls"));
  EXPECT_EQ(FindCommand("pull"), FindCommand("image pull"));
  EXPECT_EQ(FindCommand("rmi"), FindCommand("image rm"));
  EXPECT_NE(FindCommand("rmi"), nullptr);
  EXPECT_THAT(CommandUsage(*FindCommand("rmi")),
              HasSubstr("Aliases: berth rmi, berth image remove"));
}

TEST(CommandTableTest, ImageGroupListsItsCommands) {
  EXPECT_TRUE(IsCommandGroup("image"));
  EXPECT_FALSE(IsCommandGroup("node"));
  const std::string usage = GroupUsage("image");
  EXPECT_THAT(usage, StartsWith("usage: berth image COMMAND"));
  for (const CommandInfo& command : Commands()) {
    if (command.name.rfind("image ", 0) != 0) continue;
    EXPECT_THAT(usage,
                HasSubstr(absl::StrCat(
                    "\n  ", command.name.substr(sizeof("image ") - 1), " ")))
        << command.name;
  }
}

TEST(CommandTableTest, UnknownNamesAreNotFound) {
  EXPECT_EQ(FindCommand("frob"), nullptr);
  EXPECT_EQ(FindCommand("node"), nullptr);   // only "node status" is
  EXPECT_EQ(FindCommand("image"), nullptr);  // a group
  EXPECT_EQ(FindCommand(""), nullptr);
}

TEST(CommandTableTest, RunHelpIsGroupedAsDockers) {
  const CommandInfo* run = FindCommand("run");
  ASSERT_NE(run, nullptr);
  const std::string usage = CommandUsage(*run);
  // The headings in order, and no flat "Flags:" list.
  size_t at = 0;
  for (const char* heading :
       {"\n\nOptions:\n", "\n\nTerminal:\n", "\n\nImage:\n", "\n\nResources:\n",
        "\n\nNetwork:\n", "\n\nMounts:\n", "\n\nSecurity:\n",
        "\n\nHealth:\n"}) {
    const size_t found = usage.find(heading, at);
    ASSERT_NE(found, std::string::npos) << heading << " in\n" << usage;
    at = found + 1;
  }
  EXPECT_THAT(usage, Not(HasSubstr("Flags:")));
  // A flag under its group, docker's spelling with berth's as its alias.
  const size_t resources = usage.find("\nResources:\n");
  const size_t network = usage.find("\nNetwork:\n");
  const size_t cpus = usage.find("--cpus=CPUS");
  EXPECT_LT(resources, cpus);
  EXPECT_LT(cpus, network);
  EXPECT_THAT(usage, HasSubstr("(alias --cpu)\n"));
  EXPECT_THAT(usage, HasSubstr("(alias --pids)\n"));
  EXPECT_THAT(usage, HasSubstr("(alias --net)\n"));
  EXPECT_THAT(usage, HasSubstr("  -i, --interactive "));
  EXPECT_THAT(usage, HasSubstr("  -t, --tty "));
  EXPECT_THAT(usage, HasSubstr("      --hostname=NAME "));
  EXPECT_THAT(usage, HasSubstr("no -h, which is --help here"));
  EXPECT_THAT(usage, HasSubstr("      --init "));
  EXPECT_THAT(usage, HasSubstr("      --ulimit=NAME=SOFT[:HARD] "));
  // Other commands keep one flat list.
  EXPECT_THAT(CommandUsage(*FindCommand("logs")), HasSubstr("\n\nFlags:\n"));
}

TEST(CommandTableTest, AttachCompletionAndPsFlags) {
  const CommandInfo* attach = FindCommand("attach");
  ASSERT_NE(attach, nullptr);
  std::vector<std::string> names;
  for (const FlagSpec& flag : attach->flags) names.push_back(flag.name);
  EXPECT_THAT(names, ElementsAre("detach-keys", "no-stdin", "help"));
  EXPECT_THAT(CommandUsage(*attach),
              StartsWith("usage: berth attach [FLAGS] TASK\n"));
  const CommandInfo* completion = FindCommand("completion");
  ASSERT_NE(completion, nullptr);
  EXPECT_THAT(CommandUsage(*completion),
              StartsWith("usage: berth completion bash|zsh\n"));
  const CommandInfo* ps = FindCommand("ps");
  ASSERT_NE(ps, nullptr);
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(ps->flags,
                {"-f", "label=tier=web", "--filter", "status=running",
                 "--format", "{{.ID}}", "-aq", "--json"},
                ps->mode);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->Values("filter"),
              ElementsAre("label=tier=web", "status=running"));
  EXPECT_EQ(parsed->Value("format"), "{{.ID}}");
  EXPECT_TRUE(parsed->Has("all"));
  EXPECT_TRUE(parsed->Has("quiet"));
  EXPECT_TRUE(parsed->Has("json"));
  // run and attach share --detach-keys.
  bool run_has_detach_keys = false;
  for (const FlagSpec& flag : FindCommand("run")->flags) {
    if (flag.name == "detach-keys") run_has_detach_keys = true;
  }
  EXPECT_TRUE(run_has_detach_keys);
}

}  // namespace
}  // namespace berth::cli
