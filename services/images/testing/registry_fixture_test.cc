#include "services/images/testing/registry_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"

namespace berth::images {
namespace {

using ::testing::HasSubstr;

constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
constexpr char kDockerManifest[] =
    "application/vnd.docker.distribution.manifest.v2+json";
constexpr char kDockerList[] =
    "application/vnd.docker.distribution.manifest.list.v2+json";

nlohmann::json ImagesJson() {
  return nlohmann::json::parse(
      berth::testing::ReadFileOrEmpty(TestImagePath("images.json")));
}

// Whether something accepts TCP connections at "127.0.0.1:PORT".
bool Listening(const std::string& endpoint) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(endpoint.substr(endpoint.find(':') + 1), &port));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

struct Mode {
  const char* name;
  bool tls;
  bool auth;
};

class RegistryFixtureTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    RegistryOptions options;
    options.tls = GetParam().tls;
    options.auth = GetParam().auth;
    absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
        RegistryFixture::Start(options);
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = std::move(*registry);
    std::cout << "registry (" << GetParam().name << ") at "
              << registry_->base_url() << " started in "
              << absl::FormatDuration(registry_->start_duration()) << "\n";
  }

  std::unique_ptr<RegistryFixture> registry_;
};

TEST_P(RegistryFixtureTest, PushedOciImageIsServed) {
  ASSERT_TRUE(
      registry_->Push(TestImagePath("busybox"), "library/busybox:1").ok());
  absl::StatusOr<std::string> raw =
      registry_->Inspect("library/busybox:1", /*raw=*/true);
  ASSERT_TRUE(raw.ok()) << raw.status();
  nlohmann::json manifest = nlohmann::json::parse(*raw);
  EXPECT_EQ(manifest["mediaType"], kOciManifest);
  nlohmann::json images = ImagesJson();
  EXPECT_EQ(manifest["layers"][0]["digest"],
            images["busybox"]["layers"][0]["digest"]);

  absl::StatusOr<std::string> info = registry_->Inspect("library/busybox:1");
  ASSERT_TRUE(info.ok()) << info.status();
  nlohmann::json inspect = nlohmann::json::parse(*info);
  // The OCI manifest is stored as the layout has it, byte for byte.
  EXPECT_EQ(inspect["Digest"], images["busybox"]["manifest_digest"]);
  EXPECT_EQ(inspect["Os"], "linux");
}

TEST_P(RegistryFixtureTest, PushedDockerSchema2ImageIsServed) {
  PushOptions push;
  push.format = ManifestFormat::kDockerSchema2;
  ASSERT_TRUE(
      registry_->Push(TestImagePath("multilayer"), "multilayer:v2s2", push)
          .ok());
  absl::StatusOr<std::string> raw =
      registry_->Inspect("multilayer:v2s2", /*raw=*/true);
  ASSERT_TRUE(raw.ok()) << raw.status();
  nlohmann::json manifest = nlohmann::json::parse(*raw);
  EXPECT_EQ(manifest["mediaType"], kDockerManifest);
  nlohmann::json layers = ImagesJson()["multilayer"]["layers"];
  ASSERT_EQ(manifest["layers"].size(), layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    EXPECT_EQ(manifest["layers"][i]["digest"], layers[i]["digest"]);
    EXPECT_EQ(manifest["layers"][i]["mediaType"],
              "application/vnd.docker.image.rootfs.diff.tar.gzip");
  }
}

TEST_P(RegistryFixtureTest, StopsAndCleansUp) {
  std::string storage = registry_->storage_dir();
  std::string endpoint = registry_->endpoint();
  EXPECT_TRUE(Listening(endpoint));
  EXPECT_TRUE(berth::testing::PathExists(storage));
  registry_.reset();
  EXPECT_FALSE(Listening(endpoint));
  EXPECT_FALSE(berth::testing::PathExists(storage));
}

INSTANTIATE_TEST_SUITE_P(Modes, RegistryFixtureTest,
                         ::testing::Values(Mode{"plain", false, false},
                                           Mode{"tls", true, false},
                                           Mode{"auth", false, true},
                                           Mode{"tls_auth", true, true}),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           return std::string(info.param.name);
                         });

TEST(RegistryFixture, MultiPlatformIndexAndManifestList) {
  absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
      RegistryFixture::Start();
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE((*registry)->Push(TestImagePath("multiarch"), "multi:oci").ok());
  PushOptions push;
  push.format = ManifestFormat::kDockerSchema2;
  absl::Status pushed =
      (*registry)->Push(TestImagePath("multiarch"), "multi:docker", push);
  ASSERT_TRUE(pushed.ok()) << pushed;

  absl::StatusOr<std::string> raw = (*registry)->Inspect("multi:oci", true);
  ASSERT_TRUE(raw.ok()) << raw.status();
  nlohmann::json index = nlohmann::json::parse(*raw);
  EXPECT_EQ(index["mediaType"], kOciIndex);
  ASSERT_EQ(index["manifests"].size(), 2u);
  EXPECT_EQ(index["manifests"][1]["platform"]["architecture"], "arm64");

  raw = (*registry)->Inspect("multi:docker", true);
  ASSERT_TRUE(raw.ok()) << raw.status();
  nlohmann::json list = nlohmann::json::parse(*raw);
  EXPECT_EQ(list["mediaType"], kDockerList);
  ASSERT_EQ(list["manifests"].size(), 2u);
  EXPECT_EQ(list["manifests"][0]["mediaType"], kDockerManifest);
}

TEST(RegistryFixture, ArchivesArePushed) {
  absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
      RegistryFixture::Start();
  ASSERT_TRUE(registry.ok()) << registry.status();
  absl::Status pushed = (*registry)->Push(
      "docker-archive:" + TestImagePath("busybox-docker.tar"), "from:docker");
  EXPECT_TRUE(pushed.ok()) << pushed;
  pushed = (*registry)->Push("oci-archive:" + TestImagePath("busybox-oci.tar"),
                             "from:oci");
  EXPECT_TRUE(pushed.ok()) << pushed;
  EXPECT_TRUE((*registry)->Inspect("from:docker").ok());
  EXPECT_TRUE((*registry)->Inspect("from:oci").ok());
}

// Without the credentials the registry refuses: auth is really on.
TEST(RegistryFixture, AuthIsEnforced) {
  RegistryOptions options;
  options.auth = true;
  absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
      RegistryFixture::Start(options);
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE((*registry)->Push(TestImagePath("busybox"), "busybox:1").ok());
  std::string target =
      absl::StrCat("docker://", (*registry)->endpoint(), "/busybox:1");
  absl::StatusOr<std::string> anonymous =
      (*registry)->RunSkopeo({"inspect", "--tls-verify=false", target});
  ASSERT_FALSE(anonymous.ok());
  EXPECT_THAT(std::string(anonymous.status().message()),
              HasSubstr("authentication required"));
  absl::StatusOr<std::string> wrong = (*registry)->RunSkopeo(
      {"inspect", "--tls-verify=false", "--creds=berth:wrong", target});
  EXPECT_FALSE(wrong.ok());
  EXPECT_TRUE((*registry)->Inspect("busybox:1").ok());
}

// Without the test CA the server's certificate is not trusted: the CA is
// what makes TLS work, not a disabled check.
TEST(RegistryFixture, TlsNeedsTheCa) {
  RegistryOptions options;
  options.tls = true;
  absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
      RegistryFixture::Start(options);
  ASSERT_TRUE(registry.ok()) << registry.status();
  EXPECT_THAT((*registry)->ca_file(), HasSubstr("ca.crt"));
  EXPECT_THAT(berth::testing::ReadFileOrEmpty((*registry)->ca_file()),
              HasSubstr("BEGIN CERTIFICATE"));
  ASSERT_TRUE((*registry)->Push(TestImagePath("busybox"), "busybox:1").ok());
  absl::StatusOr<std::string> untrusted = (*registry)->RunSkopeo(
      {"inspect",
       absl::StrCat("docker://", (*registry)->endpoint(), "/busybox:1")});
  ASSERT_FALSE(untrusted.ok());
  EXPECT_THAT(std::string(untrusted.status().message()),
              HasSubstr("certificate signed by unknown authority"));
}

}  // namespace
}  // namespace berth::images
