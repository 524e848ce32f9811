#include "services/driver/exec/init/rotating_log.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::exec_driver {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::ShortTempDir;

TEST(RotatingLogTest, KeepsTheNewestBytesInOrderWithinTheBound) {
  ShortTempDir temp;
  const std::string dir = temp.path();
  RotatingLog log(dir, "stdout", 10, 2);
  ASSERT_TRUE(log.Open());
  const std::string data = "0123456789abcdefghijKLMNOPQRSTuvw";
  // Odd write sizes so that writes straddle file boundaries.
  for (size_t i = 0; i < data.size(); i += 7) {
    ASSERT_TRUE(
        log.Write(data.data() + i, std::min<size_t>(7, data.size() - i)));
  }
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log"), "uvw");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log.1"), "KLMNOPQRST");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log.2"), "abcdefghij");
  EXPECT_FALSE(PathExists(dir + "/stdout.log.3"));
}

TEST(RotatingLogTest, AppendsToAnExistingFileAfterARestart) {
  ShortTempDir temp;
  const std::string dir = temp.path();
  {
    RotatingLog log(dir, "stderr", 8, 1);
    ASSERT_TRUE(log.Open());
    ASSERT_TRUE(log.Write("abcde", 5));
  }
  RotatingLog log(dir, "stderr", 8, 1);
  ASSERT_TRUE(log.Open());
  ASSERT_TRUE(log.Write("fghij", 5));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stderr.log.1"), "abcdefgh");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stderr.log"), "ij");
}

TEST(RotatingLogTest, WithoutRotatedFilesTruncates) {
  ShortTempDir temp;
  const std::string dir = temp.path();
  RotatingLog log(dir, "stdout", 4, 0);
  ASSERT_TRUE(log.Open());
  ASSERT_TRUE(log.Write("abcdef", 6));
  EXPECT_EQ(ReadFileOrEmpty(dir + "/stdout.log"), "ef");
  EXPECT_FALSE(PathExists(dir + "/stdout.log.1"));
}

TEST(RotatingLogTest, OpenFailsInAMissingDirectory) {
  ShortTempDir temp;
  RotatingLog log(temp.Join("missing"), "stdout", 4, 0);
  EXPECT_FALSE(log.Open());
}

}  // namespace
}  // namespace berth::exec_driver
