// The registry client against small HTTP servers of the test's own on
// 127.0.0.1: auth flows (bearer, basic), error mapping, digests, redirects,
// resumed and retried blob downloads, mirrors. The real registry
// (docker-registry 2.8) is in registry_integration_test.

#include "services/images/registry/registry_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/images/oci/manifest.h"
#include "services/images/oci/reference.h"
#include "services/images/registry/registry_test_util.h"
#include "services/images/registry/test_http_server.h"
#include "services/images/store/content_store.h"

namespace berth::images {
namespace {

using ::berth::images::testing::FetchIntoStore;
using ::berth::images::testing::InsecureConfig;
using ::berth::images::testing::LeavePrefix;
using ::berth::images::testing::MakeClient;
using ::berth::images::testing::OpenStore;
using ::berth::images::testing::Ref;
using ::berth::images::testing::TestHttpRequest;
using ::berth::images::testing::TestHttpResponse;
using ::berth::images::testing::TestHttpServer;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kRepository[] = "team/app";

std::string DigestOf(absl::string_view data) {
  return absl::StrCat("sha256:", Sha256Hex(data));
}

// Deterministic bytes of a given size.
std::string Bytes(size_t size, char seed = 'a') {
  std::string bytes(size, '\0');
  uint32_t state = static_cast<unsigned char>(seed) * 2654435761u;
  for (size_t i = 0; i < size; ++i) {
    state = state * 1103515245u + 12345u;
    bytes[i] = static_cast<char>(state >> 24);
  }
  return bytes;
}

const std::string& ManifestBody() {
  static const std::string* body = new std::string(
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
      R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json",)"
      R"("digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},)"
      R"("layers":[]})");
  return *body;
}

TestHttpResponse ManifestAnswer(const std::string& body = ManifestBody()) {
  TestHttpResponse response;
  response.headers = {{"Content-Type", kOciManifest},
                      {"Docker-Content-Digest", DigestOf(body)}};
  response.body = body;
  return response;
}

TestHttpResponse ErrorAnswer(int status, absl::string_view code,
                             absl::string_view message) {
  TestHttpResponse response;
  response.status = status;
  response.headers = {{"Content-Type", "application/json"}};
  response.body = absl::StrCat(R"({"errors":[{"code":")", code,
                               R"(","message":")", message, R"("}]})");
  return response;
}

std::string ManifestPath(absl::string_view object,
                         absl::string_view repository = kRepository) {
  return absl::StrCat("/v2/", repository, "/manifests/", object);
}

std::string BlobPath(absl::string_view digest,
                     absl::string_view repository = kRepository) {
  return absl::StrCat("/v2/", repository, "/blobs/", digest);
}

// A blob answer that honours Range requests.
TestHttpResponse BlobAnswer(const TestHttpRequest& request,
                            const std::string& blob) {
  TestHttpResponse response;
  response.headers = {{"Content-Type", "application/octet-stream"}};
  const std::string range = request.Header("range");
  int64_t first = 0;
  if (!range.empty()) {
    absl::string_view view = range;
    EXPECT_TRUE(absl::ConsumePrefix(&view, "bytes=")) << range;
    EXPECT_TRUE(absl::ConsumeSuffix(&view, "-")) << range;
    EXPECT_TRUE(absl::SimpleAtoi(view, &first)) << range;
    if (first >= static_cast<int64_t>(blob.size())) {
      response.status = 416;
      return response;
    }
    response.status = 206;
    response.headers.push_back(
        {"Content-Range", absl::StrCat("bytes ", first, "-", blob.size() - 1,
                                       "/", blob.size())});
    response.body = blob.substr(static_cast<size_t>(first));
    return response;
  }
  response.body = blob;
  return response;
}

std::string BasicHeader(absl::string_view user, absl::string_view password) {
  return absl::StrCat("Basic ",
                      absl::Base64Escape(absl::StrCat(user, ":", password)));
}

// A port nothing listens on (bound, then closed).
int DeadPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class RegistryClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenStore(dir_.Join("store"));
    ASSERT_NE(store_, nullptr);
  }

  // Fetches `blob` by its digest into the store.
  absl::Status Fetch(RegistryClient& client, const Reference& reference,
                     const std::string& blob,
                     std::vector<int64_t>* progress = nullptr) {
    return FetchIntoStore(client, *store_, reference, DigestOf(blob),
                          static_cast<int64_t>(blob.size()), progress);
  }

  // The stored blob's bytes.
  std::string Stored(const std::string& digest) {
    absl::StatusOr<std::string> bytes = store_->ReadBlob(digest, 64 << 20);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return bytes.ok() ? *bytes : "";
  }

  berth::testing::ShortTempDir dir_;
  std::unique_ptr<ContentStore> store_;
};

TEST_F(RegistryClientTest, AnonymousManifestByTag) {
  TestHttpServer server([](const TestHttpRequest& request) {
    if (request.path == ManifestPath("1.0")) return ManifestAnswer();
    return ErrorAnswer(404, "NAME_UNKNOWN", "repository name not known");
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  absl::StatusOr<FetchedManifest> manifest =
      client->FetchManifest(Ref(server.host() + "/team/app:1.0"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->body, ManifestBody());
  EXPECT_EQ(manifest->digest, DigestOf(ManifestBody()));
  EXPECT_EQ(manifest->media_type, kOciManifest);
  EXPECT_EQ(manifest->endpoint, server.url());

  std::vector<TestHttpRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].Header("authorization"), "");
  const std::string accept = requests[0].Header("accept");
  for (const char* type :
       {kOciIndex, kOciManifest, kDockerManifestList, kDockerManifest}) {
    EXPECT_THAT(accept, HasSubstr(type));
  }
  EXPECT_THAT(requests[0].Header("user-agent"), HasSubstr("berth-images"));
}

TEST_F(RegistryClientTest, MediaTypeFromTheDocumentWithoutContentType) {
  TestHttpServer server([](const TestHttpRequest&) {
    TestHttpResponse response = ManifestAnswer();
    response.headers = {{"Content-Type", "application/json; charset=utf-8"}};
    return response;
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  absl::StatusOr<FetchedManifest> manifest =
      client->FetchManifest(Ref(server.host() + "/team/app:1.0"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->media_type, kOciManifest);
}

// The bearer flow: 401 with a challenge, the token from the realm (with the
// configured credentials), the manifest with the token; the token is reused.
TEST_F(RegistryClientTest, BearerTokenFlowWithCredentialsAndCache) {
  std::string realm;
  TestHttpServer server([&realm](const TestHttpRequest& request) {
    if (request.path == "/token") {
      if (request.Header("authorization") != BasicHeader("alice", "s3cret")) {
        return ErrorAnswer(401, "UNAUTHORIZED", "bad credentials");
      }
      TestHttpResponse response;
      response.body = R"({"token":"tok-123","expires_in":300})";
      return response;
    }
    if (request.Header("authorization") != "Bearer tok-123") {
      TestHttpResponse response =
          ErrorAnswer(401, "UNAUTHORIZED", "authentication required");
      response.headers.push_back(
          {"WWW-Authenticate",
           absl::StrCat("Bearer realm=\"", realm,
                        "\",service=\"test-registry\",scope=\"repository:",
                        kRepository, ":pull\"")});
      return response;
    }
    return ManifestAnswer();
  });
  realm = server.url() + "/token";
  auto client = MakeClient(InsecureConfig(
      server.host(), R"(, "username": "alice", "password": "s3cret")"));
  const Reference reference = Ref(server.host() + "/team/app:1.0");
  absl::StatusOr<FetchedManifest> manifest = client->FetchManifest(reference);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->digest, DigestOf(ManifestBody()));

  std::vector<TestHttpRequest> tokens = server.requests("/token");
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_THAT(tokens[0].query, HasSubstr("service=test-registry"));
  EXPECT_THAT(tokens[0].query,
              HasSubstr("scope=repository%3Ateam%2Fapp%3Apull"));

  // Again: the cached token goes with the first request.
  manifest = client->FetchManifest(reference);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(server.requests("/token").size(), 1u);
  std::vector<TestHttpRequest> manifests = server.requests(ManifestPath("1.0"));
  ASSERT_EQ(manifests.size(), 3u);  // 401, 200, 200
  EXPECT_EQ(manifests[2].Header("authorization"), "Bearer tok-123");
}

// A token that has expired (expires_in 0) is not reused.
TEST_F(RegistryClientTest, ExpiredTokenIsFetchedAgain) {
  std::string realm;
  std::atomic<int> tokens{0};
  TestHttpServer server([&](const TestHttpRequest& request) {
    if (request.path == "/token") {
      TestHttpResponse response;
      response.body =
          absl::StrCat(R"({"token":"t)", ++tokens, R"(","expires_in":0})");
      return response;
    }
    if (!absl::StartsWith(request.Header("authorization"), "Bearer t")) {
      TestHttpResponse response = ErrorAnswer(401, "UNAUTHORIZED", "no");
      response.headers.push_back(
          {"WWW-Authenticate", absl::StrCat("Bearer realm=\"", realm, "\"")});
      return response;
    }
    return ManifestAnswer();
  });
  realm = server.url() + "/token";
  auto client = MakeClient(InsecureConfig(server.host()));
  const Reference reference = Ref(server.host() + "/team/app:1.0");
  ASSERT_TRUE(client->FetchManifest(reference).ok());
  ASSERT_TRUE(client->FetchManifest(reference).ok());
  EXPECT_EQ(tokens.load(), 2);
  std::vector<TestHttpRequest> manifests = server.requests(ManifestPath("1.0"));
  ASSERT_EQ(manifests.size(), 4u);
  EXPECT_EQ(manifests[3].Header("authorization"), "Bearer t2");
}

TEST_F(RegistryClientTest, AnonymousBearerTokenAsAccessToken) {
  std::string realm;
  TestHttpServer server([&realm](const TestHttpRequest& request) {
    if (request.path == "/auth/token") {
      TestHttpResponse response;
      response.body = R"({"access_token":"anon","expires_in":60})";
      return response;
    }
    if (request.Header("authorization") != "Bearer anon") {
      TestHttpResponse response = ErrorAnswer(401, "UNAUTHORIZED", "no");
      response.headers.push_back(
          {"WWW-Authenticate", absl::StrCat("Bearer realm=\"", realm, "\"")});
      return response;
    }
    return ManifestAnswer();
  });
  realm = server.url() + "/auth/token?client=berth";
  auto client = MakeClient(InsecureConfig(server.host()));
  absl::StatusOr<FetchedManifest> manifest =
      client->FetchManifest(Ref(server.host() + "/team/app:1.0"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  std::vector<TestHttpRequest> tokens = server.requests("/auth/token");
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0].Header("authorization"), "");
  EXPECT_THAT(tokens[0].query, HasSubstr("client=berth"));
  EXPECT_THAT(tokens[0].query, HasSubstr("scope=repository%3Ateam%2Fapp"));
}

TEST_F(RegistryClientTest, TokenRefusedIsUnauthenticated) {
  std::string realm;
  TestHttpServer server([&realm](const TestHttpRequest& request) {
    if (request.path == "/token") {
      return ErrorAnswer(401, "UNAUTHORIZED", "wrong password");
    }
    TestHttpResponse response = ErrorAnswer(401, "UNAUTHORIZED", "no");
    response.headers.push_back(
        {"WWW-Authenticate",
         absl::StrCat("Bearer realm=\"", realm, "\",service=\"s\"")});
    return response;
  });
  realm = server.url() + "/token";
  auto client = MakeClient(InsecureConfig(
      server.host(), R"(, "username": "alice", "password": "wrong")"));
  absl::StatusOr<FetchedManifest> manifest =
      client->FetchManifest(Ref(server.host() + "/team/app:1.0"));
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(manifest.status().message(), HasSubstr(server.host()));
  EXPECT_THAT(manifest.status().message(), HasSubstr(kRepository));
  EXPECT_THAT(manifest.status().message(), HasSubstr("alice"));
  EXPECT_THAT(manifest.status().message(), HasSubstr("wrong password"));
}

TEST_F(RegistryClientTest, StillUnauthorizedWithTheToken) {
  std::string realm;
  TestHttpServer server([&realm](const TestHttpRequest& request) {
    if (request.path == "/token") {
      TestHttpResponse response;
      response.body = R"({"token":"useless"})";
      return response;
    }
    TestHttpResponse response = ErrorAnswer(401, "UNAUTHORIZED", "denied");
    response.headers.push_back(
        {"WWW-Authenticate", absl::StrCat("Bearer realm=\"", realm, "\"")});
    return response;
  });
  realm = server.url() + "/token";
  auto client = MakeClient(InsecureConfig(server.host()));
  absl::StatusOr<FetchedManifest> manifest =
      client->FetchManifest(Ref(server.host() + "/team/app:1.0"));
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(manifest.status().message(),
              HasSubstr(absl::StrCat("registry ", server.host(),
                                     " refused the token for ", kRepository)));
  // Not retried: one anonymous request, one with the token.
  EXPECT_EQ(server.requests(ManifestPath("1.0")).size(), 2u);
}

TEST_F(RegistryClientTest, BasicChallenge) {
  TestHttpServer server([](const TestHttpRequest& request) {
    if (request.Header("authorization") != BasicHeader("bob", "pw")) {
      TestHttpResponse response = ErrorAnswer(401, "UNAUTHORIZED", "login");
      response.headers.push_back(
          {"WWW-Authenticate", "Basic realm=\"Registry Realm\""});
      return response;
    }
    return ManifestAnswer();
  });
  const Reference reference = Ref(server.host() + "/team/app:1.0");

  auto anonymous = MakeClient(InsecureConfig(server.host()));
  absl::StatusOr<FetchedManifest> refused = anonymous->FetchManifest(reference);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat("registry ", server.host(),
                                     " requires credentials for team/app")));
  EXPECT_THAT(refused.status().message(), HasSubstr("Registry Realm"));

  auto wrong = MakeClient(
      InsecureConfig(server.host(), R"(, "username": "bob", "password": "x")"));
  absl::StatusOr<FetchedManifest> denied = wrong->FetchManifest(reference);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(denied.status().message(), HasSubstr("credentials of bob"));

  auto client = MakeClient(InsecureConfig(
      server.host(), R"(, "username": "bob", "password": "pw")"));
  ASSERT_TRUE(client->FetchManifest(reference).ok());
  const size_t before = server.requests().size();
  // Once asked for, the credentials go with the first request.
  ASSERT_TRUE(client->FetchManifest(reference).ok());
  EXPECT_EQ(server.requests().size(), before + 1);
}

TEST_F(RegistryClientTest, AnswersMapToCodes) {
  std::atomic<int> failures{0};
  TestHttpServer server([&failures](const TestHttpRequest& request) {
    if (request.path == ManifestPath("forbidden")) {
      return ErrorAnswer(403, "DENIED",
                         "requested access to the resource "
                         "is denied");
    }
    if (request.path == ManifestPath("broken")) {
      ++failures;
      return ErrorAnswer(500, "UNKNOWN", "storage is on fire");
    }
    if (request.path == ManifestPath("bad")) {
      return ErrorAnswer(400, "TAG_INVALID", "manifest tag did not match");
    }
    return ErrorAnswer(404, "MANIFEST_UNKNOWN", "manifest unknown");
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  const std::string base = server.host() + "/team/app:";

  absl::Status status = client->FetchManifest(Ref(base + "forbidden")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("denied access to team/app"));
  EXPECT_THAT(status.message(), HasSubstr("HTTP 403"));
  EXPECT_THAT(status.message(), HasSubstr("DENIED: requested access"));

  status = client->FetchManifest(Ref(base + "nosuch")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("manifest unknown: ", base, "nosuch at ",
                                     server.host())));
  EXPECT_THAT(status.message(), HasSubstr("MANIFEST_UNKNOWN"));

  status = client->FetchManifest(Ref(base + "broken")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("HTTP 500"));
  EXPECT_THAT(status.message(), HasSubstr("UNKNOWN: storage is on fire"));
  EXPECT_EQ(failures.load(), 3);  // every attempt

  status = client->FetchManifest(Ref(base + "bad")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("HTTP 400"));
  EXPECT_THAT(status.message(), HasSubstr("TAG_INVALID"));
}

TEST_F(RegistryClientTest, RetriesAfterAServerError) {
  std::atomic<int> calls{0};
  TestHttpServer server([&calls](const TestHttpRequest&) {
    if (++calls == 1) return ErrorAnswer(503, "UNAVAILABLE", "busy");
    return ManifestAnswer();
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  ASSERT_TRUE(client->FetchManifest(Ref(server.host() + "/team/app:1.0")).ok());
  EXPECT_EQ(calls.load(), 2);
}

TEST_F(RegistryClientTest, ManifestDigestMismatchIsDataLoss) {
  const std::string other = ManifestBody() + " ";
  TestHttpServer server([&other](const TestHttpRequest& request) {
    if (request.path == ManifestPath("lying")) {
      TestHttpResponse response = ManifestAnswer();
      response.headers[1].second = DigestOf("something else");
      return response;
    }
    // Whatever digest is asked for, the same bytes come back.
    return ManifestAnswer(other);
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  const std::string wanted = DigestOf(ManifestBody());

  absl::StatusOr<FetchedManifest> manifest =
      client->FetchManifest(Ref(server.host() + "/team/app@" + wanted));
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(manifest.status().message(), HasSubstr(wanted));
  EXPECT_THAT(manifest.status().message(), HasSubstr(DigestOf(other)));

  manifest = client->FetchManifestByDigest(Ref(server.host() + "/team/app:1"),
                                           wanted, kOciManifest);
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(manifest.status().message(), HasSubstr(wanted));

  manifest = client->FetchManifest(Ref(server.host() + "/team/app:lying"));
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      manifest.status().message(),
      HasSubstr("Docker-Content-Digest says " + DigestOf("something else")));

  EXPECT_EQ(client
                ->FetchManifestByDigest(Ref(server.host() + "/team/app:1"),
                                        "sha256:short", "")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryClientTest, ManifestByDigest) {
  TestHttpServer server(
      [](const TestHttpRequest&) { return ManifestAnswer(); });
  auto client = MakeClient(InsecureConfig(server.host()));
  const std::string digest = DigestOf(ManifestBody());
  absl::StatusOr<FetchedManifest> manifest = client->FetchManifestByDigest(
      Ref(server.host() + "/team/app:1.0"), digest, kOciManifest);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->digest, digest);
  EXPECT_EQ(server.requests()[0].path, ManifestPath(digest));
}

TEST_F(RegistryClientTest, ManifestTooLarge) {
  TestHttpServer server([](const TestHttpRequest&) {
    return ManifestAnswer(std::string(64 << 10, ' ') + ManifestBody());
  });
  absl::StatusOr<RegistriesConfig> config =
      RegistriesConfig::Parse(InsecureConfig(server.host()));
  ASSERT_TRUE(config.ok());
  RegistryClientOptions options;
  options.config = *config;
  options.max_manifest_size = 4096;
  auto client = RegistryClient::Create(options);
  ASSERT_TRUE(client.ok());
  absl::Status status =
      (*client)->FetchManifest(Ref(server.host() + "/team/app:1.0")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("larger than 4096 bytes"));
}

TEST_F(RegistryClientTest, BlobIntoTheStore) {
  const std::string blob = Bytes(300000);
  const std::string digest = DigestOf(blob);
  TestHttpServer server([&](const TestHttpRequest& request) {
    if (request.path == BlobPath(digest)) return BlobAnswer(request, blob);
    return ErrorAnswer(404, "BLOB_UNKNOWN", "blob unknown to registry");
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  std::vector<int64_t> progress;
  ASSERT_TRUE(
      Fetch(*client, Ref(server.host() + "/team/app:1"), blob, &progress).ok());
  EXPECT_TRUE(store_->Has(digest));
  EXPECT_EQ(Stored(digest), blob);
  ASSERT_THAT(progress, Not(IsEmpty()));
  EXPECT_EQ(progress.back(), static_cast<int64_t>(blob.size()));
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));

  const std::string missing = Bytes(10, 'm');
  absl::Status status =
      Fetch(*client, Ref(server.host() + "/team/app:1"), missing);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("blob unknown: ", DigestOf(missing),
                                     " in team/app at ", server.host())));
}

// Registries send blobs from storage elsewhere: the redirect is followed,
// and the registry's token is not sent there.
TEST_F(RegistryClientTest, RedirectToStorageWithoutTheToken) {
  const std::string blob = Bytes(70000);
  const std::string digest = DigestOf(blob);
  TestHttpServer storage([&](const TestHttpRequest& request) {
    EXPECT_EQ(request.Header("authorization"), "");
    EXPECT_EQ(request.query, "signature=abc");
    return BlobAnswer(request, blob);
  });
  std::string realm;
  TestHttpServer registry([&](const TestHttpRequest& request) {
    if (request.path == "/token") {
      TestHttpResponse response;
      response.body = R"({"token":"registry-token"})";
      return response;
    }
    if (request.Header("authorization") != "Bearer registry-token") {
      TestHttpResponse response = ErrorAnswer(401, "UNAUTHORIZED", "no");
      response.headers.push_back(
          {"WWW-Authenticate", absl::StrCat("Bearer realm=\"", realm, "\"")});
      return response;
    }
    TestHttpResponse response;
    response.status = 307;
    response.headers.push_back(
        {"Location", storage.url() + "/bucket/blob?signature=abc"});
    return response;
  });
  realm = registry.url() + "/token";
  auto client = MakeClient(InsecureConfig(registry.host()));
  ASSERT_TRUE(Fetch(*client, Ref(registry.host() + "/team/app:1"), blob).ok());
  EXPECT_EQ(Stored(digest), blob);
  ASSERT_EQ(storage.requests().size(), 1u);
  EXPECT_EQ(storage.requests()[0].path, "/bucket/blob");
}

TEST_F(RegistryClientTest, RedirectToAnotherSchemeIsRefused) {
  const std::string blob = Bytes(1000);
  for (const char* location :
       {"file:///etc/passwd", "ftp://127.0.0.1/blob", "gopher://x/"}) {
    TestHttpServer server([location](const TestHttpRequest&) {
      TestHttpResponse response;
      response.status = 302;
      response.headers.push_back({"Location", location});
      return response;
    });
    auto client = MakeClient(InsecureConfig(server.host()));
    absl::Status status =
        Fetch(*client, Ref(server.host() + "/team/app:1"), blob);
    EXPECT_FALSE(status.ok()) << location;
    EXPECT_THAT(status.message(), HasSubstr("only http:// and https://"));
    EXPECT_THAT(status.message(), HasSubstr(location));
    EXPECT_FALSE(store_->Has(DigestOf(blob)));
    // Not retried: the answer will not change.
    EXPECT_EQ(server.requests().size(), 1u);
  }
}

TEST_F(RegistryClientTest, ResumesAPartialDownloadWithRange) {
  const std::string blob = Bytes(200000);
  const std::string digest = DigestOf(blob);
  ASSERT_TRUE(LeavePrefix(*store_, digest, blob.size(),
                          absl::string_view(blob).substr(0, 123456))
                  .ok());
  TestHttpServer server([&](const TestHttpRequest& request) {
    return BlobAnswer(request, blob);
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  std::vector<int64_t> progress;
  ASSERT_TRUE(
      Fetch(*client, Ref(server.host() + "/team/app:1"), blob, &progress).ok());
  EXPECT_EQ(Stored(digest), blob);
  std::vector<TestHttpRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].Header("range"), "bytes=123456-");
  EXPECT_EQ(progress.front(), 123456);
}

TEST_F(RegistryClientTest, RangeIgnoredStartsOver) {
  const std::string blob = Bytes(50000);
  const std::string digest = DigestOf(blob);
  // A prefix that is not the blob's: only a full download can fix it.
  ASSERT_TRUE(LeavePrefix(*store_, digest, blob.size(), Bytes(1000, 'x')).ok());
  TestHttpServer server([&](const TestHttpRequest&) {
    TestHttpResponse response;
    response.body = blob;
    return response;
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  ASSERT_TRUE(Fetch(*client, Ref(server.host() + "/team/app:1"), blob).ok());
  EXPECT_EQ(Stored(digest), blob);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(RegistryClientTest, UnsatisfiableRangeStartsOver) {
  const std::string blob = Bytes(5000);
  const std::string digest = DigestOf(blob);
  // Longer than the blob.
  ASSERT_TRUE(LeavePrefix(*store_, digest, -1, Bytes(6000, 'y')).ok());
  TestHttpServer server([&](const TestHttpRequest& request) {
    return BlobAnswer(request, blob);
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  // Unknown size: the 416 tells.
  absl::StatusOr<std::unique_ptr<BlobWriter>> writer =
      store_->Writer(digest, -1);
  ASSERT_TRUE(writer.ok());
  ASSERT_EQ((*writer)->offset(), 6000);
  absl::Status status = client->FetchBlob(Ref(server.host() + "/team/app:1"),
                                          digest, -1, writer->get(), {});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Stored(digest), blob);
  std::vector<TestHttpRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].Header("range"), "bytes=6000-");
  EXPECT_EQ(requests[1].Header("range"), "");
}

// A connection that breaks mid-blob: the next try asks for the rest.
TEST_F(RegistryClientTest, BrokenTransferIsResumed) {
  const std::string blob = Bytes(400000);
  const std::string digest = DigestOf(blob);
  std::atomic<int> calls{0};
  TestHttpServer server([&](const TestHttpRequest& request) {
    TestHttpResponse response = BlobAnswer(request, blob);
    if (++calls == 1) response.cut_after = 150000;
    return response;
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  ASSERT_TRUE(Fetch(*client, Ref(server.host() + "/team/app:1"), blob).ok());
  EXPECT_EQ(Stored(digest), blob);
  std::vector<TestHttpRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].Header("range"), "");
  EXPECT_EQ(requests[1].Header("range"), "bytes=150000-");
}

// A transfer that stops moving is abandoned after the stall timeout and
// resumed.
TEST_F(RegistryClientTest, StalledTransferIsResumed) {
  const std::string blob = Bytes(200000);
  const std::string digest = DigestOf(blob);
  std::atomic<int> calls{0};
  TestHttpServer server([&](const TestHttpRequest& request) {
    TestHttpResponse response = BlobAnswer(request, blob);
    if (++calls == 1) response.stall_after = 1000;
    return response;
  });
  absl::StatusOr<RegistriesConfig> config =
      RegistriesConfig::Parse(InsecureConfig(server.host()));
  ASSERT_TRUE(config.ok());
  RegistryClientOptions options;
  options.config = *config;
  options.stall_timeout = absl::Seconds(1);
  options.retry_backoff = absl::Milliseconds(1);
  absl::StatusOr<std::unique_ptr<RegistryClient>> client =
      RegistryClient::Create(options);
  ASSERT_TRUE(client.ok());
  absl::Status status =
      FetchIntoStore(**client, *store_, Ref(server.host() + "/team/app:1"),
                     digest, static_cast<int64_t>(blob.size()));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Stored(digest), blob);
  std::vector<TestHttpRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  // Resumed where the stalled transfer stopped (curl may have received
  // less than was sent).
  const std::string range = requests[1].Header("range");
  ASSERT_TRUE(absl::StartsWith(range, "bytes=")) << range;
  int64_t resumed_at = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      absl::string_view(range).substr(6, range.size() - 7), &resumed_at))
      << range;
  EXPECT_GT(resumed_at, 0);
  EXPECT_LE(resumed_at, 1000);
}

TEST_F(RegistryClientTest, CorruptBlobStoresNothing) {
  const std::string blob = Bytes(80000);
  const std::string digest = DigestOf(blob);
  std::string corrupt = blob;
  corrupt[40000] ^= 0x55;
  TestHttpServer server([&](const TestHttpRequest& request) {
    return BlobAnswer(request, corrupt);
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  absl::Status status =
      Fetch(*client, Ref(server.host() + "/team/app:1"), blob);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(digest));
  EXPECT_THAT(status.message(), HasSubstr(DigestOf(corrupt)));
  EXPECT_FALSE(store_->Has(digest));
  // Nothing left to resume from either.
  absl::StatusOr<std::unique_ptr<BlobWriter>> writer =
      store_->Writer(digest, blob.size());
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ((*writer)->offset(), 0);
}

TEST_F(RegistryClientTest, LongerBlobStoresNothing) {
  const std::string blob = Bytes(10000);
  const std::string digest = DigestOf(blob);
  TestHttpServer server([&](const TestHttpRequest&) {
    TestHttpResponse response;
    response.body = blob + "trailing bytes";
    return response;
  });
  auto client = MakeClient(InsecureConfig(server.host()));
  absl::Status status =
      Fetch(*client, Ref(server.host() + "/team/app:1"), blob);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(digest));
  EXPECT_THAT(status.message(), HasSubstr("more than its 10000 bytes"));
  EXPECT_FALSE(store_->Has(digest));
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(RegistryClientTest, MirrorsFirstThenTheHost) {
  TestHttpServer mirror([](const TestHttpRequest& request) {
    if (request.path == ManifestPath("mirrored")) return ManifestAnswer();
    return ErrorAnswer(404, "MANIFEST_UNKNOWN", "not on the mirror");
  });
  TestHttpServer host([](const TestHttpRequest&) { return ManifestAnswer(); });
  const int dead = DeadPort();
  auto client = MakeClient(
      absl::StrCat(R"({"registries": {")", host.host(),
                   R"(": {"insecure": true, "mirrors": ["http://127.0.0.1:)",
                   dead, R"(", ")", mirror.url(), R"("]}}})"));

  absl::StatusOr<FetchedManifest> manifest =
      client->FetchManifest(Ref(host.host() + "/team/app:mirrored"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->endpoint, mirror.url());
  EXPECT_THAT(host.requests(), IsEmpty());

  manifest = client->FetchManifest(Ref(host.host() + "/team/app:other"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->endpoint, host.url());
  EXPECT_EQ(host.requests().size(), 1u);
}

TEST_F(RegistryClientTest, EveryEndpointFailing) {
  TestHttpServer mirror([](const TestHttpRequest&) {
    return ErrorAnswer(404, "MANIFEST_UNKNOWN", "not on the mirror");
  });
  TestHttpServer host([](const TestHttpRequest&) {
    return ErrorAnswer(404, "MANIFEST_UNKNOWN", "not here either");
  });
  auto client = MakeClient(absl::StrCat(
      R"({"registries": {")", host.host(),
      R"(": {"insecure": true, "mirrors": [")", mirror.url(), R"("]}}})"));
  absl::Status status =
      client->FetchManifest(Ref(host.host() + "/team/app:x")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("not here either"));
  EXPECT_THAT(status.message(), HasSubstr("mirror " + mirror.url()));
  EXPECT_THAT(status.message(), HasSubstr("not on the mirror"));
}

// A writer that refuses to take more (a pull cancelled, a full disk).
class RefusingWriter : public BlobWriter {
 public:
  int64_t offset() const override { return 0; }
  absl::Status Write(absl::string_view) override {
    return absl::CancelledError("pull cancelled");
  }
  absl::Status Truncate() override { return absl::OkStatus(); }
  absl::Status Commit() override {
    ADD_FAILURE() << "Commit after a refused write";
    return absl::OkStatus();
  }
  void Abort(bool) override {}
};

// The writer's error ends the download: no retry, no other endpoint.
TEST_F(RegistryClientTest, WriterErrorEndsTheDownload) {
  const std::string blob = Bytes(100000);
  TestHttpServer mirror([&](const TestHttpRequest& request) {
    return BlobAnswer(request, blob);
  });
  TestHttpServer host([&](const TestHttpRequest& request) {
    return BlobAnswer(request, blob);
  });
  auto client = MakeClient(absl::StrCat(
      R"({"registries": {")", host.host(),
      R"(": {"insecure": true, "mirrors": [")", mirror.url(), R"("]}}})"));
  RefusingWriter writer;
  absl::Status status =
      client->FetchBlob(Ref(host.host() + "/team/app:1"), DigestOf(blob),
                        static_cast<int64_t>(blob.size()), &writer, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(status.message(), HasSubstr("pull cancelled"));
  EXPECT_EQ(mirror.requests().size(), 1u);
  EXPECT_THAT(host.requests(), IsEmpty());
}

// An air-gapped node points docker.io at its own registry: the repository
// path is docker.io's ("library/busybox").
TEST_F(RegistryClientTest, DockerHubMirror) {
  const std::string blob = Bytes(1234);
  TestHttpServer mirror([&](const TestHttpRequest& request) {
    if (request.path == ManifestPath("latest", "library/busybox")) {
      return ManifestAnswer();
    }
    if (request.path == BlobPath(DigestOf(blob), "library/busybox")) {
      return BlobAnswer(request, blob);
    }
    return ErrorAnswer(404, "NAME_UNKNOWN", "unexpected " + request.path);
  });
  auto client =
      MakeClient(absl::StrCat(R"({"registries": {"docker.io": {"mirrors": [")",
                              mirror.url(), R"("]}}})"));
  const Reference busybox = Ref("busybox");
  absl::StatusOr<FetchedManifest> manifest = client->FetchManifest(busybox);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->endpoint, mirror.url());
  ASSERT_TRUE(Fetch(*client, busybox, blob).ok());
  EXPECT_EQ(Stored(DigestOf(blob)), blob);
}

TEST_F(RegistryClientTest, UnreadableCaFileNamesIt) {
  const std::string ca = dir_.Join("missing-ca.pem");
  // Requests to that host fail before any connection is made.
  auto client = MakeClient(absl::StrCat(
      R"({"registries": {"r.example": {"ca_file": ")", ca, R"("}}})"));
  absl::Status status =
      client->FetchManifest(Ref("r.example/team/app:1")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr(ca));
  EXPECT_THAT(status.message(), HasSubstr("r.example"));
}

// Layers come down in parallel through one client.
TEST_F(RegistryClientTest, ParallelBlobs) {
  constexpr int kBlobs = 8;
  std::vector<std::string> blobs;
  for (int i = 0; i < kBlobs; ++i) {
    blobs.push_back(Bytes(50000 + 1000 * i, static_cast<char>('A' + i)));
  }
  std::string realm;
  TestHttpServer server([&](const TestHttpRequest& request) {
    if (request.path == "/token") {
      TestHttpResponse response;
      response.body = R"({"token":"t","expires_in":600})";
      return response;
    }
    if (request.Header("authorization") != "Bearer t") {
      TestHttpResponse response = ErrorAnswer(401, "UNAUTHORIZED", "no");
      response.headers.push_back(
          {"WWW-Authenticate", absl::StrCat("Bearer realm=\"", realm, "\"")});
      return response;
    }
    for (const std::string& blob : blobs) {
      if (request.path == BlobPath(DigestOf(blob))) {
        return BlobAnswer(request, blob);
      }
    }
    return ErrorAnswer(404, "BLOB_UNKNOWN", "no");
  });
  realm = server.url() + "/token";
  auto client = MakeClient(InsecureConfig(server.host()));
  const Reference reference = Ref(server.host() + "/team/app:1");
  std::vector<absl::Status> results(kBlobs);
  std::vector<std::thread> threads;
  for (int i = 0; i < kBlobs; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = Fetch(*client, reference, blobs[i]); });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kBlobs; ++i) {
    EXPECT_TRUE(results[i].ok()) << results[i];
    EXPECT_EQ(Stored(DigestOf(blobs[i])), blobs[i]);
  }
}

TEST_F(RegistryClientTest, CreateRefusesBadOptions) {
  RegistryClientOptions options;
  options.attempts = 0;
  EXPECT_EQ(RegistryClient::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace berth::images
