#include "services/node/cli/cli_test_fixture.h"

#include <sys/mman.h>
#include <unistd.h>

#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth::cli::testing {

int MemFile(const char* name, const std::string& content) {
  const int fd = memfd_create(name, MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, content.data(), content.size()),
            static_cast<ssize_t>(content.size()));
  lseek(fd, 0, SEEK_SET);
  return fd;
}

std::string ReadBack(int fd) {
  std::string data;
  char buffer[4096];
  ssize_t n;
  while ((n = pread(fd, buffer, sizeof(buffer), data.size())) > 0) {
    data.append(buffer, n);
  }
  return data;
}

void FakeNodeTest::SetUp() {
  UnixGrpcServer::Options options;
  options.socket_path = socket_path_;
  options.services = {&fake_, &images_};
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
}

void FakeNodeTest::TearDown() {
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
}

void CliTest::SetUp() {
  FakeNodeTest::SetUp();
  variables_["BERTH_NODE_SOCKET"] = socket_path_;
}

CliEnvironment CliTest::Environment(int in, int out, int err) {
  CliEnvironment env;
  env.stdin_fd = in;
  env.stdout_fd = out;
  env.stderr_fd = err;
  env.getenv = [this](const std::string& name) -> std::optional<std::string> {
    auto it = variables_.find(name);
    if (it == variables_.end()) return std::nullopt;
    return it->second;
  };
  env.log_refollow_delay = absl::Milliseconds(1);
  return env;
}

CliResult CliTest::Run(const std::vector<std::string>& args,
                       const std::string& stdin_data) {
  const int in = MemFile("stdin", stdin_data);
  const int out = MemFile("stdout");
  const int err = MemFile("stderr");
  CliResult result;
  result.code = RunCli(args, Environment(in, out, err));
  result.out = ReadBack(out);
  result.err = ReadBack(err);
  close(in);
  close(out);
  close(err);
  return result;
}

}  // namespace berth::cli::testing
