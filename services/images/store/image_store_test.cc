#include "services/images/store/image_store.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string D(absl::string_view seed) {
  return absl::StrCat("sha256:", Sha256Hex(seed));
}

ImageStore::Image MakeImage(const std::string& name, absl::string_view seed) {
  ImageStore::Image image;
  image.set_name(name);
  image.set_digest(D(absl::StrCat(seed, "index")));
  image.set_manifest_digest(D(absl::StrCat(seed, "manifest")));
  image.set_config_digest(D(absl::StrCat(seed, "config")));
  image.mutable_platform()->set_os("linux");
  image.mutable_platform()->set_architecture("amd64");
  auto* layer = image.add_layers();
  layer->set_digest(D(absl::StrCat(seed, "layer")));
  layer->set_diff_id(D(absl::StrCat(seed, "diff")));
  layer->set_size(1234);
  image.mutable_config()->add_cmd("/bin/sh");
  return image;
}

std::vector<std::string> Names(const std::vector<ImageStore::Image>& images) {
  std::vector<std::string> names;
  for (const auto& image : images) names.push_back(image.name());
  return names;
}

TEST(ImageStoreTest, PutGetListTagDeleteAndReopen) {
  testing::ShortTempDir dir;
  const std::string path = dir.Join("images");
  {
    auto store = ImageStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_THAT((*store)->List(), IsEmpty());
    ASSERT_TRUE(
        (*store)->Put(MakeImage("docker.io/library/busybox:latest", "b")).ok());
    ASSERT_TRUE((*store)->Put(MakeImage("127.0.0.1:5000/app:1", "a")).ok());
    auto busybox = (*store)->Get("docker.io/library/busybox:latest");
    ASSERT_TRUE(busybox.ok());
    EXPECT_EQ(busybox->config_digest(), D("bconfig"));
    EXPECT_EQ(busybox->config().cmd(0), "/bin/sh");
    EXPECT_TRUE(busybox->has_stored_at());
    EXPECT_THAT(busybox->other_names(), IsEmpty());

    auto tagged = (*store)->Tag("docker.io/library/busybox:latest",
                                "docker.io/library/busybox:mine");
    ASSERT_TRUE(tagged.ok()) << tagged.status();
    EXPECT_EQ(tagged->name(), "docker.io/library/busybox:mine");
    EXPECT_THAT(tagged->other_names(),
                ElementsAre("docker.io/library/busybox:latest"));
    EXPECT_THAT(Names((*store)->List("docker.io/")),
                ElementsAre("docker.io/library/busybox:latest",
                            "docker.io/library/busybox:mine"));
    EXPECT_EQ((*store)->Tag("nope", "x").status().code(),
              absl::StatusCode::kNotFound);
  }
  // Reopened: the records are read back.
  auto store = ImageStore::Open(path);
  ASSERT_TRUE(store.ok());
  EXPECT_THAT(
      Names((*store)->List()),
      ElementsAre("127.0.0.1:5000/app:1", "docker.io/library/busybox:latest",
                  "docker.io/library/busybox:mine"));
  ASSERT_TRUE((*store)->Delete("docker.io/library/busybox:latest").ok());
  absl::Status again = (*store)->Delete("docker.io/library/busybox:latest");
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(again.message(), HasSubstr("busybox:latest"));
  EXPECT_THAT((*store)->Get("docker.io/library/busybox:mine")->other_names(),
              IsEmpty());
  store->reset();
  store = ImageStore::Open(path);
  EXPECT_THAT(
      Names((*store)->List()),
      ElementsAre("127.0.0.1:5000/app:1", "docker.io/library/busybox:mine"));
}

TEST(ImageStoreTest, RefusesMalformedRecords) {
  testing::ShortTempDir dir;
  auto store = ImageStore::Open(dir.Join("images"));
  ASSERT_TRUE(store.ok());
  ImageStore::Image image = MakeImage("x:1", "x");
  image.mutable_layers(0)->set_diff_id("sha256:../../etc");
  absl::Status status = (*store)->Put(image);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("layer 0 diff_id"));
  image = MakeImage("", "x");
  EXPECT_EQ((*store)->Put(image).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT((*store)->List(), IsEmpty());
}

TEST(ImageStoreTest, OpenDropsUnreadableAndTemporaryFiles) {
  testing::ShortTempDir dir;
  const std::string path = dir.Join("images");
  {
    auto store = ImageStore::Open(path);
    ASSERT_TRUE((*store)->Put(MakeImage("good:1", "g")).ok());
  }
  const std::string garbage =
      absl::StrCat(path, "/", std::string(64, 'a'), ".json");
  const std::string tmp = absl::StrCat(garbage, ".tmp-0123");
  for (const std::string& file : {garbage, tmp}) {
    FILE* f = fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("{not json", f);
    fclose(f);
  }
  auto store = ImageStore::Open(path);
  ASSERT_TRUE(store.ok());
  EXPECT_THAT(Names((*store)->List()), ElementsAre("good:1"));
  EXPECT_FALSE(testing::PathExists(garbage));
  EXPECT_FALSE(testing::PathExists(tmp));
}

}  // namespace
}  // namespace berth::images
