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

}  // namespace
}  // namespace berth::base
