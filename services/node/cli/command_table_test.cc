#include "services/node/cli/command_table.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

using ::testing::HasSubstr;
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

}  // namespace
}  // namespace berth::cli
