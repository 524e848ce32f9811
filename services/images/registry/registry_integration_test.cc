// The registry client against Debian's docker-registry 2.8 on 127.0.0.1
// (//services/images/testing:registry_fixture): plain HTTP, TLS with the
// test's CA, htpasswd auth, a docker.io mirror, resumed and corrupted blobs.

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/oci/reference.h"
#include "services/images/registry/registry_client.h"
#include "services/images/registry/registry_test_util.h"
#include "services/images/store/content_store.h"
#include "services/images/testing/registry_fixture.h"

namespace berth::images {
namespace {

using ::berth::images::testing::FetchIntoStore;
using ::berth::images::testing::InsecureConfig;
using ::berth::images::testing::LeavePrefix;
using ::berth::images::testing::MakeClient;
using ::berth::images::testing::OpenStore;
using ::berth::images::testing::Ref;
using ::testing::HasSubstr;

nlohmann::json ImagesJson() {
  return nlohmann::json::parse(
      berth::testing::ReadFileOrEmpty(TestImagePath("images.json")));
}

class RegistryIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenStore(dir_.Join("store"));
    ASSERT_NE(store_, nullptr);
    images_ = ImagesJson();
    ASSERT_TRUE(images_.contains("busybox")) << "images.json not found";
  }

  // Starts a registry with busybox pushed as `target`.
  std::unique_ptr<RegistryFixture> StartRegistry(
      const RegistryOptions& options,
      const std::string& target = "library/busybox:1",
      const PushOptions& push = {}) {
    absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
        RegistryFixture::Start(options);
    EXPECT_TRUE(registry.ok()) << registry.status();
    if (!registry.ok()) return nullptr;
    absl::Status pushed =
        (*registry)->Push(TestImagePath("busybox"), target, push);
    EXPECT_TRUE(pushed.ok()) << pushed;
    return *std::move(registry);
  }

  // A client speaking plain HTTP to `registry`.
  static std::unique_ptr<RegistryClient> InsecureClient(
      const RegistryFixture& registry) {
    return MakeClient(InsecureConfig(registry.endpoint()), 2);
  }

  // Where `registry` keeps busybox's layer (its filesystem driver's layout).
  std::string LayerDataPath(const RegistryFixture& registry) const {
    const std::string digest = BusyboxLayerDigest();
    return absl::StrCat(
        registry.storage_dir(), "/docker/registry/v2/blobs/sha256/",
        DigestHex(digest).substr(0, 2), "/", DigestHex(digest), "/data");
  }

  // Downloads `descriptor` into the store.
  absl::Status FetchInto(RegistryClient& client, const Reference& reference,
                         const Descriptor& descriptor) {
    return FetchIntoStore(client, *store_, reference, descriptor.digest,
                          descriptor.size);
  }

  // Pulls `reference` as berth-images does (index -> this platform's
  // manifest -> config and layers) and checks it is busybox's.
  void PullBusybox(RegistryClient& client, const Reference& reference,
                   const std::string& expected_type) {
    absl::StatusOr<FetchedManifest> fetched = client.FetchManifest(reference);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    EXPECT_EQ(fetched->media_type, expected_type);
    if (IsIndexMediaType(fetched->media_type)) {
      absl::StatusOr<Index> index =
          ParseIndex(fetched->body, fetched->media_type);
      ASSERT_TRUE(index.ok()) << index.status();
      absl::StatusOr<Descriptor> chosen =
          ChoosePlatform(*index, HostPlatform());
      ASSERT_TRUE(chosen.ok()) << chosen.status();
      fetched = client.FetchManifestByDigest(reference, chosen->digest,
                                             chosen->media_type);
      ASSERT_TRUE(fetched.ok()) << fetched.status();
    }
    absl::StatusOr<Manifest> manifest =
        ParseManifest(fetched->body, fetched->media_type);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    const nlohmann::json& busybox = images_["busybox"];
    EXPECT_EQ(manifest->config.digest, busybox["config_digest"]);
    ASSERT_EQ(manifest->layers.size(), 1u);
    EXPECT_EQ(manifest->layers[0].digest, busybox["layers"][0]["digest"]);
    absl::Status config = FetchInto(client, reference, manifest->config);
    ASSERT_TRUE(config.ok()) << config;
    absl::Status layer = FetchInto(client, reference, manifest->layers[0]);
    ASSERT_TRUE(layer.ok()) << layer;
    EXPECT_TRUE(store_->Has(manifest->config.digest));
    EXPECT_TRUE(store_->Has(manifest->layers[0].digest));
    absl::StatusOr<int64_t> size = store_->Size(manifest->layers[0].digest);
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(*size, busybox["layers"][0]["size"].get<int64_t>());
  }

  std::string BusyboxLayerDigest() const {
    return images_["busybox"]["layers"][0]["digest"];
  }
  int64_t BusyboxLayerSize() const {
    return images_["busybox"]["layers"][0]["size"];
  }

  berth::testing::ShortTempDir dir_;
  std::unique_ptr<ContentStore> store_;
  nlohmann::json images_;
};

TEST_F(RegistryIntegrationTest, PlainHttpWhenInsecure) {
  auto registry = StartRegistry({});
  ASSERT_NE(registry, nullptr);
  auto client = InsecureClient(*registry);
  const Reference reference = Ref(registry->endpoint() + "/library/busybox:1");
  PullBusybox(*client, reference, kOciManifest);

  absl::StatusOr<FetchedManifest> manifest = client->FetchManifest(reference);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->digest, images_["busybox"]["manifest_digest"]);
  EXPECT_EQ(manifest->endpoint, registry->base_url());

  absl::Status missing =
      client->FetchManifest(Ref(registry->endpoint() + "/library/busybox:9"))
          .status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      missing.message(),
      HasSubstr(absl::StrCat("manifest unknown: ", registry->endpoint(),
                             "/library/busybox:9 at ", registry->endpoint())));
  std::cout << "unknown tag: " << missing << "\n";
}

// Without "insecure" the client speaks HTTPS, which a plain registry does
// not: no silent downgrade.
TEST_F(RegistryIntegrationTest, HttpsByDefault) {
  auto registry = StartRegistry({});
  ASSERT_NE(registry, nullptr);
  auto client = MakeClient("{}");
  absl::Status status =
      client->FetchManifest(Ref(registry->endpoint() + "/library/busybox:1"))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("TLS handshake with https://" +
                                          registry->endpoint() + " failed"));
  EXPECT_THAT(status.message(), HasSubstr("marked insecure"));
  std::cout << "https to a plain registry: " << status << "\n";
}

TEST_F(RegistryIntegrationTest, DockerSchema2Manifest) {
  PushOptions push;
  push.format = ManifestFormat::kDockerSchema2;
  auto registry = StartRegistry({}, "library/busybox:v2s2", push);
  ASSERT_NE(registry, nullptr);
  auto client = InsecureClient(*registry);
  PullBusybox(*client, Ref(registry->endpoint() + "/library/busybox:v2s2"),
              kDockerManifest);
}

TEST_F(RegistryIntegrationTest, MultiPlatformIndex) {
  absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
      RegistryFixture::Start();
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE((*registry)->Push(TestImagePath("multiarch"), "multi:1").ok());
  auto client = InsecureClient(**registry);
  PullBusybox(*client, Ref((*registry)->endpoint() + "/multi:1"), kOciIndex);
}

TEST_F(RegistryIntegrationTest, TlsWithTheTestCa) {
  RegistryOptions options;
  options.tls = true;
  auto registry = StartRegistry(options);
  ASSERT_NE(registry, nullptr);
  auto client = MakeClient(
      absl::StrCat(R"({"registries": {")", registry->endpoint(),
                   R"(": {"ca_file": ")", registry->ca_file(), R"("}}})"));
  PullBusybox(*client, Ref(registry->endpoint() + "/library/busybox:1"),
              kOciManifest);
}

TEST_F(RegistryIntegrationTest, TlsWithoutTheCaNamesHostAndCertificate) {
  RegistryOptions options;
  options.tls = true;
  auto registry = StartRegistry(options);
  ASSERT_NE(registry, nullptr);
  auto client = MakeClient("{}");
  absl::Status status =
      client->FetchManifest(Ref(registry->endpoint() + "/library/busybox:1"))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr(registry->endpoint()));
  EXPECT_THAT(status.message(), HasSubstr("certificate"));
  std::cout << "TLS without the CA: " << status << "\n";
}

TEST_F(RegistryIntegrationTest, HtpasswdBasicAuth) {
  RegistryOptions options;
  options.auth = true;
  auto registry = StartRegistry(options);
  ASSERT_NE(registry, nullptr);
  const Reference reference = Ref(registry->endpoint() + "/library/busybox:1");

  auto anonymous = InsecureClient(*registry);
  absl::Status status = anonymous->FetchManifest(reference).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(status.message(), HasSubstr(registry->endpoint()));
  EXPECT_THAT(status.message(), HasSubstr("library/busybox"));
  std::cout << "without credentials: " << status << "\n";

  auto wrong = MakeClient(
      InsecureConfig(registry->endpoint(),
                     absl::StrCat(R"(, "username": ")", registry->username(),
                                  R"(", "password": "wrong")")));
  status = wrong->FetchManifest(reference).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(status.message(), HasSubstr(registry->username()));
  std::cout << "wrong password: " << status << "\n";

  auto client = MakeClient(InsecureConfig(
      registry->endpoint(),
      absl::StrCat(R"(, "username": ")", registry->username(),
                   R"(", "password": ")", registry->password(), R"(")")));
  PullBusybox(*client, reference, kOciManifest);
}

TEST_F(RegistryIntegrationTest, TlsAndAuth) {
  RegistryOptions options;
  options.tls = true;
  options.auth = true;
  auto registry = StartRegistry(options);
  ASSERT_NE(registry, nullptr);
  auto client = MakeClient(absl::StrCat(
      R"({"registries": {")", registry->endpoint(), R"(": {"ca_file": ")",
      registry->ca_file(), R"(", "username": ")", registry->username(),
      R"(", "password": ")", registry->password(), R"("}}})"));
  PullBusybox(*client, Ref(registry->endpoint() + "/library/busybox:1"),
              kOciManifest);
}

// An air-gapped node points docker.io at its own registry.
TEST_F(RegistryIntegrationTest, DockerHubMirror) {
  auto registry = StartRegistry({}, "library/busybox:latest");
  ASSERT_NE(registry, nullptr);
  auto client =
      MakeClient(absl::StrCat(R"({"registries": {"docker.io": {"mirrors": [")",
                              registry->base_url(), R"("]}}})"));
  const Reference reference = Ref("docker.io/library/busybox:latest");
  absl::StatusOr<FetchedManifest> manifest = client->FetchManifest(reference);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->endpoint, registry->base_url());
  PullBusybox(*client, Ref("busybox"), kOciManifest);
}

TEST_F(RegistryIntegrationTest, ResumesAPartialLayer) {
  auto registry = StartRegistry({});
  ASSERT_NE(registry, nullptr);
  const std::string digest = BusyboxLayerDigest();
  const int64_t size = BusyboxLayerSize();
  const std::string bytes =
      berth::testing::ReadFileOrEmpty(LayerDataPath(*registry));
  ASSERT_EQ(static_cast<int64_t>(bytes.size()), size);
  // An interrupted download left the first 400000 bytes.
  ASSERT_TRUE(LeavePrefix(*store_, digest, size, bytes.substr(0, 400000)).ok());

  std::vector<int64_t> progress;
  absl::Status status =
      FetchIntoStore(*InsecureClient(*registry), *store_,
                     Ref(registry->endpoint() + "/library/busybox:1"), digest,
                     size, &progress);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(store_->Has(digest));
  ASSERT_FALSE(progress.empty());
  // It started at the bytes held, not at 0.
  EXPECT_EQ(progress.front(), 400000);
  EXPECT_EQ(progress.back(), size);
  absl::StatusOr<std::string> stored = store_->ReadBlob(digest, size);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(DigestOf(*stored), digest);
}

// The registry's copy of a layer is damaged: the download fails naming the
// digest, and nothing is stored.
TEST_F(RegistryIntegrationTest, CorruptedBlobIsDataLoss) {
  auto registry = StartRegistry({});
  ASSERT_NE(registry, nullptr);
  auto client = InsecureClient(*registry);
  const std::string digest = BusyboxLayerDigest();
  const int64_t size = BusyboxLayerSize();
  const std::string data_path = LayerDataPath(*registry);
  {
    // Garbage of the same size in the middle of the layer.
    int fd = open(data_path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << data_path;
    const std::string garbage(4096, 'G');
    ASSERT_EQ(pwrite(fd, garbage.data(), garbage.size(), size / 2),
              static_cast<ssize_t>(garbage.size()));
    close(fd);
  }
  Descriptor layer;
  layer.digest = digest;
  layer.size = size;
  absl::Status status = FetchInto(
      *client, Ref(registry->endpoint() + "/library/busybox:1"), layer);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(digest));
  std::cout << "corrupted blob: " << status << "\n";
  EXPECT_FALSE(store_->Has(digest));
  absl::StatusOr<std::vector<std::string>> stored = store_->List();
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
  // Nothing half-written to resume from.
  absl::StatusOr<std::unique_ptr<BlobWriter>> writer =
      store_->Writer(digest, size);
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ((*writer)->offset(), 0);
}

}  // namespace
}  // namespace berth::images
