#include "services/images/registry/test_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"

namespace berth::images::testing {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 307:
      return "Temporary Redirect";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 416:
      return "Range Not Satisfiable";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string TestHttpRequest::Header(absl::string_view name) const {
  auto it = headers.find(absl::AsciiStrToLower(name));
  return it == headers.end() ? std::string() : it->second;
}

TestHttpServer::TestHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  PCHECK(listen_fd_ >= 0) << "socket";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  PCHECK(bind(listen_fd_, reinterpret_cast<sockaddr*>(&address),
              sizeof(address)) == 0)
      << "bind";
  PCHECK(listen(listen_fd_, 64) == 0) << "listen";
  socklen_t length = sizeof(address);
  PCHECK(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address),
                     &length) == 0);
  port_ = ntohs(address.sin_port);
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  PCHECK(stop_fd_ >= 0) << "eventfd";
  thread_ = std::thread([this] { Serve(); });
}

TestHttpServer::~TestHttpServer() {
  uint64_t one = 1;
  PCHECK(write(stop_fd_, &one, sizeof(one)) == sizeof(one));
  thread_.join();
  std::vector<std::thread> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.swap(connections_);
  }
  for (std::thread& connection : connections) connection.join();
  close(listen_fd_);
  close(stop_fd_);
}

std::string TestHttpServer::host() const {
  return absl::StrCat("127.0.0.1:", port_);
}

std::string TestHttpServer::url() const {
  return absl::StrCat("http://", host());
}

std::vector<TestHttpRequest> TestHttpServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::vector<TestHttpRequest> TestHttpServer::requests(
    absl::string_view path) const {
  absl::MutexLock lock(&mu_);
  std::vector<TestHttpRequest> matching;
  for (const TestHttpRequest& request : requests_) {
    if (request.path == path) matching.push_back(request);
  }
  return matching;
}

void TestHttpServer::Serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      PLOG(FATAL) << "poll";
    }
    if (fds[1].revents != 0) return;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    connections_.emplace_back([this, fd] {
      Answer(fd);
      close(fd);
    });
  }
}

void TestHttpServer::Answer(int fd) {
  std::string head;
  char buffer[4096];
  while (head.find("\r\n\r\n") == std::string::npos) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return;
    head.append(buffer, static_cast<size_t>(n));
    if (head.size() > (64 << 10)) return;
  }
  head.resize(head.find("\r\n\r\n"));
  std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  TestHttpRequest request;
  std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3) return;
  request.method = first[0];
  std::pair<std::string, std::string> target =
      absl::StrSplit(first[1], absl::MaxSplits('?', 1));
  request.path = target.first;
  request.query = target.second;
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    request.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  {
    absl::MutexLock lock(&mu_);
    requests_.push_back(request);
  }
  TestHttpResponse response = handler_(request);
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ",
                                 Reason(response.status), "\r\n");
  for (const auto& [name, value] : response.headers) {
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  absl::StrAppend(&out, "Content-Length: ", response.body.size(),
                  "\r\nConnection: close\r\n\r\n");
  if (!SendAll(fd, out)) return;
  absl::string_view body = response.body;
  if (request.method == "HEAD") return;
  if (response.cut_after >= 0 &&
      static_cast<size_t>(response.cut_after) < body.size()) {
    body = body.substr(0, static_cast<size_t>(response.cut_after));
  }
  if (response.stall_after >= 0 &&
      static_cast<size_t>(response.stall_after) < body.size()) {
    if (!SendAll(fd,
                 body.substr(0, static_cast<size_t>(response.stall_after)))) {
      return;
    }
    // Wait for the client to close (or the server to stop).
    for (;;) {
      pollfd fds[2] = {{fd, POLLIN | POLLRDHUP, 0}, {stop_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
      if (fds[0].revents != 0 || fds[1].revents != 0) return;
    }
  }
  SendAll(fd, body);
  shutdown(fd, SHUT_WR);
}

}  // namespace berth::images::testing
