#include "base/rlimits.h"

#include <sys/resource.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace berth::base {
namespace {

TEST(RlimitsTest, TheTableHoldsEveryLimitOnceWithItsNumber) {
  ASSERT_EQ(RlimitNames().size(), static_cast<size_t>(RLIMIT_NLIMITS));
  std::string previous;
  for (const RlimitName& name : RlimitNames()) {
    EXPECT_EQ(std::string(name.type),
              absl::StrCat("RLIMIT_", absl::AsciiStrToUpper(name.short_name)));
    EXPECT_LT(previous, name.short_name) << "not sorted by short name";
    previous = name.short_name;
    EXPECT_GE(name.resource, 0);
    EXPECT_LT(name.resource, RLIMIT_NLIMITS);
  }
  EXPECT_EQ(FindRlimitByType("RLIMIT_NOFILE")->resource, RLIMIT_NOFILE);
  EXPECT_EQ(FindRlimitByType("RLIMIT_NPROC")->resource, RLIMIT_NPROC);
}

TEST(RlimitsTest, ByTypeTakesOnlyTheExactName) {
  EXPECT_EQ(FindRlimitByType("RLIMIT_STACK")->resource, RLIMIT_STACK);
  for (const char* other : {"nofile", "NOFILE", "rlimit_nofile", "RLIMIT_", "",
                            "RLIMIT_NOFILE ", "RLIMIT_NOFILES"}) {
    EXPECT_EQ(FindRlimitByType(other), nullptr) << other;
  }
}

TEST(RlimitsTest, ByNameTakesEitherSpellingInAnyCase) {
  for (const char* spelling : {"nofile", "NOFILE", "NoFile", "rlimit_nofile",
                               "RLIMIT_NOFILE", "Rlimit_NOFILE"}) {
    const RlimitName* found = FindRlimit(spelling);
    ASSERT_NE(found, nullptr) << spelling;
    EXPECT_EQ(found->resource, RLIMIT_NOFILE) << spelling;
    EXPECT_STREQ(found->type, "RLIMIT_NOFILE");
    EXPECT_STREQ(found->short_name, "nofile");
  }
  for (const char* other : {"", "rlimit_", "RLIMIT_", "rlimit_rlimit_nofile",
                            "nofiles", "no file", "nlimits", "-1"}) {
    EXPECT_EQ(FindRlimit(other), nullptr) << other;
  }
}

}  // namespace
}  // namespace berth::base
