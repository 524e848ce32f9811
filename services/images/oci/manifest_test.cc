#include "services/images/oci/manifest.h"

#include <sys/utsname.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "berth/image/v1/image.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

const std::string kA = "sha256:" + std::string(64, 'a');
const std::string kB = "sha256:" + std::string(64, 'b');
const std::string kC = "sha256:" + std::string(64, 'c');
const std::string kD = "sha256:" + std::string(64, 'd');

// Fills $A..$D with the digests above.
std::string Doc(std::string text) {
  return absl::StrReplaceAll(text,
                             {{"$A", kA}, {"$B", kB}, {"$C", kC}, {"$D", kD}});
}

const char kOciIndexJson[] = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.index.v1+json",
  "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json",
     "digest": "$A", "size": 500,
     "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"},
     "annotations": {"org.opencontainers.image.ref.name": "1.36"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json",
     "digest": "$B", "size": 501,
     "platform": {"architecture": "amd64", "os": "linux"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json",
     "digest": "$C", "size": 502,
     "platform": {"architecture": "arm", "os": "linux", "variant": "v7"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json",
     "digest": "$D", "size": 503,
     "platform": {"architecture": "unknown", "os": "unknown"}}
  ],
  "annotations": {"com.example": "x"},
  "unknownField": [1, 2, {"deep": true}]
})";

TEST(IndexTest, ParsesOciIndex) {
  absl::StatusOr<Index> index = ParseIndex(Doc(kOciIndexJson));
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->media_type, kOciIndex);
  ASSERT_EQ(index->manifests.size(), 4u);
  EXPECT_EQ(index->manifests[0].digest, kA);
  EXPECT_EQ(index->manifests[0].size, 500);
  EXPECT_EQ(index->manifests[0].media_type, kOciManifest);
  ASSERT_TRUE(index->manifests[0].platform.has_value());
  EXPECT_EQ(PlatformString(*index->manifests[0].platform), "linux/arm64/v8");
  EXPECT_THAT(index->manifests[0].annotations,
              ElementsAre(Pair("org.opencontainers.image.ref.name", "1.36")));
  EXPECT_THAT(index->annotations, ElementsAre(Pair("com.example", "x")));
}

TEST(IndexTest, ChoosesPlatform) {
  absl::StatusOr<Index> index = ParseIndex(Doc(kOciIndexJson));
  ASSERT_TRUE(index.ok()) << index.status();
  image::v1::Platform platform;
  platform.set_os("linux");
  platform.set_architecture("amd64");
  absl::StatusOr<Descriptor> chosen = ChoosePlatform(*index, platform);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->digest, kB);

  // uname's spelling and an implied variant.
  platform.set_architecture("aarch64");
  chosen = ChoosePlatform(*index, platform);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->digest, kA);

  platform.set_architecture("arm");
  platform.set_variant("v7");
  chosen = ChoosePlatform(*index, platform);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->digest, kC);

  // A different variant does not match.
  platform.set_variant("v6");
  chosen = ChoosePlatform(*index, platform);
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kNotFound);

  platform.set_architecture("s390x");
  platform.clear_variant();
  chosen = ChoosePlatform(*index, platform);
  ASSERT_EQ(chosen.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(chosen.status().message(), HasSubstr("linux/s390x"));
  EXPECT_THAT(chosen.status().message(),
              HasSubstr("linux/arm64/v8, linux/amd64, linux/arm/v7, "
                        "unknown/unknown"));
}

TEST(IndexTest, ExactVariantPreferred) {
  absl::StatusOr<Index> index = ParseIndex(Doc(R"({
    "schemaVersion": 2,
    "manifests": [
      {"mediaType": "application/vnd.oci.image.manifest.v1+json",
       "digest": "$A", "size": 1,
       "platform": {"architecture": "arm", "os": "linux"}},
      {"mediaType": "application/vnd.oci.image.manifest.v1+json",
       "digest": "$B", "size": 1,
       "platform": {"architecture": "arm", "os": "linux", "variant": "v7"}}
    ]})"));
  ASSERT_TRUE(index.ok()) << index.status();
  image::v1::Platform platform;
  platform.set_os("linux");
  platform.set_architecture("arm");
  platform.set_variant("v7");
  absl::StatusOr<Descriptor> chosen = ChoosePlatform(*index, platform);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->digest, kB);
  platform.set_variant("v6");
  chosen = ChoosePlatform(*index, platform);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->digest, kA);
}

TEST(IndexTest, ParsesDockerManifestList) {
  const std::string json = Doc(R"({
    "schemaVersion": 2,
    "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
    "manifests": [
      {"mediaType": "application/vnd.docker.distribution.manifest.v2+json",
       "digest": "$A", "size": 527,
       "platform": {"architecture": "amd64", "os": "linux"}}
    ]})");
  absl::StatusOr<Index> index = ParseIndex(json);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->media_type, kDockerManifestList);
  // The registry's Content-Type, with a parameter, agrees.
  index =
      ParseIndex(json, std::string(kDockerManifestList) + "; charset=utf-8");
  ASSERT_TRUE(index.ok()) << index.status();
  // A contradicting one is refused.
  index = ParseIndex(json, kOciIndex);
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr("contradicts"));
  // So is a manifest type.
  absl::StatusOr<Index> not_index =
      ParseIndex(Doc(R"({"schemaVersion": 2, "manifests": []})"), kOciManifest);
  ASSERT_FALSE(not_index.ok());
  EXPECT_THAT(not_index.status().message(),
              HasSubstr("is not an index or manifest list"));
}

const char kOciManifestJson[] = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.manifest.v1+json",
  "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
             "digest": "$A", "size": 1469},
  "layers": [
    {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
     "digest": "$B", "size": 2592550},
    {"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd",
     "digest": "$C", "size": 0, "urls": ["https://example.com/x"]}
  ],
  "annotations": {"org.opencontainers.image.created": "2023-01-01T00:00:00Z"}
})";

TEST(ManifestTest, ParsesOciManifest) {
  absl::StatusOr<Manifest> manifest = ParseManifest(Doc(kOciManifestJson));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->media_type, kOciManifest);
  EXPECT_EQ(manifest->config.digest, kA);
  EXPECT_EQ(manifest->config.size, 1469);
  EXPECT_EQ(manifest->config.media_type, kOciConfig);
  ASSERT_EQ(manifest->layers.size(), 2u);
  EXPECT_EQ(manifest->layers[0].digest, kB);
  EXPECT_EQ(manifest->layers[0].size, 2592550);
  EXPECT_EQ(manifest->layers[0].media_type, kOciLayerGzip);
  EXPECT_THAT(manifest->layers[1].urls, ElementsAre("https://example.com/x"));
  EXPECT_EQ(manifest->annotations.size(), 1u);
}

TEST(ManifestTest, ParsesDockerSchema2WithoutGivenType) {
  absl::StatusOr<Manifest> manifest = ParseManifest(Doc(R"({
    "schemaVersion": 2,
    "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
    "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
               "size": 7023, "digest": "$A"},
    "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "size": 32654, "digest": "$B"}]})"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->media_type, kDockerManifest);
  EXPECT_EQ(manifest->config.media_type, kDockerConfig);
  EXPECT_TRUE(IsLayerMediaType(manifest->layers[0].media_type));
}

TEST(ManifestTest, MediaTypeChecks) {
  EXPECT_TRUE(IsIndexMediaType(kOciIndex));
  EXPECT_TRUE(IsIndexMediaType(kDockerManifestList));
  EXPECT_FALSE(IsIndexMediaType(kOciManifest));
  EXPECT_TRUE(IsManifestMediaType(kOciManifest));
  EXPECT_TRUE(IsManifestMediaType(kDockerManifest));
  EXPECT_FALSE(IsManifestMediaType(kDockerManifestList));
  for (const char* layer : {kOciLayerTar, kOciLayerGzip, kOciLayerZstd,
                            kDockerLayerGzip, kDockerLayerTar}) {
    EXPECT_TRUE(IsLayerMediaType(layer)) << layer;
  }
  EXPECT_FALSE(IsLayerMediaType(kOciConfig));
  EXPECT_FALSE(IsLayerMediaType("application/octet-stream"));
  const std::string accept = ManifestAcceptHeader();
  for (const char* type :
       {kOciIndex, kOciManifest, kDockerManifestList, kDockerManifest}) {
    EXPECT_THAT(accept, HasSubstr(type));
  }
}

// Each hostile or malformed manifest is refused with a message naming the
// field at fault; none throws.
TEST(ManifestTest, RefusesMalformedNamingTheField) {
  const std::string layer_prefix = R"({"schemaVersion": 2,
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
               "digest": "$A", "size": 10},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": "$B", )";
  struct Case {
    std::string json;
    std::string why;
  } cases[] = {
      {layer_prefix + R"("size": -1}]})",
       "field \"layers[0].size\" is -1, outside [0, 1099511627776]"},
      {layer_prefix + R"("size": 9223372036854775807}]})",
       "field \"layers[0].size\" is 9223372036854775807, outside"},
      {layer_prefix + R"("size": 18446744073709551615}]})",
       "field \"layers[0].size\" is 18446744073709551615, outside"},
      {layer_prefix + R"("size": 1e30}]})",
       "field \"layers[0].size\" must be an integer, got a fractional number"},
      {layer_prefix + R"("size": 1.5}]})",
       "field \"layers[0].size\" must be an integer"},
      {layer_prefix + R"("size": "10"}]})",
       "field \"layers[0].size\" must be an integer, got a string"},
      {layer_prefix + R"("size": null}]})",
       "field \"layers[0].size\" is missing"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "sha256:../../etc", "size": 1}, "layers": []})",
       "digest in field \"config.digest\""},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "md5:d41d8cd98f00b204e9800998ecf8427e", "size": 1}, "layers": []})",
       "unsupported algorithm \"md5\""},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": 5, "size": 1}, "layers": []})",
       "field \"config.digest\" must be a string, got an integer"},
      {R"({"schemaVersion": 2, "config": {"digest": "$A", "size": 1}, "layers": []})",
       "field \"config.mediaType\" is missing"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "$A", "size": 99999999}, "layers": []})",
       "the config is 99999999 bytes"},
      {R"({"schemaVersion": 2, "layers": []})", "field \"config\" is missing"},
      {R"({"schemaVersion": 2, "config": [], "layers": []})",
       "field \"config\" must be an object, got an array"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "$A", "size": 1}, "layers": {}})",
       "field \"layers\" must be an array, got an object"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "$A", "size": 1}, "layers": ["x"]})",
       "field \"layers[0]\" must be an object, got a string"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "$A", "size": 1}, "layers": [], "annotations": {"a": 1}})",
       "field \"annotations[\"a\"]\" must be a string, got an integer"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "$A", "size": 1, "urls": "u"}, "layers": []})",
       "field \"config.urls\" must be an array of strings"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "$A", "size": 1}, "layers": [], "mediaType": 3})",
       "field \"mediaType\" must be a string"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "x", "digest": "$A", "size": 1}, "layers": [], "mediaType": "application/vnd.oci.image.index.v1+json"})",
       "is not an image manifest"},
      {R"({"schemaVersion": 1, "name": "x", "fsLayers": []})",
       "schema 1 manifests (schemaVersion 1) are not supported"},
      {R"({"schemaVersion": 3})", "schemaVersion is 3, want 2"},
      {R"({"schemaVersion": "2"})",
       "field \"schemaVersion\" must be an integer, got a string"},
      {R"({"config": {}})", "field \"schemaVersion\" is missing"},
      {R"([1, 2])", "the document must be a JSON object, got an array"},
      {R"({"schemaVersion": 2,)", "not valid JSON"},
      {"", "not valid JSON"},
      {"{\"schemaVersion\": 2, \"a\": \"\xff\"}", "not valid JSON"},
      {R"({"schemaVersion": 2, "config": {"mediaType": "a\u0000b", "digest": "$A", "size": 1}, "layers": []})",
       "field \"config.mediaType\" has a NUL character"},
      {std::string(100000, '[') + std::string(100000, ']'),
       "nested deeper than 64"},
      {"{\"x\": \"" + std::string(kMaxManifestSize, 'x') + "\"}",
       "more than the limit of 4194304"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Manifest> manifest = ParseManifest(Doc(c.json));
    ASSERT_FALSE(manifest.ok()) << c.json.substr(0, 200);
    EXPECT_EQ(manifest.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(manifest.status().message(), HasSubstr("image manifest: "))
        << c.json.substr(0, 200);
    EXPECT_THAT(manifest.status().message(), HasSubstr(c.why))
        << c.json.substr(0, 200);
  }
}

TEST(ManifestTest, RefusesTooManyLayers) {
  std::string json = Doc(R"({"schemaVersion": 2,
    "config": {"mediaType": "x", "digest": "$A", "size": 1}, "layers": [)");
  for (size_t i = 0; i <= kMaxLayers; ++i) {
    absl::StrAppend(&json, i ? "," : "",
                    Doc(R"({"mediaType": "x", "digest": "$B", "size": 1})"));
  }
  json += "]}";
  absl::StatusOr<Manifest> manifest = ParseManifest(json);
  ASSERT_FALSE(manifest.ok());
  EXPECT_THAT(manifest.status().message(),
              HasSubstr("field \"layers\" has 1025 entries, more than the "
                        "limit of 1024"));
}

TEST(IndexTest, RefusesBadEntries) {
  absl::StatusOr<Index> index = ParseIndex(Doc(R"({"schemaVersion": 2,
    "manifests": [{"mediaType": "x", "digest": "$A", "size": 1},
                  {"mediaType": "x", "digest": "$A", "size": 1,
                   "platform": {"os": "linux", "architecture": 64}}]})"));
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(),
              HasSubstr("image index: field \"manifests[1].platform."
                        "architecture\" must be a string, got an integer"));
  index = ParseIndex(R"({"schemaVersion": 2})");
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(),
              HasSubstr("field \"manifests\" is missing"));
}

const char kDockerConfigJson[] = R"({
  "architecture": "amd64",
  "os": "linux",
  "created": "2023-05-19T20:19:41.123456789+02:00",
  "config": {
    "User": "1000:1000",
    "ExposedPorts": {"8080/tcp": {}, "53/udp": {}},
    "Env": ["PATH=/usr/bin:/bin", "A=b=c"],
    "Entrypoint": ["/bin/sh", "-c"],
    "Cmd": null,
    "Volumes": {"/data": {}},
    "WorkingDir": "/srv",
    "Labels": {"maintainer": "x", "version": "1"},
    "StopSignal": "SIGQUIT",
    "Healthcheck": {
      "Test": ["CMD-SHELL", "wget -q localhost || exit 1"],
      "Interval": 30000000000,
      "Timeout": 1500000000,
      "StartPeriod": 0,
      "Retries": 3
    },
    "Hostname": "",
    "AttachStdout": false
  },
  "rootfs": {"type": "layers", "diff_ids": ["$A", "$B"]},
  "history": [{"created": "2023-05-19T20:19:41Z", "created_by": "x"}]
})";

TEST(ImageConfigTest, ParsesDockerConfig) {
  absl::StatusOr<ImageConfigFile> file =
      ParseImageConfig(Doc(kDockerConfigJson));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(PlatformString(file->platform), "linux/amd64");
  const image::v1::ImageConfig& config = file->config;
  EXPECT_EQ(config.user(), "1000:1000");
  EXPECT_THAT(config.exposed_ports(),
              UnorderedElementsAre("8080/tcp", "53/udp"));
  EXPECT_THAT(config.env(), ElementsAre("PATH=/usr/bin:/bin", "A=b=c"));
  EXPECT_THAT(config.entrypoint(), ElementsAre("/bin/sh", "-c"));
  EXPECT_TRUE(config.cmd().empty());
  EXPECT_THAT(config.volumes(), ElementsAre("/data"));
  EXPECT_EQ(config.working_dir(), "/srv");
  EXPECT_EQ(config.labels().size(), 2u);
  EXPECT_EQ(config.labels().at("version"), "1");
  EXPECT_EQ(config.stop_signal(), "SIGQUIT");
  ASSERT_TRUE(config.has_healthcheck());
  const image::v1::HealthCheck& check = config.healthcheck();
  EXPECT_THAT(check.test(),
              ElementsAre("CMD-SHELL", "wget -q localhost || exit 1"));
  EXPECT_EQ(check.interval().seconds(), 30);
  EXPECT_EQ(check.interval().nanos(), 0);
  EXPECT_EQ(check.timeout().seconds(), 1);
  EXPECT_EQ(check.timeout().nanos(), 500000000);
  EXPECT_FALSE(check.has_start_period());
  EXPECT_EQ(check.retries(), 3);
  EXPECT_THAT(file->diff_ids, ElementsAre(kA, kB));
  ASSERT_TRUE(file->created_unix_nanos.has_value());
  // 2023-05-19T18:19:41.123456789Z.
  EXPECT_EQ(*file->created_unix_nanos, int64_t{1684520381123456789});
}

TEST(ImageConfigTest, MinimalAndLenientForms) {
  // Entrypoint as a lone string (Docker accepts one); no config at all;
  // Go's zero time for created.
  absl::StatusOr<ImageConfigFile> file = ParseImageConfig(Doc(R"({
    "architecture": "arm64", "variant": "v8", "os": "linux",
    "created": "0001-01-01T00:00:00Z",
    "config": {"Entrypoint": "/bin/app", "Env": null, "Healthcheck": null},
    "rootfs": {"type": "layers", "diff_ids": []}})"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(PlatformString(file->platform), "linux/arm64/v8");
  EXPECT_THAT(file->config.entrypoint(), ElementsAre("/bin/app"));
  EXPECT_FALSE(file->config.has_healthcheck());
  EXPECT_FALSE(file->created_unix_nanos.has_value());

  file = ParseImageConfig(R"({"architecture": "amd64", "os": "linux",
    "rootfs": {"type": "layers", "diff_ids": []}})");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(file->created_unix_nanos.has_value());
  EXPECT_TRUE(file->diff_ids.empty());
}

TEST(ImageConfigTest, RefusesMalformedNamingTheField) {
  const std::string head = R"({"architecture": "amd64", "os": "linux", )";
  const std::string rootfs =
      R"("rootfs": {"type": "layers", "diff_ids": ["$A"]}})";
  const std::pair<std::string, std::string> cases[] = {
      {head + R"("config": {"Env": ["A=1", 2]}, )" + rootfs,
       "field \"config.Env[1]\" must be a string, got an integer"},
      {head + R"("config": {"Env": "A=1"}, )" + rootfs,
       "field \"config.Env\" must be an array of strings, got a string"},
      {head + R"("config": {"Cmd": {"a": 1}}, )" + rootfs,
       "field \"config.Cmd\" must be an array of strings, got an object"},
      {head + R"("config": {"WorkingDir": ["/"]}, )" + rootfs,
       "field \"config.WorkingDir\" must be a string, got an array"},
      {head + R"("config": {"Labels": {"a": null}}, )" + rootfs,
       "field \"config.Labels[\"a\"]\" must be a string, got null"},
      {head + R"("config": {"ExposedPorts": ["80/tcp"]}, )" + rootfs,
       "field \"config.ExposedPorts\" must be an object, got an array"},
      {head + R"("config": {"Healthcheck": {"Interval": -5}}, )" + rootfs,
       "field \"config.Healthcheck.Interval\" is -5, outside"},
      {head + R"("config": {"Healthcheck": {"Timeout": "5s"}}, )" + rootfs,
       "field \"config.Healthcheck.Timeout\" must be an integer, got a string"},
      {head + R"("config": {"Healthcheck": {"Retries": 4294967296}}, )" +
           rootfs,
       "field \"config.Healthcheck.Retries\" is 4294967296, outside"},
      {head + R"("config": {"Healthcheck": {"Test": "CMD"}}, )" + rootfs,
       "field \"config.Healthcheck.Test\" must be an array of strings"},
      {head + R"("config": 5, )" + rootfs,
       "field \"config\" must be an object, got an integer"},
      {head + R"("created": "yesterday", )" + rootfs,
       "field \"created\" (\"yesterday\") is not an RFC 3339 time"},
      {head + R"("created": 1684520381, )" + rootfs,
       "field \"created\" must be a string"},
      {head +
           R"("rootfs": {"type": "layers", "diff_ids": ["$A", "sha256:x"]}})",
       "digest in field \"rootfs.diff_ids[1]\""},
      {head + R"("rootfs": {"type": "layers", "diff_ids": [7]}})",
       "field \"rootfs.diff_ids[0]\" must be a string, got an integer"},
      {head + R"("rootfs": {"type": "squash", "diff_ids": []}})",
       "field \"rootfs.type\" is \"squash\", want \"layers\""},
      {head + R"("rootfs": {"type": "layers"}})",
       "field \"rootfs.diff_ids\" is missing"},
      {R"({"architecture": "amd64", "os": "linux"})",
       "field \"rootfs\" is missing"},
      {R"({"architecture": ["amd64"], "os": "linux"})",
       "field \"architecture\" must be a string, got an array"},
  };
  for (const auto& [json, why] : cases) {
    absl::StatusOr<ImageConfigFile> file = ParseImageConfig(Doc(json));
    ASSERT_FALSE(file.ok()) << json;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(file.status().message(), HasSubstr("image config: ")) << json;
    EXPECT_THAT(file.status().message(), HasSubstr(why)) << json;
  }
}

TEST(DetectMediaTypeTest, FieldOrShape) {
  absl::StatusOr<std::string> type = DetectMediaType(Doc(kOciIndexJson));
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(*type, kOciIndex);
  type = DetectMediaType(R"({"schemaVersion": 2, "manifests": []})");
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(*type, kOciIndex);
  type = DetectMediaType(R"({"schemaVersion": 2, "config": {}, "layers": []})");
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(*type, kOciManifest);
  type = DetectMediaType(
      R"({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"})");
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(*type, kDockerManifest);

  type = DetectMediaType(R"({"schemaVersion": 2})");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(type.status().message(), HasSubstr("neither an index"));
  type = DetectMediaType(R"({"manifests": [], "layers": []})");
  EXPECT_FALSE(type.ok());
  type = DetectMediaType(R"({"schemaVersion": 1, "fsLayers": []})");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(type.status().message(), HasSubstr("schema 1"));
  type = DetectMediaType("not json");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(type.status().message(), HasSubstr("not valid JSON"));
}

TEST(PlatformTest, HostPlatformIsUnamesInGoSpelling) {
  const image::v1::Platform host = HostPlatform();
  EXPECT_EQ(host.os(), "linux");
  struct utsname name;
  ASSERT_EQ(uname(&name), 0);
  const std::string machine = name.machine;
  if (machine == "x86_64") {
    EXPECT_EQ(PlatformString(host), "linux/amd64");
  } else if (machine == "aarch64") {
    EXPECT_EQ(PlatformString(host), "linux/arm64");
  } else {
    EXPECT_FALSE(host.architecture().empty());
  }
}

}  // namespace
}  // namespace berth::images
