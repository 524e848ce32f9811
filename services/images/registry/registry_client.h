// A client of the OCI distribution API (v2) over libcurl: HTTPS with the
// system's CAs plus a per-registry CA file, plain HTTP only for registries
// configured insecure, anonymous and bearer-token auth (the
// WWW-Authenticate challenge), basic credentials, mirrors per registry host.

#ifndef SERVICES_IMAGES_REGISTRY_REGISTRY_CLIENT_H_
#define SERVICES_IMAGES_REGISTRY_REGISTRY_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/images/oci/reference.h"
#include "services/images/store/content_store.h"

namespace berth::images {

// How to reach one registry host (a key of RegistriesConfig::hosts:
// "docker.io", "127.0.0.1:5000").
struct RegistryHost {
  // Endpoints tried in order before the host itself, each
  // http(s)://host[:port][/path]: "https://m.example",
  // "http://127.0.0.1:5000". A mirror is spoken to as its URL's scheme says
  // (plain HTTP only when written http://); its CA file and credentials are
  // those of its own entry in `hosts` (keyed by its host[:port]), if any.
  std::vector<std::string> mirrors;
  // Speak plain HTTP to the host instead of HTTPS.
  bool insecure = false;
  // Extra CA bundle (PEM, an absolute path) trusted for this host besides
  // the system's.
  std::string ca_file;
  // Basic credentials; also used to obtain bearer tokens (sent to a token
  // realm only over HTTPS, or over HTTP when the registry itself is plain
  // HTTP).
  std::string username;
  std::string password;
};

// The registries configuration file (JSON), default
// /etc/berth/registries.json:
//   {"registries": {"docker.io": {"mirrors": ["http://127.0.0.1:5000"]},
//                   "127.0.0.1:5000": {"insecure": true, "ca_file": "...",
//                                      "username": "u", "password": "p"}}}
// A missing file is an empty configuration. Unknown fields are refused,
// naming the field.
struct RegistriesConfig {
  std::map<std::string, RegistryHost> hosts;
  static absl::StatusOr<RegistriesConfig> Load(const std::string& path);
  static absl::StatusOr<RegistriesConfig> Parse(absl::string_view json);
};

struct RegistryClientOptions {
  RegistriesConfig config;
  // Tries per request and endpoint, on network errors, stalls, 429 and 5xx
  // answers (a blob download resumes at the bytes stored).
  int attempts = 4;
  // The wait before the second try, doubled for each further one (capped at
  // 5 s, with jitter).
  absl::Duration retry_backoff = absl::Milliseconds(250);
  absl::Duration connect_timeout = absl::Seconds(10);
  // A transfer slower than 1 KiB/s for this long is aborted and retried.
  absl::Duration stall_timeout = absl::Seconds(30);
  // Largest manifest or index accepted.
  int64_t max_manifest_size = 4 << 20;
  std::string user_agent = "berth-images/0.1";
};

// A manifest, index or list fetched by reference.
struct FetchedManifest {
  std::string media_type;  // from Content-Type, or detected
  std::string digest;      // computed from the bytes (and checked against
                           // the reference's digest if it has one)
  std::string body;
  std::string endpoint;  // which mirror or host answered
};

// Endpoints: the host's mirrors in order, then the host itself (docker.io is
// reached at registry-1.docker.io); the first that answers is used, and an
// error lists what each said. Auth: anonymous first; on 401 the
// WWW-Authenticate challenge decides (a Bearer token fetched from its realm
// with scope repository:<repo>:pull, cached per endpoint and repository until
// it expires; or Basic credentials). Errors name the host and repository:
// UNAUTHENTICATED (401 after authenticating, or no credentials for Basic),
// PERMISSION_DENIED (403), NOT_FOUND (404), DATA_LOSS (bytes that do not
// match their digest), FAILED_PRECONDITION (a certificate not trusted, a
// CA file that cannot be read), UNAVAILABLE (network errors, 429, 5xx, after
// the retries), INTERNAL (other answers), each with the HTTP status and the
// registry's error message. Redirects (blobs are often served from storage
// elsewhere) are followed to http(s) URLs only, never from HTTPS to HTTP,
// and credentials are not sent to another origin.
//
// Thread-safe: PullImage fetches layers in parallel through one client.
class RegistryClient {
 public:
  static absl::StatusOr<std::unique_ptr<RegistryClient>> Create(
      RegistryClientOptions options);
  virtual ~RegistryClient() = default;

  // GET /v2/<repo>/manifests/<tag or digest>. Errors name the reference
  // and host (NOT_FOUND for 404, UNAUTHENTICATED/PERMISSION_DENIED for
  // 401/403, UNAVAILABLE when no endpoint answered).
  virtual absl::StatusOr<FetchedManifest> FetchManifest(
      const Reference& reference) = 0;
  // The same by digest within the reference's repository (an index entry).
  virtual absl::StatusOr<FetchedManifest> FetchManifestByDigest(
      const Reference& reference, absl::string_view digest,
      absl::string_view media_type) = 0;

  // GET /v2/<repo>/blobs/<digest> into `writer`, from writer->offset()
  // (Range request; a 200 instead of 206 truncates and starts again, a 416
  // too), retried and resumed, then writer->Commit() once: its DATA_LOSS (a
  // digest or size mismatch, nothing stored) is returned as it is. More
  // bytes than `size` (when >= 0) is DATA_LOSS too, and the writer is
  // truncated. `progress` (may be empty) gets the bytes held so far.
  virtual absl::Status FetchBlob(
      const Reference& reference, absl::string_view digest, int64_t size,
      BlobWriter* writer, const std::function<void(int64_t)>& progress) = 0;
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_REGISTRY_REGISTRY_CLIENT_H_
