#include "services/node/cli/detach_keys.h"

#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

using ::testing::HasSubstr;

TEST(ParseDetachKeysTest, DockersFormat) {
  EXPECT_EQ(*ParseDetachKeys(kDefaultDetachKeys), "\x10\x11");
  EXPECT_EQ(*ParseDetachKeys("ctrl-a"), "\x01");
  EXPECT_EQ(*ParseDetachKeys("Ctrl-Z,CTRL-b"), std::string("\x1a\x02"));
  EXPECT_EQ(*ParseDetachKeys("ctrl-@"), std::string(1, '\0'));
  EXPECT_EQ(*ParseDetachKeys("ctrl-[,ctrl-\\,ctrl-],ctrl-^,ctrl-_"),
            "\x1b\x1c\x1d\x1e\x1f");
  EXPECT_EQ(*ParseDetachKeys("a,ctrl-x,q"), "a\x18q");
  EXPECT_EQ(*ParseDetachKeys(""), "");  // detaching off
}

TEST(ParseDetachKeysTest, BadKeysAreNamed) {
  for (const char* bad : {"ctrl-", "ctrl-1", "ctrl-pp", "foo", "ctrl-p,",
                          ",ctrl-q", "ctrl-p,,ctrl-q", "alt-x"}) {
    absl::StatusOr<std::string> keys = ParseDetachKeys(bad);
    EXPECT_FALSE(keys.ok()) << bad;
    EXPECT_THAT(keys.status().message(), HasSubstr("is not a key")) << bad;
  }
  EXPECT_THAT(ParseDetachKeys("ctrl-p,foo").status().message(),
              HasSubstr("\"foo\" is not a key"));
  EXPECT_THAT(ParseDetachKeys("ctrl-p,,x").status().message(),
              HasSubstr("\"\" is not a key"));
}

TEST(DetachMatcherTest, PlainBytesPassAtOnce) {
  DetachMatcher matcher("\x10\x11");
  EXPECT_EQ(matcher.Feed("echo hi\r"), "echo hi\r");
  EXPECT_FALSE(matcher.detached());
}

TEST(DetachMatcherTest, TheSequenceDetachesAndDropsWhatFollows) {
  DetachMatcher matcher("\x10\x11");
  EXPECT_EQ(matcher.Feed("ls\x10\x11more"), "ls");
  EXPECT_TRUE(matcher.detached());
  EXPECT_EQ(matcher.Feed("after"), "");
  EXPECT_EQ(matcher.TakeHeld(), "");
}

TEST(DetachMatcherTest, ASequenceAcrossReads) {
  DetachMatcher matcher("\x10\x11");
  EXPECT_EQ(matcher.Feed("a\x10"), "a");  // Ctrl-P held
  EXPECT_FALSE(matcher.detached());
  EXPECT_EQ(matcher.Feed("\x11"), "");
  EXPECT_TRUE(matcher.detached());
}

TEST(DetachMatcherTest, ACutShortSequenceIsReleasedWithTheNextByte) {
  DetachMatcher matcher("\x10\x11");
  EXPECT_EQ(matcher.Feed("\x10"), "");
  EXPECT_EQ(matcher.Feed("x"), "\x10x");
  EXPECT_FALSE(matcher.detached());
  // Ctrl-P Ctrl-P Ctrl-Q: the first Ctrl-P reaches the task, then detach.
  EXPECT_EQ(matcher.Feed("\x10\x10"), "\x10");
  EXPECT_EQ(matcher.Feed("\x11"), "");
  EXPECT_TRUE(matcher.detached());
}

TEST(DetachMatcherTest, HeldBytesAreTakenAtTheEnd) {
  DetachMatcher matcher("abc");
  EXPECT_EQ(matcher.Feed("xab"), "x");
  EXPECT_EQ(matcher.TakeHeld(), "ab");
  EXPECT_EQ(matcher.Feed("c"), "c");  // nothing held any more
  EXPECT_FALSE(matcher.detached());
}

TEST(DetachMatcherTest, RepeatedPrefixes) {
  // "aab" in "aaab": the first a is released, "aab" detaches.
  DetachMatcher matcher("aab");
  EXPECT_EQ(matcher.Feed("aaa"), "a");
  EXPECT_EQ(matcher.Feed("b"), "");
  EXPECT_TRUE(matcher.detached());
}

TEST(DetachMatcherTest, NoKeysNeverDetach) {
  DetachMatcher matcher("");
  EXPECT_EQ(matcher.Feed(std::string("\x10\x11\0", 3)),
            std::string("\x10\x11\0", 3));
  EXPECT_FALSE(matcher.detached());
}

TEST(DetachMatcherTest, OneKey) {
  DetachMatcher matcher("\x01");
  EXPECT_EQ(matcher.Feed("ab\x01z"), "ab");
  EXPECT_TRUE(matcher.detached());
}

}  // namespace
}  // namespace berth::cli
