#include "services/images/image_record.h"

#include <dirent.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"
#include "services/images/oci/manifest.h"
#include "services/images/store/content_store.h"

namespace berth::images {
namespace {

namespace pb = ::berth::image::v1;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string TestImage(const std::string& name) {
  return RunfilePath(absl::StrCat("tools/testimages/images/", name));
}

class ImageRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ContentStore>> content =
        ContentStore::Open(dir_.Join("content"));
    ASSERT_TRUE(content.ok()) << content.status();
    content_ = *std::move(content);
    expected_ =
        nlohmann::json::parse(ReadFileOrEmpty(TestImage("images.json")));
  }

  // Stores every blob of the layout `name` but those in `skip`.
  void StoreLayout(const std::string& name,
                   const std::vector<std::string>& skip = {}) {
    const std::string blobs = TestImage(name + "/blobs/sha256");
    DIR* dir = opendir(blobs.c_str());
    ASSERT_NE(dir, nullptr) << blobs;
    while (struct dirent* entry = readdir(dir)) {
      const std::string hex = entry->d_name;
      if (hex == "." || hex == "..") continue;
      const std::string digest = "sha256:" + hex;
      if (std::find(skip.begin(), skip.end(), digest) != skip.end()) continue;
      ASSERT_TRUE(content_
                      ->WriteBlob(digest, ReadFileOrEmpty(
                                              absl::StrCat(blobs, "/", hex)))
                      .ok());
    }
    closedir(dir);
  }

  static pb::Platform Linux(const std::string& architecture) {
    pb::Platform platform;
    platform.set_os("linux");
    platform.set_architecture(architecture);
    return platform;
  }

  ShortTempDir dir_;
  std::unique_ptr<ContentStore> content_;
  nlohmann::json expected_;
};

TEST_F(ImageRecordTest, AManifestResolvesToItselfAndMakesTheRecord) {
  StoreLayout("busybox");
  const nlohmann::json& want = expected_["busybox"];
  absl::StatusOr<ResolvedImage> image =
      ResolveStoredImage(*content_, want["manifest_digest"].get<std::string>(),
                         "", Linux("amd64"));
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->media_type, kOciManifest);
  EXPECT_EQ(image->manifest_digest, want["manifest_digest"]);
  EXPECT_FALSE(image->index_platform.has_value());

  pb::Image record =
      MakeImageRecord("docker.io/library/busybox:latest", *image, {12345});
  EXPECT_EQ(record.name(), "docker.io/library/busybox:latest");
  EXPECT_EQ(record.digest(), want["manifest_digest"]);
  EXPECT_EQ(record.config_digest(), want["config_digest"]);
  EXPECT_EQ(record.platform().architecture(), "amd64");
  ASSERT_THAT(record.layers(), SizeIs(1));
  EXPECT_EQ(record.layers(0).diff_id(), want["layers"][0]["diff_id"]);
  EXPECT_EQ(record.layers(0).unpacked_size(), 12345);
  EXPECT_EQ(record.size(),
            *content_->Size(record.config_digest()) + record.layers(0).size());
  EXPECT_THAT(record.config().cmd(), ElementsAre("sh"));
  EXPECT_TRUE(record.has_created());
}

TEST_F(ImageRecordTest, AnIndexResolvesToThePlatformsManifest) {
  StoreLayout("multiarch");
  const nlohmann::json& want = expected_["multiarch"];
  const std::string index = want["index_digest"];
  absl::StatusOr<ResolvedImage> arm64 =
      ResolveStoredImage(*content_, index, kOciIndex, Linux("arm64"));
  ASSERT_TRUE(arm64.ok()) << arm64.status();
  EXPECT_EQ(arm64->digest, index);
  EXPECT_EQ(arm64->manifest_digest,
            want["manifests"]["arm64"]["manifest_digest"]);
  ASSERT_TRUE(arm64->index_platform.has_value());
  EXPECT_EQ(arm64->index_platform->architecture(), "arm64");
  EXPECT_EQ(MakeImageRecord("x", *arm64, {}).platform().architecture(),
            "arm64");

  absl::StatusOr<ResolvedImage> mips =
      ResolveStoredImage(*content_, index, "", Linux("mips"));
  ASSERT_FALSE(mips.ok());
  EXPECT_EQ(mips.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(mips.status().message(), HasSubstr(index));
}

TEST_F(ImageRecordTest, AMissingConfigIsNotFoundNamingIt) {
  const nlohmann::json& want = expected_["busybox"];
  const std::string config = want["config_digest"];
  StoreLayout("busybox", {config});
  absl::StatusOr<ResolvedImage> image =
      ResolveStoredImage(*content_, want["manifest_digest"].get<std::string>(),
                         "", Linux("amd64"));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(image.status().message(), HasSubstr(config));
}

TEST_F(ImageRecordTest, CheckLayersRefusesAConfigWithOtherLayers) {
  StoreLayout("busybox");
  const nlohmann::json& want = expected_["busybox"];
  absl::StatusOr<ResolvedImage> image =
      ResolveStoredImage(*content_, want["manifest_digest"].get<std::string>(),
                         "", Linux("amd64"));
  ASSERT_TRUE(image.ok());
  image->config.diff_ids.push_back(image->config.diff_ids[0]);
  absl::Status checked = CheckLayers(*image);
  EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(checked.message(), HasSubstr("2 diff_ids"));

  image->config.diff_ids.pop_back();
  image->manifest.layers[0].media_type = "application/x-nonsense";
  checked = CheckLayers(*image);
  EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(checked.message(), HasSubstr(image->manifest.layers[0].digest));
}

}  // namespace
}  // namespace berth::images
