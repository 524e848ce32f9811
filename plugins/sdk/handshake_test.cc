#include "plugins/sdk/handshake.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::plugin {
namespace {

using ::testing::HasSubstr;

TEST(HandshakeTest, FormatsAndParsesBack) {
  Handshake handshake;
  handshake.address = "/run/berth/plugins/exec.sock";
  const std::string line = FormatHandshake(handshake);
  EXPECT_EQ(line, "1|1|unix|/run/berth/plugins/exec.sock|grpc");
  absl::StatusOr<Handshake> parsed = ParseHandshake(line + "\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->core_version, 1);
  EXPECT_EQ(parsed->app_version, 1);
  EXPECT_EQ(parsed->address, "/run/berth/plugins/exec.sock");
}

TEST(HandshakeTest, AcceptsGoPluginsEmptyCertificatePart) {
  absl::StatusOr<Handshake> parsed =
      ParseHandshake("1|2|unix|/run/x.sock|grpc|");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->app_version, 2);
}

TEST(HandshakeTest, RejectsEachBadPartNamingIt) {
  struct Case {
    const char* line;
    const char* why;
  } cases[] = {
      {"1|1|unix|/x.sock", "fewer than 5 parts"},
      {"one|1|unix|/x.sock|grpc", "core version is not a number"},
      {"1|x|unix|/x.sock|grpc", "app version is not a number"},
      {"1|1|tcp|127.0.0.1:1|grpc", "network \"tcp\" is not unix"},
      {"1|1|unix|x.sock|grpc", "socket path is not absolute"},
      {"1|1|unix|/x.sock|netrpc", "protocol \"netrpc\" is not grpc"},
      {"1|1|unix|/x.sock|grpc|MIIB", "asks for TLS"},
      {"some log line", "fewer than 5 parts"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Handshake> parsed = ParseHandshake(c.line);
    ASSERT_FALSE(parsed.ok()) << c.line;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.why)) << c.line;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.line));
  }
}

TEST(HandshakeTest, NotLaunchedByHostMessageNamesTheBinary) {
  EXPECT_THAT(NotLaunchedByHostMessage("/usr/lib/berth/berth-driver-exec"),
              HasSubstr("/usr/lib/berth/berth-driver-exec is a berth plugin"));
}

}  // namespace
}  // namespace berth::plugin
