// PluginService, DriverService and Health as the SDK serves them on a driver.

#include <sys/stat.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "berth/plugin/v1/plugin.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/sdk/fake_driver.h"
#include "plugins/sdk/plugin_server.h"
#include "plugins/sdk/proto_time.h"
#include "plugins/sdk/testing.h"
#include "services/common/peer_test_util.h"

namespace berth::plugin {
namespace {

using ::berth::driver::v1::DriverService;
using ::berth::plugin::testing::CapturingLogSink;
using ::berth::plugin::testing::ShortTempDir;
using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::AllOf;
using ::testing::HasSubstr;

google::protobuf::Struct Json(const std::string& json) {
  google::protobuf::Struct value;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &value).ok())
      << json;
  return value;
}

class ServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<PluginServer>> server = PluginServer::Start(
        driver_, {dir_.Join("fake.sock"), absl::Seconds(2)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        testing::Dial(server_->socket_path());
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = *channel;
    driver_stub_ = DriverService::NewStub(channel_);
    plugin_stub_ = v1::PluginService::NewStub(channel_);
    health_stub_ = Health::NewStub(channel_);
  }

  grpc::Status Start(const std::string& id, const std::string& config,
                     driver::v1::StartTaskResponse* response = nullptr) {
    driver::v1::StartTaskRequest request;
    request.mutable_task()->set_id(id);
    *request.mutable_task()->mutable_driver_config() = Json(config);
    driver::v1::StartTaskResponse ignored;
    grpc::ClientContext context;
    return driver_stub_->StartTask(&context, request,
                                   response != nullptr ? response : &ignored);
  }

  HealthCheckResponse::ServingStatus Check(const std::string& service,
                                           grpc::Status* status) {
    grpc::ClientContext context;
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    *status = health_stub_->Check(&context, request, &response);
    return response.status();
  }

  ShortTempDir dir_;
  testing::FakeDriver driver_;
  std::unique_ptr<PluginServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<DriverService::Stub> driver_stub_;
  std::unique_ptr<v1::PluginService::Stub> plugin_stub_;
  std::unique_ptr<Health::Stub> health_stub_;
};

// A plugin's socket is root's and the plugin's own uid's: 0600, and a caller
// of another uid past the file's permissions is refused by the server.
TEST_F(ServicesTest, CallersOfOtherUidsAreRefused) {
  struct stat st = {};
  ASSERT_EQ(lstat(server_->socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600);
  absl::StatusOr<base::UniqueFd> fd = berth::testing::ConnectAs(
      server_->socket_path(), berth::testing::Caller{});
  ASSERT_TRUE(fd.ok()) << fd.status();
  std::unique_ptr<v1::PluginService::Stub> other = v1::PluginService::NewStub(
      berth::testing::ChannelOverConnection(*std::move(fd)));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::GetPluginInfoResponse info;
  grpc::Status status = other->GetPluginInfo(&context, {}, &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("uid 65534 may not call " + server_->socket_path()));
  EXPECT_EQ(info.name(), "");
}

TEST_F(ServicesTest, PluginInfoCapabilitiesAndSchema) {
  {
    grpc::ClientContext context;
    v1::GetPluginInfoResponse info;
    ASSERT_TRUE(plugin_stub_->GetPluginInfo(&context, {}, &info).ok());
    EXPECT_EQ(info.name(), "fake");
    EXPECT_EQ(info.type(), v1::PLUGIN_TYPE_DRIVER);
    EXPECT_EQ(info.plugin_version(), "0.0.1");
  }
  {
    grpc::ClientContext context;
    v1::GetCapabilitiesResponse capabilities;
    ASSERT_TRUE(
        plugin_stub_->GetCapabilities(&context, {}, &capabilities).ok());
    ASSERT_EQ(capabilities.api_versions_size(), 2);
    EXPECT_EQ(capabilities.api_versions(0).package(), "berth.plugin.v1");
    EXPECT_EQ(capabilities.api_versions(1).package(), "berth.driver.v1");
    EXPECT_EQ(capabilities.api_versions(1).revision(), 0);
  }
  {
    grpc::ClientContext context;
    v1::GetConfigSchemaResponse schema;
    ASSERT_TRUE(plugin_stub_->GetConfigSchema(&context, {}, &schema).ok());
    ASSERT_EQ(schema.task_config().fields_size(), 2);
    EXPECT_EQ(schema.task_config().fields(0).name(), "command");
    EXPECT_EQ(schema.plugin_config().fields_size(), 0);
  }
}

TEST_F(ServicesTest, HealthIsServingForPluginUntilShutdown) {
  grpc::Status status;
  EXPECT_EQ(Check("plugin", &status), HealthCheckResponse::SERVING);
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(Check("", &status), HealthCheckResponse::SERVING);
  Check("other", &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);

  // A Watch sees SERVING, then NOT_SERVING at shutdown, and ends.
  grpc::ClientContext context;
  HealthCheckRequest request;
  request.set_service("plugin");
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> watch =
      health_stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  std::thread shutdown([this] { server_->Shutdown(absl::Seconds(30)); });
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&response));
  EXPECT_TRUE(watch->Finish().ok());
  shutdown.join();
  EXPECT_FALSE(testing::PathExists(dir_.Join("fake.sock")));
}

TEST_F(ServicesTest, StartTaskChecksTheConfigAgainstTheSchema) {
  grpc::Status missing = Start("t1", R"({"args": ["a"]})");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(missing.error_message(),
            "task.driver_config.command is required (task t1)");

  grpc::Status unknown = Start("t1", R"({"command": "x", "colour": "red"})");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unknown.error_message(),
              AllOf(HasSubstr("task.driver_config.colour"), HasSubstr("t1")));

  grpc::Status wrong_type = Start("t1", R"({"command": 3})");
  EXPECT_EQ(wrong_type.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(wrong_type.error_message(),
              HasSubstr("task.driver_config.command must be a string"));

  grpc::Status no_id = Start("", R"({"command": "x"})");
  EXPECT_EQ(no_id.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(no_id.error_message(), HasSubstr("task.id"));

  driver::v1::StartTaskResponse started;
  ASSERT_TRUE(Start("t1", R"({"command": "x"})", &started).ok());
  EXPECT_EQ(started.handle().config().id(), "t1") << "filled in by the SDK";
  EXPECT_EQ(started.handle()
                .config()
                .driver_config()
                .fields()
                .at("command")
                .string_value(),
            "x");
}

TEST_F(ServicesTest, StopTaskParsesTheSignal) {
  ASSERT_TRUE(Start("t1", R"({"command": "x"})").ok());
  ASSERT_TRUE(Start("t2", R"({"command": "x"})").ok());
  {
    grpc::ClientContext context;
    driver::v1::StopTaskRequest request;
    request.set_task_id("t1");
    driver::v1::StopTaskResponse response;
    ASSERT_TRUE(driver_stub_->StopTask(&context, request, &response).ok());
    EXPECT_EQ(driver_.last_stop_signal(), 15) << "SIGTERM by default";
  }
  {
    grpc::ClientContext context;
    driver::v1::StopTaskRequest request;
    request.set_task_id("t2");
    request.set_signal("sigkill");
    driver::v1::StopTaskResponse response;
    ASSERT_TRUE(driver_stub_->StopTask(&context, request, &response).ok());
    EXPECT_EQ(driver_.last_stop_signal(), 9);
  }
  {
    grpc::ClientContext context;
    driver::v1::StopTaskRequest request;
    request.set_task_id("t2");
    request.set_signal("SIGFOO");
    driver::v1::StopTaskResponse response;
    grpc::Status status = driver_stub_->StopTask(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(
        status.error_message(),
        AllOf(HasSubstr("signal"), HasSubstr("SIGFOO"), HasSubstr("t2")));
  }
  {
    grpc::ClientContext context;
    driver::v1::StopTaskRequest request;  // no task id
    driver::v1::StopTaskResponse response;
    grpc::Status status = driver_stub_->StopTask(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("task_id"));
  }
}

TEST_F(ServicesTest, TaskStatsOfUnknownTaskIsNotFound) {
  grpc::ClientContext context;
  driver::v1::TaskStatsRequest request;
  request.set_task_id("ghost");
  auto stream = driver_stub_->TaskStats(&context, request);
  driver::v1::TaskStatsResponse response;
  EXPECT_FALSE(stream->Read(&response));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("ghost"));
}

TEST_F(ServicesTest, TaskStatsStreamsUntilTheTaskIsDestroyed) {
  ASSERT_TRUE(Start("t1", R"({"command": "x"})").ok());
  grpc::ClientContext context;
  driver::v1::TaskStatsRequest request;
  request.set_task_id("t1");
  *request.mutable_interval() = ToProtoDuration(absl::Milliseconds(10));
  auto stream = driver_stub_->TaskStats(&context, request);
  driver::v1::TaskStatsResponse response;
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.usage().task_id(), "t1");
    EXPECT_TRUE(response.usage().has_timestamp());
    EXPECT_EQ(response.usage().usage().memory().rss(), i);
  }
  {
    grpc::ClientContext destroy_context;
    driver::v1::DestroyTaskRequest destroy;
    destroy.set_task_id("t1");
    destroy.set_force(true);
    driver::v1::DestroyTaskResponse destroyed;
    ASSERT_TRUE(
        driver_stub_->DestroyTask(&destroy_context, destroy, &destroyed).ok());
  }
  while (stream->Read(&response)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServicesTest, TaskStatsRefusesANonPositiveInterval) {
  ASSERT_TRUE(Start("t1", R"({"command": "x"})").ok());
  grpc::ClientContext context;
  driver::v1::TaskStatsRequest request;
  request.set_task_id("t1");
  *request.mutable_interval() = ToProtoDuration(absl::Seconds(-1));
  auto stream = driver_stub_->TaskStats(&context, request);
  driver::v1::TaskStatsResponse response;
  EXPECT_FALSE(stream->Read(&response));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("interval"));
}

TEST_F(ServicesTest, WaitTaskReturnsTheExit) {
  ASSERT_TRUE(Start("t1", R"({"command": "x"})").ok());
  // Exits once WaitTask has been called (or before: both must work).
  std::thread exiter([this] { driver_.Exit("t1", 3); });
  grpc::ClientContext context;
  driver::v1::WaitTaskRequest request;
  request.set_task_id("t1");
  driver::v1::WaitTaskResponse response;
  ASSERT_TRUE(driver_stub_->WaitTask(&context, request, &response).ok());
  EXPECT_EQ(response.result().exit_code(), 3);
  exiter.join();
}

TEST_F(ServicesTest, WaitTaskCancelledByItsCallerIsNotAnError) {
  ASSERT_TRUE(Start("t1", R"({"command": "x"})").ok());
  CapturingLogSink warnings(google::GLOG_WARNING);
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Milliseconds(200)));
  driver::v1::WaitTaskRequest request;
  request.set_task_id("t1");
  driver::v1::WaitTaskResponse response;
  grpc::Status status = driver_stub_->WaitTask(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(testing::WaitFor([&] { return driver_.cancelled_waits() == 1; }));
  server_->Shutdown(absl::Seconds(5));
  for (const CapturingLogSink::Entry& entry : warnings.entries()) {
    ADD_FAILURE() << "logged: " << entry.message;
  }
}

// The SDK polls each open call for cancellation ever less often as it
// lasts (berth-node holds a WaitTask per running task): a call that has
// lasted a while, among many, is still seen cancelled, and only it.
TEST_F(ServicesTest, ALongWaitAmongManyIsStillSeenCancelled) {
  ASSERT_TRUE(Start("t1", R"({"command": "x"})").ok());
  constexpr int kWaits = 20;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> waiters;
  for (int i = 0; i <= kWaits; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    // The last one ends by its deadline, once its polls have slowed down.
    contexts.back()->set_deadline(
        absl::ToChronoTime(absl::Now() + (i == kWaits ? absl::Milliseconds(1500)
                                                      : absl::Seconds(60))));
  }
  for (int i = 0; i <= kWaits; ++i) {
    waiters.emplace_back([this, context = contexts[i].get()] {
      driver::v1::WaitTaskRequest request;
      request.set_task_id("t1");
      driver::v1::WaitTaskResponse response;
      (void)driver_stub_->WaitTask(context, request, &response);
    });
  }
  EXPECT_TRUE(testing::WaitFor([&] { return driver_.cancelled_waits() == 1; }));
  EXPECT_EQ(driver_.cancelled_waits(), 1);
  for (int i = 0; i < kWaits; ++i) contexts[i]->TryCancel();
  EXPECT_TRUE(testing::WaitFor(
      [&] { return driver_.cancelled_waits() == kWaits + 1; }));
  for (std::thread& waiter : waiters) waiter.join();
  server_->Shutdown(absl::Seconds(5));
}

TEST_F(ServicesTest, TaskEventsStreamsPublishedEvents) {
  grpc::ClientContext context;
  auto stream = driver_stub_->TaskEvents(&context, {});
  // Events published before the handler subscribed are not sent.
  ASSERT_TRUE(testing::WaitFor(
      [this] { return driver_.TaskEventSubscriberCount() == 1; }));
  ASSERT_TRUE(Start("t1", R"({"command": "x"})").ok());
  driver::v1::TaskEventsResponse event;
  ASSERT_TRUE(stream->Read(&event));
  EXPECT_EQ(event.task_id(), "t1");
  EXPECT_EQ(event.message(), "started");
  EXPECT_TRUE(event.has_timestamp());
  context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(testing::WaitFor(
      [this] { return driver_.TaskEventSubscriberCount() == 0; }));
}

TEST_F(ServicesTest, FingerprintSendsTheCurrentOneThenChanges) {
  grpc::ClientContext context;
  auto stream = driver_stub_->Fingerprint(&context, {});
  driver::v1::FingerprintResponse fingerprint;
  ASSERT_TRUE(stream->Read(&fingerprint));
  EXPECT_EQ(fingerprint.health(), driver::v1::HEALTH_STATE_HEALTHY);

  driver::v1::FingerprintResponse unhealthy;
  unhealthy.set_health(driver::v1::HEALTH_STATE_UNHEALTHY);
  unhealthy.set_health_description("disk full");
  driver_.PublishFingerprint(unhealthy);
  ASSERT_TRUE(stream->Read(&fingerprint));
  EXPECT_EQ(fingerprint.health(), driver::v1::HEALTH_STATE_UNHEALTHY);
  EXPECT_EQ(fingerprint.health_description(), "disk full");
  context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(ServicesTest, SetConfigChecksThePluginSchema) {
  grpc::ClientContext context;
  v1::SetConfigRequest request;
  *request.mutable_config() = Json(R"({"verbose": true})");
  v1::SetConfigResponse response;
  grpc::Status status = plugin_stub_->SetConfig(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("config.verbose"));

  grpc::ClientContext empty_context;
  v1::SetConfigRequest empty;
  EXPECT_TRUE(plugin_stub_->SetConfig(&empty_context, empty, &response).ok());
}

TEST_F(ServicesTest, ShutdownCallAsksForShutdownWithItsGrace) {
  grpc::ClientContext context;
  v1::ShutdownRequest request;
  *request.mutable_grace_period() = ToProtoDuration(absl::Seconds(3));
  v1::ShutdownResponse response;
  ASSERT_TRUE(plugin_stub_->Shutdown(&context, request, &response).ok());
  EXPECT_EQ(server_->WaitForShutdownRequest(), absl::Seconds(3));
}

TEST_F(ServicesTest, ShutdownCallWithoutGraceUsesTheDefault) {
  grpc::ClientContext context;
  v1::ShutdownResponse response;
  ASSERT_TRUE(plugin_stub_->Shutdown(&context, {}, &response).ok());
  EXPECT_EQ(server_->WaitForShutdownRequest(), absl::Seconds(2));
}

// InspectTask answers the run's handle when the driver's HandleOf gives one
// (the one StartTask returned, for a node that never got that reply), and
// the status alone when HandleOf is unimplemented or names another task.
TEST_F(ServicesTest, InspectTaskCarriesTheHandleOfTheRun) {
  driver::v1::StartTaskResponse started;
  ASSERT_TRUE(Start("t1", R"({"command": "x"})", &started).ok());
  auto inspect = [&](driver::v1::InspectTaskResponse* response) {
    grpc::ClientContext context;
    driver::v1::InspectTaskRequest request;
    request.set_task_id("t1");
    return driver_stub_->InspectTask(&context, request, response);
  };

  driver::v1::InspectTaskResponse plain;
  grpc::Status status = inspect(&plain);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(plain.status().state(), driver::v1::TASK_STATE_RUNNING);
  EXPECT_FALSE(plain.has_handle()) << "HandleOf is unimplemented";

  driver_.set_handle_mode(testing::FakeDriver::HandleMode::kOwn);
  driver::v1::InspectTaskResponse with_handle;
  status = inspect(&with_handle);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(with_handle.status().state(), driver::v1::TASK_STATE_RUNNING);
  ASSERT_TRUE(with_handle.has_handle());
  EXPECT_EQ(with_handle.handle().config().id(), "t1");
  EXPECT_EQ(with_handle.handle().config().id(), started.handle().config().id());
  EXPECT_EQ(with_handle.handle().driver_state(),
            started.handle().driver_state());
  EXPECT_EQ(with_handle.handle()
                .config()
                .driver_config()
                .fields()
                .at("command")
                .string_value(),
            "x");

  driver_.set_handle_mode(testing::FakeDriver::HandleMode::kOtherTask);
  CapturingLogSink warnings(google::GLOG_WARNING);
  driver::v1::InspectTaskResponse other;
  status = inspect(&other);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(other.status().state(), driver::v1::TASK_STATE_RUNNING);
  EXPECT_FALSE(other.has_handle()) << other.handle().ShortDebugString();
  EXPECT_THAT(warnings.messages(),
              ::testing::Contains(HasSubstr("config.id is \"t1-other\"")));
}

TEST_F(ServicesTest, OptionalCallsAreUnimplemented) {
  ASSERT_TRUE(Start("t1", R"({"command": "x"})").ok());
  grpc::ClientContext context;
  driver::v1::SignalTaskRequest request;
  request.set_task_id("t1");
  request.set_signal("HUP");
  driver::v1::SignalTaskResponse response;
  EXPECT_EQ(driver_stub_->SignalTask(&context, request, &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  grpc::ClientContext network_context;
  driver::v1::CreateNetworkRequest network;
  network.set_allocation_id("a1");
  driver::v1::CreateNetworkResponse created;
  EXPECT_EQ(driver_stub_->CreateNetwork(&network_context, network, &created)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace berth::plugin
