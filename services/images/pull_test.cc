// Puller over a real store (in a temporary directory, layers unpacked for
// real) and a registry client serving the test images from memory, with
// downloads held, counted and corrupted.

#include "services/images/pull.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"
#include "services/images/fake_registry.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/store/store.h"
#include "services/images/test_util.h"

namespace berth::images {
namespace {

namespace pb = ::berth::image::v1;
using ::berth::images::testing::DirEntries;
using ::berth::images::testing::ExpectedImages;
using ::berth::images::testing::FileBytes;
using ::berth::images::testing::LinuxAmd64;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kBusybox[] = "registry.test/library/busybox:1";

struct PullOutcome {
  absl::StatusOr<pb::Image> image;
  std::vector<pb::PullImageProgress> messages;
};

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store =
        Store::Open(dir_.Join("images"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    for (const auto& [layout, reference] :
         std::vector<std::pair<std::string, std::string>>{
             {"busybox", kBusybox},
             {"multilayer", "registry.test/team/multilayer:1"},
             {"multiarch", "registry.test/team/multiarch:1"},
             {"shared", "registry.test/team/shared:1"}}) {
      ASSERT_TRUE(
          registry_.AddLayout(FakeRegistry::TestImage(layout), reference).ok());
    }
    MakePuller(3);
  }

  void MakePuller(int downloads) {
    PullerOptions options;
    options.max_concurrent_downloads = downloads;
    options.platform = LinuxAmd64();
    puller_ = std::make_unique<Puller>(store_.get(), &registry_, options);
  }

  PullOutcome Pull(const std::string& reference,
                   const std::function<bool()>& cancelled = nullptr,
                   const pb::Platform* platform = nullptr) {
    pb::PullImageRequest request;
    request.set_reference(reference);
    if (platform != nullptr) *request.mutable_platform() = *platform;
    PullOutcome outcome;
    PullCallbacks callbacks;
    callbacks.progress = [this,
                          &outcome](const pb::PullImageProgress& message) {
      outcome.messages.push_back(message);
      if (on_progress_) on_progress_(message);
      return true;
    };
    callbacks.cancelled = cancelled;
    outcome.image = puller_->Pull(request, callbacks);
    return outcome;
  }

  ShortTempDir dir_;
  std::unique_ptr<Store> store_;
  FakeRegistry registry_;
  // Sees each progress message too.
  std::function<void(const pb::PullImageProgress&)> on_progress_;
  std::unique_ptr<Puller> puller_;
  const nlohmann::json expected_ = ExpectedImages();
};

TEST_F(PullTest, PullsAnImageAndStoresItWhole) {
  const nlohmann::json& want = expected_["busybox"];
  const std::string layer = want["layers"][0]["digest"];
  const std::string diff_id = want["layers"][0]["diff_id"];
  // The layer's download is held until the progress has shown it.
  registry_.Hold(layer, 64 << 10);
  bool saw_downloading = false;
  on_progress_ = [&](const pb::PullImageProgress& message) {
    for (const pb::LayerProgress& progress : message.layers()) {
      if (progress.state() == pb::LAYER_STATE_DOWNLOADING &&
          progress.downloaded() >= 64 << 10) {
        saw_downloading = true;
        registry_.Release();
      }
    }
  };
  PullOutcome outcome = Pull("registry.test/library/busybox:1");
  ASSERT_TRUE(outcome.image.ok()) << outcome.image.status();
  const pb::Image& image = *outcome.image;
  EXPECT_EQ(image.name(), kBusybox);
  EXPECT_EQ(image.digest(), want["manifest_digest"]);
  EXPECT_EQ(image.manifest_digest(), want["manifest_digest"]);
  EXPECT_EQ(image.config_digest(), want["config_digest"]);
  EXPECT_EQ(image.platform().os(), "linux");
  EXPECT_EQ(image.platform().architecture(), "amd64");
  ASSERT_THAT(image.layers(), SizeIs(1));
  EXPECT_EQ(image.layers(0).digest(), layer);
  EXPECT_EQ(image.layers(0).diff_id(), diff_id);
  EXPECT_EQ(image.layers(0).size(), want["layers"][0]["size"]);
  EXPECT_GT(image.layers(0).unpacked_size(), 0);
  EXPECT_EQ(image.size(), image.layers(0).size() +
                              *store_->content()->Size(image.config_digest()));
  EXPECT_THAT(image.config().cmd(), ElementsAre("sh"));
  EXPECT_TRUE(image.has_created());
  EXPECT_TRUE(image.has_stored_at());

  // Stored whole: listed, its blobs and its layer there.
  ASSERT_THAT(store_->images()->List(), SizeIs(1));
  EXPECT_TRUE(store_->content()->Has(image.manifest_digest()));
  EXPECT_TRUE(store_->content()->Has(image.config_digest()));
  EXPECT_TRUE(store_->content()->Has(layer));
  EXPECT_TRUE(store_->layers()->Has(diff_id));
  struct stat st;
  EXPECT_EQ(
      stat(absl::StrCat(store_->layers()->LayerPath(diff_id), "/bin/busybox")
               .c_str(),
           &st),
      0);

  // Progress: resolution first, the layer's states, the image last.
  ASSERT_GE(outcome.messages.size(), 3u);
  EXPECT_THAT(outcome.messages.front().status(),
              HasSubstr("resolving registry.test/library/busybox:1"));
  const pb::PullImageProgress& last = outcome.messages.back();
  EXPECT_EQ(last.image().manifest_digest(), image.manifest_digest());
  ASSERT_THAT(last.layers(), SizeIs(1));
  EXPECT_EQ(last.layers(0).state(), pb::LAYER_STATE_COMPLETE);
  EXPECT_EQ(last.layers(0).downloaded(), last.layers(0).size());
  for (size_t i = 0; i + 1 < outcome.messages.size(); ++i) {
    EXPECT_FALSE(outcome.messages[i].has_image()) << i;
  }
  EXPECT_TRUE(saw_downloading);
}

TEST_F(PullTest, SecondPullFetchesNothingAgainAndSaysSo) {
  const std::string layer = expected_["busybox"]["layers"][0]["digest"];
  ASSERT_TRUE(Pull(kBusybox).image.ok());
  PullOutcome again = Pull("registry.test/library/busybox:1");
  ASSERT_TRUE(again.image.ok()) << again.image.status();
  EXPECT_EQ(registry_.fetches(layer), 1);
  ASSERT_THAT(again.messages.back().layers(), SizeIs(1));
  EXPECT_EQ(again.messages.back().layers(0).state(),
            pb::LAYER_STATE_ALREADY_EXISTS);
}

TEST_F(PullTest, AnIndexIsResolvedForTheNodeOrTheRequestedPlatform) {
  const nlohmann::json& want = expected_["multiarch"];
  PullOutcome amd64 = Pull("registry.test/team/multiarch:1");
  ASSERT_TRUE(amd64.image.ok()) << amd64.image.status();
  EXPECT_EQ(amd64.image->digest(), want["index_digest"]);
  EXPECT_EQ(amd64.image->media_type(), kOciIndex);
  EXPECT_EQ(amd64.image->manifest_digest(),
            want["manifests"]["amd64"]["manifest_digest"]);
  EXPECT_EQ(amd64.image->platform().architecture(), "amd64");
  EXPECT_TRUE(store_->content()->Has(amd64.image->digest()));

  pb::Platform arm64 = LinuxAmd64();
  arm64.set_architecture("arm64");
  PullOutcome other = Pull("registry.test/team/multiarch:1", nullptr, &arm64);
  ASSERT_TRUE(other.image.ok()) << other.image.status();
  EXPECT_EQ(other.image->manifest_digest(),
            want["manifests"]["arm64"]["manifest_digest"]);
  EXPECT_EQ(other.image->platform().architecture(), "arm64");

  // A platform naming only its architecture: the node's os.
  pb::Platform arm64_only;
  arm64_only.set_architecture("arm64");
  PullOutcome other_os =
      Pull("registry.test/team/multiarch:1", nullptr, &arm64_only);
  ASSERT_TRUE(other_os.image.ok()) << other_os.image.status();
  EXPECT_EQ(other_os.image->manifest_digest(),
            want["manifests"]["arm64"]["manifest_digest"]);
  bool said = false;
  for (const pb::PullImageProgress& message : other_os.messages) {
    said = said || absl::StrContains(message.status(),
                                     "fetching the manifest for linux/arm64");
  }
  EXPECT_TRUE(said);

  pb::Platform s390x = LinuxAmd64();
  s390x.set_architecture("s390x");
  PullOutcome none = Pull("registry.test/team/multiarch:1", nullptr, &s390x);
  ASSERT_FALSE(none.image.ok());
  EXPECT_EQ(none.image.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.image.status().message(), HasSubstr("linux/s390x"));
  EXPECT_THAT(none.image.status().message(),
              HasSubstr("registry.test/team/multiarch:1"));
}

TEST_F(PullTest, EveryLayerOfAMultiLayerImageIsUnpackedWithItsWhiteouts) {
  const nlohmann::json& want = expected_["multilayer"];
  PullOutcome outcome = Pull("registry.test/team/multilayer:1");
  ASSERT_TRUE(outcome.image.ok()) << outcome.image.status();
  ASSERT_THAT(outcome.image->layers(), SizeIs(4));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(outcome.image->layers(i).diff_id(), want["layers"][i]["diff_id"]);
    EXPECT_TRUE(store_->layers()->Has(outcome.image->layers(i).diff_id()));
  }
  EXPECT_THAT(outcome.image->config().entrypoint(), ElementsAre("/bin/echo"));
  EXPECT_EQ(outcome.image->config().user(), "65534:65534");
  // The third layer deletes data/remove-me.txt: an overlay whiteout.
  struct stat st;
  const std::string whiteout =
      absl::StrCat(store_->layers()->LayerPath(want["layers"][2]["diff_id"]),
                   "/data/remove-me.txt");
  ASSERT_EQ(lstat(whiteout.c_str(), &st), 0) << whiteout;
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(0, 0));
}

TEST_F(PullTest, AnImageSharingABaseLayerStoresItOnce) {
  const nlohmann::json& busybox = expected_["busybox"];
  const nlohmann::json& shared = expected_["shared"];
  const std::string base = busybox["layers"][0]["digest"];
  ASSERT_EQ(shared["layers"][0]["digest"], base);
  ASSERT_TRUE(Pull(kBusybox).image.ok());
  PullOutcome outcome = Pull("registry.test/team/shared:1");
  ASSERT_TRUE(outcome.image.ok()) << outcome.image.status();
  EXPECT_EQ(registry_.fetches(base), 1);
  EXPECT_EQ(outcome.messages.back().layers(0).state(),
            pb::LAYER_STATE_ALREADY_EXISTS);
  EXPECT_EQ(outcome.messages.back().layers(1).state(),
            pb::LAYER_STATE_COMPLETE);
  // Two manifests, two configs, the base layer and shared's own.
  absl::StatusOr<std::vector<std::string>> blobs = store_->content()->List();
  ASSERT_TRUE(blobs.ok());
  EXPECT_THAT(*blobs, SizeIs(6));
  absl::StatusOr<std::vector<LayerInfo>> layers = store_->layers()->List();
  ASSERT_TRUE(layers.ok());
  EXPECT_THAT(*layers, SizeIs(2));
  // On disk: each blob once.
  int64_t want_bytes = 0;
  for (const std::string& digest : *blobs) {
    want_bytes += *store_->content()->Size(digest);
  }
  EXPECT_EQ(FileBytes(dir_.Join("images/blobs/sha256")), want_bytes);
  EXPECT_LT(want_bytes, 2 * static_cast<int64_t>(busybox["layers"][0]["size"]));
}

TEST_F(PullTest, ABlobNotMatchingItsDigestFailsAndStoresNothing) {
  const nlohmann::json& want = expected_["busybox"];
  const std::string layer = want["layers"][0]["digest"];
  std::string corrupt(static_cast<size_t>(want["layers"][0]["size"]), 'x');
  registry_.SetBlob(layer, corrupt);
  PullOutcome outcome = Pull(kBusybox);
  ASSERT_FALSE(outcome.image.ok());
  EXPECT_EQ(outcome.image.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(outcome.image.status().message(), HasSubstr(layer));
  EXPECT_THAT(outcome.image.status().message(), HasSubstr(kBusybox));
  EXPECT_THAT(outcome.image.status().message(), HasSubstr("registry.test"));
  EXPECT_THAT(store_->images()->List(), SizeIs(0));
  EXPECT_FALSE(store_->content()->Has(layer));
  EXPECT_FALSE(store_->layers()->Has(want["layers"][0]["diff_id"]));
  absl::StatusOr<std::vector<std::string>> blobs = store_->content()->List();
  ASSERT_TRUE(blobs.ok());
  EXPECT_THAT(*blobs, SizeIs(0));
  EXPECT_THAT(DirEntries(dir_.Join("images/ingest")), SizeIs(0));
  EXPECT_EQ(outcome.messages.back().layers_size(), 1);
}

TEST_F(PullTest, TwoPullsOfOneImageAtOnceShareTheDownload) {
  const std::string layer = expected_["busybox"]["layers"][0]["digest"];
  absl::Notification release;
  std::atomic<int> held{0};
  registry_.set_before_chunk([&](const std::string& digest, int64_t offset) {
    if (digest == layer && offset == 0) {
      ++held;
      release.WaitForNotification();
    }
  });
  PullOutcome first;
  std::thread one([&] { first = Pull(kBusybox); });
  ASSERT_TRUE(WaitFor([&] { return held.load() == 1; }));
  // The second pull waits on the first's download: it shows the layer
  // downloading without fetching it.
  std::atomic<bool> second_waits{false};
  PullOutcome second;
  std::thread two([&] {
    pb::PullImageRequest request;
    request.set_reference(kBusybox);
    PullCallbacks callbacks;
    callbacks.progress = [&](const pb::PullImageProgress& message) {
      second.messages.push_back(message);
      if (message.layers_size() == 1 &&
          message.layers(0).state() == pb::LAYER_STATE_DOWNLOADING) {
        second_waits = true;
      }
      return true;
    };
    second.image = puller_->Pull(request, callbacks);
  });
  EXPECT_TRUE(WaitFor([&] { return second_waits.load(); }));
  release.Notify();
  one.join();
  two.join();
  ASSERT_TRUE(first.image.ok()) << first.image.status();
  ASSERT_TRUE(second.image.ok()) << second.image.status();
  EXPECT_EQ(registry_.fetches(layer), 1);
  EXPECT_EQ(held.load(), 1);
  EXPECT_EQ(first.image->manifest_digest(), second.image->manifest_digest());
  EXPECT_THAT(store_->images()->List(), SizeIs(1));
}

TEST_F(PullTest, ACancelledPullStopsAndTheNextResumesItsDownload) {
  const std::string layer = expected_["busybox"]["layers"][0]["digest"];
  registry_.set_chunk_size(64 << 10);
  absl::Mutex mu;
  int cancel_checks = 0;  // calls of `cancelled` once it says yes
  std::atomic<bool> cancel{false};
  registry_.set_before_chunk([&](const std::string& digest, int64_t offset) {
    if (digest != layer || offset < (256 << 10) || cancel) return;
    cancel = true;
    // Held until the pull has seen the cancellation (its second look is
    // after it stopped its downloads).
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(
        absl::Condition(
            +[](int* checks) { return *checks >= 2; }, &cancel_checks),
        absl::Seconds(30));
  });
  PullOutcome outcome = Pull(kBusybox, [&] {
    if (!cancel) return false;
    absl::MutexLock lock(&mu);
    ++cancel_checks;
    return true;
  });
  ASSERT_FALSE(outcome.image.ok());
  EXPECT_EQ(outcome.image.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(outcome.image.status().message(), HasSubstr(kBusybox));
  EXPECT_THAT(store_->images()->List(), SizeIs(0));
  EXPECT_FALSE(store_->content()->Has(layer));
  // What was downloaded stays for the next pull.
  struct stat st;
  ASSERT_EQ(stat(store_->content()->IngestPath(layer).c_str(), &st), 0);
  EXPECT_GE(st.st_size, 256 << 10);

  registry_.set_before_chunk(nullptr);
  PullOutcome again = Pull(kBusybox);
  ASSERT_TRUE(again.image.ok()) << again.image.status();
  EXPECT_EQ(registry_.fetches(layer), 2);
  EXPECT_EQ(registry_.start_offset(layer), st.st_size);
  EXPECT_TRUE(store_->content()->Has(layer));
}

TEST_F(PullTest, DownloadsRunInParallelUpToTheBound) {
  MakePuller(2);
  const nlohmann::json& want = expected_["multilayer"];
  std::set<std::string> layers;
  for (const nlohmann::json& layer : want["layers"]) {
    layers.insert(layer["digest"].get<std::string>());
  }
  std::atomic<int> gated{0};
  registry_.set_before_chunk([&](const std::string& digest, int64_t offset) {
    if (offset != 0 || layers.count(digest) == 0 || gated.fetch_add(1) >= 2) {
      return;
    }
    // The first two downloads wait until two have run at once.
    WaitFor([&] { return registry_.max_concurrent_fetches() >= 2; },
            absl::Seconds(10));
  });
  PullOutcome outcome = Pull("registry.test/team/multilayer:1");
  ASSERT_TRUE(outcome.image.ok()) << outcome.image.status();
  EXPECT_EQ(registry_.max_concurrent_fetches(), 2);
}

TEST_F(PullTest, ErrorsNameTheReferenceAndHost) {
  PullOutcome missing = Pull("registry.test/library/nope:1");
  ASSERT_FALSE(missing.image.ok());
  EXPECT_EQ(missing.image.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.image.status().message(),
              HasSubstr("pulling registry.test/library/nope:1 from "
                        "registry.test"));

  PullOutcome bad = Pull("Registry.test/UPPER");
  ASSERT_FALSE(bad.image.ok());
  EXPECT_EQ(bad.image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store_->images()->List(), SizeIs(0));
}

}  // namespace
}  // namespace berth::images
