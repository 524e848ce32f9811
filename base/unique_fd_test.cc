#include "base/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "gtest/gtest.h"

namespace berth::base {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) >= 0; }

TEST(UniqueFdTest, ClosesWhenItGoes) {
  int raw = -1;
  {
    UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, MovesOwnershipAndResets) {
  UniqueFd a(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(
      a.valid());  // NOLINT(bugprone-use-after-move): checked on purpose
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
  c.reset();
  EXPECT_FALSE(c);
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, ReleaseGivesItUp) {
  UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = fd.release();
  EXPECT_FALSE(fd.valid());
  EXPECT_TRUE(IsOpen(raw));
  close(raw);
}

}  // namespace
}  // namespace berth::base
