#include "services/images/oci/digest.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::images {
namespace {

using ::testing::HasSubstr;

constexpr char kEmptyHex[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

TEST(DigestTest, AcceptsSha256) {
  EXPECT_TRUE(ValidateDigest(std::string("sha256:") + kEmptyHex).ok());
}

TEST(DigestTest, RefusesOthersNamingTheText) {
  const std::string hex = kEmptyHex;
  struct Case {
    std::string digest;
    std::string why;
  } cases[] = {
      {"", "want \"sha256:\""},
      {hex, "want \"sha256:\""},
      {":" + hex, "want \"sha256:\""},
      {"sha512:" + hex, "unsupported algorithm \"sha512\""},
      {"SHA256:" + hex, "unsupported algorithm"},
      {"sha256:" + hex.substr(1), "63 hex characters"},
      {"sha256:" + hex + "0", "65 hex characters"},
      {"sha256:" + std::string(64, 'A'), "not lowercase hex"},
      {"sha256:../../../../etc/passwd" + std::string(42, 'a'),
       "not lowercase hex"},
      {"sha256:" + hex.substr(0, 63) + "/", "not lowercase hex"},
  };
  for (const Case& c : cases) {
    absl::Status status = ValidateDigest(c.digest, "layer 2");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.digest;
    EXPECT_THAT(status.message(), HasSubstr("invalid layer 2")) << c.digest;
    EXPECT_THAT(status.message(), HasSubstr(c.why)) << c.digest;
    if (c.digest.size() < 100) {
      EXPECT_THAT(status.message(), HasSubstr(c.digest)) << c.digest;
    }
  }
}

TEST(DigestTest, LongTextIsShortenedInTheError) {
  absl::Status status = ValidateDigest(std::string(10000, 'x'));
  EXPECT_FALSE(status.ok());
  EXPECT_LT(status.message().size(), 400u);
  EXPECT_THAT(status.message(), HasSubstr("10000 bytes"));
}

TEST(DigestTest, HexAndDigestOf) {
  EXPECT_EQ(DigestFromHex(kEmptyHex), std::string("sha256:") + kEmptyHex);
  EXPECT_EQ(DigestHex(DigestFromHex(kEmptyHex)), kEmptyHex);
  EXPECT_EQ(DigestOf(""), std::string("sha256:") + kEmptyHex);
  EXPECT_EQ(DigestOf("abc"),
            "sha256:"
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace berth::images
