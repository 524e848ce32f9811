#include "services/images/store/store.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"
#include "services/images/oci/digest.h"
#include "services/images/store/fs_util.h"
#include "services/images/store/store_test_util.h"

namespace berth::images {
namespace {

using ::berth::image::v1::Image;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names =
      store_internal::ListDir(dir).value_or(std::vector<std::string>());
  std::sort(names.begin(), names.end());
  return names;
}

// Stores fixture image `fixture` as `name` as a pull does: blobs under a
// lease, layers unpacked, then the record.
absl::StatusOr<Image> Import(Store* store, const std::string& fixture,
                             const std::string& name) {
  const nlohmann::json& info = store_testing::TestImage(fixture);
  Image image;
  image.set_name(name);
  image.set_digest(info["manifest_digest"].get<std::string>());
  image.set_manifest_digest(image.digest());
  image.set_config_digest(info["config_digest"].get<std::string>());
  image.set_media_type("application/vnd.oci.image.manifest.v1+json");
  image.mutable_platform()->set_os("linux");
  image.mutable_platform()->set_architecture("amd64");
  for (const auto& layer : info["layers"]) {
    auto* added = image.add_layers();
    added->set_digest(layer["digest"].get<std::string>());
    added->set_diff_id(layer["diff_id"].get<std::string>());
    added->set_size(layer["size"].get<int64_t>());
  }
  std::unique_ptr<Store::Lease> lease = store->NewLease();
  lease->AddImage(image);
  std::vector<std::string> blobs = {image.manifest_digest(),
                                    image.config_digest()};
  for (const auto& layer : image.layers()) blobs.push_back(layer.digest());
  for (const std::string& digest : blobs) {
    const std::string data = store_testing::TestImageBlob(fixture, digest);
    absl::Status status = store->content()->WriteBlob(digest, data);
    if (!status.ok()) return status;
  }
  for (auto& layer : *image.mutable_layers()) {
    absl::StatusOr<LayerInfo> unpacked =
        store->layers()->Unpack(layer.digest(), layer.diff_id());
    if (!unpacked.ok()) return unpacked.status();
    layer.set_unpacked_size(unpacked->unpacked_size);
  }
  absl::Status status = store->images()->Put(image);
  if (!status.ok()) return status;
  return store->images()->Get(name);
}

std::vector<std::string> LayerDigests(const std::string& fixture) {
  std::vector<std::string> digests;
  for (const auto& layer : store_testing::TestImage(fixture)["layers"]) {
    digests.push_back(layer["digest"].get<std::string>());
  }
  return digests;
}

std::vector<std::string> DiffIds(const std::string& fixture) {
  std::vector<std::string> ids;
  for (const auto& layer : store_testing::TestImage(fixture)["layers"]) {
    ids.push_back(layer["diff_id"].get<std::string>());
  }
  return ids;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "unpacking layers and mounting overlays need root";
    }
    root_ = dir_.Join("images");
    Reopen();
  }

  void TearDown() override {
    store_.reset();
    const std::string snapshots = absl::StrCat(root_, "/snapshots");
    for (const std::string& id : Names(snapshots)) {
      const std::string rootfs = absl::StrCat(snapshots, "/", id, "/rootfs");
      while (umount2(rootfs.c_str(), MNT_DETACH) == 0) {
      }
    }
  }

  void Reopen() {
    store_.reset();
    auto store = Store::Open(root_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  std::vector<std::string> Blobs() { return *store_->content()->List(); }
  std::vector<std::string> Layers() {
    std::vector<std::string> ids;
    const std::vector<LayerInfo> layers = *store_->layers()->List();
    for (const LayerInfo& layer : layers) {
      ids.push_back(layer.diff_id);
    }
    return ids;
  }

  testing::ShortTempDir dir_;
  std::string root_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, LayoutUnderTheRoot) {
  EXPECT_THAT(Names(root_),
              ElementsAre("blobs", "images", "ingest", "layers", "snapshots"));
}

TEST_F(StoreTest, SnapshotOfAMultiLayerImage) {
  auto image = Import(store_.get(), "multilayer", "127.0.0.1:5000/multi:1");
  ASSERT_TRUE(image.ok()) << image.status();
  auto snapshot =
      store_->PrepareSnapshot("0123456789abcdef0123456789abcdef", *image);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const std::string& rootfs = snapshot->rootfs;
  EXPECT_TRUE(testing::PathExists(rootfs + "/bin/busybox"));
  // Whiteouts of the third layer hide what the second made.
  EXPECT_FALSE(testing::PathExists(rootfs + "/data/remove-me.txt"));
  EXPECT_FALSE(testing::PathExists(rootfs + "/data/gone"));
  EXPECT_FALSE(testing::PathExists(rootfs + "/bin/wc"));
  EXPECT_TRUE(testing::PathExists(rootfs + "/bin/sh"));
  // Hard links stay links.
  struct stat a, b;
  ASSERT_EQ(stat((rootfs + "/data/hardlink-a").c_str(), &a), 0);
  ASSERT_EQ(stat((rootfs + "/data/hardlink-b").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  struct stat work;
  ASSERT_EQ(stat((rootfs + "/work").c_str(), &work), 0);
  EXPECT_EQ(work.st_uid, 65534u);
  // The snapshot is listed with its layers, top first.
  std::vector<std::string> top_first = DiffIds("multilayer");
  std::reverse(top_first.begin(), top_first.end());
  auto listed = store_->snapshots()->List();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].layers, top_first);
  EXPECT_EQ((*listed)[0].image_name, "127.0.0.1:5000/multi:1");
  EXPECT_THAT(store_->SnapshotsOf(*image),
              ElementsAre("0123456789abcdef0123456789abcdef"));

  // A restart keeps it mounted and listed.
  Reopen();
  EXPECT_TRUE(
      store_->snapshots()->IsMounted("0123456789abcdef0123456789abcdef"));
  EXPECT_THAT(*store_->snapshots()->List(), ::testing::SizeIs(1));
  ASSERT_TRUE(
      store_->snapshots()->Release("0123456789abcdef0123456789abcdef").ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] { return Names(absl::StrCat(root_, "/snapshots")).empty(); }));
}

TEST_F(StoreTest, PrepareUnpacksALayerDeletedByHand) {
  auto image = Import(store_.get(), "busybox", "busybox:latest");
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_TRUE(store_->layers()->Delete(image->layers(0).diff_id()).ok());
  auto snapshot = store_->PrepareSnapshot("task", *image);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_TRUE(testing::PathExists(snapshot->rootfs + "/bin/busybox"));
  ASSERT_TRUE(store_->snapshots()->Release("task").ok());

  // Without the blob either, the error names the image.
  ASSERT_TRUE(store_->layers()->Delete(image->layers(0).diff_id()).ok());
  ASSERT_TRUE(store_->content()->Delete(image->layers(0).digest()).ok());
  absl::Status status = store_->PrepareSnapshot("task", *image).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("busybox:latest"));
  EXPECT_TRUE(testing::WaitFor(
      [&] { return Names(absl::StrCat(root_, "/snapshots")).empty(); }));
}

TEST_F(StoreTest, SharedLayersAreStoredOnce) {
  ASSERT_TRUE(Import(store_.get(), "busybox", "busybox:latest").ok());
  ASSERT_TRUE(Import(store_.get(), "shared", "shared:latest").ok());
  // busybox's layer is shared's first.
  ASSERT_EQ(LayerDigests("shared")[0], LayerDigests("busybox")[0]);
  EXPECT_THAT(Layers(), UnorderedElementsAreArray(DiffIds("shared")));
  EXPECT_EQ(Blobs().size(), 2u + 2u + 2u);  // 2 manifests, 2 configs, 2 layers
}

TEST_F(StoreTest, GarbageCollectionFreesExactlyTheUnreferenced) {
  auto busybox = Import(store_.get(), "busybox", "busybox:latest");
  auto shared = Import(store_.get(), "shared", "shared:latest");
  ASSERT_TRUE(busybox.ok() && shared.ok());
  const std::vector<std::string> blobs_before = Blobs();
  const std::vector<std::string> layers_before = Layers();
  // Unreferenced: a blob, a stale unpack directory, a partial download.
  const std::string orphan(5000, 'o');
  ASSERT_TRUE(store_->content()->WriteBlob(DigestOf(orphan), orphan).ok());
  ASSERT_EQ(mkdir(absl::StrCat(root_, "/layers/tmp-stale").c_str(), 0755), 0);
  std::ofstream(absl::StrCat(root_, "/layers/tmp-stale/f"))
      << std::string(8192, 'x');
  {
    auto writer = store_->content()->Writer(DigestOf("partial"), -1);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Write(std::string(4096, 'p')).ok());
  }

  auto gc = store_->CollectGarbage(false);
  ASSERT_TRUE(gc.ok()) << gc.status();
  EXPECT_THAT(gc->deleted, ElementsAre(DigestOf(orphan)));
  EXPECT_THAT(gc->untagged, IsEmpty());
  EXPECT_GE(gc->reclaimed_bytes, 5000 + 8192 + 4096);
  EXPECT_EQ(Blobs(), blobs_before);
  EXPECT_EQ(Layers(), layers_before);
  EXPECT_THAT(Names(absl::StrCat(root_, "/ingest")), IsEmpty());
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/layers/tmp-stale")));

  // Without busybox's name, its manifest and config go; its layer stays
  // (shared has it).
  ASSERT_TRUE(store_->images()->Delete("busybox:latest").ok());
  gc = store_->CollectGarbage(false);
  ASSERT_TRUE(gc.ok());
  std::vector<std::string> expected = {busybox->manifest_digest(),
                                       busybox->config_digest()};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(gc->deleted, expected);
  EXPECT_TRUE(store_->content()->Has(busybox->layers(0).digest()));
  EXPECT_TRUE(store_->layers()->Has(busybox->layers(0).diff_id()));

  // A snapshot keeps its image from `prune --all`.
  ASSERT_TRUE(store_->PrepareSnapshot("task", *shared).ok());
  gc = store_->CollectGarbage(true);
  ASSERT_TRUE(gc.ok());
  EXPECT_THAT(gc->untagged, IsEmpty());
  EXPECT_THAT(gc->deleted, IsEmpty());

  // A name removed while a snapshot uses it: the layers stay for the
  // snapshot, the blobs go.
  ASSERT_TRUE(store_->images()->Delete("shared:latest").ok());
  gc = store_->CollectGarbage(false);
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->deleted.size(), 4u);
  EXPECT_THAT(Blobs(), IsEmpty());
  EXPECT_THAT(Layers(), UnorderedElementsAreArray(DiffIds("shared")));
  EXPECT_TRUE(testing::PathExists(
      absl::StrCat(root_, "/snapshots/task/rootfs/bin/busybox")));

  // Released: everything goes.
  ASSERT_TRUE(store_->snapshots()->Release("task").ok());
  gc = store_->CollectGarbage(true);
  ASSERT_TRUE(gc.ok());
  EXPECT_THAT(gc->deleted, UnorderedElementsAreArray(DiffIds("shared")));
  EXPECT_GT(gc->reclaimed_bytes, 1000000);
  EXPECT_THAT(Layers(), IsEmpty());
  EXPECT_THAT(Names(absl::StrCat(root_, "/layers")), IsEmpty());
  gc = store_->CollectGarbage(true);
  EXPECT_THAT(gc->deleted, IsEmpty());
  EXPECT_EQ(gc->reclaimed_bytes, 0);
}

TEST_F(StoreTest, PruneAllRemovesUnusedImages) {
  ASSERT_TRUE(Import(store_.get(), "busybox", "busybox:latest").ok());
  ASSERT_TRUE(store_->images()->Tag("busybox:latest", "busybox:other").ok());
  auto multi = Import(store_.get(), "multilayer", "multi:1");
  ASSERT_TRUE(multi.ok());
  ASSERT_TRUE(store_->PrepareSnapshot("task", *multi).ok());
  auto gc = store_->CollectGarbage(true);
  ASSERT_TRUE(gc.ok());
  EXPECT_THAT(gc->untagged, ElementsAre("busybox:latest", "busybox:other"));
  // busybox's layer is multilayer's first: kept.
  EXPECT_THAT(Layers(), UnorderedElementsAreArray(DiffIds("multilayer")));
  EXPECT_EQ(store_->images()->List().size(), 1u);
  ASSERT_TRUE(store_->snapshots()->Release("task").ok());
}

TEST_F(StoreTest, LeasesKeepWhatTheyPin) {
  const std::string data = "downloaded, not yet in a record";
  auto lease = store_->NewLease();
  lease->AddBlob(DigestOf(data));
  ASSERT_TRUE(store_->content()->WriteBlob(DigestOf(data), data).ok());
  auto gc = store_->CollectGarbage(true);
  ASSERT_TRUE(gc.ok());
  EXPECT_THAT(gc->deleted, IsEmpty());
  EXPECT_TRUE(store_->content()->Has(DigestOf(data)));
  lease.reset();
  gc = store_->CollectGarbage(true);
  EXPECT_THAT(gc->deleted, ElementsAre(DigestOf(data)));
}

TEST_F(StoreTest, OpenDropsRecordsOfMissingBlobsAndHalfMadeThings) {
  auto busybox = Import(store_.get(), "busybox", "busybox:latest");
  auto multi = Import(store_.get(), "multilayer", "multi:1");
  ASSERT_TRUE(busybox.ok() && multi.ok());
  ASSERT_TRUE(store_->PrepareSnapshot("running", *busybox).ok());
  // Damage: a config blob of multilayer gone; half-made things of each kind.
  ASSERT_EQ(unlink(store_->content()->BlobPath(multi->config_digest()).c_str()),
            0);
  ASSERT_EQ(mkdir(absl::StrCat(root_, "/layers/tmp-1234").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(absl::StrCat(root_, "/layers/", std::string(64, 'e')).c_str(),
                  0755),
            0);
  ASSERT_EQ(mkdir(absl::StrCat(root_, "/snapshots/half").c_str(), 0711), 0);
  std::ofstream(absl::StrCat(root_, "/images/x.json.tmp-5")) << "{";

  Reopen();
  EXPECT_THAT(Names(absl::StrCat(root_, "/images")), ::testing::SizeIs(1));
  ASSERT_EQ(store_->images()->List().size(), 1u);
  EXPECT_EQ(store_->images()->List()[0].name(), "busybox:latest");
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/layers/tmp-1234")));
  EXPECT_FALSE(testing::PathExists(
      absl::StrCat(root_, "/layers/", std::string(64, 'e'))));
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/snapshots/half")));
  // The running snapshot is untouched.
  EXPECT_TRUE(store_->snapshots()->IsMounted("running"));
  EXPECT_TRUE(testing::PathExists(
      absl::StrCat(root_, "/snapshots/running/rootfs/bin/busybox")));
  ASSERT_TRUE(store_->snapshots()->Release("running").ok());
}

// Checks what a store opened after a crash shows: every listed image whole,
// nothing partial visible.
void ExpectConsistent(Store* store, const std::string& root) {
  for (const Image& image : store->images()->List()) {
    EXPECT_TRUE(store->content()->Has(image.manifest_digest())) << image.name();
    EXPECT_TRUE(store->content()->Has(image.config_digest())) << image.name();
    for (const auto& layer : image.layers()) {
      EXPECT_TRUE(store->content()->Has(layer.digest())) << image.name();
      EXPECT_TRUE(store->layers()->Has(layer.diff_id())) << image.name();
    }
  }
  const std::vector<std::string> blobs = *store->content()->List();
  for (const std::string& digest : blobs) {
    auto fd = store->content()->OpenBlob(digest);
    ASSERT_TRUE(fd.ok());
    auto data = store->content()->ReadBlob(digest, 64 << 20);
    ASSERT_TRUE(data.ok());
    EXPECT_EQ(DigestOf(*data), digest);
  }
  for (const std::string& name : Names(absl::StrCat(root, "/layers"))) {
    EXPECT_FALSE(absl::StartsWith(name, "tmp-")) << name;
    if (!absl::EndsWith(name, ".json")) {
      EXPECT_TRUE(
          testing::PathExists(absl::StrCat(root, "/layers/", name, ".json")))
          << name;
    }
  }
}

TEST_F(StoreTest, KillNineDuringAnImportLeavesNothingPartial) {
  // The child imports multilayer again and again into fresh names, each
  // time after deleting what it stored; the parent kills it at varying
  // moments and checks what a new Open shows.
  for (int round = 0; round < 8; ++round) {
    store_.reset();
    ASSERT_TRUE(store_testing::KillChildWhenReady(
                    [&](const auto& ready) {
                      auto store = Store::Open(root_);
                      if (!store.ok()) return;
                      ready();
                      for (int i = 0;; ++i) {
                        const std::string name = absl::StrCat("multi:", i);
                        (void)Import(store->get(), "multilayer", name);
                        (void)(*store)->images()->Delete(name);
                        (void)(*store)->CollectGarbage(false);
                      }
                    },
                    absl::Milliseconds(17 * round))
                    .ok());
    Reopen();
    ExpectConsistent(store_.get(), root_);
    // What the child left is collectable: a collection empties the store.
    for (const Image& image : store_->images()->List()) {
      ASSERT_TRUE(store_->images()->Delete(image.name()).ok());
    }
    ASSERT_TRUE(store_->CollectGarbage(true).ok());
    EXPECT_THAT(Blobs(), IsEmpty());
    EXPECT_THAT(Layers(), IsEmpty());
  }
}

}  // namespace
}  // namespace berth::images
