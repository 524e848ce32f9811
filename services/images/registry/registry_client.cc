#include "services/images/registry/registry_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <utility>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/io.h"
#include "base/sha256.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/registry/challenge.h"
#include "services/images/registry/url.h"

namespace berth::images {
namespace {

using Json = nlohmann::json;

// docker.io's API is served from another host than the name images carry.
constexpr char kDockerHubDomain[] = "docker.io";
constexpr char kDockerHubApiHost[] = "registry-1.docker.io";
constexpr int kMaxRedirects = 10;
// The body of an error answer kept for its message.
constexpr size_t kMaxErrorBody = 64 << 10;
// A token server's answer.
constexpr size_t kMaxTokenBody = 1 << 20;
// What a token lives when the server does not say (the distribution spec's
// default).
constexpr int64_t kDefaultTokenSeconds = 60;

void GlobalInit() {
  static absl::once_flag once;
  absl::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string PercentEncode(absl::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%",
                      absl::AsciiStrToUpper(absl::BytesToHexString(
                          absl::string_view(reinterpret_cast<char*>(&c), 1))));
    }
  }
  return out;
}

// The registry's error document ({"errors": [{"code", "message", "detail"}]})
// as "CODE: message; ...", or the start of the body when it is not one.
std::string RegistryErrorText(absl::string_view body) {
  Json document = Json::parse(body.begin(), body.end(), nullptr, false);
  std::vector<std::string> parts;
  if (document.is_object() && document.contains("errors") &&
      document["errors"].is_array()) {
    for (const Json& error : document["errors"]) {
      if (!error.is_object()) continue;
      std::string code, message;
      if (error.contains("code") && error["code"].is_string()) {
        code = error["code"].get<std::string>();
      }
      if (error.contains("message") && error["message"].is_string()) {
        message = error["message"].get<std::string>();
      }
      if (code.empty() && message.empty()) continue;
      parts.push_back(code.empty()      ? message
                      : message.empty() ? code
                                        : absl::StrCat(code, ": ", message));
    }
  }
  if (!parts.empty()) return absl::StrJoin(parts, "; ");
  std::string text(absl::StripAsciiWhitespace(body.substr(0, 200)));
  for (char& c : text) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return text;
}

// One endpoint a repository is reached at: a mirror or the host itself.
struct Endpoint {
  HttpUrl base;  // scheme://host[:port][/path]
  bool mirror = false;
  // Settings of the endpoint's own entry in the configuration (credentials,
  // CA file); null when it has none.
  const RegistryHost* settings = nullptr;
  // The key of `settings` in the configuration.
  std::string settings_key;

  std::string Name() const { return base.String(); }
  std::string Host() const { return base.HostPort(); }
  bool has_credentials() const {
    return settings != nullptr && !settings->username.empty();
  }
};

// The final answer of a request (after redirects).
struct HttpResponse {
  long status = 0;
  // Header names in lower case, in order.
  std::vector<std::pair<std::string, std::string>> headers;
  // The body, unless a sink took it.
  std::string body;
  // Where it came from.
  HttpUrl url;

  std::string Header(absl::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (key == name) return value;
    }
    return "";
  }
  std::vector<std::string> Headers(absl::string_view name) const {
    std::vector<std::string> values;
    for (const auto& [key, value] : headers) {
      if (key == name) values.push_back(value);
    }
    return values;
  }
};

// Takes the body of a 2xx answer. Returns an error to abort the transfer.
using BodySink =
    std::function<absl::Status(const HttpResponse& head, absl::string_view)>;

struct HttpRequest {
  HttpUrl url;
  std::vector<std::string> headers;
  // "Bearer ..." or "Basic ...": sent to the origin of `url` only, never to
  // where a redirect leads elsewhere.
  std::string authorization;
  bool follow_redirects = false;
  // Largest body kept (an answer beyond it is RESOURCE_EXHAUSTED naming
  // `what`).
  size_t max_body = kMaxErrorBody;
  // Takes the bodies of 2xx answers when set.
  BodySink sink;
  // For messages: "manifest docker.io/library/busybox:latest".
  std::string what;
};

// Why a request failed, and whether trying again may help.
struct Failure {
  absl::Status status;
  bool retriable = false;
};

bool IsRedirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 ||
         status == 308;
}

bool IsRetriableStatus(long status) {
  return status == 408 || status == 429 || status >= 500;
}

// The status of an HTTP answer that is not what the caller wanted:
// UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (with `not_found`), or
// UNAVAILABLE / INTERNAL with the status and the registry's message.
Failure StatusOfAnswer(const HttpResponse& response, const Endpoint& endpoint,
                       absl::string_view repository,
                       absl::string_view not_found) {
  const std::string detail = absl::StrCat(
      "HTTP ", response.status, " from ", response.url.String(),
      response.body.empty() ? "" : ": ", RegistryErrorText(response.body));
  switch (response.status) {
    case 401:
      return {absl::UnauthenticatedError(absl::StrCat(
                  "registry ", endpoint.Host(), " refused access to ",
                  repository, " (", detail, ")")),
              false};
    case 403:
      return {absl::PermissionDeniedError(absl::StrCat(
                  "registry ", endpoint.Host(), " denied access to ",
                  repository, " (", detail, ")")),
              false};
    case 404:
      return {absl::NotFoundError(absl::StrCat(not_found, " (", detail, ")")),
              false};
    default:
      break;
  }
  if (IsRetriableStatus(response.status)) {
    return {absl::UnavailableError(detail), true};
  }
  return {absl::InternalError(absl::StrCat("unexpected ", detail)), false};
}

struct CurlEasyDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyDeleter>;

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

// What the callbacks of one transfer share.
struct Transfer {
  const HttpRequest* request = nullptr;
  HttpResponse response;
  bool in_headers_of_new_response = true;
  absl::Status sink_status;
  bool too_large = false;
};

size_t HeaderCallback(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t length = size * count;
  absl::string_view line(data, length);
  line = absl::StripTrailingAsciiWhitespace(line);
  if (absl::StartsWith(line, "HTTP/")) {
    // A new response (after a 100 Continue, for instance).
    transfer->response.headers.clear();
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::MaxSplits(' ', 2));
    long status = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &status)) {
      transfer->response.status = status;
    }
    return length;
  }
  size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    transfer->response.headers.emplace_back(
        absl::AsciiStrToLower(
            absl::StripAsciiWhitespace(line.substr(0, colon))),
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return length;
}

size_t WriteCallback(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t length = size * count;
  const long status = transfer->response.status;
  if (status >= 200 && status < 300 && transfer->request->sink) {
    transfer->sink_status = transfer->request->sink(
        transfer->response, absl::string_view(data, length));
    return transfer->sink_status.ok() ? length : 0;
  }
  std::string& body = transfer->response.body;
  const size_t limit = status >= 200 && status < 300
                           ? transfer->request->max_body
                           : kMaxErrorBody;
  if (body.size() + length > limit) {
    if (status >= 200 && status < 300) {
      transfer->too_large = true;
      return 0;
    }
    // An error page: keep its start only.
    body.append(data, limit - std::min(limit, body.size()));
    return length;
  }
  body.append(data, length);
  return length;
}

class RegistryClientImpl : public RegistryClient {
 public:
  explicit RegistryClientImpl(RegistryClientOptions options)
      : options_(std::move(options)), share_(curl_share_init()) {
    curl_share_setopt(share_, CURLSHOPT_LOCKFUNC, &ShareLock);
    curl_share_setopt(share_, CURLSHOPT_UNLOCKFUNC, &ShareUnlock);
    curl_share_setopt(share_, CURLSHOPT_USERDATA, this);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  }

  ~RegistryClientImpl() override {
    {
      absl::MutexLock lock(&pool_mu_);
      idle_.clear();
    }
    curl_share_cleanup(share_);
  }

  // Reads each host's CA file (and the system's bundle once) into the bundle
  // its requests trust; an unreadable file fails that host's requests only.
  void LoadCaBundles() {
    std::string system_bundle;
    bool system_read = false;
    for (const auto& [name, host] : options_.config.hosts) {
      if (host.ca_file.empty()) continue;
      if (!system_read) {
        system_bundle = ReadSystemBundle();
        system_read = true;
      }
      absl::StatusOr<std::string> extra =
          base::ReadFile(host.ca_file, 16 << 20);
      if (!extra.ok()) {
        ca_errors_[name] = absl::FailedPreconditionError(absl::StrCat(
            "registry ", name, ": ca_file: ", extra.status().message()));
        continue;
      }
      if (!absl::StrContains(*extra, "-----BEGIN CERTIFICATE-----")) {
        ca_errors_[name] = absl::FailedPreconditionError(
            absl::StrCat("registry ", name, ": ca_file ", host.ca_file,
                         " holds no PEM certificate"));
        continue;
      }
      ca_bundles_[name] = absl::StrCat(system_bundle, "\n", *extra);
    }
  }

  absl::StatusOr<FetchedManifest> FetchManifest(
      const Reference& reference) override {
    return FetchManifestObject(reference, reference.Object(), reference.digest,
                               "");
  }

  absl::StatusOr<FetchedManifest> FetchManifestByDigest(
      const Reference& reference, absl::string_view digest,
      absl::string_view media_type) override {
    absl::Status valid = ValidateDigest(digest, "manifest digest");
    if (!valid.ok()) return valid;
    return FetchManifestObject(reference, std::string(digest),
                               std::string(digest), media_type);
  }

  absl::Status FetchBlob(const Reference& reference, absl::string_view digest,
                         int64_t size, BlobWriter* writer,
                         const std::function<void(int64_t)>& progress) override;

 private:
  static void ShareLock(CURL*, curl_lock_data data, curl_lock_access,
                        void* user) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    // The lock is released in ShareUnlock, which the analysis cannot pair.
    static_cast<RegistryClientImpl*>(user)->share_mu_[ShareIndex(data)].Lock();
  }
  static void ShareUnlock(CURL*, curl_lock_data data,
                          void* user) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    static_cast<RegistryClientImpl*>(user)
        ->share_mu_[ShareIndex(data)]
        .Unlock();
  }
  static size_t ShareIndex(curl_lock_data data) {
    size_t index = static_cast<size_t>(data);
    return index < kShareLocks ? index : 0;
  }

  static std::string ReadSystemBundle() {
    CurlEasy curl(curl_easy_init());
    char* path = nullptr;
    if (curl == nullptr ||
        curl_easy_getinfo(curl.get(), CURLINFO_CAINFO, &path) != CURLE_OK ||
        path == nullptr) {
      return "";
    }
    absl::StatusOr<std::string> bundle = base::ReadFile(path, 16 << 20);
    if (!bundle.ok()) {
      LOG(WARNING) << "registry client: the system CA bundle: "
                   << bundle.status();
      return "";
    }
    return *std::move(bundle);
  }

  // The endpoints of `reference`'s registry: its mirrors, then itself.
  absl::StatusOr<std::vector<Endpoint>> Endpoints(
      const Reference& reference) const;
  const RegistryHost* HostSettings(const std::string& key) const {
    auto it = options_.config.hosts.find(key);
    return it == options_.config.hosts.end() ? nullptr : &it->second;
  }

  absl::StatusOr<FetchedManifest> FetchManifestObject(
      const Reference& reference, const std::string& object,
      const std::string& expected_digest, absl::string_view media_type);
  // One endpoint's try (with retries) at a manifest.
  absl::StatusOr<FetchedManifest> FetchManifestFrom(
      const Endpoint& endpoint, const Reference& reference,
      const std::string& object, const std::string& expected_digest,
      absl::string_view media_type);
  // One endpoint's try (with retries) at a blob; leaves the writer holding
  // the whole blob on success. `held` is the number of bytes the writer
  // holds, kept up to date. `writer_failed` is set when the writer refused
  // a write or truncation (a full disk, a cancelled pull): no other endpoint
  // is tried then.
  absl::Status FetchBlobFrom(const Endpoint& endpoint,
                             const Reference& reference,
                             absl::string_view digest, int64_t size,
                             BlobWriter* writer, int64_t* held,
                             bool* writer_failed,
                             const std::function<void(int64_t)>& progress);

  // Performs `request` with the endpoint's credentials: a cached token (or
  // Basic credentials for an endpoint that asked for them), and on a 401
  // whatever its challenge asks for, once.
  absl::StatusOr<HttpResponse> PerformAuthorized(const Endpoint& endpoint,
                                                 const std::string& repository,
                                                 HttpRequest request,
                                                 Failure* failure);
  // A token from the Bearer challenge's realm.
  absl::Status FetchToken(const Endpoint& endpoint,
                          const std::string& repository,
                          const AuthChallenge& challenge, std::string* token,
                          Failure* failure);
  // One request, following redirects when asked. Network failures fill
  // `failure` (and return its status).
  absl::StatusOr<HttpResponse> Perform(const Endpoint& endpoint,
                                       const HttpRequest& request,
                                       Failure* failure);
  absl::Status PerformOnce(CURL* curl, const Endpoint& endpoint,
                           const HttpRequest& request, const HttpUrl& url,
                           bool send_authorization, Transfer* transfer,
                           Failure* failure);

  CurlEasy TakeHandle();
  void ReturnHandle(CurlEasy curl);

  void Backoff(int attempt) const;

  std::string BasicAuthorization(const Endpoint& endpoint) const {
    return absl::StrCat("Basic ", absl::Base64Escape(absl::StrCat(
                                      endpoint.settings->username, ":",
                                      endpoint.settings->password)));
  }
  static std::string CacheKey(const Endpoint& endpoint,
                              const std::string& repository) {
    return absl::StrCat(endpoint.Name(), " ", repository);
  }

  const RegistryClientOptions options_;
  // CA bundles (system + ca_file) and CA file errors by configuration key;
  // written by Create only.
  std::map<std::string, std::string> ca_bundles_;
  std::map<std::string, absl::Status> ca_errors_;

  static constexpr size_t kShareLocks = CURL_LOCK_DATA_LAST;
  CURLSH* const share_;
  std::array<absl::Mutex, kShareLocks> share_mu_;

  absl::Mutex pool_mu_;
  std::vector<CurlEasy> idle_ ABSL_GUARDED_BY(pool_mu_);

  struct CachedToken {
    std::string token;
    absl::Time expires;
  };
  absl::Mutex auth_mu_;
  // Bearer tokens by endpoint and repository.
  absl::flat_hash_map<std::string, CachedToken> tokens_
      ABSL_GUARDED_BY(auth_mu_);
  // Endpoints that asked for Basic credentials.
  absl::flat_hash_map<std::string, bool> basic_endpoints_
      ABSL_GUARDED_BY(auth_mu_);
};

absl::StatusOr<std::vector<Endpoint>> RegistryClientImpl::Endpoints(
    const Reference& reference) const {
  std::vector<Endpoint> endpoints;
  const RegistryHost* host = HostSettings(reference.domain);
  if (host != nullptr) {
    for (const std::string& mirror : host->mirrors) {
      absl::StatusOr<HttpUrl> url = ParseHttpUrl(
          mirror, absl::StrCat("mirror of ", reference.domain), true);
      if (!url.ok()) return url.status();
      Endpoint endpoint;
      endpoint.base = *std::move(url);
      endpoint.mirror = true;
      endpoint.settings_key = endpoint.base.HostPort();
      endpoint.settings = HostSettings(endpoint.settings_key);
      endpoints.push_back(std::move(endpoint));
    }
  }
  const bool insecure = host != nullptr && host->insecure;
  const std::string api_host = reference.domain == kDockerHubDomain
                                   ? std::string(kDockerHubApiHost)
                                   : reference.domain;
  absl::StatusOr<HttpUrl> url =
      ParseHttpUrl(absl::StrCat(insecure ? "http" : "https", "://", api_host),
                   absl::StrCat("registry ", reference.domain), true);
  if (!url.ok()) return url.status();
  Endpoint endpoint;
  endpoint.base = *std::move(url);
  endpoint.settings_key = reference.domain;
  endpoint.settings = host;
  endpoints.push_back(std::move(endpoint));
  return endpoints;
}

// Every endpoint's error in one: the code of the last (the host itself),
// the messages of all.
absl::Status Combine(
    const std::vector<std::pair<const Endpoint*, absl::Status>>& errors) {
  if (errors.size() == 1) return errors[0].second;
  std::vector<std::string> earlier;
  for (size_t i = 0; i + 1 < errors.size(); ++i) {
    earlier.push_back(absl::StrCat(errors[i].first->mirror ? "mirror " : "",
                                   errors[i].first->Name(), ": ",
                                   errors[i].second.message()));
  }
  const absl::Status& last = errors.back().second;
  return absl::Status(last.code(),
                      absl::StrCat(last.message(), " (after ",
                                   absl::StrJoin(earlier, "; "), ")"));
}

absl::StatusOr<FetchedManifest> RegistryClientImpl::FetchManifestObject(
    const Reference& reference, const std::string& object,
    const std::string& expected_digest, absl::string_view media_type) {
  absl::StatusOr<std::vector<Endpoint>> endpoints = Endpoints(reference);
  if (!endpoints.ok()) return endpoints.status();
  std::vector<std::pair<const Endpoint*, absl::Status>> errors;
  for (const Endpoint& endpoint : *endpoints) {
    absl::StatusOr<FetchedManifest> manifest = FetchManifestFrom(
        endpoint, reference, object, expected_digest, media_type);
    if (manifest.ok()) return manifest;
    VLOG(1) << "manifest " << reference.String() << " at " << endpoint.Name()
            << ": " << manifest.status();
    errors.emplace_back(&endpoint, manifest.status());
  }
  return Combine(errors);
}

absl::StatusOr<FetchedManifest> RegistryClientImpl::FetchManifestFrom(
    const Endpoint& endpoint, const Reference& reference,
    const std::string& object, const std::string& expected_digest,
    absl::string_view media_type) {
  const std::string name = absl::StrCat(
      reference.Name(),
      object == expected_digest && !object.empty() ? "@" : ":", object);
  absl::StatusOr<HttpUrl> url =
      ParseHttpUrl(absl::StrCat(endpoint.Name(), "/v2/", reference.repository,
                                "/manifests/", object),
                   "manifest URL");
  if (!url.ok()) return url.status();
  HttpRequest request;
  request.url = *url;
  request.headers.push_back(absl::StrCat("Accept: ", ManifestAcceptHeader()));
  request.max_body = static_cast<size_t>(options_.max_manifest_size);
  request.follow_redirects = true;
  request.what = absl::StrCat("manifest ", name);
  Failure failure;
  for (int attempt = 1;; ++attempt) {
    failure = Failure();
    absl::StatusOr<HttpResponse> response =
        PerformAuthorized(endpoint, reference.repository, request, &failure);
    if (response.ok()) {
      if (response->status == 200) {
        FetchedManifest manifest;
        manifest.body = std::move(response->body);
        manifest.digest = DigestFromHex(Sha256Hex(manifest.body));
        manifest.endpoint = endpoint.Name();
        if (!expected_digest.empty() && manifest.digest != expected_digest) {
          return absl::DataLossError(
              absl::StrCat("manifest ", name, " from ", endpoint.Host(),
                           ": its bytes have digest ", manifest.digest,
                           ", not ", expected_digest));
        }
        const std::string header = response->Header("docker-content-digest");
        if (absl::StartsWith(header, "sha256:") && header != manifest.digest) {
          return absl::DataLossError(
              absl::StrCat("manifest ", name, " from ", endpoint.Host(),
                           ": Docker-Content-Digest says ", header,
                           " but its bytes have digest ", manifest.digest));
        }
        // "application/vnd.oci.image.index.v1+json; charset=utf-8"
        std::string content_type = response->Header("content-type");
        content_type = std::string(absl::StripAsciiWhitespace(
            absl::string_view(content_type).substr(0, content_type.find(';'))));
        if (content_type.empty() || content_type == "application/json" ||
            content_type == "text/plain" ||
            content_type == "application/octet-stream") {
          if (!media_type.empty()) {
            content_type = std::string(media_type);
          } else {
            absl::StatusOr<std::string> detected =
                DetectMediaType(manifest.body);
            if (!detected.ok()) {
              return absl::Status(
                  detected.status().code(),
                  absl::StrCat("manifest ", name, " from ", endpoint.Host(),
                               ": ", detected.status().message()));
            }
            content_type = *detected;
          }
        }
        manifest.media_type = std::move(content_type);
        return manifest;
      }
      failure = StatusOfAnswer(
          *response, endpoint, reference.repository,
          absl::StrCat("manifest unknown: ", name, " at ", endpoint.Host()));
    }
    if (!failure.retriable || attempt >= options_.attempts) {
      return failure.status;
    }
    LOG(WARNING) << "manifest " << name << " at " << endpoint.Host() << ", try "
                 << attempt << " of " << options_.attempts << ": "
                 << failure.status;
    Backoff(attempt);
  }
}

absl::Status RegistryClientImpl::FetchBlob(
    const Reference& reference, absl::string_view digest, int64_t size,
    BlobWriter* writer, const std::function<void(int64_t)>& progress) {
  absl::Status valid = ValidateDigest(digest, "blob digest");
  if (!valid.ok()) return valid;
  absl::StatusOr<std::vector<Endpoint>> endpoints = Endpoints(reference);
  if (!endpoints.ok()) return endpoints.status();
  std::vector<std::pair<const Endpoint*, absl::Status>> errors;
  // What the writer holds: its offset when opened, then counted here.
  int64_t held = writer->offset();
  for (const Endpoint& endpoint : *endpoints) {
    bool writer_failed = false;
    absl::Status status =
        FetchBlobFrom(endpoint, reference, digest, size, writer, &held,
                      &writer_failed, progress);
    if (writer_failed) return status;
    if (status.ok()) {
      absl::Status committed = writer->Commit();
      if (!committed.ok()) {
        return absl::Status(
            committed.code(),
            absl::StrCat("blob ", digest, " of ", reference.Name(), " from ",
                         endpoint.Host(), ": ", committed.message()));
      }
      return absl::OkStatus();
    }
    VLOG(1) << "blob " << digest << " at " << endpoint.Name() << ": " << status;
    errors.emplace_back(&endpoint, status);
  }
  return Combine(errors);
}

absl::Status RegistryClientImpl::FetchBlobFrom(
    const Endpoint& endpoint, const Reference& reference,
    absl::string_view digest, int64_t size, BlobWriter* writer, int64_t* held,
    bool* writer_failed, const std::function<void(int64_t)>& progress) {
  const std::string name = absl::StrCat(
      "blob ", digest, " of ", reference.Name(), " at ", endpoint.Host());
  absl::StatusOr<HttpUrl> url =
      ParseHttpUrl(absl::StrCat(endpoint.Name(), "/v2/", reference.repository,
                                "/blobs/", digest),
                   "blob URL");
  if (!url.ok()) return url.status();
  auto truncate = [&]() {
    *held = 0;
    absl::Status status = writer->Truncate();
    if (!status.ok()) *writer_failed = true;
    return status;
  };
  bool restarted = false;  // after a 416
  for (int attempt = 1;; ++attempt) {
    if (size >= 0 && *held > size) {
      absl::Status truncated = truncate();
      if (!truncated.ok()) return truncated;
    }
    const int64_t offset = *held;
    if (progress) progress(offset);
    if (size >= 0 && offset == size) return absl::OkStatus();

    HttpRequest request;
    request.url = *url;
    request.follow_redirects = true;
    request.what = name;
    if (offset > 0) {
      request.headers.push_back(absl::StrCat("Range: bytes=", offset, "-"));
    }
    bool started = false;
    // Set when the bytes must be thrown away rather than resumed from.
    bool discard = false;
    request.sink = [&](const HttpResponse& head,
                       absl::string_view data) -> absl::Status {
      if (!started) {
        started = true;
        if (head.status == 206) {
          // Content-Range: bytes <first>-<last>/<total>
          const std::string content_range = head.Header("content-range");
          absl::string_view range = content_range;
          int64_t first = -1;
          if (absl::ConsumePrefix(&range, "bytes ")) {
            (void)absl::SimpleAtoi(range.substr(0, range.find('-')), &first);
          }
          if (first != offset) {
            discard = true;
            return absl::UnavailableError(absl::StrCat(
                name, ": asked for bytes from ", offset,
                ", the registry sent Content-Range \"", content_range, "\""));
          }
        } else if (offset > 0) {
          // The whole blob again: start over.
          absl::Status truncated = truncate();
          if (!truncated.ok()) return truncated;
        }
      }
      if (size >= 0 && *held + static_cast<int64_t>(data.size()) > size) {
        discard = true;
        return absl::DataLossError(
            absl::StrCat(name, ": more than its ", size, " bytes"));
      }
      absl::Status written = writer->Write(data);
      if (!written.ok()) {
        *writer_failed = true;
        return written;
      }
      *held += static_cast<int64_t>(data.size());
      if (progress) progress(*held);
      return absl::OkStatus();
    };

    Failure failure;
    absl::StatusOr<HttpResponse> response =
        PerformAuthorized(endpoint, reference.repository, request, &failure);
    if (*writer_failed) return response.status();
    if (discard) {
      absl::Status truncated = truncate();
      if (!truncated.ok()) return truncated;
    }
    if (response.ok()) {
      if (response->status == 200 || response->status == 206) {
        if (size >= 0 && *held != size) {
          failure = {
              absl::UnavailableError(absl::StrCat(
                  name, ": the transfer ended at byte ", *held, " of ", size)),
              true};
        } else {
          return absl::OkStatus();
        }
      } else if (response->status == 416 && !restarted) {
        // The range is not satisfiable: what is held is not a prefix the
        // registry knows. Start again from nothing (not counted as a try).
        restarted = true;
        absl::Status truncated = truncate();
        if (!truncated.ok()) return truncated;
        --attempt;
        continue;
      } else {
        failure = StatusOfAnswer(
            *response, endpoint, reference.repository,
            absl::StrCat("blob unknown: ", digest, " in ", reference.repository,
                         " at ", endpoint.Host()));
      }
    } else if (absl::IsDataLoss(response.status())) {
      // More bytes than the descriptor says: the registry's content is not
      // this blob; another endpoint may have it.
      return response.status();
    }
    if (!failure.retriable || attempt >= options_.attempts) {
      return failure.status;
    }
    LOG(WARNING) << name << ", try " << attempt << " of " << options_.attempts
                 << " (resuming at byte " << *held << "): " << failure.status;
    Backoff(attempt);
  }
}

absl::StatusOr<HttpResponse> RegistryClientImpl::PerformAuthorized(
    const Endpoint& endpoint, const std::string& repository,
    HttpRequest request, Failure* failure) {
  const std::string key = CacheKey(endpoint, repository);
  bool cached = false;
  {
    absl::MutexLock lock(&auth_mu_);
    auto token = tokens_.find(key);
    if (token != tokens_.end() && token->second.expires > absl::Now()) {
      request.authorization = absl::StrCat("Bearer ", token->second.token);
      cached = true;
    } else if (basic_endpoints_.contains(endpoint.Name()) &&
               endpoint.has_credentials()) {
      request.authorization = BasicAuthorization(endpoint);
      cached = true;
    }
  }
  absl::StatusOr<HttpResponse> response = Perform(endpoint, request, failure);
  if (!response.ok() || response->status != 401) return response;

  // 401: answer the challenge.
  if (cached) {
    absl::MutexLock lock(&auth_mu_);
    tokens_.erase(key);
  }
  absl::StatusOr<std::vector<AuthChallenge>> challenges =
      ParseWwwAuthenticateHeaders(response->Headers("www-authenticate"));
  if (!challenges.ok()) {
    *failure = {
        absl::UnauthenticatedError(absl::StrCat(
            "registry ", endpoint.Host(), " answered HTTP 401 for ", repository,
            " without a usable challenge: ", challenges.status().message())),
        false};
    return failure->status;
  }
  const AuthChallenge* bearer = nullptr;
  const AuthChallenge* basic = nullptr;
  for (const AuthChallenge& challenge : *challenges) {
    if (challenge.scheme == "bearer" && bearer == nullptr) bearer = &challenge;
    if (challenge.scheme == "basic" && basic == nullptr) basic = &challenge;
  }
  if (bearer != nullptr) {
    std::string token;
    absl::Status fetched =
        FetchToken(endpoint, repository, *bearer, &token, failure);
    if (!fetched.ok()) return fetched;
    request.authorization = absl::StrCat("Bearer ", token);
  } else if (basic != nullptr) {
    if (!endpoint.has_credentials()) {
      *failure = {
          absl::UnauthenticatedError(absl::StrCat(
              "registry ", endpoint.Host(), " requires credentials for ",
              repository, " (Basic realm \"", basic->Param("realm"),
              "\") and none are configured for ", endpoint.settings_key)),
          false};
      return failure->status;
    }
    {
      absl::MutexLock lock(&auth_mu_);
      basic_endpoints_[endpoint.Name()] = true;
    }
    request.authorization = BasicAuthorization(endpoint);
  } else {
    *failure = {
        absl::UnauthenticatedError(absl::StrCat(
            "registry ", endpoint.Host(), " asks for ", (*challenges)[0].scheme,
            " authentication for ", repository, ", which is not supported")),
        false};
    return failure->status;
  }
  response = Perform(endpoint, request, failure);
  if (response.ok() && response->status == 401) {
    *failure = {
        absl::UnauthenticatedError(absl::StrCat(
            "registry ", endpoint.Host(), " refused ",
            bearer != nullptr ? "the token" : "the credentials of ",
            bearer != nullptr ? "" : endpoint.settings->username, " for ",
            repository, " (HTTP 401 from ", response->url.String(), ": ",
            RegistryErrorText(response->body), ")")),
        false};
    return failure->status;
  }
  return response;
}

absl::Status RegistryClientImpl::FetchToken(const Endpoint& endpoint,
                                            const std::string& repository,
                                            const AuthChallenge& challenge,
                                            std::string* token,
                                            Failure* failure) {
  auto fail = [&](absl::Status status, bool retriable) {
    *failure = {std::move(status), retriable};
    return failure->status;
  };
  absl::StatusOr<HttpUrl> realm =
      ParseHttpUrl(challenge.Param("realm"),
                   absl::StrCat("token realm of registry ", endpoint.Host()));
  if (!realm.ok()) return fail(realm.status(), false);
  const std::string scope = absl::StrCat("repository:", repository, ":pull");
  std::vector<std::string> query;
  if (!realm->query.empty()) query.push_back(realm->query);
  const std::string service = challenge.Param("service");
  if (!service.empty()) {
    query.push_back(absl::StrCat("service=", PercentEncode(service)));
  }
  query.push_back(absl::StrCat("scope=", PercentEncode(scope)));
  const std::string challenge_scope = challenge.Param("scope");
  if (!challenge_scope.empty() && challenge_scope != scope) {
    query.push_back(absl::StrCat("scope=", PercentEncode(challenge_scope)));
  }
  HttpRequest request;
  request.url = *realm;
  request.url.query = absl::StrJoin(query, "&");
  request.max_body = kMaxTokenBody;
  request.follow_redirects = true;
  request.what = absl::StrCat("token for ", repository);
  // Credentials travel to the realm over HTTPS, or over HTTP when the
  // registry itself is spoken to in plain HTTP.
  const bool send_credentials =
      endpoint.has_credentials() &&
      (realm->scheme == "https" || endpoint.base.scheme == "http");
  if (endpoint.has_credentials() && !send_credentials) {
    LOG(WARNING) << "registry " << endpoint.Host() << ": not sending "
                 << endpoint.settings->username << "'s credentials to "
                 << realm->Origin() << " over plain HTTP";
  }
  if (send_credentials) request.authorization = BasicAuthorization(endpoint);

  absl::StatusOr<HttpResponse> response = Perform(endpoint, request, failure);
  if (!response.ok()) return response.status();
  const std::string who =
      send_credentials
          ? absl::StrCat("the credentials of ", endpoint.settings->username)
          : std::string("an anonymous request");
  if (response->status == 401 || response->status == 403) {
    return fail(
        absl::UnauthenticatedError(absl::StrCat(
            "token server ", realm->Origin(), realm->path, " refused ", who,
            " for ", repository, " at registry ", endpoint.Host(), " (HTTP ",
            response->status, ": ", RegistryErrorText(response->body), ")")),
        false);
  }
  if (response->status != 200) {
    return fail(absl::UnavailableError(absl::StrCat(
                    "token server ", realm->Origin(), realm->path,
                    " for registry ", endpoint.Host(), ": HTTP ",
                    response->status, ": ", RegistryErrorText(response->body))),
                IsRetriableStatus(response->status));
  }
  Json document = Json::parse(response->body, nullptr, false);
  std::string value;
  if (document.is_object()) {
    for (const char* field : {"token", "access_token"}) {
      auto it = document.find(field);
      if (it != document.end() && it->is_string() &&
          !it->get<std::string>().empty()) {
        value = it->get<std::string>();
        break;
      }
    }
  }
  if (value.empty()) {
    return fail(
        absl::UnavailableError(absl::StrCat(
            "token server ", realm->Origin(), realm->path, " for registry ",
            endpoint.Host(), " answered without a token")),
        false);
  }
  int64_t seconds = kDefaultTokenSeconds;
  auto expires_in = document.find("expires_in");
  if (expires_in != document.end() && expires_in->is_number_integer() &&
      expires_in->get<int64_t>() >= 0) {
    seconds = expires_in->get<int64_t>();
  }
  {
    absl::MutexLock lock(&auth_mu_);
    // Renewed a little before it runs out.
    tokens_[CacheKey(endpoint, repository)] = {
        value, absl::Now() + absl::Seconds(seconds) * 0.9};
  }
  *token = std::move(value);
  return absl::OkStatus();
}

absl::StatusOr<HttpResponse> RegistryClientImpl::Perform(
    const Endpoint& endpoint, const HttpRequest& request, Failure* failure) {
  auto ca_error = ca_errors_.find(endpoint.settings_key);
  if (ca_error != ca_errors_.end()) {
    *failure = {ca_error->second, false};
    return failure->status;
  }
  CurlEasy curl = TakeHandle();
  if (curl == nullptr) {
    *failure = {absl::ResourceExhaustedError("curl_easy_init failed"), false};
    return failure->status;
  }
  HttpUrl url = request.url;
  for (int hop = 0;; ++hop) {
    Transfer transfer;
    transfer.request = &request;
    absl::Status status = PerformOnce(
        curl.get(), endpoint, request, url,
        /*send_authorization=*/url.SameOrigin(request.url), &transfer, failure);
    if (!status.ok()) return status;
    HttpResponse& response = transfer.response;
    response.url = url;
    if (!request.follow_redirects || !IsRedirect(response.status)) {
      ReturnHandle(std::move(curl));
      return std::move(response);
    }
    char* location = nullptr;
    if (curl_easy_getinfo(curl.get(), CURLINFO_REDIRECT_URL, &location) !=
            CURLE_OK ||
        location == nullptr) {
      *failure = {absl::UnavailableError(absl::StrCat(
                      request.what, ": HTTP ", response.status, " from ",
                      url.String(), " without a Location")),
                  false};
      return failure->status;
    }
    const std::string from = url.String();
    absl::StatusOr<HttpUrl> next =
        ParseHttpUrl(location, absl::StrCat("redirect from ", from));
    if (!next.ok()) {
      *failure = {absl::UnavailableError(absl::StrCat(request.what, ": ",
                                                      next.status().message())),
                  false};
      return failure->status;
    }
    if (url.scheme == "https" && next->scheme == "http") {
      *failure = {absl::UnavailableError(absl::StrCat(
                      request.what, ": refusing the redirect from ", from,
                      " to plain HTTP ", next->String())),
                  false};
      return failure->status;
    }
    if (hop + 1 >= kMaxRedirects) {
      *failure = {absl::UnavailableError(
                      absl::StrCat(request.what, ": more than ", kMaxRedirects,
                                   " redirects from ", request.url.String())),
                  false};
      return failure->status;
    }
    url = *std::move(next);
  }
}

absl::Status RegistryClientImpl::PerformOnce(
    CURL* curl, const Endpoint& endpoint, const HttpRequest& request,
    const HttpUrl& url, bool send_authorization, Transfer* transfer,
    Failure* failure) {
  curl_easy_reset(curl);
  std::array<char, CURL_ERROR_SIZE> error_buffer{};
  const std::string text_url = url.String();
  curl_easy_setopt(curl, CURLOPT_URL, text_url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer.data());
  curl_easy_setopt(curl, CURLOPT_SHARE, share_);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(
      curl, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(options_.connect_timeout)));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(
      curl, CURLOPT_LOW_SPEED_TIME,
      std::max<long>(
          1, static_cast<long>(absl::ToInt64Seconds(options_.stall_timeout))));
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &HeaderCallback);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &WriteCallback);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, transfer);
  if (url.scheme == "https") {
    auto bundle = ca_bundles_.find(endpoint.settings_key);
    if (bundle != ca_bundles_.end()) {
      curl_blob blob;
      blob.data = const_cast<char*>(bundle->second.data());
      blob.len = bundle->second.size();
      blob.flags = CURL_BLOB_NOCOPY;
      curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &blob);
    }
  }
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  auto add_header = [&headers](const std::string& header) {
    curl_slist* list = curl_slist_append(headers.get(), header.c_str());
    if (list != nullptr) {
      (void)headers.release();
      headers.reset(list);
    }
  };
  for (const std::string& header : request.headers) add_header(header);
  if (send_authorization && !request.authorization.empty()) {
    add_header(absl::StrCat("Authorization: ", request.authorization));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());

  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK) return absl::OkStatus();
  if (!transfer->sink_status.ok()) {
    const bool retriable = absl::IsUnavailable(transfer->sink_status);
    *failure = {transfer->sink_status, retriable};
    return failure->status;
  }
  if (transfer->too_large) {
    *failure = {absl::ResourceExhaustedError(absl::StrCat(
                    request.what, " at ", url.HostPort(), " is larger than ",
                    request.max_body, " bytes")),
                false};
    return failure->status;
  }
  const std::string detail = error_buffer[0] != '\0'
                                 ? std::string(error_buffer.data())
                                 : std::string(curl_easy_strerror(code));
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
      *failure = {
          absl::FailedPreconditionError(absl::StrCat(
              request.what, ": the TLS certificate of ", url.HostPort(),
              " is not trusted (", detail, "); give its CA as ca_file of ",
              endpoint.settings_key, " in the registries configuration")),
          false};
      return failure->status;
    case CURLE_SSL_CONNECT_ERROR:
      // Also what a plain-HTTP server answers to a TLS handshake; a
      // connection reset during one is worth another try.
      *failure = {absl::UnavailableError(absl::StrCat(
                      request.what, ": TLS handshake with ", url.Origin(),
                      " failed (", detail,
                      "); a registry speaking plain HTTP must be marked "
                      "insecure in the registries configuration")),
                  true};
      return failure->status;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      *failure = {absl::UnavailableError(absl::StrCat(
                      request.what, ": ", url.String(), ": ", detail)),
                  false};
      return failure->status;
    default:
      *failure = {absl::UnavailableError(absl::StrCat(
                      request.what, ": ", url.String(), ": ", detail)),
                  true};
      return failure->status;
  }
}

CurlEasy RegistryClientImpl::TakeHandle() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!idle_.empty()) {
      CurlEasy curl = std::move(idle_.back());
      idle_.pop_back();
      return curl;
    }
  }
  return CurlEasy(curl_easy_init());
}

void RegistryClientImpl::ReturnHandle(CurlEasy curl) {
  // A handle keeps its connections open for the next request.
  constexpr size_t kMaxIdle = 16;
  absl::MutexLock lock(&pool_mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(curl));
}

void RegistryClientImpl::Backoff(int attempt) const {
  absl::Duration wait = options_.retry_backoff;
  for (int i = 1; i < attempt && wait < absl::Seconds(5); ++i) wait *= 2;
  wait = std::min(wait, absl::Seconds(5));
  thread_local std::minstd_rand random(std::random_device{}());
  // Between half and all of it.
  const double jitter =
      0.5 + 0.5 * std::uniform_real_distribution<double>(0, 1)(random);
  absl::SleepFor(wait * jitter);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RegistryClient>> RegistryClient::Create(
    RegistryClientOptions options) {
  if (options.attempts < 1) {
    return absl::InvalidArgumentError("registry client: attempts must be >= 1");
  }
  if (options.max_manifest_size <= 0) {
    return absl::InvalidArgumentError(
        "registry client: max_manifest_size must be > 0");
  }
  GlobalInit();
  auto client = std::make_unique<RegistryClientImpl>(std::move(options));
  client->LoadCaBundles();
  return std::unique_ptr<RegistryClient>(std::move(client));
}

}  // namespace berth::images
