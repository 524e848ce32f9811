#include "services/common/remove_tree.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth {
namespace {

TEST(RemoveTreeTest, RemovesNestedDirectoriesAndFiles) {
  testing::ShortTempDir dir;
  const std::string root = dir.Join("t");
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.Join("t/a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.Join("t/a/b").c_str(), 0700), 0);
  std::ofstream(dir.Join("t/a/b/file")) << "x";
  std::ofstream(dir.Join("t/top")) << "y";
  ASSERT_TRUE(RemoveTree(root).ok());
  EXPECT_FALSE(testing::PathExists(root));
}

TEST(RemoveTreeTest, AnAbsentPathIsNotAnError) {
  testing::ShortTempDir dir;
  EXPECT_TRUE(RemoveTree(dir.Join("nothing-here")).ok());
}

// A symbolic link inside is removed, not followed: what it points to stays.
TEST(RemoveTreeTest, DoesNotFollowSymbolicLinks) {
  testing::ShortTempDir dir;
  ASSERT_EQ(mkdir(dir.Join("outside").c_str(), 0755), 0);
  std::ofstream(dir.Join("outside/keep")) << "z";
  ASSERT_EQ(mkdir(dir.Join("t").c_str(), 0755), 0);
  ASSERT_EQ(symlink(dir.Join("outside").c_str(), dir.Join("t/link").c_str()),
            0);
  ASSERT_TRUE(RemoveTree(dir.Join("t")).ok());
  EXPECT_FALSE(testing::PathExists(dir.Join("t")));
  EXPECT_TRUE(testing::PathExists(dir.Join("outside/keep")));
}

// A link at the path itself (a task directory a task replaced) or deeper
// down, to a directory outside: the links go, the directory stays whole.
TEST(RemoveTreeTest, ALinkAtThePathOrDeepDownIsRemovedItself) {
  testing::ShortTempDir dir;
  ASSERT_EQ(mkdir(dir.Join("outside").c_str(), 0755), 0);
  std::ofstream(dir.Join("outside/keep")) << "z";
  ASSERT_EQ(symlink(dir.Join("outside").c_str(), dir.Join("top").c_str()), 0);
  ASSERT_TRUE(RemoveTree(dir.Join("top")).ok());
  EXPECT_FALSE(testing::PathExists(dir.Join("top")));
  EXPECT_TRUE(testing::PathExists(dir.Join("outside/keep")));

  ASSERT_EQ(mkdir(dir.Join("t").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.Join("t/a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.Join("t/a/b").c_str(), 0755), 0);
  std::ofstream(dir.Join("t/a/b/file")) << "x";
  ASSERT_EQ(symlink(dir.Join("outside").c_str(), dir.Join("t/a/b/l").c_str()),
            0);
  ASSERT_TRUE(RemoveTree(dir.Join("t")).ok());
  EXPECT_FALSE(testing::PathExists(dir.Join("t")));
  EXPECT_TRUE(testing::PathExists(dir.Join("outside/keep")));
}

}  // namespace
}  // namespace berth
