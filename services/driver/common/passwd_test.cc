#include "services/driver/common/passwd.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::driver_common {
namespace {

using std::string_literals::operator""s;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PasswdTest, IdsAreDecimalDigitsBelowMinusOne) {
  EXPECT_EQ(ParseId("0"), 0u);
  EXPECT_EQ(ParseId("0042"), 42u);
  EXPECT_EQ(ParseId("4294967294"), 4294967294u);
  for (const char* bad :
       {"", "4294967295", "4294967296", "99999999999", "18446744073709551617",
        "-1", "+1", " 1", "1 ", "0x10", "1e3", "12a"}) {
    EXPECT_FALSE(ParseId(bad).has_value()) << bad;
  }
  // A name, a uid, and digits that no uid is.
  EXPECT_EQ(*NumericId("app", "user"), std::nullopt);
  EXPECT_EQ(*NumericId("1000", "user"), 1000u);
  absl::StatusOr<std::optional<uint32_t>> minus_one =
      NumericId("4294967295", "user");
  EXPECT_TRUE(absl::IsInvalidArgument(minus_one.status()));
  EXPECT_THAT(minus_one.status().message(),
              HasSubstr("user: 4294967295 is not an id"));
}

TEST(PasswdTest, ParsesPasswdLines) {
  std::optional<PasswdEntry> entry =
      ParsePasswdLine("app:x:1000:1001:App User,,,:/home/app:/bin/sh");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->name, "app");
  EXPECT_EQ(entry->uid, 1000u);
  EXPECT_EQ(entry->gid, 1001u);
  EXPECT_EQ(entry->home, "/home/app");
  // Four fields are enough; no home is "/".
  entry = ParsePasswdLine("min:x:7:8");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->home, "/");
  EXPECT_EQ(ParsePasswdLine("e:x:7:8::::")->home, "/");
  // A file written on Windows.
  EXPECT_EQ(ParsePasswdLine("w:x:1:2::/w:/bin/sh\r")->name, "w");
  // The shell is the rest of the line: a ':' in it moves nothing.
  entry = ParsePasswdLine("s:x:1:2:g:/h:/bin/sh:-c:x");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->home, "/h");
}

TEST(PasswdTest, MalformedPasswdLinesAreSkipped) {
  for (const std::string& line : std::vector<std::string>{
           "", "\r", "# root:x:0:0:root:/root:/bin/sh",
           "+nis:x:1:1::/:", "-nis:x:1:1::/:", "+", "nouid", "a:x", "a:x:1",
           ":x:1:1::/:", "a:x::1::/:", "a:x:1::::", "a:x:-1:1::/:",
           "a:x:1:4294967295::/:", "a:x:4294967295:0::/:", "a:x:1x:1::/:",
           "a:x: 1:1::/:", "a:x:1:1::/ho\0me:/bin/sh"s, "a\0b:x:1:1::/:"s}) {
    EXPECT_FALSE(ParsePasswdLine(line).has_value()) << absl::CHexEscape(line);
  }
}

TEST(PasswdTest, ParsesGroupLines) {
  std::optional<GroupEntry> entry = ParseGroupLine("www:x:33:alice,,bob");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->name, "www");
  EXPECT_EQ(entry->gid, 33u);
  EXPECT_THAT(entry->members, ElementsAre("alice", "bob"));
  EXPECT_TRUE(ParseGroupLine("g:x:5")->members.empty());
  EXPECT_TRUE(ParseGroupLine("g:x:5:")->members.empty());
  for (const std::string& line : std::vector<std::string>{
           "", "#g:x:5:", "+g:x:5:", "g:x", ":x:5:", "g:x::a",
           "g:x:4294967295:a", "g:x:5:a\0b"s}) {
    EXPECT_FALSE(ParseGroupLine(line).has_value()) << absl::CHexEscape(line);
  }
}

constexpr char kPasswd[] =
    "# the image's users\n"
    "root:x:0:0:root:/root:/bin/sh\n"
    "broken line\n"
    "apple:x:1001:1001::/home/apple:/bin/sh\n"
    "app:x:1000:1000::/home/app:/bin/sh\n"
    "app:x:2000:2000::/second:/bin/sh\n"
    "dup:x:1000:3000::/dup:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/false";  // no final '\n'

constexpr char kGroup[] =
    "root:x:0:\n"
    "app:x:1000:\n"
    "web:x:33:bob,app\n"
    "apps:x:50:apple\n"
    "again:x:33:app\n"
    "also:x:1000:app\n"
    "audio:x:29:bob,app,carol\n"
    "nogroup:x:65534:\n";

TEST(PasswdTest, TheFirstEntryOfANameOrUidIsTaken) {
  std::optional<PasswdEntry> app = FindUserByName(kPasswd, "app");
  ASSERT_TRUE(app.has_value());
  EXPECT_EQ(app->uid, 1000u);
  EXPECT_EQ(app->home, "/home/app");
  EXPECT_EQ(FindUserByName(kPasswd, "apple")->uid, 1001u);
  EXPECT_EQ(FindUserByName(kPasswd, "nobody")->uid, 65534u);
  EXPECT_FALSE(FindUserByName(kPasswd, "ap").has_value());
  EXPECT_FALSE(FindUserByName(kPasswd, "broken line").has_value());
  EXPECT_FALSE(FindUserByName(kPasswd, "").has_value());
  EXPECT_EQ(FindUserById(kPasswd, 1000)->name, "app");
  EXPECT_EQ(FindUserById(kPasswd, 0)->name, "root");
  EXPECT_FALSE(FindUserById(kPasswd, 4242).has_value());
  EXPECT_EQ(FindGroupByName(kGroup, "web"), 33u);
  EXPECT_FALSE(FindGroupByName(kGroup, "we").has_value());
}

TEST(PasswdTest, SupplementaryGroupsAreThoseListingTheUserOnce) {
  // Primary first; "again" and "also" repeat gids already there; "apps"
  // lists "apple", not "app".
  EXPECT_THAT(GroupsOfUser(kGroup, "app", 1000), ElementsAre(1000, 33, 29));
  EXPECT_THAT(GroupsOfUser(kGroup, "carol", 7), ElementsAre(7, 29));
  EXPECT_THAT(GroupsOfUser(kGroup, "nobody", 65534), ElementsAre(65534));
  EXPECT_THAT(GroupsOfUser("", "app", 5), ElementsAre(5));
}

TEST(PasswdTest, ResolvesUsersAndGroupsInTheFiles) {
  UserFiles files{kPasswd, kGroup};
  absl::StatusOr<ResolvedUser> user = ResolveUserInFiles("app", files, "user");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->uid, 1000u);
  EXPECT_EQ(user->gid, 1000u);
  EXPECT_THAT(user->groups, ElementsAre(1000, 33, 29));
  EXPECT_EQ(user->home, "/home/app");
  EXPECT_EQ(user->name, "app");

  // A uid: its entry when there is one...
  user = ResolveUserInFiles("1000", files, "user");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->name, "app");
  EXPECT_EQ(user->home, "/home/app");
  // ... else nogroup, never group 0.
  user = ResolveUserInFiles("4321", files, "user");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->uid, 4321u);
  EXPECT_EQ(user->gid, kNoGroup);
  EXPECT_TRUE(user->groups.empty());
  EXPECT_EQ(user->home, "/");

  user = ResolveUserInFiles("", files, "user");
  ASSERT_TRUE(user.ok());
  EXPECT_EQ(user->uid, 0u);
  EXPECT_EQ(user->home, "/root");

  user = ResolveUserInFiles("daemon", files, "user");
  EXPECT_TRUE(absl::IsInvalidArgument(user.status()));
  EXPECT_EQ(user.status().message(),
            "user: no user named \"daemon\" in the image's /etc/passwd");
  EXPECT_TRUE(absl::IsInvalidArgument(
      ResolveUserInFiles("4294967295", files, "user").status()));

  EXPECT_EQ(*ResolveGroupInFiles("web", files, "group"), 33u);
  EXPECT_EQ(*ResolveGroupInFiles("4242", files, "group"), 4242u);
  absl::StatusOr<gid_t> gid = ResolveGroupInFiles("staff", files, "group");
  EXPECT_TRUE(absl::IsInvalidArgument(gid.status()));
  EXPECT_EQ(gid.status().message(),
            "group: no group named \"staff\" in the image's /etc/group");
}

TEST(PasswdTest, MissingFiles) {
  // Neither file: a uid still runs; a name cannot be found.
  const UserFiles none;
  absl::StatusOr<ResolvedUser> user = ResolveUserInFiles("1000", none, "user");
  ASSERT_TRUE(user.ok());
  EXPECT_EQ(user->gid, kNoGroup);
  user = ResolveUserInFiles("app", none, "user");
  EXPECT_EQ(user.status().message(),
            "user: no user named \"app\" in the image's /etc/passwd (the "
            "image has no /etc/passwd)");
  EXPECT_THAT(ResolveGroupInFiles("web", none, "group").status().message(),
              HasSubstr("(the image has no /etc/group)"));
  // A passwd without a group file: the primary group only.
  const UserFiles passwd_only{kPasswd, std::nullopt};
  user = ResolveUserInFiles("app", passwd_only, "user");
  ASSERT_TRUE(user.ok());
  EXPECT_THAT(user->groups, ElementsAre(1000));
}

// An image is untrusted: garbage, enormous lines, a file of the largest
// size read, and a user in more groups than a process can have.
TEST(PasswdTest, HostileContentNeverCrashesNorYieldsABadEntry) {
  std::mt19937 random(16);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string garbage;
  for (size_t i = 0; i < kMaxUserFileBytes - 100; ++i) {
    // Enough ':' and '\n' to make lines and fields of the noise.
    const int b = byte(random);
    garbage.push_back(b < 40   ? ':'
                      : b < 48 ? '\n'
                      : b < 56 ? '0' + b % 10
                               : static_cast<char>(b));
  }
  const std::string content =
      absl::StrCat(garbage, "\nberthimageuser:x:4321:4321::/home/x:/bin/sh\n");
  size_t entries = 0;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    std::optional<PasswdEntry> entry = ParsePasswdLine(line);
    if (!entry.has_value()) continue;
    ++entries;
    EXPECT_FALSE(entry->name.empty());
    EXPECT_EQ(entry->name.find_first_of(":\n\0"s), std::string::npos);
    EXPECT_EQ(entry->home.find_first_of("\n\0"s), std::string::npos);
    EXPECT_NE(entry->uid, static_cast<uid_t>(-1));
    EXPECT_NE(entry->gid, static_cast<gid_t>(-1));
  }
  EXPECT_GE(entries, 1u);
  absl::StatusOr<ResolvedUser> user =
      ResolveUserInFiles("berthimageuser", UserFiles{content, garbage}, "user");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->uid, 4321u);

  // One line of a million fields, one of a million bytes without any.
  const std::string colons(1 << 20, ':');
  EXPECT_FALSE(ParsePasswdLine(colons).has_value());
  EXPECT_FALSE(ParseGroupLine(colons).has_value());
  EXPECT_THAT(
      GroupsOfUser(absl::StrCat("g:x:5:", std::string(1 << 20, ',')), "", 1),
      ElementsAre(1));
  EXPECT_FALSE(FindUserByName(std::string(1 << 20, 'a'), "a").has_value());

  // More groups than setgroups(2) takes.
  std::string groups;
  for (int gid = 1; gid <= 70000; ++gid) {
    absl::StrAppend(&groups, "g", gid, ":x:", gid, ":u\n");
  }
  ASSERT_LE(groups.size(), kMaxUserFileBytes);
  user = ResolveUserInFiles("u", UserFiles{"u:x:1:0::/:\n", groups}, "user");
  EXPECT_TRUE(absl::IsInvalidArgument(user.status()));
  EXPECT_THAT(user.status().message(),
              HasSubstr("is in 70001 groups of the image's /etc/group"));
}

}  // namespace
}  // namespace berth::driver_common
