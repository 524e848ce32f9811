// A small HTTP/1.1 server on 127.0.0.1 for the registry client's tests: each
// request (GET, no body) is answered by a handler and the connection closed.
// It can cut an answer short to stand for a broken connection.

#ifndef SERVICES_IMAGES_REGISTRY_TEST_HTTP_SERVER_H_
#define SERVICES_IMAGES_REGISTRY_TEST_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace berth::images::testing {

struct TestHttpRequest {
  std::string method;
  std::string path;   // without the query
  std::string query;  // without '?'
  // Header names in lower case.
  std::map<std::string, std::string> headers;

  std::string Header(absl::string_view name) const;
};

struct TestHttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // When >= 0, the connection is closed after this many bytes of the body
  // (Content-Length still says the whole body).
  int64_t cut_after = -1;
  // When >= 0, after this many bytes of the body nothing more is sent
  // until the client gives up and closes the connection (a stalled
  // transfer).
  int64_t stall_after = -1;
};

class TestHttpServer {
 public:
  using Handler = std::function<TestHttpResponse(const TestHttpRequest&)>;

  explicit TestHttpServer(Handler handler);
  ~TestHttpServer();
  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  int port() const { return port_; }
  // "127.0.0.1:<port>"
  std::string host() const;
  // "http://127.0.0.1:<port>"
  std::string url() const;
  // Every request received so far, in order.
  std::vector<TestHttpRequest> requests() const ABSL_LOCKS_EXCLUDED(mu_);
  // Those whose path is `path`.
  std::vector<TestHttpRequest> requests(absl::string_view path) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Serve();
  void Answer(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd
  int port_ = 0;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<TestHttpRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::images::testing

#endif  // SERVICES_IMAGES_REGISTRY_TEST_HTTP_SERVER_H_
