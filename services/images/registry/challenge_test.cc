#include "services/images/registry/challenge.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/images/registry/url.h"

namespace berth::images {
namespace {

using ::testing::HasSubstr;

TEST(ChallengeTest, DockerHubBearer) {
  absl::StatusOr<std::vector<AuthChallenge>> challenges = ParseWwwAuthenticate(
      "Bearer realm=\"https://auth.docker.io/token\",service=\"registry."
      "docker.io\",scope=\"repository:library/busybox:pull\"");
  ASSERT_TRUE(challenges.ok()) << challenges.status();
  ASSERT_EQ(challenges->size(), 1u);
  const AuthChallenge& bearer = (*challenges)[0];
  EXPECT_EQ(bearer.scheme, "bearer");
  EXPECT_EQ(bearer.Param("realm"), "https://auth.docker.io/token");
  EXPECT_EQ(bearer.Param("service"), "registry.docker.io");
  EXPECT_EQ(bearer.Param("scope"), "repository:library/busybox:pull");
  EXPECT_EQ(bearer.Param("missing"), "");
}

TEST(ChallengeTest, BasicWithSpacesAndCase) {
  absl::StatusOr<std::vector<AuthChallenge>> challenges = ParseWwwAuthenticate(
      "  BASIC   Realm = \"Registry Realm\" , charset=UTF-8");
  ASSERT_TRUE(challenges.ok()) << challenges.status();
  ASSERT_EQ(challenges->size(), 1u);
  EXPECT_EQ((*challenges)[0].scheme, "basic");
  EXPECT_EQ((*challenges)[0].Param("REALM"), "Registry Realm");
  EXPECT_EQ((*challenges)[0].Param("charset"), "UTF-8");
}

TEST(ChallengeTest, QuotedCommasAndEscapes) {
  absl::StatusOr<std::vector<AuthChallenge>> challenges = ParseWwwAuthenticate(
      "Bearer realm=\"https://a.example/token?x=1,2\",scope=\"repository:a/"
      "b:pull,push\",error=\"say \\\"hi\\\" \\\\ there\"");
  ASSERT_TRUE(challenges.ok()) << challenges.status();
  ASSERT_EQ(challenges->size(), 1u);
  EXPECT_EQ((*challenges)[0].Param("realm"), "https://a.example/token?x=1,2");
  EXPECT_EQ((*challenges)[0].Param("scope"), "repository:a/b:pull,push");
  EXPECT_EQ((*challenges)[0].Param("error"), "say \"hi\" \\ there");
}

TEST(ChallengeTest, SeveralChallengesInOneHeader) {
  absl::StatusOr<std::vector<AuthChallenge>> challenges = ParseWwwAuthenticate(
      "Newauth realm=\"apps\", type=1, title=\"Login to \\\"apps\\\"\", "
      "Basic realm=\"simple\", Negotiate abc+/9==, Bearer");
  ASSERT_TRUE(challenges.ok()) << challenges.status();
  ASSERT_EQ(challenges->size(), 4u);
  EXPECT_EQ((*challenges)[0].scheme, "newauth");
  EXPECT_EQ((*challenges)[0].params.size(), 3u);
  EXPECT_EQ((*challenges)[0].Param("type"), "1");
  EXPECT_EQ((*challenges)[0].Param("title"), "Login to \"apps\"");
  EXPECT_EQ((*challenges)[1].scheme, "basic");
  EXPECT_EQ((*challenges)[1].Param("realm"), "simple");
  EXPECT_EQ((*challenges)[2].scheme, "negotiate");
  EXPECT_EQ((*challenges)[2].token68, "abc+/9==");
  EXPECT_TRUE((*challenges)[2].params.empty());
  EXPECT_EQ((*challenges)[3].scheme, "bearer");
  EXPECT_TRUE((*challenges)[3].params.empty());
}

TEST(ChallengeTest, SchemeWithoutParametersThenAnother) {
  absl::StatusOr<std::vector<AuthChallenge>> challenges =
      ParseWwwAuthenticate("Basic, Bearer realm=x");
  ASSERT_TRUE(challenges.ok()) << challenges.status();
  ASSERT_EQ(challenges->size(), 2u);
  EXPECT_EQ((*challenges)[0].scheme, "basic");
  EXPECT_EQ((*challenges)[1].Param("realm"), "x");
}

TEST(ChallengeTest, UnquotedUrlValue) {
  absl::StatusOr<std::vector<AuthChallenge>> challenges = ParseWwwAuthenticate(
      "Bearer realm=https://auth.example/token,service=reg");
  ASSERT_TRUE(challenges.ok()) << challenges.status();
  EXPECT_EQ((*challenges)[0].Param("realm"), "https://auth.example/token");
  EXPECT_EQ((*challenges)[0].Param("service"), "reg");
}

TEST(ChallengeTest, Malformed) {
  for (const char* header : {
           "",
           "   ,  ",
           "Bearer realm=\"unterminated",
           "Bearer =value",
           "Bearer realm=\"x\" service=\"y\"",
           "\"quoted\" realm=x",
       }) {
    absl::StatusOr<std::vector<AuthChallenge>> challenges =
        ParseWwwAuthenticate(header);
    EXPECT_FALSE(challenges.ok()) << header;
    EXPECT_EQ(challenges.status().code(), absl::StatusCode::kInvalidArgument)
        << header;
    EXPECT_THAT(challenges.status().message(),
                HasSubstr("invalid WWW-Authenticate header"))
        << header;
  }
  EXPECT_THAT(
      ParseWwwAuthenticate("Bearer realm=\"unterminated").status().message(),
      HasSubstr("unterminated quoted value of parameter realm"));
}

TEST(ChallengeTest, SeveralHeadersSkipTheBadOnes) {
  absl::StatusOr<std::vector<AuthChallenge>> challenges =
      ParseWwwAuthenticateHeaders(
          {"Bearer realm=\"x", "Basic realm=\"r\"", "Bearer realm=\"t\""});
  ASSERT_TRUE(challenges.ok()) << challenges.status();
  ASSERT_EQ(challenges->size(), 2u);
  EXPECT_EQ((*challenges)[0].scheme, "basic");
  EXPECT_EQ((*challenges)[1].scheme, "bearer");

  absl::StatusOr<std::vector<AuthChallenge>> none =
      ParseWwwAuthenticateHeaders({"Bearer realm=\"x"});
  EXPECT_THAT(none.status().message(), HasSubstr("unterminated"));
  EXPECT_FALSE(ParseWwwAuthenticateHeaders({}).ok());
}

TEST(UrlTest, ParsesAndNormalises) {
  absl::StatusOr<HttpUrl> url =
      ParseHttpUrl("HTTPS://Mirror.Example:443/prefix/", "mirror", true);
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->scheme, "https");
  EXPECT_EQ(url->host, "mirror.example");
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->path, "/prefix");
  EXPECT_EQ(url->String(), "https://mirror.example/prefix");

  absl::StatusOr<HttpUrl> local =
      ParseHttpUrl("http://127.0.0.1:5000", "mirror", true);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->HostPort(), "127.0.0.1:5000");
  EXPECT_EQ(local->path, "");

  absl::StatusOr<HttpUrl> v6 = ParseHttpUrl("http://[::1]:8080/a?b=c", "x");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->Origin(), "http://[::1]:8080");
  EXPECT_EQ(v6->query, "b=c");
}

TEST(UrlTest, SameOrigin) {
  HttpUrl a = *ParseHttpUrl("https://r.example/v2/x", "a");
  EXPECT_TRUE(a.SameOrigin(*ParseHttpUrl("https://R.example:443/other", "b")));
  EXPECT_FALSE(a.SameOrigin(*ParseHttpUrl("http://r.example/v2/x", "b")));
  EXPECT_FALSE(a.SameOrigin(*ParseHttpUrl("https://r.example:444/", "b")));
  EXPECT_FALSE(a.SameOrigin(*ParseHttpUrl("https://s3.example/", "b")));
}

TEST(UrlTest, Refused) {
  struct Case {
    const char* text;
    bool base_only;
    const char* why;
  } cases[] = {
      {"ftp://m.example", false, "only http:// and https://"},
      {"file:///etc/passwd", false, "only http:// and https://"},
      {"m.example", true, "not a URL"},
      {"https://user:pw@m.example", true, "user information"},
      {"https://m.example/#frag", false, "fragment"},
      {"https://m.example/?q=1", true, "query"},
      {"https://m.example:99999", true, "not a URL"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<HttpUrl> url = ParseHttpUrl(c.text, "mirror", c.base_only);
    ASSERT_FALSE(url.ok()) << c.text;
    EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(url.status().message(), HasSubstr(c.why)) << c.text;
    EXPECT_THAT(url.status().message(), HasSubstr(c.text));
  }
}

}  // namespace
}  // namespace berth::images
