#include "services/common/grpc_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/peer_credentials.h"
#include "services/common/peer_test_util.h"
#include "services/common/test_service.grpc.pb.h"
#include "services/common/test_util.h"
#include "services/common/unix_socket.h"

namespace berth {
namespace {

using ::berth::testing::Caller;
using ::berth::testing::CallHealthAs;
using ::berth::testing::CapturingLogSink;
using ::berth::testing::ConnectAs;
using ::berth::testing::FileMode;
using ::berth::testing::PathExists;
using ::berth::testing::RawUnaryCall;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// grpc.health.v1.HealthCheckResponse.ServingStatus.
constexpr int kServing = 1;
constexpr int kNotServing = 2;

// grpc.health.v1 messages by hand: this package has no copy of health.proto.
// HealthCheckRequest { string service = 1; }
std::string EncodeHealthCheckRequest(const std::string& service) {
  if (service.empty()) return "";
  EXPECT_LT(service.size(), 128u);
  return absl::StrCat("\x0a", std::string(1, static_cast<char>(service.size())),
                      service);
}

// HealthCheckResponse { ServingStatus status = 1; } -> status (0 if absent).
int DecodeHealthCheckResponse(const std::string& bytes) {
  if (bytes.empty()) return 0;
  EXPECT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[0], '\x08');
  return bytes.size() == 2 ? bytes[1] : -1;
}

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromByteBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// grpc.health.v1.Health/Check: the serving status, or the call's error.
absl::StatusOr<int> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service) {
  std::string response;
  grpc::Status status =
      RawUnaryCall(channel, "/grpc.health.v1.Health/Check",
                   EncodeHealthCheckRequest(service), &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return DecodeHealthCheckResponse(response);
}

// grpc.health.v1.Health/Watch, recording every status it streams.
class HealthWatcher
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  HealthWatcher(const std::shared_ptr<grpc::Channel>& channel,
                const std::string& service)
      : stub_(channel),
        request_(ToByteBuffer(EncodeHealthCheckRequest(service))) {
    stub_.PrepareBidiStreamingCall(&context_, "/grpc.health.v1.Health/Watch",
                                   grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }

  ~HealthWatcher() override {
    Cancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void Cancel() { context_.TryCancel(); }

  // Whether `status` was streamed within kTimeout.
  bool WaitForStatus(int status) {
    absl::MutexLock lock(&mu_);
    auto seen = [this, status]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (int s : statuses_) {
        if (s == status) return true;
      }
      return false;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), kTimeout);
  }

  // Whether the call ended within kTimeout.
  bool WaitDone() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), kTimeout);
  }

  void OnWriteDone(bool) override {}

  void OnReadDone(bool ok) override {
    if (!ok) return;
    {
      absl::MutexLock lock(&mu_);
      statuses_.push_back(DecodeHealthCheckResponse(FromByteBuffer(response_)));
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status&) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

 private:
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  absl::Mutex mu_;
  std::vector<int> statuses_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// Block returns when released, or CANCELLED when its call is cancelled.
class BlockingService final : public common::test::TestService::Service {
 public:
  grpc::Status Block(grpc::ServerContext* context,
                     const common::test::BlockRequest*,
                     common::test::BlockResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++entered_;
    while (!released_) {
      if (context->IsCancelled()) {
        ++cancelled_;
        return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      }
      // Polls IsCancelled: a sync handler has no cancellation callback.
      mu_.AwaitWithTimeout(absl::Condition(&released_), absl::Milliseconds(5));
    }
    response->set_released(true);
    return grpc::Status::OK;
  }

  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

  bool WaitEntered() {
    absl::MutexLock lock(&mu_);
    auto entered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return entered_ > 0;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&entered), kTimeout);
  }

  int cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

 private:
  absl::Mutex mu_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  int cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// Calls Block on a thread of its own.
class BlockCall {
 public:
  explicit BlockCall(const std::shared_ptr<grpc::Channel>& channel)
      : stub_(common::test::TestService::NewStub(channel)), thread_([this] {
          context_.set_deadline(absl::ToChronoTime(absl::Now() + kTimeout));
          status_ = stub_->Block(&context_, {}, &response_);
        }) {}
  ~BlockCall() {
    if (thread_.joinable()) thread_.join();
  }

  // Waits for the call to end.
  grpc::Status Finish() {
    thread_.join();
    return status_;
  }
  const common::test::BlockResponse& response() const { return response_; }

 private:
  std::unique_ptr<common::test::TestService::Stub> stub_;
  grpc::ClientContext context_;
  common::test::BlockResponse response_;
  grpc::Status status_;
  std::thread thread_;
};

bool ListenerClosed(const std::string& path) {
  absl::StatusOr<SocketPathState> state = ProbeSocketPath(path);
  return state.ok() && *state != SocketPathState::kLive;
}

TEST(UnixGrpcServerTest, ServesHealthAndShutsDown) {
  ShortTempDir dir;
  const std::string path = dir.Join("run/s.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->socket_path(), path);

  struct stat st = {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600) << "by default root and its uid only";
  EXPECT_EQ(FileMode(dir.Join("run")), 0750);

  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, kTimeout);
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ(CheckHealth(*channel, "").value(), kServing);
  EXPECT_EQ(CheckHealth(*channel, "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(RawUnaryCall(*channel, "/no.such.Service/Method", "", nullptr)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  (*server)->Shutdown(absl::Seconds(1));
  EXPECT_FALSE(PathExists(path));
  EXPECT_EQ(FileMode(dir.Join("run")), 0750) << "the directory stays";
  (*server)->Shutdown(absl::Seconds(1));  // no-op
  (*server)->Wait();                      // returns at once
  EXPECT_FALSE(PathExists(path));
}

TEST(UnixGrpcServerTest, ServesGivenServices) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  BlockingService service;
  service.Release();
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {&service}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, kTimeout);
  ASSERT_TRUE(channel.ok()) << channel.status();
  BlockCall call(*channel);
  EXPECT_TRUE(call.Finish().ok());
  EXPECT_TRUE(call.response().released());
  EXPECT_EQ(CheckHealth(*channel, "").value(), kServing);
}

TEST(UnixGrpcServerTest, HealthCanBeLeftOut) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, /*enable_health=*/false});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, kTimeout);
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ(CheckHealth(*channel, "").status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(UnixGrpcServerTest, DestructorShutsDownAndRemovesSocket) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  {
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start({path, {}, true});
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_TRUE(PathExists(path));
  }
  EXPECT_FALSE(PathExists(path));
}

TEST(UnixGrpcServerTest, StartFailureNamesThePath) {
  ShortTempDir dir;
  const std::string too_long = dir.Join(std::string(120, 's'));
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({too_long, {}, true});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr(too_long));
}

TEST(UnixGrpcServerTest, BindFailureNamesThePath) {
  // Nobody, root included, can make a socket in /proc/self/fd (root's,
  // 0500: a runtime directory that passes the checks).
  const std::string path = "/proc/self/fd/berth-test.sock";
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr(path));
  EXPECT_FALSE(PathExists(path));
}

TEST(UnixGrpcServerTest, ShutdownMarksNotServingThenGivesCallsTheirGrace) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  BlockingService service;
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {&service}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, kTimeout);
  ASSERT_TRUE(channel.ok()) << channel.status();

  HealthWatcher watcher(*channel, "");
  ASSERT_TRUE(watcher.WaitForStatus(kServing));
  BlockCall call(*channel);
  ASSERT_TRUE(service.WaitEntered());

  std::thread stopper([&] { (*server)->Shutdown(absl::Hours(1)); });
  EXPECT_TRUE(watcher.WaitForStatus(kNotServing));
  // Shutting down: no new connections, the call in flight goes on.
  EXPECT_TRUE(WaitFor([&] { return ListenerClosed(path); }));
  // gRPC's health service keeps Watch open through shutdown (see
  // UnixGrpcServer::Shutdown); a watching client lets go on NOT_SERVING.
  watcher.Cancel();
  EXPECT_TRUE(watcher.WaitDone());

  service.Release();
  grpc::Status status = call.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(call.response().released());
  stopper.join();
  EXPECT_EQ(service.cancelled(), 0);
  EXPECT_FALSE(PathExists(path));
}

TEST(UnixGrpcServerTest, ShutdownCancelsCallsStillRunningAfterGrace) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  BlockingService service;
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {&service}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, kTimeout);
  ASSERT_TRUE(channel.ok()) << channel.status();
  BlockCall call(*channel);
  ASSERT_TRUE(service.WaitEntered());

  (*server)->Shutdown(absl::Milliseconds(1));
  EXPECT_EQ(service.cancelled(), 1);
  EXPECT_FALSE(call.Finish().ok());
  EXPECT_FALSE(call.response().released());
  EXPECT_FALSE(PathExists(path));
}

// Records the peer of each Block call (PeerOf) and returns at once.
class PeerRecordingService final : public common::test::TestService::Service {
 public:
  grpc::Status Block(grpc::ServerContext* context,
                     const common::test::BlockRequest*,
                     common::test::BlockResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    peer_ = PeerOf(*context);
    peer_string_ = context->peer();
    response->set_released(true);
    return grpc::Status::OK;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  std::optional<PeerCredentials> peer() {
    absl::MutexLock lock(&mu_);
    return peer_;
  }
  std::string peer_string() {
    absl::MutexLock lock(&mu_);
    return peer_string_;
  }

 private:
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<PeerCredentials> peer_ ABSL_GUARDED_BY(mu_);
  std::string peer_string_ ABSL_GUARDED_BY(mu_);
};

grpc::Status BlockOver(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = common::test::TestService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTimeout));
  common::test::BlockResponse response;
  return stub->Block(&context, {}, &response);
}

// A gid no account here has as a group (for group tests).
constexpr gid_t kTestGroup = 48213;

TEST(UnixGrpcServerAccessTest, OtherUidIsRefusedNamingItAndTheSocket) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  PeerRecordingService service;
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {&service}, true});
  ASSERT_TRUE(server.ok()) << server.status();

  grpc::Status health = CallHealthAs(path, Caller{});
  EXPECT_EQ(health.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << health.error_message();
  EXPECT_THAT(health.error_message(),
              AllOf(HasSubstr("uid 65534 may not call"), HasSubstr(path),
                    HasSubstr("allowed: root")));

  // A service method too, and the service never sees it.
  absl::StatusOr<base::UniqueFd> fd = ConnectAs(path, Caller{});
  ASSERT_TRUE(fd.ok()) << fd.status();
  grpc::Status call = BlockOver(testing::ChannelOverConnection(*std::move(fd)));
  EXPECT_EQ(call.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(call.error_message(), HasSubstr("uid 65534"));
  EXPECT_EQ(service.calls(), 0);

  // Root still gets in, with its credentials known to the handler.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, kTimeout);
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_TRUE(BlockOver(*channel).ok());
  EXPECT_EQ(service.calls(), 1);
  std::optional<PeerCredentials> peer = service.peer();
  ASSERT_TRUE(peer.has_value()) << "peer string " << service.peer_string();
  EXPECT_EQ(peer->uid, geteuid());
  EXPECT_EQ(peer->gid, getegid());
  EXPECT_EQ(peer->pid, getpid());
}

TEST(UnixGrpcServerAccessTest, RefusalsOfAUidAreLoggedOnceThenCounted) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  CapturingLogSink log(google::GLOG_WARNING);
  auto refusal_lines = [&] {
    std::vector<std::string> lines;
    for (const std::string& message : log.messages()) {
      if (absl::StrContains(message, "uid 65534")) lines.push_back(message);
    }
    return lines;
  };
  // A peer connecting in a loop: each is refused, naming its uid; one line.
  for (int i = 0; i < 5; ++i) {
    grpc::Status health = CallHealthAs(path, Caller{});
    EXPECT_EQ(health.error_code(), grpc::StatusCode::PERMISSION_DENIED) << i;
    EXPECT_THAT(health.error_message(),
                AllOf(HasSubstr("uid 65534 may not call"), HasSubstr(path)))
        << i;
  }
  std::vector<std::string> lines = refusal_lines();
  ASSERT_EQ(lines.size(), 1u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[0], AllOf(HasSubstr(path),
                              HasSubstr("refusing the calls of uid "
                                        "65534 (gid 65534, pid "),
                              HasSubstr("allowed: root")));
  // The rest are counted; a count not yet due is logged when the server
  // stops.
  (*server)->Shutdown(absl::ZeroDuration());
  lines = refusal_lines();
  ASSERT_EQ(lines.size(), 2u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[1],
              AllOf(HasSubstr(path),
                    HasSubstr("uid 65534: 4 more connections refused")));
}

TEST(UnixGrpcServerAccessTest, PeerOfACallIsTheConnectingProcess) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  PeerRecordingService service;
  UnixGrpcServer::Options options{path, {&service}, true};
  options.access.uids = {65534};
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  Caller caller;
  caller.gid = 65533;
  caller.groups = {kTestGroup, 65532};
  absl::StatusOr<base::UniqueFd> fd = ConnectAs(path, caller);
  ASSERT_TRUE(fd.ok()) << fd.status();
  grpc::Status call = BlockOver(testing::ChannelOverConnection(*std::move(fd)));
  EXPECT_TRUE(call.ok()) << call.error_message();
  std::optional<PeerCredentials> peer = service.peer();
  ASSERT_TRUE(peer.has_value()) << "peer string " << service.peer_string();
  EXPECT_EQ(peer->uid, 65534u);
  EXPECT_EQ(peer->gid, 65533u);
  EXPECT_NE(peer->pid, getpid()) << "the forked child connected";
  EXPECT_TRUE(peer->InGroup(kTestGroup));
  EXPECT_TRUE(peer->InGroup(65533));
  EXPECT_FALSE(peer->InGroup(0));
  EXPECT_EQ(service.calls(), 1);
}

TEST(UnixGrpcServerAccessTest, GroupMembersMayCallOthersMayNot) {
  ShortTempDir dir;
  const std::string path = dir.Join("run/s.sock");
  UnixGrpcServer::Options options{path, {}, true};
  options.access.group = kTestGroup;
  options.access.mode = 0660;
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();

  struct stat st = {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660);
  EXPECT_EQ(st.st_gid, kTestGroup) << "the socket is the group's";
  ASSERT_EQ(stat(dir.Join("run").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, kTestGroup) << "the directory it made too";
  EXPECT_EQ(st.st_mode & 07777, 0750);

  Caller member;
  member.groups = {kTestGroup};
  grpc::Status status = CallHealthAs(path, member);
  EXPECT_TRUE(status.ok()) << status.error_message();

  Caller primary;
  primary.gid = kTestGroup;
  status = CallHealthAs(path, primary);
  EXPECT_TRUE(status.ok()) << status.error_message();

  Caller stranger;
  stranger.groups = {kTestGroup + 1};
  status = CallHealthAs(path, stranger);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("uid 65534"),
                    HasSubstr(absl::StrCat("gid ", kTestGroup))));
}

TEST(UnixGrpcServerAccessTest, FilePermissionsAloneKeepOthersOut) {
  ShortTempDir dir;  // 0700
  const std::string path = dir.Join("s.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_TRUE(server.ok()) << server.status();
  Caller plain;
  plain.bypass_file_permissions = false;
  // The directory is not searchable by others.
  absl::StatusOr<base::UniqueFd> fd = ConnectAs(path, plain);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied)
      << fd.status();
  // Searchable, but the socket is 0600.
  ASSERT_EQ(chmod(dir.path().c_str(), 0711), 0);
  fd = ConnectAs(path, plain);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied)
      << fd.status();
  // And with the file's permissions out of the way, the server says no.
  EXPECT_EQ(CallHealthAs(path, Caller{}).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST(UnixGrpcServerAccessTest, RuntimeDirectoryOpenToOthersIsRefused) {
  // Any permission for others (0755 is what a plain mkdir -p makes), and
  // write for its group.
  for (mode_t mode :
       {0755, 0777, 0705, 0701, 0704, 0703, 0702, 0770, 0730, 0720, 0751}) {
    ShortTempDir dir;
    const std::string run = dir.Join("run");
    ASSERT_EQ(mkdir(run.c_str(), 0700), 0);
    ASSERT_EQ(chmod(run.c_str(), mode), 0);
    const std::string path = run + "/s.sock";
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start({path, {}, true});
    ASSERT_FALSE(server.ok()) << std::oct << mode;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
    char octal[8];
    snprintf(octal, sizeof(octal), "%04o", mode);
    EXPECT_THAT(server.status().message(),
                AllOf(HasSubstr(absl::StrCat("runtime directory ", run)),
                      HasSubstr(octal), HasSubstr("owner uid 0"),
                      HasSubstr(path), HasSubstr("chmod 0750 " + run)))
        << std::oct << mode;
    EXPECT_FALSE(PathExists(path)) << std::oct << mode;
    EXPECT_EQ(FileMode(run), mode) << "not ours to change";
  }
  // Group read and search are fine (berth-node's runtime directory is
  // root:berth 0750: the group reaches node.sock); so is 0700.
  for (mode_t mode : {0750, 0710, 0740, 0700}) {
    ShortTempDir dir;
    ASSERT_EQ(chmod(dir.path().c_str(), mode), 0);
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start({dir.Join("s.sock"), {}, true});
    EXPECT_TRUE(server.ok()) << std::oct << mode << " " << server.status();
  }
}

TEST(UnixGrpcServerAccessTest, RuntimeDirectoryOfAnotherOwnerIsRefused) {
  ShortTempDir dir;
  ASSERT_EQ(chown(dir.path().c_str(), 65534, 65534), 0);
  const std::string path = dir.Join("s.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start({path, {}, true});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(server.status().message(),
              AllOf(HasSubstr(dir.path()), HasSubstr("owned by uid 65534"),
                    HasSubstr("0700"), HasSubstr(path)));
  EXPECT_FALSE(PathExists(path));
}

TEST(UnixGrpcServerAccessTest, MessagesLargerThanTheLimitAreRefused) {
  ShortTempDir dir;
  const std::string path = dir.Join("s.sock");
  UnixGrpcServer::Options options{path, {}, true};
  options.max_message_bytes = 64;
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(path, kTimeout);
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ(CheckHealth(*channel, std::string(40, 's')).status().code(),
            absl::StatusCode::kNotFound)
      << "within the limit: an unknown service";
  grpc::Status big =
      RawUnaryCall(*channel, "/grpc.health.v1.Health/Check",
                   EncodeHealthCheckRequest(std::string(100, 's')), nullptr);
  EXPECT_EQ(big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << big.error_message();

  options.max_message_bytes = 0;
  options.socket_path = dir.Join("t.sock");
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> bad =
      UnixGrpcServer::Start(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("max_message_bytes"));
}

}  // namespace
}  // namespace berth
