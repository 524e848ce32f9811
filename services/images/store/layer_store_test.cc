#include "services/images/store/layer_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"
#include "services/images/oci/digest.h"
#include "services/images/store/fs_util.h"
#include "services/images/store/store_test_util.h"

namespace berth::images {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

class LayerStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    content_ = *ContentStore::Open(dir_.path());
    layers_dir_ = dir_.Join("layers");
  }

  std::unique_ptr<LayerStore> Open(LayerStore::UnpackFunction unpack) {
    auto store = LayerStore::Open(layers_dir_, content_.get(), unpack);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // A blob in the content store (its bytes do not matter to a fake unpack).
  std::string PutBlob(absl::string_view data) {
    const std::string digest = DigestOf(data);
    EXPECT_TRUE(content_->WriteBlob(digest, data).ok());
    return digest;
  }

  testing::ShortTempDir dir_;
  std::unique_ptr<ContentStore> content_;
  std::string layers_dir_;
};

TEST_F(LayerStoreTest, UnpacksARealLayerOnceAndDeletesIt) {
  if (geteuid() != 0) GTEST_SKIP() << "unpacking owners and devices needs root";
  const nlohmann::json& layer =
      store_testing::TestImage("busybox")["layers"][0];
  const std::string digest = layer["digest"];
  const std::string diff_id = layer["diff_id"];
  ASSERT_TRUE(
      content_
          ->WriteBlob(digest, store_testing::TestImageBlob("busybox", digest))
          .ok());
  auto store = Open(UnpackLayer);
  EXPECT_FALSE(store->Has(diff_id));
  auto info = store->Unpack(digest, diff_id);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->path, absl::StrCat(layers_dir_, "/", DigestHex(diff_id)));
  EXPECT_EQ(info->blob_digest, digest);
  EXPECT_GT(info->unpacked_size, 500000);
  EXPECT_TRUE(testing::PathExists(info->path + "/bin/busybox"));
  EXPECT_TRUE(testing::PathExists(
      absl::StrCat(layers_dir_, "/", DigestHex(diff_id), ".json")));
  EXPECT_TRUE(store->Has(diff_id));
  // Again: the layer as it is.
  auto again = store->Unpack(digest, diff_id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->unpacked_at, info->unpacked_at);
  // Reopened: still there.
  store = Open(UnpackLayer);
  auto listed = store->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].diff_id, diff_id);
  EXPECT_EQ((*listed)[0].unpacked_size, info->unpacked_size);

  auto freed = store->Delete(diff_id);
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_GT(*freed, 500000);
  EXPECT_FALSE(store->Has(diff_id));
  EXPECT_THAT(*store->List(), IsEmpty());
  EXPECT_EQ(*store->Delete(diff_id), 0);
}

TEST_F(LayerStoreTest, WrongDiffIdStoresNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "unpacking owners and devices needs root";
  const nlohmann::json& layer =
      store_testing::TestImage("busybox")["layers"][0];
  const std::string digest = layer["digest"];
  const std::string wrong = DigestOf("not this layer");
  ASSERT_TRUE(
      content_
          ->WriteBlob(digest, store_testing::TestImageBlob("busybox", digest))
          .ok());
  auto store = Open(UnpackLayer);
  absl::Status status = store->Unpack(digest, wrong).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(digest));
  EXPECT_THAT(status.message(), HasSubstr(wrong));
  EXPECT_THAT(status.message(), HasSubstr(layer["diff_id"].get<std::string>()));
  EXPECT_FALSE(store->Has(wrong));
  EXPECT_THAT(*store->List(), IsEmpty());
  EXPECT_THAT(*store_internal::ListDir(layers_dir_), IsEmpty());
}

TEST_F(LayerStoreTest, MissingBlobAndBadDigestsAreErrors) {
  auto store = Open(store_testing::FakeUnpack(DigestOf("x")));
  absl::Status status =
      store->Unpack(DigestOf("absent blob"), DigestOf("x")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(DigestOf("absent blob")));
  EXPECT_EQ(store->Unpack("sha256:../../x", DigestOf("x")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Unpack(DigestOf("absent blob"), "md5:00").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LayerStoreTest, ConcurrentRequestsForALayerUnpackItOnce) {
  const std::string blob = PutBlob("layer blob");
  const std::string diff_id = DigestOf("layer");
  std::atomic<int> calls{0};
  absl::Notification entered;
  absl::Notification release;
  auto store =
      Open(store_testing::FakeUnpack(diff_id, &calls, &entered, &release));
  std::vector<absl::StatusOr<LayerInfo>> results(6, absl::UnknownError(""));
  std::vector<std::thread> threads;
  threads.emplace_back([&] { results[0] = store->Unpack(blob, diff_id); });
  // The others ask while the first is unpacking.
  entered.WaitForNotification();
  for (int i = 1; i < 6; ++i) {
    threads.emplace_back([&, i] { results[i] = store->Unpack(blob, diff_id); });
  }
  release.Notify();
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(calls.load(), 1);
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->path, results[0]->path);
  }
  EXPECT_EQ(testing::ReadFileOrEmpty(results[0]->path + "/file"), "content");
}

TEST_F(LayerStoreTest, AFailedUnpackLeavesNothingAndTheNextTries) {
  const std::string blob = PutBlob("layer blob");
  const std::string diff_id = DigestOf("layer");
  std::atomic<int> calls{0};
  auto store =
      Open([&](int fd, const std::string& dest,
               const UnpackOptions& options) -> absl::StatusOr<UnpackResult> {
        if (calls++ == 0) {
          std::ofstream(absl::StrCat(dest, "/half")) << "half";
          return absl::DataLossError("entry \"half\": truncated gzip stream");
        }
        return store_testing::FakeUnpack(diff_id)(fd, dest, options);
      });
  absl::Status status = store->Unpack(blob, diff_id).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("truncated gzip stream"));
  EXPECT_THAT(status.message(), HasSubstr(diff_id));
  EXPECT_THAT(*store->List(), IsEmpty());
  EXPECT_TRUE(store->Unpack(blob, diff_id).ok());
  EXPECT_EQ(calls.load(), 2);
}

TEST_F(LayerStoreTest, OpenRemovesHalfMadeLayers) {
  const std::string blob = PutBlob("layer blob");
  const std::string diff_id = DigestOf("layer");
  auto store = Open(store_testing::FakeUnpack(diff_id));
  ASSERT_TRUE(store->Unpack(blob, diff_id).ok());
  const std::string hex_a(64, 'a'), hex_b(64, 'b');
  // tmp-* (an unpack cut short), a directory without metadata (a crash
  // between rename and metadata), metadata without directory, a temporary
  // metadata file.
  ASSERT_EQ(mkdir((layers_dir_ + "/tmp-0123456789abcdef").c_str(), 0755), 0);
  std::ofstream(layers_dir_ + "/tmp-0123456789abcdef/f") << "x";
  ASSERT_EQ(mkdir((layers_dir_ + "/" + hex_a).c_str(), 0755), 0);
  std::ofstream(layers_dir_ + "/" + hex_b + ".json") << "{}";
  std::ofstream(layers_dir_ + "/" + hex_a + ".json.tmp-77") << "{";
  store = Open(store_testing::FakeUnpack(diff_id));
  EXPECT_FALSE(testing::PathExists(layers_dir_ + "/tmp-0123456789abcdef"));
  EXPECT_FALSE(testing::PathExists(layers_dir_ + "/" + hex_a));
  EXPECT_FALSE(testing::PathExists(layers_dir_ + "/" + hex_b + ".json"));
  EXPECT_FALSE(testing::PathExists(layers_dir_ + "/" + hex_a + ".json.tmp-77"));
  auto listed = store->List();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].diff_id, diff_id);
}

TEST_F(LayerStoreTest, KilledUnpackLeavesNothingListed) {
  const std::string blob = PutBlob("layer blob");
  const std::string diff_id = DigestOf("layer");
  ASSERT_TRUE(store_testing::KillChildWhenReady([&](const auto& ready) {
                auto store = LayerStore::Open(
                    layers_dir_, content_.get(),
                    [&](int, const std::string& dest,
                        const UnpackOptions&) -> absl::StatusOr<UnpackResult> {
                      for (int i = 0; i < 100; ++i) {
                        std::ofstream(absl::StrCat(dest, "/file", i))
                            << "partial";
                      }
                      ready();
                      for (;;) pause();
                    });
                if (store.ok()) (void)(*store)->Unpack(blob, diff_id);
              }).ok());

  const std::vector<std::string> before = *store_internal::ListDir(layers_dir_);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_THAT(before[0], StartsWith("tmp-"));

  auto store = Open(store_testing::FakeUnpack(diff_id));
  EXPECT_FALSE(store->Has(diff_id));
  EXPECT_THAT(*store->List(), IsEmpty());
  EXPECT_FALSE(testing::PathExists(absl::StrCat(layers_dir_, "/", before[0])));
  // And it can be unpacked now.
  EXPECT_TRUE(store->Unpack(blob, diff_id).ok());
}

TEST_F(LayerStoreTest, CleanTmpSparesUnpacksInProgress) {
  const std::string blob = PutBlob("layer blob");
  const std::string diff_id = DigestOf("layer");
  absl::Notification entered;
  absl::Notification release;
  auto store =
      Open(store_testing::FakeUnpack(diff_id, nullptr, &entered, &release));
  std::thread unpacking(
      [&] { EXPECT_TRUE(store->Unpack(blob, diff_id).ok()); });
  entered.WaitForNotification();
  ASSERT_EQ(mkdir((layers_dir_ + "/tmp-stale").c_str(), 0755), 0);
  std::ofstream(layers_dir_ + "/tmp-stale/f") << std::string(10000, 'x');
  EXPECT_GE(store->CleanTmp(), 10000);
  EXPECT_FALSE(testing::PathExists(layers_dir_ + "/tmp-stale"));
  // The one in progress is not deleted either.
  EXPECT_EQ(*store->Delete(diff_id), 0);
  release.Notify();
  unpacking.join();
  EXPECT_TRUE(store->Has(diff_id));
}

}  // namespace
}  // namespace berth::images
