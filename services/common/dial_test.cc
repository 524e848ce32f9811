#include "services/common/dial.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"

namespace berth {
namespace {

using ::berth::testing::ShortTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(DialUnixTest, MissingSocketIsUnavailableNamingThePath) {
  ShortTempDir dir;
  const std::string path = dir.Join("missing.sock");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, absl::Milliseconds(100));
  ASSERT_FALSE(channel.ok());
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(channel.status().message(),
            absl::StrCat("cannot connect to ", path,
                         " within 100ms: no such socket"));
}

TEST(DialUnixTest, StaleSocketIsUnavailable) {
  ShortTempDir dir;
  const std::string path = dir.Join("stale.sock");
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);

  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, absl::Milliseconds(100));
  ASSERT_FALSE(channel.ok());
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(channel.status().message()),
              AllOf(StartsWith(absl::StrCat("cannot connect to ", path)),
                    HasSubstr("connection refused")));
}

TEST(DialUnixTest, NonSocketIsUnavailable) {
  ShortTempDir dir;
  const std::string path = dir.Join("file");
  std::ofstream(path) << "x";
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, absl::Milliseconds(100));
  ASSERT_FALSE(channel.ok());
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(channel.status().message(),
              AllOf(HasSubstr(path), HasSubstr("not a socket")));
}

TEST(DialUnixTest, TooLongPathIsInvalid) {
  const std::string path = "/tmp/" + std::string(200, 'x');
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, absl::Seconds(1));
  ASSERT_FALSE(channel.ok());
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(channel.status().message(), HasSubstr(path));
}

TEST(DialUnixTest, ConnectsToALiveServer) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, absl::Seconds(30));
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ((*channel)->GetState(false), GRPC_CHANNEL_READY);
}

// The channel's own bound on what it sends is explicit: a request larger
// than kChannelMaxMessageBytes fails before it leaves, naming both sizes.
TEST(DialUnixTest, AMessageLargerThanTheChannelsBoundIsNotSent) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, absl::Seconds(30));
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = grpc::health::v1::Health::NewStub(*channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(kChannelMaxMessageBytes + 1, 'x'));
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  const grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat(kChannelMaxMessageBytes)));
  // A request within it is answered.
  grpc::health::v1::HealthCheckRequest small;
  grpc::ClientContext again;
  EXPECT_TRUE(stub->Check(&again, small, &response).ok());
}

}  // namespace
}  // namespace berth
