#include <fstream>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/images/registry/registry_client.h"

namespace berth::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RegistriesConfigTest, ParsesEveryField) {
  absl::StatusOr<RegistriesConfig> config = RegistriesConfig::Parse(R"({
    "registries": {
      "docker.io": {"mirrors": ["http://127.0.0.1:5000",
                                "https://mirror.example/cache/"]},
      "127.0.0.1:5000": {"insecure": true, "ca_file": "/etc/ca.pem",
                         "username": "u", "password": "p:w"}
    }})");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->hosts.size(), 2u);
  const RegistryHost& hub = config->hosts.at("docker.io");
  EXPECT_THAT(hub.mirrors, ElementsAre("http://127.0.0.1:5000",
                                       "https://mirror.example/cache"));
  EXPECT_FALSE(hub.insecure);
  const RegistryHost& local = config->hosts.at("127.0.0.1:5000");
  EXPECT_TRUE(local.insecure);
  EXPECT_EQ(local.ca_file, "/etc/ca.pem");
  EXPECT_EQ(local.username, "u");
  EXPECT_EQ(local.password, "p:w");
}

TEST(RegistriesConfigTest, EmptyDocuments) {
  EXPECT_TRUE(RegistriesConfig::Parse("{}")->hosts.empty());
  EXPECT_TRUE(RegistriesConfig::Parse(R"({"registries": {}})")->hosts.empty());
}

TEST(RegistriesConfigTest, RefusesNamingTheProblem) {
  struct Case {
    const char* json;
    const char* error;
  } cases[] = {
      {"not json", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {R"({"mirrors": {}})", "unknown field mirrors"},
      {R"({"registries": {"docker.io": {"mirror": []}}})",
       "unknown field registries.\"docker.io\".mirror"},
      {R"({"registries": {"docker.io": {"mirrors": ["ftp://m"]}}})",
       "registries.\"docker.io\".mirrors[0] \"ftp://m\": only http:// and "
       "https://"},
      {R"({"registries": {"docker.io": {"mirrors": ["m.example"]}}})",
       "mirrors[0] \"m.example\""},
      {R"({"registries": {"docker.io": {"mirrors": ["https://m/?a=b"]}}})",
       "a query is not allowed"},
      {R"({"registries": {"docker.io": {"mirrors": "http://m"}}})",
       "mirrors: must be an array"},
      {R"({"registries": {"docker.io": {"mirrors": [1]}}})",
       "mirrors[0]: must be a string"},
      {R"({"registries": {"docker.io": {"insecure": "yes"}}})",
       "insecure: must be true or false"},
      {R"({"registries": {"docker.io": {"ca_file": "ca.pem"}}})",
       "ca_file: must be an absolute path"},
      {R"({"registries": {"docker.io": {"password": "p"}}})",
       "a password without a username"},
      {R"({"registries": {"docker.io": {"username": "a:b"}}})",
       "cannot contain ':'"},
      {R"({"registries": {"https://docker.io": {}}})", "not a URL"},
      {R"({"registries": {"docker.io/library": {}}})",
       "character '/' is not allowed"},
      {R"({"registries": {"": {}}})", "host \"\": empty"},
      {R"({"registries": {"docker.io": []}})", "must be an object"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<RegistriesConfig> config = RegistriesConfig::Parse(c.json);
    ASSERT_FALSE(config.ok()) << c.json;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(config.status().message(), HasSubstr(c.error)) << c.json;
  }
}

TEST(RegistriesConfigTest, Load) {
  testing::ShortTempDir dir;
  // A missing file is an empty configuration.
  absl::StatusOr<RegistriesConfig> missing =
      RegistriesConfig::Load(dir.Join("none.json"));
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_TRUE(missing->hosts.empty());

  const std::string path = dir.Join("registries.json");
  std::ofstream(path) << R"({"registries": {"r.example": {"insecure": true}}})";
  absl::StatusOr<RegistriesConfig> config = RegistriesConfig::Load(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->hosts.at("r.example").insecure);

  std::ofstream(path, std::ios::trunc) << R"({"registries": {"r": {"x": 1}}})";
  absl::StatusOr<RegistriesConfig> bad = RegistriesConfig::Load(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(path));
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown field"));

  // A directory cannot be read as the file.
  absl::StatusOr<RegistriesConfig> directory =
      RegistriesConfig::Load(dir.path());
  EXPECT_FALSE(directory.ok());
}

}  // namespace
}  // namespace berth::images
