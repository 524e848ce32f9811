#include "services/proxy/token.h"

#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"

namespace berth {
namespace proxy {
namespace {

TEST(TokenTest, Is128BitsOfHex) {
  absl::StatusOr<std::string> token = NewToken();
  ASSERT_TRUE(token.ok()) << token.status();
  ASSERT_EQ(token->size(), 32u);
  for (char c : *token) {
    EXPECT_TRUE(absl::ascii_isxdigit(c) && !absl::ascii_isupper(c)) << *token;
  }
}

TEST(TokenTest, NeverRepeatsAndUsesEveryBit) {
  std::set<std::string> seen;
  // Every hex digit position takes more than one value across tokens: no
  // fixed bits (a counter or a timestamp would fail this).
  std::vector<std::set<char>> digits(32);
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<std::string> token = NewToken();
    ASSERT_TRUE(token.ok());
    EXPECT_TRUE(seen.insert(*token).second) << "repeated " << *token;
    for (int j = 0; j < 32; ++j) digits[j].insert((*token)[j]);
  }
  for (int j = 0; j < 32; ++j) {
    EXPECT_GT(digits[j].size(), 8u) << "digit " << j;
  }
}

TEST(TokenTest, PrefixIsEightCharacters) {
  EXPECT_EQ(TokenPrefix("0123456789abcdef0123456789abcdef"), "01234567");
  EXPECT_EQ(TokenPrefix("abc"), "abc");
}

}  // namespace
}  // namespace proxy
}  // namespace berth
