#include "services/images/importer/importer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/image/v1/image.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/store/content_store.h"

namespace berth::images {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using Json = nlohmann::json;

enum class EntryType { kFile, kDir, kSymlink, kHardlink };

struct TarEntry {
  std::string name;
  std::string data;  // a file's content, or a link's target
  EntryType type = EntryType::kFile;
};

// Writes `entries` as a pax tar with `filter` ("", "gzip", "zstd").
void WriteTar(const std::string& path, const std::vector<TarEntry>& entries,
              const std::string& filter = "") {
  archive* a = archive_write_new();
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
  if (filter == "gzip") {
    ASSERT_EQ(archive_write_add_filter_gzip(a), ARCHIVE_OK);
  } else if (filter == "zstd") {
    ASSERT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
  }
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK)
      << archive_error_string(a);
  for (const TarEntry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_mtime(entry, 1700000000, 0);
    switch (e.type) {
      case EntryType::kFile:
      case EntryType::kHardlink:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_perm(entry, 0644);
        if (e.type == EntryType::kHardlink) {
          archive_entry_set_hardlink(entry, e.data.c_str());
        } else {
          archive_entry_set_size(entry, e.data.size());
        }
        break;
      case EntryType::kDir:
        archive_entry_set_filetype(entry, AE_IFDIR);
        archive_entry_set_perm(entry, 0755);
        break;
      case EntryType::kSymlink:
        archive_entry_set_filetype(entry, AE_IFLNK);
        archive_entry_set_perm(entry, 0777);
        archive_entry_set_symlink(entry, e.data.c_str());
        break;
    }
    ASSERT_EQ(archive_write_header(a, entry), ARCHIVE_OK)
        << e.name << ": " << archive_error_string(a);
    if (e.type == EntryType::kFile && !e.data.empty()) {
      ASSERT_EQ(archive_write_data(a, e.data.data(), e.data.size()),
                static_cast<la_ssize_t>(e.data.size()));
    }
    archive_entry_free(entry);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

// A layer: an uncompressed tar holding one file.
std::string LayerTar(const std::string& dir, const std::string& file,
                     const std::string& content) {
  const std::string path = dir + "/layer-tmp.tar";
  WriteTar(path, {{"etc/", "", EntryType::kDir}, {file, content}});
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  unlink(path.c_str());
  return out.str();
}

std::string ConfigJson(const std::vector<std::string>& diff_ids,
                       const std::string& arch = "amd64") {
  return Json{{"architecture", arch},
              {"os", "linux"},
              {"config", {{"Cmd", {"sh"}}, {"Env", {"PATH=/bin"}}}},
              {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}}
      .dump();
}

Json DescriptorJson(const std::string& media_type, const std::string& data) {
  return Json{{"mediaType", media_type},
              {"digest", DigestOf(data)},
              {"size", data.size()}};
}

// An OCI layout: file name -> content.
struct Layout {
  std::map<std::string, std::string> files;
  std::string manifest;
  std::string manifest_digest;
  std::string config;
  std::string layer;

  void AddBlob(const std::string& data) {
    files["blobs/sha256/" + std::string(DigestHex(DigestOf(data)))] = data;
  }
  std::vector<TarEntry> Entries() const {
    std::vector<TarEntry> entries = {{"blobs/", "", EntryType::kDir},
                                     {"blobs/sha256/", "", EntryType::kDir}};
    for (const auto& [name, data] : files) entries.push_back({name, data});
    return entries;
  }
  void WriteDir(const std::string& dir) const {
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir + "/blobs").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir + "/blobs/sha256").c_str(), 0755), 0);
    for (const auto& [name, data] : files) {
      std::ofstream out(dir + "/" + name, std::ios::binary);
      out << data;
      ASSERT_TRUE(out.good());
    }
  }
};

// One image: a layer, its config, a manifest, index.json naming it "latest".
Layout OneImageLayout(const std::string& tmp, const std::string& content) {
  Layout layout;
  layout.layer = LayerTar(tmp, "etc/hello", content);
  layout.config = ConfigJson({DigestOf(layout.layer)});
  layout.manifest =
      Json{{"schemaVersion", 2},
           {"mediaType", kOciManifest},
           {"config", DescriptorJson(kOciConfig, layout.config)},
           {"layers", {DescriptorJson(kOciLayerTar, layout.layer)}}}
          .dump();
  layout.manifest_digest = DigestOf(layout.manifest);
  layout.AddBlob(layout.layer);
  layout.AddBlob(layout.config);
  layout.AddBlob(layout.manifest);
  Json entry = DescriptorJson(kOciManifest, layout.manifest);
  entry["annotations"] = {{"org.opencontainers.image.ref.name", "latest"}};
  layout.files["index.json"] = Json{
      {"schemaVersion", 2},
      {"mediaType", kOciIndex},
      {"manifests", {entry}}}.dump();
  layout.files["oci-layout"] = R"({"imageLayoutVersion":"1.0.0"})";
  return layout;
}

image::v1::Platform Amd64() {
  image::v1::Platform platform;
  platform.set_os("linux");
  platform.set_architecture("amd64");
  return platform;
}

class ImporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    ASSERT_NE(tmp, nullptr);
    std::string pattern = std::string(tmp) + "/importer-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    absl::StatusOr<std::unique_ptr<ContentStore>> store =
        ContentStore::Open(dir_ + "/store");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  // The blobs the store holds.
  std::vector<std::string> Stored() {
    absl::StatusOr<std::vector<std::string>> list = store_->List();
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? *list : std::vector<std::string>{};
  }

  void ExpectImported(const Layout& layout,
                      const absl::StatusOr<std::vector<ImportedImage>>& got) {
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].name, "latest");
    EXPECT_EQ((*got)[0].digest, layout.manifest_digest);
    EXPECT_EQ((*got)[0].media_type, kOciManifest);
    EXPECT_THAT(Stored(), UnorderedElementsAre(layout.manifest_digest,
                                               DigestOf(layout.config),
                                               DigestOf(layout.layer)));
    absl::StatusOr<std::string> layer =
        store_->ReadBlob(DigestOf(layout.layer), 1 << 20);
    ASSERT_TRUE(layer.ok()) << layer.status();
    EXPECT_EQ(*layer, layout.layer);
  }

  // Imports `path`, which must fail; prints and returns the error.
  absl::Status ImportError(const std::string& path,
                           const image::v1::Platform& platform = Amd64()) {
    absl::StatusOr<std::vector<ImportedImage>> images =
        ImportArchive(path, platform, store_.get());
    EXPECT_FALSE(images.ok()) << path << " was imported";
    if (images.ok()) return absl::OkStatus();
    std::cout << "printed: " << images.status() << "\n";
    return images.status();
  }

  std::string dir_;
  std::unique_ptr<ContentStore> store_;
};

TEST_F(ImporterTest, OciLayoutDirectory) {
  const Layout layout = OneImageLayout(dir_, "hello\n");
  layout.WriteDir(dir_ + "/layout");
  ExpectImported(layout,
                 ImportArchive(dir_ + "/layout", Amd64(), store_.get()));
  // Again: everything is there already.
  ExpectImported(layout,
                 ImportArchive(dir_ + "/layout", Amd64(), store_.get()));
}

TEST_F(ImporterTest, OciArchivePlainGzipAndZstd) {
  for (const std::string filter : {"", "gzip", "zstd"}) {
    SCOPED_TRACE(filter);
    SetUp();  // a fresh store
    const Layout layout = OneImageLayout(dir_, "hello " + filter);
    const std::string path = dir_ + "/oci.tar";
    std::vector<TarEntry> entries = layout.Entries();
    // Names as tar often writes them.
    for (TarEntry& entry : entries) entry.name = "./" + entry.name;
    WriteTar(path, entries, filter);
    ExpectImported(layout, ImportArchive(path, Amd64(), store_.get()));
  }
}

TEST_F(ImporterTest, DockerSaveArchive) {
  const std::string layer = LayerTar(dir_, "etc/hello", "docker\n");
  const std::string diff_id = DigestOf(layer);
  const std::string config = ConfigJson({diff_id});
  const std::string config_name =
      absl::StrCat(DigestHex(DigestOf(config)), ".json");
  // A second image with the same layer twice, the second by a symbolic
  // link (as docker save writes a layer it wrote already).
  const std::string config2 = ConfigJson({diff_id, diff_id}, "amd64");
  const std::string config2_name = "config2.json";
  const std::string manifest_json =
      Json::array({{{"Config", config_name},
                    {"RepoTags", {"busybox:latest", "example.com/x/busybox:1"}},
                    {"Layers", {"aaa/layer.tar"}}},
                   {{"Config", config2_name},
                    {"RepoTags", nullptr},
                    {"Layers", {"aaa/layer.tar", "bbb/layer.tar"}}}})
          .dump();
  const std::string path = dir_ + "/docker.tar";
  WriteTar(path, {{"aaa/", "", EntryType::kDir},
                  {"aaa/VERSION", "1.0"},
                  {"aaa/json", "{}"},
                  {"aaa/layer.tar", layer},
                  {"bbb/", "", EntryType::kDir},
                  {"bbb/layer.tar", "../aaa/layer.tar", EntryType::kSymlink},
                  {config_name, config},
                  {config2_name, config2},
                  {"repositories", "{}"},
                  // docker writes manifest.json last.
                  {"manifest.json", manifest_json}});
  absl::StatusOr<std::vector<ImportedImage>> images =
      ImportArchive(path, Amd64(), store_.get());
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 3u);
  EXPECT_EQ((*images)[0].name, "busybox:latest");
  EXPECT_EQ((*images)[1].name, "example.com/x/busybox:1");
  EXPECT_EQ((*images)[0].digest, (*images)[1].digest);
  EXPECT_EQ((*images)[2].name, "");
  for (const ImportedImage& image : *images) {
    EXPECT_EQ(image.media_type, kDockerManifest);
  }

  // The manifest made for the first image: the layer under its own digest,
  // which is its diff_id.
  absl::StatusOr<std::string> text =
      store_->ReadBlob((*images)[0].digest, kMaxManifestSize);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(DigestOf(*text), (*images)[0].digest);
  absl::StatusOr<Manifest> manifest = ParseManifest(*text);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->media_type, kDockerManifest);
  EXPECT_EQ(manifest->config.media_type, kDockerConfig);
  EXPECT_EQ(manifest->config.digest, DigestOf(config));
  EXPECT_EQ(manifest->config.size, static_cast<int64_t>(config.size()));
  ASSERT_EQ(manifest->layers.size(), 1u);
  EXPECT_EQ(manifest->layers[0].digest, diff_id);
  EXPECT_EQ(manifest->layers[0].media_type, kDockerLayerTar);
  EXPECT_EQ(manifest->layers[0].size, static_cast<int64_t>(layer.size()));

  absl::StatusOr<std::string> text2 =
      store_->ReadBlob((*images)[2].digest, kMaxManifestSize);
  ASSERT_TRUE(text2.ok());
  absl::StatusOr<Manifest> manifest2 = ParseManifest(*text2);
  ASSERT_TRUE(manifest2.ok());
  ASSERT_EQ(manifest2->layers.size(), 2u);
  EXPECT_EQ(manifest2->layers[1].digest, diff_id);

  EXPECT_THAT(Stored(),
              UnorderedElementsAre(diff_id, DigestOf(config), DigestOf(config2),
                                   (*images)[0].digest, (*images)[2].digest));
}

TEST_F(ImporterTest, DockerSaveLayerNotItsDiffIdIsRefused) {
  const std::string layer = LayerTar(dir_, "etc/hello", "one\n");
  const std::string other = DigestOf("something else");
  const std::string config = ConfigJson({other});
  const std::string path = dir_ + "/docker.tar";
  WriteTar(path,
           {{"c.json", config},
            {"l/layer.tar", layer},
            {"manifest.json",
             Json::array({{{"Config", "c.json"}, {"Layers", {"l/layer.tar"}}}})
                 .dump()}});
  absl::Status error = ImportError(path);
  EXPECT_THAT(error.message(),
              HasSubstr(absl::StrCat("\"l/layer.tar\" is ", DigestOf(layer),
                                     ", but the config's diff_id is ", other)));
  EXPECT_FALSE(store_->Has(DigestOf(layer)));
}

TEST_F(ImporterTest, DockerSaveMissingLayerNamesIt) {
  const std::string config = ConfigJson({DigestOf("x")});
  const std::string path = dir_ + "/docker.tar";
  WriteTar(
      path,
      {{"c.json", config},
       {"manifest.json",
        Json::array({{{"Config", "c.json"}, {"Layers", {"gone/layer.tar"}}}})
            .dump()}});
  absl::Status error = ImportError(path);
  EXPECT_THAT(error.message(),
              HasSubstr("layer 0 \"gone/layer.tar\" is missing from the "
                        "archive"));
}

// A blob whose content is not its name's digest: an error naming the
// digest, and nothing stored under it.
TEST_F(ImporterTest, BlobNotMatchingItsNameIsRefused) {
  Layout layout = OneImageLayout(dir_, "hello\n");
  const std::string layer_name =
      "blobs/sha256/" + std::string(DigestHex(DigestOf(layout.layer)));
  layout.files[layer_name] = LayerTar(dir_, "etc/hello", "HELLO\n");
  const std::string path = dir_ + "/oci.tar";
  WriteTar(path, layout.Entries());
  absl::Status error = ImportError(path);
  EXPECT_THAT(error.message(), HasSubstr(DigestOf(layout.layer)));
  EXPECT_THAT(error.message(), HasSubstr(layer_name));
  EXPECT_FALSE(store_->Has(DigestOf(layout.layer)));
  struct stat st;
  EXPECT_NE(stat(store_->IngestPath(DigestOf(layout.layer)).c_str(), &st), 0)
      << "a partial ingest file is left";

  // The same from a directory.
  SetUp();
  layout.WriteDir(dir_ + "/layout");
  error = ImportError(dir_ + "/layout");
  EXPECT_THAT(error.message(), HasSubstr(DigestOf(layout.layer)));
  EXPECT_FALSE(store_->Has(DigestOf(layout.layer)));
}

TEST_F(ImporterTest, EscapingEntriesAreRefusedNamingThem) {
  const Layout layout = OneImageLayout(dir_, "hello\n");
  const std::vector<std::pair<TarEntry, std::string>> cases = {
      {{"blobs/../../evil", "x"}, "\"blobs/../../evil\": \"..\" in its name"},
      {{"../index.json", "{}"}, "\"../index.json\": \"..\" in its name"},
      {{"/etc/evil", "x"}, "\"/etc/evil\": absolute name"},
      {{"aaa/layer.tar", "../../etc/passwd", EntryType::kSymlink},
       "\"aaa/layer.tar\": symbolic link to \"../../etc/passwd\", outside "
       "the archive"},
      {{"aaa/layer.tar", "/etc/passwd", EntryType::kSymlink},
       "\"aaa/layer.tar\": symbolic link to \"/etc/passwd\", outside"},
      {{"aaa/layer.tar", "../etc/passwd", EntryType::kHardlink},
       "\"../etc/passwd\": \"..\" in its name"},
      {{"blobs/sha256/" + std::string(64, 'a'), "index.json",
        EntryType::kSymlink},
       "a link where a blob must be a file"},
      {{"blobs/sha256/not-a-digest", "x"}, "blob name of entry"},
      {{"index.json", "{}"}, "\"index.json\": appears twice"},
      {{std::string(5000, 'n'), "x"}, "a name of 5000 bytes, more than 4096"},
  };
  for (const auto& [bad, why] : cases) {
    SCOPED_TRACE(bad.name);
    std::vector<TarEntry> entries = layout.Entries();
    entries.push_back(bad);
    const std::string path = dir_ + "/evil.tar";
    WriteTar(path, entries);
    const absl::Status error = ImportError(path);
    EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(error.message(), HasSubstr(why));
  }
}

TEST_F(ImporterTest, MissingBlobIsNamed) {
  Layout layout = OneImageLayout(dir_, "hello\n");
  const std::string config_digest = DigestOf(layout.config);
  layout.files.erase("blobs/sha256/" + std::string(DigestHex(config_digest)));
  const std::string path = dir_ + "/oci.tar";
  WriteTar(path, layout.Entries());
  absl::Status error = ImportError(path);
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(error.message(),
              HasSubstr(absl::StrCat(
                  "blob ", config_digest, " (the config of manifest ",
                  layout.manifest_digest, ") is missing from the archive")));
  // From a directory.
  layout.WriteDir(dir_ + "/layout");
  error = ImportError(dir_ + "/layout");
  EXPECT_THAT(error.message(), HasSubstr(absl::StrCat("blob ", config_digest)));
  EXPECT_THAT(error.message(), HasSubstr("missing from the layout"));
}

TEST_F(ImporterTest, DescriptorSizeMustMatchTheBlob) {
  Layout layout = OneImageLayout(dir_, "hello\n");
  // The index says the manifest is one byte longer than it is.
  Json index = Json::parse(layout.files["index.json"]);
  index["manifests"][0]["size"] = layout.manifest.size() + 1;
  layout.files["index.json"] = index.dump();
  const std::string path = dir_ + "/oci.tar";
  WriteTar(path, layout.Entries());
  absl::Status error = ImportError(path);
  EXPECT_THAT(error.message(),
              HasSubstr(absl::StrCat("blob ", layout.manifest_digest, " is ",
                                     layout.manifest.size(),
                                     " bytes, but entry 0 of index.json says ",
                                     layout.manifest.size() + 1)));
}

TEST_F(ImporterTest, TruncatedArchiveFailsAndStoresNothingPartial) {
  // Incompressible content, so that half the gzip stream ends inside it.
  std::string noise(300000, '\0');
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  for (char& c : noise) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    c = static_cast<char>(state);
  }
  Layout layout = OneImageLayout(dir_, noise);
  const std::string path = dir_ + "/oci.tar.gz";
  // The layer entry first, so that the cut falls in it.
  std::vector<TarEntry> entries = {
      {"blobs/sha256/" + std::string(DigestHex(DigestOf(layout.layer))),
       layout.layer}};
  WriteTar(path, entries, "gzip");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  ASSERT_EQ(truncate(path.c_str(), st.st_size / 2), 0);
  absl::Status error = ImportError(path);
  EXPECT_THAT(error.message(),
              HasSubstr(std::string(DigestHex(DigestOf(layout.layer)))));
  EXPECT_THAT(Stored(), IsEmpty());
  EXPECT_NE(stat(store_->IngestPath(DigestOf(layout.layer)).c_str(), &st), 0);
}

TEST_F(ImporterTest, NotAnArchive) {
  const std::string path = dir_ + "/junk";
  std::ofstream(path) << "this is not a tar";
  absl::Status error = ImportError(path);
  EXPECT_THAT(error.message(), HasSubstr(path));
  // A tar of neither kind.
  WriteTar(path, {{"hello.txt", "hi"}});
  error = ImportError(path);
  EXPECT_THAT(error.message(), HasSubstr("neither an OCI image layout"));
  error = ImportError(dir_ + "/nothing-here");
  EXPECT_THAT(error.message(), HasSubstr("nothing-here"));
}

// A FIFO planted as a blob in a layout directory neither blocks the import
// nor is stored.
TEST_F(ImporterTest, FifoBlobInADirectoryIsRefused) {
  const Layout layout = OneImageLayout(dir_, "hello\n");
  layout.WriteDir(dir_ + "/layout");
  const std::string config = dir_ + "/layout/blobs/sha256/" +
                             std::string(DigestHex(DigestOf(layout.config)));
  ASSERT_EQ(unlink(config.c_str()), 0);
  ASSERT_EQ(mkfifo(config.c_str(), 0644), 0);
  absl::Status error = ImportError(dir_ + "/layout");
  EXPECT_THAT(error.message(),
              HasSubstr(absl::StrCat(DigestHex(DigestOf(layout.config)),
                                     " is not a regular file")));
  EXPECT_FALSE(store_->Has(DigestOf(layout.config)));
}

// An index of two platforms: only the chosen one must be complete.
TEST_F(ImporterTest, IndexNeedsOnlyTheChosenPlatform) {
  Layout layout = OneImageLayout(dir_, "amd64\n");
  const std::string arm_manifest = Json{
      {"schemaVersion", 2},
      {"mediaType", kOciManifest},
      {"config", DescriptorJson(kOciConfig, "{\"arm\":1}")},
      {"layers", Json::array()}}.dump();
  Json amd = DescriptorJson(kOciManifest, layout.manifest);
  amd["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  Json arm = DescriptorJson(kOciManifest, arm_manifest);
  arm["platform"] = {{"os", "linux"}, {"architecture", "arm64"}};
  const std::string index = Json{
      {"schemaVersion", 2},
      {"mediaType", kOciIndex},
      {"manifests", {amd, arm}}}.dump();
  layout.AddBlob(index);
  Json top = DescriptorJson(kOciIndex, index);
  top["annotations"] = {
      {"io.containerd.image.name", "docker.io/library/multi:1"},
      {"org.opencontainers.image.ref.name", "1"}};
  layout.files["index.json"] =
      Json{{"schemaVersion", 2}, {"manifests", {top}}}.dump();
  const std::string path = dir_ + "/multi.tar";
  WriteTar(path, layout.Entries());

  absl::StatusOr<std::vector<ImportedImage>> images =
      ImportArchive(path, Amd64(), store_.get());
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 1u);
  EXPECT_EQ((*images)[0].name, "docker.io/library/multi:1");
  EXPECT_EQ((*images)[0].digest, DigestOf(index));
  EXPECT_EQ((*images)[0].media_type, kOciIndex);

  image::v1::Platform arm64;
  arm64.set_os("linux");
  arm64.set_architecture("arm64");
  absl::Status error = ImportError(path, arm64);
  EXPECT_THAT(
      error.message(),
      HasSubstr(absl::StrCat(
          "blob ", DigestOf(arm_manifest), " (the linux/arm64 entry of index ",
          DigestOf(index), ") is missing from the archive")));
  image::v1::Platform s390x;
  s390x.set_os("linux");
  s390x.set_architecture("s390x");
  error = ImportError(path, s390x);
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(error.message(), HasSubstr("linux/s390x"));
}

// The project's test images (tools/testimages), against images.json.
class TestImagesTest : public ImporterTest {
 protected:
  void SetUp() override {
    ImporterTest::SetUp();
    images_dir_ =
        absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                     std::getenv("TEST_WORKSPACE"), "/tools/testimages/images");
    std::ifstream in(images_dir_ + "/images.json");
    ASSERT_TRUE(in.good()) << images_dir_;
    want_ = Json::parse(in);
  }

  // Every blob of `image` (an images.json entry) is stored.
  void ExpectBlobs(const Json& image) {
    EXPECT_TRUE(store_->Has(image["config_digest"].get<std::string>()));
    for (const Json& layer : image["layers"]) {
      EXPECT_TRUE(store_->Has(layer["digest"].get<std::string>()))
          << layer["digest"];
    }
  }

  std::string images_dir_;
  Json want_;
};

TEST_F(TestImagesTest, BusyboxLayoutAndOciArchive) {
  for (const std::string name : {"busybox", "busybox-oci.tar"}) {
    SCOPED_TRACE(name);
    ImporterTest::SetUp();
    absl::StatusOr<std::vector<ImportedImage>> images =
        ImportArchive(images_dir_ + "/" + name, Amd64(), store_.get());
    ASSERT_TRUE(images.ok()) << images.status();
    ASSERT_EQ(images->size(), 1u);
    EXPECT_EQ((*images)[0].name, "latest");
    EXPECT_EQ((*images)[0].digest, want_["busybox"]["manifest_digest"]);
    ExpectBlobs(want_["busybox"]);
  }
}

TEST_F(TestImagesTest, DockerArchives) {
  for (const std::string name : {"busybox", "multilayer"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::vector<ImportedImage>> images = ImportArchive(
        images_dir_ + "/" + name + "-docker.tar", Amd64(), store_.get());
    ASSERT_TRUE(images.ok()) << images.status();
    ASSERT_EQ(images->size(), 1u);
    EXPECT_EQ((*images)[0].media_type, kDockerManifest);
    absl::StatusOr<std::string> text =
        store_->ReadBlob((*images)[0].digest, kMaxManifestSize);
    ASSERT_TRUE(text.ok());
    absl::StatusOr<Manifest> manifest = ParseManifest(*text);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    const Json& want = want_[name];
    EXPECT_EQ(manifest->config.digest, want["config_digest"]);
    ASSERT_EQ(manifest->layers.size(), want["layers"].size());
    for (size_t i = 0; i < manifest->layers.size(); ++i) {
      // docker save holds the uncompressed layers: stored by diff_id.
      EXPECT_EQ(manifest->layers[i].digest, want["layers"][i]["diff_id"]);
      EXPECT_TRUE(store_->Has(manifest->layers[i].digest));
    }
  }
}

TEST_F(TestImagesTest, MultiarchLayout) {
  absl::StatusOr<std::vector<ImportedImage>> images =
      ImportArchive(images_dir_ + "/multiarch", Amd64(), store_.get());
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 1u);
  EXPECT_EQ((*images)[0].digest, want_["multiarch"]["index_digest"]);
  EXPECT_EQ((*images)[0].media_type, kOciIndex);
  ExpectBlobs(want_["multiarch"]["manifests"]["amd64"]);
  // Only what amd64 needs was copied from the directory.
  EXPECT_FALSE(
      store_->Has(want_["multiarch"]["manifests"]["arm64"]["config_digest"]
                      .get<std::string>()));
}

}  // namespace
}  // namespace berth::images
