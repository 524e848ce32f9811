#include "services/images/testing/registry_fixture.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/io.h"
#include "base/process.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "services/common/remove_tree.h"
#include "services/common/test_util.h"

namespace berth::images {
namespace {

constexpr char kRegistry[] = "/usr/bin/docker-registry";
constexpr char kSkopeo[] = "/usr/bin/skopeo";
constexpr char kOpenssl[] = "/usr/bin/openssl";
constexpr char kHtpasswd[] = "/usr/bin/htpasswd";

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// The last `n` bytes of `s`, for error messages.
std::string Tail(const std::string& s, size_t n = 2000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

absl::Status WriteFileAt(const std::string& path, absl::string_view content,
                         mode_t mode = 0644) {
  base::UniqueFd fd(
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd.valid()) return ErrnoError(absl::StrCat("creating ", path));
  return base::WriteAll(fd.get(), content, path);
}

// A port nothing listens on now: bound by the kernel, then released.
absl::StatusOr<int> FreeLoopbackPort() {
  base::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoError("binding 127.0.0.1:0");
  }
  socklen_t len = sizeof(addr);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoError("getsockname");
  }
  return ntohs(addr.sin_port);
}

// The environment of every tool run here: nothing of the test's (no
// proxies, no REGISTRY_* overrides of the registry's configuration, no
// user's containers configuration).
std::vector<std::string> ToolEnvironment(const std::string& dir) {
  return {"PATH=/usr/bin:/bin", absl::StrCat("HOME=", dir),
          absl::StrCat("TMPDIR=", dir), "LC_ALL=C"};
}

absl::StatusOr<std::string> Run(const std::string& binary,
                                std::vector<std::string> args,
                                const std::string& dir,
                                absl::Duration timeout = absl::Seconds(60)) {
  base::SubprocessOptions options;
  options.args = std::move(args);
  options.env = ToolEnvironment(dir);
  options.timeout = timeout;
  absl::StatusOr<base::SubprocessResult> result =
      base::RunSubprocess(binary, options);
  if (!result.ok()) return result.status();
  if (result->exited() && result->exit_code() == 0) {
    return std::move(result->stdout_data);
  }
  return absl::InternalError(
      absl::StrCat(binary, " ", absl::StrJoin(options.args, " "), " ",
                   result->Describe(), ": ", Tail(result->stderr_data)));
}

size_t DiscardBody(char*, size_t size, size_t nmemb, void*) {
  return size * nmemb;
}

// The HTTP status of GET `url`, or 0 with `error` set when nothing
// answered (refused, TLS failure, timeout).
long HttpStatus(const std::string& url, const std::string& ca_file,
                std::string* error) {
  static absl::once_flag init;
  absl::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    *error = "curl_easy_init failed";
    return 0;
  }
  char message[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, DiscardBody);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, message);
  if (!ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file.c_str());
    curl_easy_setopt(curl, CURLOPT_CAPATH, nullptr);
  }
  CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  if (rc == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  } else {
    *error = absl::StrCat(curl_easy_strerror(rc), ": ", message);
  }
  curl_easy_cleanup(curl);
  return status;
}

// waitpid(pid) until it has exited or `timeout` passed: whether it exited.
bool WaitForExit(pid_t pid, absl::Duration timeout, int* status) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
}

}  // namespace

RegistryFixture::RegistryFixture(const RegistryOptions& options)
    : options_(options) {}

absl::StatusOr<std::unique_ptr<RegistryFixture>> RegistryFixture::Start(
    const RegistryOptions& options) {
  std::unique_ptr<RegistryFixture> fixture(new RegistryFixture(options));
  absl::Time start = absl::Now();
  absl::Status status = fixture->Init();
  if (!status.ok()) return status;
  fixture->start_duration_ = absl::Now() - start;
  return fixture;
}

absl::Status RegistryFixture::Init() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern = absl::StrCat(
      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/registry-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return ErrnoError(absl::StrCat("mkdtemp ", pattern));
  }
  dir_ = pattern;
  storage_dir_ = dir_ + "/storage";
  config_file_ = dir_ + "/config.yml";
  log_file_ = dir_ + "/registry.log";
  if (mkdir(storage_dir_.c_str(), 0755) != 0) {
    return ErrnoError(absl::StrCat("mkdir ", storage_dir_));
  }
  if (options_.tls) {
    if (absl::Status s = MakeCertificates(); !s.ok()) return s;
  }
  if (options_.auth) {
    if (absl::Status s = MakeHtpasswd(); !s.ok()) return s;
  }
  // The port is free when chosen; should another process take it before
  // the registry binds it, the registry exits and another port is tried.
  absl::Status status;
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<int> port = FreeLoopbackPort();
    if (!port.ok()) return port.status();
    if (status = WriteConfig(*port); !status.ok()) return status;
    bool address_in_use = false;
    status = Launch(*port, &address_in_use);
    if (status.ok() || !address_in_use) return status;
  }
  return status;
}

absl::Status RegistryFixture::MakeCertificates() {
  std::string pki = dir_ + "/pki";
  cert_dir_ = dir_ + "/certs.d";
  for (const std::string& d : {pki, cert_dir_}) {
    if (mkdir(d.c_str(), 0700) != 0) {
      return ErrnoError(absl::StrCat("mkdir ", d));
    }
  }
  std::string ca_key = pki + "/ca.key";
  ca_file_ = cert_dir_ + "/ca.crt";
  server_key_ = pki + "/server.key";
  server_cert_ = pki + "/server.crt";
  // P-256 keys: made in a millisecond, where RSA takes tenths of a second.
  absl::StatusOr<std::string> out =
      Run(kOpenssl,
          {"req", "-x509", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", ca_key, "-out",
           ca_file_, "-days", "2", "-subj", "/CN=berth test registry CA",
           "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
           "keyUsage=critical,keyCertSign,cRLSign"},
          dir_);
  if (!out.ok()) return out.status();
  out = Run(kOpenssl,
            {"req",
             "-x509",
             "-newkey",
             "ec",
             "-pkeyopt",
             "ec_paramgen_curve:prime256v1",
             "-nodes",
             "-keyout",
             server_key_,
             "-out",
             server_cert_,
             "-days",
             "2",
             "-subj",
             "/CN=127.0.0.1",
             "-CA",
             ca_file_,
             "-CAkey",
             ca_key,
             "-addext",
             "subjectAltName=IP:127.0.0.1",
             "-addext",
             "basicConstraints=critical,CA:FALSE",
             "-addext",
             "extendedKeyUsage=serverAuth"},
            dir_);
  return out.status();
}

absl::Status RegistryFixture::MakeHtpasswd() {
  htpasswd_file_ = dir_ + "/htpasswd";
  absl::StatusOr<std::string> line =
      Run(kHtpasswd, {"-Bbn", options_.username, options_.password}, dir_);
  if (!line.ok()) return line.status();
  return WriteFileAt(htpasswd_file_, *line, 0600);
}

absl::Status RegistryFixture::WriteConfig(int port) {
  endpoint_ = absl::StrCat("127.0.0.1:", port);
  std::string config = absl::StrCat(
      "version: 0.1\n"
      "log:\n"
      "  level: warn\n"
      "  accesslog:\n"
      "    disabled: true\n"
      "storage:\n"
      "  filesystem:\n"
      "    rootdirectory: \"",
      storage_dir_,
      "\"\n"
      "  delete:\n"
      "    enabled: true\n"
      "  maintenance:\n"
      "    uploadpurging:\n"
      "      enabled: false\n"
      "http:\n"
      "  addr: \"",
      endpoint_, "\"\n");
  if (options_.tls) {
    absl::StrAppend(&config, "  tls:\n    certificate: \"", server_cert_,
                    "\"\n    key: \"", server_key_, "\"\n");
  }
  if (options_.auth) {
    absl::StrAppend(&config, "auth:\n  htpasswd:\n    realm: \"",
                    options_.realm, "\"\n    path: \"", htpasswd_file_, "\"\n");
  }
  return WriteFileAt(config_file_, config);
}

absl::Status RegistryFixture::Launch(int port, bool* address_in_use) {
  base::UniqueFd log(
      open(log_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log.valid()) return ErrnoError(absl::StrCat("creating ", log_file_));
  absl::StatusOr<pid_t> pid =
      base::Spawn(kRegistry, {"serve", config_file_}, ToolEnvironment(dir_), -1,
                  log.get(), log.get());
  if (!pid.ok()) return pid.status();
  pid_ = *pid;

  const std::string url = base_url() + "/v2/";
  absl::Time deadline = absl::Now() + options_.start_timeout;
  std::string error;
  while (true) {
    int wait_status = 0;
    pid_t r = waitpid(pid_, &wait_status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      std::string output = Log();
      *address_in_use = absl::StrContains(output, "address already in use");
      return absl::UnavailableError(
          absl::StrCat(kRegistry, " serve ", config_file_, " on port ", port,
                       " ", base::DescribeWaitStatus(wait_status),
                       " before answering: ", Tail(output)));
    }
    long status = HttpStatus(url, ca_file_, &error);
    if (status == 200 || (options_.auth && status == 401)) {
      return absl::OkStatus();
    }
    if (status != 0) {
      error = absl::StrCat("HTTP status ", status);
    }
    if (absl::Now() >= deadline) {
      (void)Stop();
      return absl::DeadlineExceededError(
          absl::StrCat("GET ", url, " did not answer within ",
                       absl::FormatDuration(options_.start_timeout), " (",
                       error, "); registry log: ", Tail(Log())));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

RegistryFixture::~RegistryFixture() {
  (void)Stop();
  if (!dir_.empty()) (void)RemoveTree(dir_);
}

absl::Status RegistryFixture::Stop() {
  if (pid_ <= 0) return absl::OkStatus();
  pid_t pid = pid_;
  pid_ = -1;
  // The registry is the only process of its group (Spawn made it).
  kill(-pid, SIGTERM);
  int status = 0;
  if (WaitForExit(pid, absl::Seconds(5), &status)) return absl::OkStatus();
  kill(-pid, SIGKILL);
  waitpid(pid, &status, 0);
  return absl::DeadlineExceededError(absl::StrCat(
      kRegistry, " (pid ", pid, ") ignored SIGTERM for 5 s; killed"));
}

std::string RegistryFixture::base_url() const {
  return absl::StrCat(options_.tls ? "https://" : "http://", endpoint_);
}

std::string RegistryFixture::username() const {
  return options_.auth ? options_.username : "";
}

std::string RegistryFixture::password() const {
  return options_.auth ? options_.password : "";
}

std::string RegistryFixture::Log() const {
  return berth::testing::ReadFileOrEmpty(log_file_);
}

std::vector<std::string> RegistryFixture::AccessArgs(
    absl::string_view prefix) const {
  std::string p = prefix.empty() ? "--" : absl::StrCat("--", prefix, "-");
  std::vector<std::string> args;
  if (options_.tls) {
    args.push_back(absl::StrCat(p, "cert-dir=", cert_dir_));
  } else {
    args.push_back(absl::StrCat(p, "tls-verify=false"));
  }
  if (options_.auth) {
    args.push_back(
        absl::StrCat(p, "creds=", options_.username, ":", options_.password));
  }
  return args;
}

absl::StatusOr<std::string> RegistryFixture::RunSkopeo(
    const std::vector<std::string>& args) const {
  std::vector<std::string> all = {"--insecure-policy", "--tmpdir", dir_};
  all.insert(all.end(), args.begin(), args.end());
  return Run(kSkopeo, std::move(all), dir_, absl::Seconds(300));
}

absl::Status RegistryFixture::Push(const std::string& layout_dir,
                                   const std::string& target,
                                   const PushOptions& options) const {
  std::vector<std::string> args = {
      "copy", "--quiet", "--format",
      options.format == ManifestFormat::kOci ? "oci" : "v2s2"};
  if (options.all_platforms) args.push_back("--all");
  std::vector<std::string> access = AccessArgs("dest");
  args.insert(args.end(), access.begin(), access.end());
  bool has_transport = absl::StartsWith(layout_dir, "oci:") ||
                       absl::StartsWith(layout_dir, "oci-archive:") ||
                       absl::StartsWith(layout_dir, "docker-archive:") ||
                       absl::StartsWith(layout_dir, "dir:");
  args.push_back(has_transport ? layout_dir : "oci:" + layout_dir);
  args.push_back(absl::StrCat("docker://", endpoint_, "/", target));
  absl::StatusOr<std::string> out = RunSkopeo(args);
  if (!out.ok()) {
    return absl::Status(
        out.status().code(),
        absl::StrCat("pushing ", layout_dir, " to ", endpoint_, "/", target,
                     ": ", out.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RegistryFixture::Inspect(const std::string& target,
                                                     bool raw) const {
  std::vector<std::string> args = {"inspect"};
  if (raw) args.push_back("--raw");
  std::vector<std::string> access = AccessArgs("");
  args.insert(args.end(), access.begin(), access.end());
  args.push_back(absl::StrCat("docker://", endpoint_, "/", target));
  return RunSkopeo(args);
}

std::string TestImagesDir() {
  return berth::testing::RunfilePath("tools/testimages/images");
}

std::string TestImagePath(absl::string_view name) {
  return absl::StrCat(TestImagesDir(), "/", name);
}

}  // namespace berth::images
