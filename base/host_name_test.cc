#include "base/host_name.h"

#include <string>

#include "gtest/gtest.h"

namespace berth::base {
namespace {

TEST(HostNameTest, TakesLettersDigitsDashesAndDots) {
  for (const char* name : {"a", "web", "db-1.example", "1", "A-b.C9",
                           "xn--bcher-kva.example", "a..b"}) {
    EXPECT_EQ(CheckHostName(name, 63), HostNameFault::kNone) << name;
    EXPECT_TRUE(IsHostName(name, 63)) << name;
  }
}

TEST(HostNameTest, LengthIsOneToTheMost) {
  EXPECT_EQ(CheckHostName("", 63), HostNameFault::kLength);
  EXPECT_TRUE(IsHostName(std::string(63, 'a'), 63));
  EXPECT_EQ(CheckHostName(std::string(64, 'a'), 63), HostNameFault::kLength);
  EXPECT_TRUE(IsHostName(std::string(64, 'a'), 253));
  EXPECT_TRUE(IsHostName(std::string(253, 'a'), 253));
  EXPECT_FALSE(IsHostName(std::string(254, 'a'), 253));
}

TEST(HostNameTest, OtherCharactersAreNamed) {
  for (const std::string& name :
       {std::string("a b"), std::string("x/y"), std::string("under_score"),
        std::string("caf\xc3\xa9"), std::string("a\0b", 3),
        std::string("a:1")}) {
    char bad = 'a';
    EXPECT_EQ(CheckHostName(name, 63, &bad), HostNameFault::kCharacter) << name;
    EXPECT_EQ(bad, name[name.find_first_not_of(
                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                       "0123456789-.")])
        << name;
    EXPECT_FALSE(IsHostName(name, 63)) << name;
  }
  // No character is set for other faults.
  char untouched = 'z';
  EXPECT_EQ(CheckHostName("-a", 63, &untouched), HostNameFault::kEdge);
  EXPECT_EQ(untouched, 'z');
}

TEST(HostNameTest, StartsAndEndsWithALetterOrDigit) {
  for (const char* name : {"-lead", "trail-", ".lead", "trail.", "-", "."}) {
    EXPECT_EQ(CheckHostName(name, 63), HostNameFault::kEdge) << name;
  }
  // A character fault is found before an edge one.
  EXPECT_EQ(CheckHostName("-a_b", 63), HostNameFault::kCharacter);
}

}  // namespace
}  // namespace berth::base
