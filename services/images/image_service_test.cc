// ImageService in-process on a temporary socket, over a real store in a
// temporary directory: imports of the test archives, pulls from Debian's
// docker-registry on 127.0.0.1 (//services/images/testing:registry_fixture),
// records, removal, pruning and snapshots (root: overlay mounts).

#include "services/images/image_service.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc/grpc.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/images/fake_registry.h"
#include "services/images/oci/digest.h"
#include "services/images/store/store.h"
#include "services/images/test_util.h"
#include "services/images/testing/registry_fixture.h"

namespace berth::images {
namespace {

namespace pb = ::berth::image::v1;
using ::berth::images::testing::DirEntries;
using ::berth::images::testing::ExpectedImages;
using ::berth::images::testing::FileBytes;
using ::berth::images::testing::LinuxAmd64;
using ::berth::testing::CapturingLogSink;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

bool CanMountOverlay() { return geteuid() == 0; }

struct PullResult {
  grpc::Status status;
  std::vector<pb::PullImageProgress> messages;
};

// The registry every pull test shares, with the test images pushed.
RegistryFixture* shared_registry = nullptr;

class ImageServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Held for the whole run: each test's server would otherwise drop the
    // last reference on gRPC's library, and grpc_shutdown (gRPC 1.51) can
    // wait 10 s for an executor thread parked in epoll_wait.
    grpc_init();
    absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
        RegistryFixture::Start();
    ASSERT_TRUE(registry.ok()) << registry.status();
    for (const auto& [layout, target] :
         std::vector<std::pair<std::string, std::string>>{
             {"busybox", "library/busybox:1"},
             {"multiarch", "team/multiarch:1"},
             {"multilayer", "team/multilayer:1"},
             {"shared", "team/shared:1"}}) {
      absl::Status pushed = (*registry)->Push(TestImagePath(layout), target);
      ASSERT_TRUE(pushed.ok()) << pushed;
    }
    // Docker schema 2 (a manifest converted by skopeo).
    PushOptions docker;
    docker.format = ManifestFormat::kDockerSchema2;
    absl::Status pushed = (*registry)->Push(TestImagePath("busybox"),
                                            "library/busybox:docker", docker);
    ASSERT_TRUE(pushed.ok()) << pushed;
    shared_registry = registry->release();
  }

  static void TearDownTestSuite() {
    delete shared_registry;
    shared_registry = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(shared_registry, nullptr);
    StartService(shared_registry);
  }

  void TearDown() override {
    StopService();
    // Snapshots are mounts: release whatever a test left.
    if (store_ != nullptr) {
      absl::StatusOr<std::vector<SnapshotInfo>> snapshots =
          store_->snapshots()->List();
      if (snapshots.ok()) {
        for (const SnapshotInfo& snapshot : *snapshots) {
          EXPECT_TRUE(store_->snapshots()->Release(snapshot.id).ok());
        }
      }
    }
  }

  static RegistriesConfig ConfigFor(const RegistryFixture& registry) {
    RegistriesConfig config;
    config.hosts[registry.endpoint()].insecure = true;
    return config;
  }

  // Starts the service over a new store in dir_, pulling from `registry`,
  // or through `client` when given.
  void StartService(const RegistryFixture* registry,
                    RegistryClient* client = nullptr) {
    if (store_ == nullptr) {
      absl::StatusOr<std::unique_ptr<Store>> store =
          Store::Open(dir_.Join("images"));
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = *std::move(store);
    }
    if (client == nullptr) {
      RegistryClientOptions options;
      if (registry != nullptr) options.config = ConfigFor(*registry);
      options.retry_backoff = absl::Milliseconds(10);
      absl::StatusOr<std::unique_ptr<RegistryClient>> created =
          RegistryClient::Create(options);
      ASSERT_TRUE(created.ok()) << created.status();
      client_ = *std::move(created);
      client = client_.get();
    }
    ImageServiceOptions options;
    options.platform = LinuxAmd64();
    options.import_dir = dir_.Join("images/import");
    options.idmap_dir = dir_.Join("images/idmaps");
    absl::StatusOr<std::unique_ptr<ImageServiceImpl>> service =
        ImageServiceImpl::Create(store_.get(), client, options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
    UnixGrpcServer::Options server_options;
    server_options.socket_path = dir_.Join("images.sock");
    server_options.services = {service_.get()};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start(server_options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(server_options.socket_path, absl::Seconds(10));
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = pb::ImageService::NewStub(*channel);
  }

  void StopService() {
    stub_.reset();
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
    server_.reset();
    service_.reset();
  }

  std::string Ref(const std::string& repository_tag) const {
    return absl::StrCat(shared_registry->endpoint(), "/", repository_tag);
  }

  PullResult Pull(const std::string& reference,
                  const pb::Platform* platform = nullptr) {
    pb::PullImageRequest request;
    request.set_reference(reference);
    if (platform != nullptr) *request.mutable_platform() = *platform;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(120));
    std::unique_ptr<grpc::ClientReader<pb::PullImageProgress>> reader =
        stub_->PullImage(&context, request);
    PullResult result;
    pb::PullImageProgress message;
    while (reader->Read(&message)) result.messages.push_back(message);
    result.status = reader->Finish();
    return result;
  }

  // Pulls and returns the image of the last message.
  pb::Image MustPull(const std::string& reference) {
    PullResult result = Pull(reference);
    EXPECT_TRUE(result.status.ok()) << result.status.error_message();
    if (!result.status.ok() || result.messages.empty()) return {};
    EXPECT_TRUE(result.messages.back().has_image());
    return result.messages.back().image();
  }

  grpc::Status Import(const std::string& archive, const std::string& name,
                      pb::ImportImageResponse* response) {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientWriter<pb::ImportImageRequest>> writer =
        stub_->ImportImage(&context, response);
    pb::ImportImageRequest first;
    first.mutable_options()->set_name(name);
    const std::string bytes = ReadFileOrEmpty(archive);
    EXPECT_FALSE(bytes.empty()) << archive;
    constexpr size_t kChunk = 64 << 10;
    for (size_t offset = 0; offset < bytes.size(); offset += kChunk) {
      pb::ImportImageRequest request;
      if (offset == 0) request = first;
      request.set_chunk(bytes.substr(offset, kChunk));
      if (!writer->Write(request)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  pb::Image MustImport(const std::string& archive,
                       const std::string& name = "") {
    pb::ImportImageResponse response;
    grpc::Status status = Import(archive, name, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_THAT(response.images(), SizeIs(1));
    return response.images_size() > 0 ? response.images(0) : pb::Image();
  }

  std::vector<std::string> ListNames() {
    grpc::ClientContext context;
    pb::ListImagesResponse response;
    EXPECT_TRUE(
        stub_->ListImages(&context, pb::ListImagesRequest(), &response).ok());
    std::vector<std::string> names;
    for (const pb::Image& image : response.images()) {
      names.push_back(image.name());
    }
    return names;
  }

  grpc::Status Inspect(const std::string& reference, pb::Image* image) {
    grpc::ClientContext context;
    pb::InspectImageRequest request;
    request.set_reference(reference);
    pb::InspectImageResponse response;
    grpc::Status status = stub_->InspectImage(&context, request, &response);
    *image = response.image();
    return status;
  }

  grpc::Status Remove(const std::string& reference, bool force,
                      pb::RemoveImageResponse* response) {
    grpc::ClientContext context;
    pb::RemoveImageRequest request;
    request.set_reference(reference);
    request.set_force(force);
    return stub_->RemoveImage(&context, request, response);
  }

  grpc::Status Prepare(const std::string& id, const std::string& reference,
                       pb::PrepareSnapshotResponse* response) {
    grpc::ClientContext context;
    pb::PrepareSnapshotRequest request;
    request.set_id(id);
    request.set_reference(reference);
    return stub_->PrepareSnapshot(&context, request, response);
  }

  grpc::Status Release(const std::string& id) {
    grpc::ClientContext context;
    pb::ReleaseSnapshotRequest request;
    request.set_id(id);
    pb::ReleaseSnapshotResponse response;
    return stub_->ReleaseSnapshot(&context, request, &response);
  }

  size_t BlobCount() {
    absl::StatusOr<std::vector<std::string>> blobs = store_->content()->List();
    EXPECT_TRUE(blobs.ok());
    return blobs.ok() ? blobs->size() : 0;
  }

  size_t LayerCount() {
    absl::StatusOr<std::vector<LayerInfo>> layers = store_->layers()->List();
    EXPECT_TRUE(layers.ok());
    return layers.ok() ? layers->size() : 0;
  }

  ShortTempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RegistryClient> client_;
  std::unique_ptr<ImageServiceImpl> service_;
  std::unique_ptr<UnixGrpcServer> server_;
  std::unique_ptr<pb::ImageService::Stub> stub_;
  const nlohmann::json expected_ = ExpectedImages();
};

TEST_F(ImageServiceTest, PullsAnImageFromTheRegistryWithProgress) {
  const nlohmann::json& want = expected_["busybox"];
  PullResult result = Pull(Ref("library/busybox:1"));
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_FALSE(result.messages.empty());
  EXPECT_THAT(result.messages.front().status(),
              HasSubstr(absl::StrCat("resolving ", Ref("library/busybox:1"))));
  const pb::PullImageProgress& last = result.messages.back();
  ASSERT_TRUE(last.has_image());
  EXPECT_EQ(last.image().name(), Ref("library/busybox:1"));
  EXPECT_EQ(last.image().manifest_digest(), want["manifest_digest"]);
  EXPECT_EQ(last.image().config_digest(), want["config_digest"]);
  ASSERT_THAT(last.layers(), SizeIs(1));
  EXPECT_EQ(last.layers(0).state(), pb::LAYER_STATE_COMPLETE);
  EXPECT_EQ(last.layers(0).downloaded(), want["layers"][0]["size"]);
  EXPECT_THAT(ListNames(), ElementsAre(Ref("library/busybox:1")));
  EXPECT_TRUE(store_->layers()->Has(want["layers"][0]["diff_id"]));

  // A Docker schema 2 manifest of the same image: the layer is not fetched
  // again.
  PullResult docker = Pull(Ref("library/busybox:docker"));
  ASSERT_TRUE(docker.status.ok()) << docker.status.error_message();
  const pb::Image& image = docker.messages.back().image();
  EXPECT_EQ(image.media_type(),
            "application/vnd.docker.distribution.manifest.v2+json");
  EXPECT_EQ(image.layers(0).diff_id(), want["layers"][0]["diff_id"]);
  EXPECT_EQ(docker.messages.back().layers(0).state(),
            pb::LAYER_STATE_ALREADY_EXISTS);
}

TEST_F(ImageServiceTest, PullOfAMultiPlatformImageChoosesAmd64) {
  const nlohmann::json& want = expected_["multiarch"];
  pb::Image image = MustPull(Ref("team/multiarch:1"));
  EXPECT_EQ(image.digest(), want["index_digest"]);
  EXPECT_EQ(image.manifest_digest(),
            want["manifests"]["amd64"]["manifest_digest"]);
  EXPECT_EQ(image.platform().architecture(), "amd64");
  // The arm64 image's layer was not fetched.
  EXPECT_FALSE(store_->content()->Has(
      want["manifests"]["arm64"]["layers"][0]["digest"].get<std::string>()));
}

TEST_F(ImageServiceTest, AMultiLayerImageRunsOnASnapshotWithItsWhiteouts) {
  pb::Image image = MustPull(Ref("team/multilayer:1"));
  ASSERT_THAT(image.layers(), SizeIs(4));
  for (const pb::Layer& layer : image.layers()) {
    EXPECT_GT(layer.size(), 0);
    EXPECT_TRUE(store_->layers()->Has(layer.diff_id())) << layer.diff_id();
  }
  EXPECT_EQ(image.config().working_dir(), "/work");
  if (!CanMountOverlay()) {
    GTEST_SKIP() << "snapshot part skipped: overlay mounts need root";
  }
  pb::PrepareSnapshotResponse prepared;
  grpc::Status status = Prepare("task-1", Ref("team/multilayer:1"), &prepared);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(prepared.image().manifest_digest(), image.manifest_digest());
  const std::string& root = prepared.rootfs();
  EXPECT_TRUE(PathExists(root + "/bin/busybox"));
  EXPECT_TRUE(PathExists(root + "/data/hardlink-a"));
  EXPECT_FALSE(PathExists(root + "/data/remove-me.txt"));
  EXPECT_FALSE(PathExists(root + "/data/gone"));
  EXPECT_FALSE(PathExists(root + "/bin/wc"));
  struct stat a, b;
  ASSERT_EQ(stat((root + "/data/hardlink-a").c_str(), &a), 0);
  ASSERT_EQ(stat((root + "/data/hardlink-b").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  // Writable: the upper directory of its own.
  std::ofstream(root + "/tmp/written") << "x";
  EXPECT_TRUE(PathExists(root + "/tmp/written"));

  // Preparing the same id again gives the same snapshot.
  pb::PrepareSnapshotResponse again;
  ASSERT_TRUE(Prepare("task-1", image.manifest_digest(), &again).ok());
  EXPECT_EQ(again.rootfs(), root);

  grpc::ClientContext context;
  pb::ListSnapshotsResponse snapshots;
  ASSERT_TRUE(
      stub_->ListSnapshots(&context, pb::ListSnapshotsRequest(), &snapshots)
          .ok());
  ASSERT_THAT(snapshots.snapshots(), SizeIs(1));
  EXPECT_EQ(snapshots.snapshots(0).id(), "task-1");
  EXPECT_EQ(snapshots.snapshots(0).rootfs(), root);
  EXPECT_EQ(snapshots.snapshots(0).image_name(), Ref("team/multilayer:1"));
  EXPECT_EQ(snapshots.snapshots(0).manifest_digest(), image.manifest_digest());
  EXPECT_TRUE(snapshots.snapshots(0).has_created());

  // In use: not removed unless forced.
  pb::RemoveImageResponse removed;
  status = Remove(Ref("team/multilayer:1"), false, &removed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("task-1"));
  EXPECT_THAT(ListNames(), SizeIs(1));
  // Forced: the name goes, the snapshot keeps its layers until released.
  status = Remove(Ref("team/multilayer:1"), true, &removed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(removed.untagged(), ElementsAre(Ref("team/multilayer:1")));
  EXPECT_THAT(ListNames(), IsEmpty());
  EXPECT_EQ(LayerCount(), 4u);
  EXPECT_TRUE(PathExists(root + "/bin/busybox"));
  ASSERT_TRUE(Release("task-1").ok());
  EXPECT_FALSE(PathExists(root));
  EXPECT_EQ(LayerCount(), 0u);
  EXPECT_EQ(BlobCount(), 0u);
  // Releasing an unknown id is OK.
  EXPECT_TRUE(Release("task-1").ok());
}

TEST_F(ImageServiceTest, ASecondImageSharingTheBaseLayerStoresItOnce) {
  const nlohmann::json& busybox = expected_["busybox"];
  pb::Image first = MustPull(Ref("library/busybox:1"));
  const int64_t blob_bytes_after_first =
      FileBytes(dir_.Join("images/blobs/sha256"));
  PullResult second = Pull(Ref("team/shared:1"));
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  const pb::Image& shared = second.messages.back().image();
  ASSERT_THAT(shared.layers(), SizeIs(2));
  EXPECT_EQ(shared.layers(0).digest(), busybox["layers"][0]["digest"]);
  EXPECT_EQ(second.messages.back().layers(0).state(),
            pb::LAYER_STATE_ALREADY_EXISTS);
  // Blobs: two manifests, two configs, the base layer, shared's own layer.
  EXPECT_EQ(BlobCount(), 6u);
  EXPECT_EQ(LayerCount(), 2u);
  // Disk: the second image added only its own manifest, config and layer.
  const int64_t added =
      FileBytes(dir_.Join("images/blobs/sha256")) - blob_bytes_after_first;
  const int64_t own = shared.size() - shared.layers(0).size();
  EXPECT_LT(added, shared.size());
  EXPECT_GE(added, own);
  std::cout << "busybox: " << first.size()
            << " bytes; shared: " << shared.size()
            << " bytes, of which it added " << added << " to the store\n";
}

TEST_F(ImageServiceTest, ADigestMismatchFailsNamingTheBlobAndStoresNothing) {
  // A registry of its own: a blob is corrupted in its storage.
  absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
      RegistryFixture::Start();
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE(
      (*registry)->Push(TestImagePath("multilayer"), "team/bad:1").ok());
  StopService();
  StartService(registry->get());
  const std::string layer = expected_["multilayer"]["layers"][3]["digest"];
  const std::string hex(DigestHex(layer));
  const std::string data = absl::StrCat((*registry)->storage_dir(),
                                        "/docker/registry/v2/blobs/sha256/",
                                        hex.substr(0, 2), "/", hex, "/data");
  std::string bytes = ReadFileOrEmpty(data);
  ASSERT_FALSE(bytes.empty()) << data;
  bytes[bytes.size() / 2] ^= 0x55;
  std::ofstream(data, std::ios::binary | std::ios::trunc) << bytes;

  const std::string reference =
      absl::StrCat((*registry)->endpoint(), "/team/bad:1");
  PullResult result = Pull(reference);
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::DATA_LOSS)
      << result.status.error_message();
  EXPECT_THAT(result.status.error_message(), HasSubstr(layer));
  EXPECT_THAT(result.status.error_message(), HasSubstr(reference));
  EXPECT_THAT(result.status.error_message(),
              HasSubstr((*registry)->endpoint()));
  std::cout << "digest mismatch: " << result.status.error_message() << "\n";
  EXPECT_THAT(ListNames(), IsEmpty());
  EXPECT_EQ(BlobCount(), 0u);
  EXPECT_EQ(LayerCount(), 0u);
  EXPECT_THAT(DirEntries(dir_.Join("images/ingest")), IsEmpty());
}

TEST_F(ImageServiceTest, TwoPullsOfOneImageAtOnceBothSucceed) {
  PullResult results[2];
  std::thread threads[2];
  for (int i = 0; i < 2; ++i) {
    threads[i] = std::thread(
        [this, &results, i] { results[i] = Pull(Ref("team/shared:1")); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const PullResult& result : results) {
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    EXPECT_TRUE(result.messages.back().has_image());
  }
  EXPECT_THAT(ListNames(), ElementsAre(Ref("team/shared:1")));
  EXPECT_EQ(LayerCount(), 2u);
  EXPECT_EQ(BlobCount(), 4u);
}

TEST_F(ImageServiceTest, PullErrorsNameTheReferenceAndHost) {
  PullResult missing = Pull(Ref("library/missing:1"));
  EXPECT_EQ(missing.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(missing.status.error_message(),
              HasSubstr(Ref("library/missing:1")));
  PullResult bad = Pull("UPPER/case");
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.status.error_message(), HasSubstr("UPPER/case"));
  EXPECT_THAT(ListNames(), IsEmpty());
}

TEST_F(ImageServiceTest, ACancelledPullEndsQuietlyAndStoresNoImage) {
  FakeRegistry fake;
  ASSERT_TRUE(
      fake.AddLayout(TestImagePath("busybox"), "registry.test/busybox:1").ok());
  const std::string layer = expected_["busybox"]["layers"][0]["digest"];
  fake.Hold(layer, 128 << 10);
  StopService();
  StartService(nullptr, &fake);
  CapturingLogSink warnings(google::GLOG_WARNING);

  grpc::ClientContext context;
  pb::PullImageRequest request;
  request.set_reference("registry.test/busybox:1");
  std::unique_ptr<grpc::ClientReader<pb::PullImageProgress>> reader =
      stub_->PullImage(&context, request);
  ASSERT_TRUE(WaitFor([&] { return fake.held() == 1; }));
  context.TryCancel();
  pb::PullImageProgress message;
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server's download stops (its writer refuses more bytes).
  EXPECT_TRUE(WaitFor([&] { return fake.running_fetches() == 0; }));
  StopService();
  for (const std::string& line : warnings.messages()) {
    EXPECT_THAT(line, ::testing::Not(HasSubstr("PullImage"))) << line;
  }
  EXPECT_THAT(store_->images()->List(), IsEmpty());
  EXPECT_FALSE(store_->content()->Has(layer));
  // The bytes it had stay for the next pull to resume.
  EXPECT_TRUE(PathExists(store_->content()->IngestPath(layer)));
  fake.Release();
  StartService(nullptr, &fake);
  pb::Image image = MustPull("registry.test/busybox:1");
  EXPECT_EQ(image.layers(0).digest(), layer);
  EXPECT_GE(fake.start_offset(layer), 128 << 10);
}

TEST_F(ImageServiceTest, ImportsAnOciArchiveUnderTheNameGiven) {
  const nlohmann::json& want = expected_["multilayer"];
  pb::Image image =
      MustImport(TestImagePath("multilayer-oci.tar"), "multilayer:imported");
  EXPECT_EQ(image.name(), "docker.io/library/multilayer:imported");
  EXPECT_EQ(image.manifest_digest(), want["manifest_digest"]);
  ASSERT_THAT(image.layers(), SizeIs(4));
  for (const pb::Layer& layer : image.layers()) {
    EXPECT_TRUE(store_->layers()->Has(layer.diff_id()));
    EXPECT_GE(layer.unpacked_size(), 0);
  }
  EXPECT_THAT(ListNames(),
              ElementsAre("docker.io/library/multilayer:imported"));
  // Nothing left of the upload.
  EXPECT_THAT(DirEntries(dir_.Join("images/import")), IsEmpty());
}

TEST_F(ImageServiceTest, ImportsADockerSaveArchiveUnderItsRepoTag) {
  const nlohmann::json& want = expected_["busybox"];
  pb::Image image = MustImport(TestImagePath("busybox-docker.tar"));
  EXPECT_EQ(image.name(), "docker.io/library/busybox:latest");
  EXPECT_EQ(image.config_digest(), want["config_digest"]);
  ASSERT_THAT(image.layers(), SizeIs(1));
  EXPECT_EQ(image.layers(0).diff_id(), want["layers"][0]["diff_id"]);
  EXPECT_THAT(image.config().cmd(), ElementsAre("sh"));
}

TEST_F(ImageServiceTest, AnImageWithoutANameNeedsOne) {
  // The busybox layout with no ref.name annotation, as a tar.
  const std::string layout = dir_.Join("unnamed");
  const std::string archive = dir_.Join("unnamed.tar");
  ASSERT_EQ(system(absl::StrCat("cp -r '", TestImagePath("busybox"), "' '",
                                layout, "' && chmod -R u+w '", layout, "'")
                       .c_str()),
            0);
  nlohmann::json index =
      nlohmann::json::parse(ReadFileOrEmpty(layout + "/index.json"));
  index["manifests"][0].erase("annotations");
  std::ofstream(layout + "/index.json", std::ios::trunc) << index.dump();
  ASSERT_EQ(system(absl::StrCat("tar -C '", layout, "' -cf '", archive,
                                "' oci-layout index.json blobs")
                       .c_str()),
            0);

  pb::ImportImageResponse response;
  grpc::Status status = Import(archive, "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("pass one"));
  EXPECT_THAT(ListNames(), IsEmpty());

  pb::Image image = MustImport(archive, "team/named:2");
  EXPECT_EQ(image.name(), "docker.io/team/named:2");
  EXPECT_EQ(image.manifest_digest(), expected_["busybox"]["manifest_digest"]);

  status = Import(archive, "Not A Name", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("ImportOptions.name"));
}

TEST_F(ImageServiceTest, AnOciArchiveNamingOnlyATagTakesItWithTheNameGiven) {
  pb::ImportImageResponse response;
  grpc::Status status = Import(TestImagePath("busybox-oci.tar"), "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("only the tag \"latest\""));
  pb::Image image = MustImport(TestImagePath("busybox-oci.tar"), "busybox");
  EXPECT_EQ(image.name(), "docker.io/library/busybox:latest");
  image = MustImport(TestImagePath("busybox-oci.tar"), "busybox:2");
  EXPECT_EQ(image.name(), "docker.io/library/busybox:2");
}

TEST(ImportNamesTest, NamesFromTheArchiveOrTheOptions) {
  auto names = [](std::vector<std::pair<std::string, std::string>> images,
                  const std::string& option) {
    std::vector<ImportedImage> imported;
    for (const auto& [name, digest] : images) {
      imported.push_back({name, digest, ""});
    }
    return ImportNames(imported, option);
  };
  const std::string a = "sha256:" + std::string(64, 'a');
  const std::string b = "sha256:" + std::string(64, 'b');
  EXPECT_THAT(*names({{"busybox:latest", a}}, ""),
              ElementsAre("docker.io/library/busybox:latest"));
  EXPECT_THAT(*names({{"busybox:latest", a}}, "other:1"),
              ElementsAre("docker.io/library/other:1"));
  EXPECT_THAT(*names({{"1", a}, {"2", b}}, "r.test:5000/app"),
              ElementsAre("r.test:5000/app:1", "r.test:5000/app:2"));
  EXPECT_THAT(
      *names({{"app:1", a}, {"", b}}, "app:2"),
      ElementsAre("docker.io/library/app:1", "docker.io/library/app:2"));
  // The same image under two tags is fine; two images under one name not.
  EXPECT_THAT(*names({{"app:1", a}, {"app:2", a}}, ""), SizeIs(2));
  absl::StatusOr<std::vector<std::string>> clash =
      names({{"", a}, {"", b}}, "app:1");
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clash.status().message(), HasSubstr("docker.io/library/app:1"));
  absl::StatusOr<std::vector<std::string>> unnamed = names({{"", a}}, "");
  EXPECT_EQ(unnamed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unnamed.status().message(), HasSubstr(a));
  absl::StatusOr<std::vector<std::string>> bad = names({{"Bad Name", a}}, "");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr(a));
}

TEST_F(ImageServiceTest, TagInspectListRemoveAndPrune) {
  const nlohmann::json& want = expected_["busybox"];
  const pb::Image imported = MustImport(TestImagePath("busybox-docker.tar"));
  {
    grpc::ClientContext context;
    pb::TagImageRequest request;
    request.set_source("busybox");
    request.set_target("mine:1");
    pb::TagImageResponse response;
    grpc::Status status = stub_->TagImage(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.image().name(), "docker.io/library/mine:1");
    EXPECT_EQ(response.image().config_digest(), want["config_digest"]);
  }
  {
    grpc::ClientContext context;
    pb::TagImageRequest request;
    request.set_source("nope");
    request.set_target("mine:2");
    pb::TagImageResponse response;
    grpc::Status status = stub_->TagImage(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(status.error_message(),
                HasSubstr("docker.io/library/nope:latest"));
  }
  EXPECT_THAT(ListNames(), ElementsAre("docker.io/library/busybox:latest",
                                       "docker.io/library/mine:1"));
  {
    grpc::ClientContext context;
    pb::ListImagesRequest request;
    request.set_name_prefix("docker.io/library/m");
    pb::ListImagesResponse response;
    ASSERT_TRUE(stub_->ListImages(&context, request, &response).ok());
    ASSERT_THAT(response.images(), SizeIs(1));
    EXPECT_EQ(response.images(0).name(), "docker.io/library/mine:1");
  }

  // Inspect by name, digest, image id and id prefix.
  const std::string id = want["config_digest"];
  const std::string hex(DigestHex(id));
  for (const std::string& reference :
       {std::string("mine:1"), imported.manifest_digest(), id,
        hex.substr(0, 12), "sha256:" + hex.substr(0, 20)}) {
    pb::Image image;
    grpc::Status status = Inspect(reference, &image);
    ASSERT_TRUE(status.ok()) << reference << ": " << status.error_message();
    EXPECT_EQ(image.config_digest(), id) << reference;
    EXPECT_EQ(image.other_names_size(), 1) << reference;
  }
  pb::Image image;
  grpc::Status status = Inspect(hex.substr(0, 11), &image);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr(hex.substr(0, 11)));
  const std::string other = want["manifest_digest"];
  status = Inspect(other, &image);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr("no image has digest " + other));

  // A name goes; the image stays under its other name.
  pb::RemoveImageResponse removed;
  status = Remove("busybox", false, &removed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(removed.untagged(),
              ElementsAre("docker.io/library/busybox:latest"));
  EXPECT_THAT(removed.deleted(), IsEmpty());
  EXPECT_THAT(ListNames(), ElementsAre("docker.io/library/mine:1"));
  // By id prefix: its last name, then its blobs and layer.
  removed.Clear();
  status = Remove(hex.substr(0, 12), false, &removed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(removed.untagged(), ElementsAre("docker.io/library/mine:1"));
  for (const std::string& digest :
       {imported.manifest_digest(), imported.config_digest(),
        imported.layers(0).digest(), imported.layers(0).diff_id()}) {
    EXPECT_THAT(removed.deleted(), ::testing::Contains(digest));
  }
  EXPECT_THAT(ListNames(), IsEmpty());
  EXPECT_EQ(BlobCount(), 0u);
  EXPECT_EQ(LayerCount(), 0u);
  status = Remove("busybox", false, &removed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);

  // Prune: nothing while the image is named; with all, the image too.
  MustImport(TestImagePath("busybox-docker.tar"));
  {
    grpc::ClientContext context;
    pb::PruneImagesResponse response;
    ASSERT_TRUE(
        stub_->PruneImages(&context, pb::PruneImagesRequest(), &response).ok());
    EXPECT_THAT(response.untagged(), IsEmpty());
    EXPECT_THAT(response.deleted(), IsEmpty());
  }
  {
    grpc::ClientContext context;
    pb::PruneImagesRequest request;
    request.set_all(true);
    pb::PruneImagesResponse response;
    ASSERT_TRUE(stub_->PruneImages(&context, request, &response).ok());
    EXPECT_THAT(response.untagged(),
                ElementsAre("docker.io/library/busybox:latest"));
    EXPECT_GT(response.reclaimed_bytes(), 0);
  }
  EXPECT_THAT(ListNames(), IsEmpty());
  EXPECT_EQ(BlobCount(), 0u);
}

TEST_F(ImageServiceTest, AUserNamespacedTasksSnapshotHasItsLayersIdmapped) {
  MustImport(TestImagePath("busybox-docker.tar"));
  pb::PrepareSnapshotRequest request;
  request.set_id("task-u");
  request.set_reference("busybox");
  pb::IdMapping* uid = request.add_uid_mappings();
  uid->set_container_id(0);
  uid->set_host_id(400000);
  uid->set_size(65536);
  // Only uids: refused, naming the field.
  {
    grpc::ClientContext context;
    pb::PrepareSnapshotResponse response;
    grpc::Status status = stub_->PrepareSnapshot(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("gid_mappings"));
  }
  *request.add_gid_mappings() = *uid;
  if (!CanMountOverlay()) {
    GTEST_SKIP() << "overlay mounts and user namespaces need root";
  }
  pb::PrepareSnapshotResponse prepared;
  {
    grpc::ClientContext context;
    grpc::Status status = stub_->PrepareSnapshot(&context, request, &prepared);
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      GTEST_SKIP() << status.error_message()
                   << " (this kernel cannot give overlayfs idmapped layers)";
    }
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  // The image's root-owned files show as the namespace's root.
  struct stat st;
  ASSERT_EQ(stat((prepared.rootfs() + "/bin/busybox").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 400000u);
  EXPECT_EQ(st.st_gid, 400000u);
  {
    grpc::ClientContext context;
    pb::ListSnapshotsResponse snapshots;
    ASSERT_TRUE(
        stub_->ListSnapshots(&context, pb::ListSnapshotsRequest(), &snapshots)
            .ok());
    ASSERT_EQ(snapshots.snapshots_size(), 1);
    ASSERT_EQ(snapshots.snapshots(0).uid_mappings_size(), 1);
    EXPECT_EQ(snapshots.snapshots(0).uid_mappings(0).host_id(), 400000u);
    EXPECT_EQ(snapshots.snapshots(0).gid_mappings(0).size(), 65536u);
  }
  // Again with the same mappings: the same snapshot; with others: refused.
  {
    grpc::ClientContext context;
    pb::PrepareSnapshotResponse again;
    ASSERT_TRUE(stub_->PrepareSnapshot(&context, request, &again).ok());
    EXPECT_EQ(again.rootfs(), prepared.rootfs());
  }
  {
    pb::PrepareSnapshotRequest unmapped = request;
    unmapped.clear_uid_mappings();
    unmapped.clear_gid_mappings();
    grpc::ClientContext context;
    pb::PrepareSnapshotResponse response;
    grpc::Status status = stub_->PrepareSnapshot(&context, unmapped, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("task-u"));
    EXPECT_THAT(status.error_message(), HasSubstr("0 400000 65536"));
  }
  ASSERT_TRUE(Release("task-u").ok());
  EXPECT_THAT(DirEntries(dir_.Join("images/idmaps")), IsEmpty());
}

TEST_F(ImageServiceTest, SnapshotErrorsNameTheIdAndImage) {
  pb::PrepareSnapshotResponse prepared;
  grpc::Status status = Prepare("task-x", "nope:1", &prepared);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("task-x"));
  EXPECT_THAT(status.error_message(), HasSubstr("docker.io/library/nope:1"));
  status = Prepare("../escape", "busybox", &prepared);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("../escape"));
  EXPECT_EQ(Release("../escape").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace berth::images
