#include "services/images/oci/reference.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::images {
namespace {

using ::testing::HasSubstr;

const std::string kHex(
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
const std::string kDigest = "sha256:" + kHex;

struct Normalised {
  std::string text;
  std::string domain;
  std::string repository;
  std::string tag;
  std::string digest;
  std::string string;
  std::string familiar;
};

TEST(ReferenceTest, Normalises) {
  const Normalised cases[] = {
      {"busybox", "docker.io", "library/busybox", "latest", "",
       "docker.io/library/busybox:latest", "busybox:latest"},
      {"busybox:1.36", "docker.io", "library/busybox", "1.36", "",
       "docker.io/library/busybox:1.36", "busybox:1.36"},
      {"library/busybox", "docker.io", "library/busybox", "latest", "",
       "docker.io/library/busybox:latest", "busybox:latest"},
      {"docker.io/busybox", "docker.io", "library/busybox", "latest", "",
       "docker.io/library/busybox:latest", "busybox:latest"},
      {"index.docker.io/library/busybox", "docker.io", "library/busybox",
       "latest", "", "docker.io/library/busybox:latest", "busybox:latest"},
      {"user/app:v1", "docker.io", "user/app", "v1", "",
       "docker.io/user/app:v1", "user/app:v1"},
      {"registry:5000/team/app:1.2", "registry:5000", "team/app", "1.2", "",
       "registry:5000/team/app:1.2", "registry:5000/team/app:1.2"},
      {"127.0.0.1:5000/busybox", "127.0.0.1:5000", "busybox", "latest", "",
       "127.0.0.1:5000/busybox:latest", "127.0.0.1:5000/busybox:latest"},
      {"localhost/app", "localhost", "app", "latest", "",
       "localhost/app:latest", "localhost/app:latest"},
      {"[::1]:5000/app", "[::1]:5000", "app", "latest", "",
       "[::1]:5000/app:latest", "[::1]:5000/app:latest"},
      {"ghcr.io/x/y@" + kDigest, "ghcr.io", "x/y", "", kDigest,
       "ghcr.io/x/y@" + kDigest, "ghcr.io/x/y@" + kDigest},
      {"ghcr.io/x/y:1@" + kDigest, "ghcr.io", "x/y", "1", kDigest,
       "ghcr.io/x/y:1@" + kDigest, "ghcr.io/x/y:1@" + kDigest},
      {"busybox@" + kDigest, "docker.io", "library/busybox", "", kDigest,
       "docker.io/library/busybox@" + kDigest, "busybox@" + kDigest},
      {"a.b-c/d__e/f-g.h_i---j:Tag_1.-x", "a.b-c", "d__e/f-g.h_i---j",
       "Tag_1.-x", "", "a.b-c/d__e/f-g.h_i---j:Tag_1.-x",
       "a.b-c/d__e/f-g.h_i---j:Tag_1.-x"},
      // A first component without '.' or ':' is a path, not a domain.
      {"team/sub/app", "docker.io", "team/sub/app", "latest", "",
       "docker.io/team/sub/app:latest", "team/sub/app:latest"},
  };
  for (const Normalised& c : cases) {
    absl::StatusOr<Reference> reference = ParseReference(c.text);
    ASSERT_TRUE(reference.ok()) << c.text << ": " << reference.status();
    EXPECT_EQ(reference->domain, c.domain) << c.text;
    EXPECT_EQ(reference->repository, c.repository) << c.text;
    EXPECT_EQ(reference->tag, c.tag) << c.text;
    EXPECT_EQ(reference->digest, c.digest) << c.text;
    EXPECT_EQ(reference->String(), c.string) << c.text;
    EXPECT_EQ(FamiliarString(*reference), c.familiar) << c.text;
    // The normal form parses to itself.
    absl::StatusOr<Reference> again = ParseReference(reference->String());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->String(), c.string);
  }
}

TEST(ReferenceTest, NameAndObject) {
  absl::StatusOr<Reference> tagged = ParseReference("registry:5000/a/b:7");
  ASSERT_TRUE(tagged.ok());
  EXPECT_EQ(tagged->Name(), "registry:5000/a/b");
  EXPECT_EQ(tagged->Object(), "7");
  absl::StatusOr<Reference> pinned =
      ParseReference("registry:5000/a/b:7@" + kDigest);
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->Object(), kDigest);
}

TEST(ReferenceTest, RefusesNamingTextAndReason) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty"},
      {"Busybox", "repository name must be lowercase"},
      {"docker.io/Library/busybox", "repository name must be lowercase"},
      {"Registry.example.com/app", "repository name must be lowercase"},
      {"busybox:", "invalid tag"},
      {"busybox:-x", "invalid tag"},
      {"busybox:a/b", "invalid port"},
      {"busybox:" + std::string(129, 'a'), "invalid tag"},
      {"busybox@sha256:abc", "3 hex characters"},
      {"busybox@md5:abc", "unsupported algorithm"},
      {"busybox@", "invalid digest"},
      {":latest", "empty repository name"},
      {"registry:5000/", "empty repository name"},
      {"a//b", "empty path component"},
      {"a/b/", "empty path component"},
      {"-app", "invalid path component \"-app\""},
      {"app-", "invalid path component"},
      {"a..b", "invalid path component"},
      {"a___b", "invalid path component"},
      {"a b", "invalid path component"},
      {"bad_domain.com:5000/app", "invalid domain"},
      {"-bad.com/app", "invalid domain"},
      {"bad-.com/app", "invalid domain"},
      {"bad..com/app", "invalid domain"},
      {"registry:50a0/app", "invalid port"},
      {"registry:/app", "empty port"},
      {"[::1/app", "unterminated IPv6"},
      {"[zz]:5000/app", "invalid IPv6"},
      {kHex, "64 hexadecimal characters"},
      {"r.io/" + std::string(260, 'a'), "longer than 255"},
      {std::string("a\0b", 3), "invalid path component"},
  };
  for (const auto& [text, why] : cases) {
    absl::StatusOr<Reference> reference = ParseReference(text);
    ASSERT_FALSE(reference.ok())
        << text << " parsed as " << reference->String();
    EXPECT_EQ(reference.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(reference.status().message(), HasSubstr("invalid reference \""))
        << text;
    EXPECT_THAT(reference.status().message(), HasSubstr(why)) << text;
    if (text.size() < 100 && text.find('\0') == std::string::npos) {
      EXPECT_THAT(reference.status().message(), HasSubstr("\"" + text + "\""))
          << text;
    }
  }
}

}  // namespace
}  // namespace berth::images
