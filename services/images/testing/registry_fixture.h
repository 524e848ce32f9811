// A real OCI distribution registry for tests (issue 16, point 6): Debian's
// docker-registry (2.8) on 127.0.0.1 at a free port, plain HTTP, HTTPS with a
// CA made at start with openssl, or htpasswd basic auth (or both), its storage
// in a temporary directory; images are pushed to it with Debian's skopeo from
// the OCI layouts //tools/testimages:images builds.
//
//   RegistryOptions options;
//   options.tls = true;
//   absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
//       RegistryFixture::Start(options);
//   ASSERT_TRUE(registry.ok()) << registry.status();
//   ASSERT_TRUE((*registry)->Push(TestImagePath("busybox"),
//                                 "library/busybox:1").ok());
//   // pull from registry->endpoint(), trusting registry->ca_file(), as
//   // registry->username() / registry->password().
//
// A target using it lists nothing more: the library's data brings
// @debian_image_test_tools//:tools and //tools/testimages:images.

#ifndef SERVICES_IMAGES_TESTING_REGISTRY_FIXTURE_H_
#define SERVICES_IMAGES_TESTING_REGISTRY_FIXTURE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace berth::images {

struct RegistryOptions {
  // HTTPS with a server certificate for IP 127.0.0.1 signed by a CA made at
  // start (ca_file()); plain HTTP otherwise.
  bool tls = false;
  // htpasswd (bcrypt) basic auth for `username`:`password` in `realm`;
  // anonymous access otherwise.
  bool auth = false;
  std::string username = "berth";
  std::string password = "berth-test-secret";
  std::string realm = "berth-test-registry";
  // How long Start waits for GET /v2/ to answer.
  absl::Duration start_timeout = absl::Seconds(20);
};

// The manifest type a push stores.
enum class ManifestFormat {
  // OCI image manifests (and an OCI image index for a multi-platform image),
  // as the layouts have them.
  kOci,
  // Docker schema 2 manifests (and a Docker manifest list), converted by
  // skopeo; the blobs are the same.
  kDockerSchema2,
};

struct PushOptions {
  ManifestFormat format = ManifestFormat::kOci;
  // Every platform of an index (skopeo --all); only this machine's otherwise.
  bool all_platforms = true;
};

class RegistryFixture {
 public:
  // Starts the registry and waits until GET /v2/ answers (200, or 401 with
  // auth), through TLS verified against the CA when `tls`. Errors name the
  // step that failed, with the registry's log when it exited.
  static absl::StatusOr<std::unique_ptr<RegistryFixture>> Start(
      const RegistryOptions& options = {});

  // Stops the registry (SIGTERM, then SIGKILL after 5 s) and removes its
  // temporary directory.
  ~RegistryFixture();
  RegistryFixture(const RegistryFixture&) = delete;
  RegistryFixture& operator=(const RegistryFixture&) = delete;

  // "127.0.0.1:PORT".
  const std::string& endpoint() const { return endpoint_; }
  // "http://127.0.0.1:PORT" or "https://127.0.0.1:PORT".
  std::string base_url() const;
  bool tls() const { return options_.tls; }
  // The CA certificate (PEM) the server's certificate is signed by; empty
  // without TLS.
  const std::string& ca_file() const { return ca_file_; }
  // A directory holding only ca_file() as ca.crt (skopeo's --cert-dir, the
  // layout of containerd's and docker's certs.d); empty without TLS.
  const std::string& cert_dir() const { return cert_dir_; }
  // The credentials; empty without auth.
  std::string username() const;
  std::string password() const;
  // The registry's storage (its filesystem driver's root directory).
  const std::string& storage_dir() const { return storage_dir_; }
  // What the registry wrote to stdout and stderr so far.
  std::string Log() const;
  // How long Start took, from the first command to GET /v2/ answering
  // (including the CA and htpasswd set-up).
  absl::Duration start_duration() const { return start_duration_; }

  // Copies the image of the OCI layout `layout_dir` (or, with a transport
  // prefix such as "oci-archive:" or "docker-archive:", that source) to
  // `repository:tag` (or `repository@sha256:...`) in this registry with
  // skopeo copy. Errors carry skopeo's stderr.
  absl::Status Push(const std::string& layout_dir, const std::string& target,
                    const PushOptions& options = {}) const;

  // skopeo inspect (--raw: the manifest as stored) of `repository:tag`, with
  // this registry's CA and credentials: its stdout.
  absl::StatusOr<std::string> Inspect(const std::string& target,
                                      bool raw = false) const;

  // Runs skopeo with `args`, with the environment Push and Inspect use
  // (HOME and TMPDIR in the fixture's directory, --insecure-policy); its
  // stdout, or an error with its stderr.
  absl::StatusOr<std::string> RunSkopeo(
      const std::vector<std::string>& args) const;

  // Stops the registry now (as the destructor, keeping the directory);
  // OK when it is stopped already.
  absl::Status Stop();

 private:
  explicit RegistryFixture(const RegistryOptions& options);
  absl::Status Init();
  absl::Status MakeCertificates();
  absl::Status MakeHtpasswd();
  absl::Status WriteConfig(int port);
  // Starts the registry on `port`; an error when it exits before GET /v2/
  // answers or the timeout passes. `address_in_use` is set when its log
  // says so.
  absl::Status Launch(int port, bool* address_in_use);
  // "--dest-tls-verify=false" or "--dest-cert-dir=..." and the credentials,
  // for `prefix` "dest" or "" (inspect).
  std::vector<std::string> AccessArgs(absl::string_view prefix) const;

  const RegistryOptions options_;
  std::string dir_;
  std::string storage_dir_;
  std::string config_file_;
  std::string log_file_;
  std::string ca_file_;
  std::string cert_dir_;
  std::string server_cert_;
  std::string server_key_;
  std::string htpasswd_file_;
  std::string endpoint_;
  pid_t pid_ = -1;
  absl::Duration start_duration_;
};

// The directory //tools/testimages:images builds, in the test's runfiles
// (busybox/, multilayer/, multiarch/, shared/, the archives, images.json).
std::string TestImagesDir();
// TestImagesDir() + "/" + name: TestImagePath("busybox").
std::string TestImagePath(absl::string_view name);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_TESTING_REGISTRY_FIXTURE_H_
