#include "base/path.h"

#include "gtest/gtest.h"

namespace berth::base {
namespace {

TEST(DirnameTest, AsDirnameSaysIt) {
  EXPECT_EQ(Dirname("/a/b"), "/a");
  EXPECT_EQ(Dirname("/a/b/"), "/a");
  EXPECT_EQ(Dirname("/a//b"), "/a");
  EXPECT_EQ(Dirname("/a"), "/");
  EXPECT_EQ(Dirname("/"), "/");
  EXPECT_EQ(Dirname("a"), ".");
  EXPECT_EQ(Dirname("a/"), ".");
  EXPECT_EQ(Dirname("a/b"), "a");
  EXPECT_EQ(Dirname(""), ".");
}

TEST(LexicallyNormalTest, ResolvesDotsAndSlashesWithoutTheFileSystem) {
  EXPECT_EQ(LexicallyNormal("/a/./b/../c/"), "/a/c");
  EXPECT_EQ(LexicallyNormal("//a//b"), "/a/b");
  EXPECT_EQ(LexicallyNormal("/../../etc"), "/etc");
  EXPECT_EQ(LexicallyNormal("/"), "/");
  EXPECT_EQ(LexicallyNormal("//"), "/");
  EXPECT_EQ(LexicallyNormal("/a/.."), "/");
  EXPECT_EQ(LexicallyNormal("a/b"), "/a/b");
  EXPECT_EQ(LexicallyNormal(""), "/");
}

}  // namespace
}  // namespace berth::base
