// Test fixtures of the CLI's tests: a FakeNodeService (and the
// FakeImageService berth-node forwards) served on a Unix socket in a
// temporary directory, and RunCli run against it with its stdin, stdout and
// stderr in memory files.

#ifndef SERVICES_NODE_CLI_CLI_TEST_FIXTURE_H_
#define SERVICES_NODE_CLI_CLI_TEST_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/node/cli/commands.h"
#include "services/node/cli/fake_node_service.h"

namespace berth::cli::testing {

// How a run of the CLI ended and what it wrote.
struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
};

// A memory file named `name` holding `content`, at offset 0.
int MemFile(const char* name, const std::string& content = "");

// What was written to `fd`; pread, so that a writer's offset stays put.
std::string ReadBack(int fd);

// fake_ and images_ served on socket_path_ (in dir_) from SetUp to
// TearDown.
class FakeNodeTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  berth::testing::ShortTempDir dir_;
  const std::string socket_path_ = dir_.Join("node.sock");
  FakeNodeService fake_;
  FakeImageService images_;
  std::unique_ptr<UnixGrpcServer> server_;
};

// FakeNodeTest with RunCli: the CLI's environment variables are variables_
// (BERTH_NODE_SOCKET the fake's socket).
class CliTest : public FakeNodeTest {
 protected:
  void SetUp() override;

  // The CLI's environment with these descriptors: getenv from variables_,
  // log_refollow_delay 1 ms.
  virtual CliEnvironment Environment(int in, int out, int err);

  // RunCli(args) with `stdin_data` as its stdin.
  CliResult Run(const std::vector<std::string>& args,
                const std::string& stdin_data = "");

  std::map<std::string, std::string> variables_;
};

}  // namespace berth::cli::testing

#endif  // SERVICES_NODE_CLI_CLI_TEST_FIXTURE_H_
