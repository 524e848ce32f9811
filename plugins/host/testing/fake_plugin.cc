// fake_plugin: a driver plugin in miniature for the tests of //plugins/host,
// written on raw gRPC and the handshake constants only (not on the SDK), with
// flags that make it misbehave.
//
// It serves berth.plugin.v1.PluginService, a little of
// berth.driver.v1.DriverService (GetCapabilities, StartTask, InspectTask,
// WaitTask blocking, Fingerprint, TaskEvents, TaskStats streaming a sample
// every interval, ExecTaskStreaming echoing stdin) and grpc.health.v1 with
// service "plugin", on $BERTH_PLUGIN_SOCKET_DIR/NAME.sock.

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "berth/plugin/v1/plugin.grpc.pb.h"
#include "glog/logging.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "plugins/sdk/handshake.h"
#include "services/common/stream_log.h"

ABSL_FLAG(std::string, name, "fake", "Plugin name; the socket is NAME.sock.");
ABSL_FLAG(std::string, handshake, "normal",
          "normal: print the handshake line; none: serve but never print it; "
          "bad: print a line that is not a handshake.");
ABSL_FLAG(int, exit_at_once, -1,
          "If >= 0: exit with this code at once, before the handshake.");
ABSL_FLAG(int, core_version, berth::plugin::kCoreProtocolVersion,
          "Core version on the handshake line.");
ABSL_FLAG(int, app_version, berth::plugin::kAppProtocolVersion,
          "App protocol version on the handshake line.");
ABSL_FLAG(absl::Duration, serve_delay, absl::ZeroDuration(),
          "Print the handshake line, then wait this long before serving.");
ABSL_FLAG(std::string, shutdown, "exit",
          "What PluginService.Shutdown does: exit (0, after calls in flight "
          "get the grace period), ignore (answer and go on), close_socket "
          "(stop serving, remove the socket, but keep running).");
ABSL_FLAG(std::string, health, "serving",
          "Health of service \"plugin\": serving or not_serving.");
ABSL_FLAG(std::vector<std::string>, stderr_lines, {},
          "Lines written to stderr at start (comma separated).");
ABSL_FLAG(std::string, socket_path, "",
          "Serve here instead of $BERTH_PLUGIN_SOCKET_DIR/NAME.sock.");
ABSL_FLAG(bool, driver_api, true, "List berth.driver.v1 in GetCapabilities.");
ABSL_FLAG(bool, print_env, false,
          "Write the handshake environment variables to stderr at start.");

namespace {

namespace driver = berth::driver::v1;
namespace plugin = berth::plugin::v1;

// How often blocked handlers look whether their call was cancelled: the sync
// server API has no notification of it.
constexpr absl::Duration kCancelCheck = absl::Milliseconds(20);

// What the handlers share with main.
class State {
 public:
  void RequestShutdown() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    shutdown_requested_ = true;
  }
  void WaitForShutdownRequest() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&shutdown_requested_));
  }
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Waits up to `timeout`; returns whether the plugin is stopping or the
  // call was cancelled.
  bool WaitDone(grpc::ServerContext* context, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (!stopping_ && !context->IsCancelled()) {
      const absl::Time now = absl::Now();
      if (now >= deadline) return false;
      mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                           std::min(kCancelCheck, deadline - now));
    }
    return true;
  }
  bool stopping() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stopping_;
  }

 private:
  absl::Mutex mu_;
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::Status Stopping() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin is stopping");
}

class PluginServiceImpl final : public plugin::PluginService::Service {
 public:
  explicit PluginServiceImpl(State* state) : state_(state) {}

  grpc::Status GetPluginInfo(grpc::ServerContext*,
                             const plugin::GetPluginInfoRequest*,
                             plugin::GetPluginInfoResponse* response) override {
    response->set_name(absl::GetFlag(FLAGS_name));
    response->set_type(plugin::PLUGIN_TYPE_DRIVER);
    response->set_plugin_version("0.0.1-fake");
    response->set_description("fake driver for the plugin host's tests");
    return grpc::Status::OK;
  }

  grpc::Status GetCapabilities(
      grpc::ServerContext*, const plugin::GetCapabilitiesRequest*,
      plugin::GetCapabilitiesResponse* response) override {
    response->add_api_versions()->set_package("berth.plugin.v1");
    if (absl::GetFlag(FLAGS_driver_api)) {
      response->add_api_versions()->set_package("berth.driver.v1");
    }
    return grpc::Status::OK;
  }

  grpc::Status GetConfigSchema(grpc::ServerContext*,
                               const plugin::GetConfigSchemaRequest*,
                               plugin::GetConfigSchemaResponse*) override {
    return grpc::Status::OK;
  }

  grpc::Status SetConfig(grpc::ServerContext*, const plugin::SetConfigRequest*,
                         plugin::SetConfigResponse*) override {
    return grpc::Status::OK;
  }

  grpc::Status Shutdown(grpc::ServerContext*, const plugin::ShutdownRequest*,
                        plugin::ShutdownResponse*) override {
    LOG(INFO) << "Shutdown requested (--shutdown="
              << absl::GetFlag(FLAGS_shutdown) << ")";
    if (absl::GetFlag(FLAGS_shutdown) != "ignore") state_->RequestShutdown();
    return grpc::Status::OK;
  }

 private:
  State* const state_;
};

class DriverServiceImpl final : public driver::DriverService::Service {
 public:
  explicit DriverServiceImpl(State* state) : state_(state) {}

  grpc::Status GetCapabilities(
      grpc::ServerContext*, const driver::GetCapabilitiesRequest*,
      driver::GetCapabilitiesResponse* response) override {
    response->mutable_capabilities()->set_stats(true);
    response->mutable_capabilities()->set_exec_streaming(true);
    return grpc::Status::OK;
  }

  grpc::Status StartTask(grpc::ServerContext*,
                         const driver::StartTaskRequest* request,
                         driver::StartTaskResponse* response) override {
    *response->mutable_handle()->mutable_config() = request->task();
    response->mutable_handle()->set_state(driver::TASK_STATE_RUNNING);
    return grpc::Status::OK;
  }

  grpc::Status InspectTask(grpc::ServerContext*,
                           const driver::InspectTaskRequest* request,
                           driver::InspectTaskResponse* response) override {
    if (request->task_id() == "missing") {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          absl::StrCat("task ", request->task_id(), " not found"));
    }
    response->mutable_status()->set_id(request->task_id());
    response->mutable_status()->set_state(driver::TASK_STATE_RUNNING);
    return grpc::Status::OK;
  }

  // Blocks until the call is cancelled or the plugin stops: the task never
  // exits.
  grpc::Status WaitTask(grpc::ServerContext* context,
                        const driver::WaitTaskRequest*,
                        driver::WaitTaskResponse*) override {
    state_->WaitDone(context, absl::InfiniteDuration());
    grpc::Status status =
        state_->stopping()
            ? Stopping()
            : grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    berth::LogStreamEnd("DriverService/WaitTask", status, context);
    return status;
  }

  grpc::Status Fingerprint(
      grpc::ServerContext* context, const driver::FingerprintRequest*,
      grpc::ServerWriter<driver::FingerprintResponse>* writer) override {
    driver::FingerprintResponse fingerprint;
    fingerprint.set_health(driver::HEALTH_STATE_HEALTHY);
    fingerprint.set_health_description("fake");
    writer->Write(fingerprint);
    return BlockUntilDone(context, "DriverService/Fingerprint");
  }

  grpc::Status TaskEvents(
      grpc::ServerContext* context, const driver::TaskEventsRequest*,
      grpc::ServerWriter<driver::TaskEventsResponse>*) override {
    return BlockUntilDone(context, "DriverService/TaskEvents");
  }

  grpc::Status TaskStats(
      grpc::ServerContext* context, const driver::TaskStatsRequest* request,
      grpc::ServerWriter<driver::TaskStatsResponse>* writer) override {
    absl::Duration interval = absl::Seconds(1);
    if (request->has_interval()) {
      interval = absl::Seconds(request->interval().seconds()) +
                 absl::Nanoseconds(request->interval().nanos());
    }
    while (true) {
      driver::TaskStatsResponse sample;
      sample.mutable_usage()->set_task_id(request->task_id());
      *sample.mutable_usage()->mutable_timestamp() =
          google::protobuf::util::TimeUtil::GetCurrentTime();
      if (!writer->Write(sample)) break;
      if (state_->WaitDone(context, interval)) break;
    }
    const grpc::Status status =
        state_->stopping() ? Stopping() : grpc::Status::OK;
    berth::LogStreamEnd("DriverService/TaskStats", status, context);
    return status;
  }

  // Echoes stdin as stdout; stdin close (or the caller half-closing) ends
  // the command with exit code 0.
  grpc::Status ExecTaskStreaming(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<driver::ExecTaskStreamingResponse,
                               driver::ExecTaskStreamingRequest>* stream)
      override {
    driver::ExecTaskStreamingRequest request;
    if (!stream->Read(&request) || !request.has_setup()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "the first request must carry the setup");
    }
    while (stream->Read(&request)) {
      if (request.has_stdin()) {
        driver::ExecTaskStreamingResponse out;
        out.set_stdout(request.stdin());
        stream->Write(out);
      }
      if (request.has_stdin_close()) break;
    }
    if (context->IsCancelled()) {
      const grpc::Status status(grpc::StatusCode::CANCELLED, "cancelled");
      berth::LogStreamEnd("DriverService/ExecTaskStreaming", status, context);
      return status;
    }
    driver::ExecTaskStreamingResponse exit;
    exit.mutable_exit()->set_exit_code(0);
    stream->Write(exit);
    return grpc::Status::OK;
  }

 private:
  grpc::Status BlockUntilDone(grpc::ServerContext* context,
                              absl::string_view rpc) {
    state_->WaitDone(context, absl::InfiniteDuration());
    const grpc::Status status =
        state_->stopping() ? Stopping() : grpc::Status::OK;
    berth::LogStreamEnd(rpc, status, context);
    return status;
  }

  State* const state_;
};

void WriteLine(FILE* stream, const std::string& line) {
  fputs(line.c_str(), stream);
  fputc('\n', stream);
  fflush(stream);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  // The host may go away (and its end of our stderr with it) while we run on.
  signal(SIGPIPE, SIG_IGN);
  // A test that crashes leaves no fake plugin behind.
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;

  const char* cookie = getenv(berth::plugin::kMagicCookieKey);
  if (cookie == nullptr ||
      std::string(cookie) != berth::plugin::kMagicCookieValue) {
    fputs(berth::plugin::NotLaunchedByHostMessage(argv[0]).c_str(), stderr);
    return 1;
  }
  if (absl::GetFlag(FLAGS_print_env)) {
    for (const char* key :
         {berth::plugin::kSocketDirEnv, berth::plugin::kProtocolVersionsEnv}) {
      const char* value = getenv(key);
      WriteLine(stderr, absl::StrCat(key, "=", value ? value : "(unset)"));
    }
  }
  for (const std::string& line : absl::GetFlag(FLAGS_stderr_lines)) {
    WriteLine(stderr, line);
  }
  if (const int code = absl::GetFlag(FLAGS_exit_at_once); code >= 0) {
    WriteLine(stderr,
              absl::StrCat("fake plugin: exiting at once with code ", code));
    _exit(code);
  }

  std::string socket_path = absl::GetFlag(FLAGS_socket_path);
  if (socket_path.empty()) {
    const char* dir = getenv(berth::plugin::kSocketDirEnv);
    if (dir == nullptr || *dir == '\0') {
      LOG(ERROR) << berth::plugin::kSocketDirEnv << " is not set";
      return 1;
    }
    socket_path = absl::StrCat(dir, "/", absl::GetFlag(FLAGS_name), ".sock");
  }
  unlink(socket_path.c_str());

  berth::plugin::Handshake handshake;
  handshake.core_version = absl::GetFlag(FLAGS_core_version);
  handshake.app_version = absl::GetFlag(FLAGS_app_version);
  handshake.address = socket_path;
  const std::string mode = absl::GetFlag(FLAGS_handshake);
  auto print_handshake = [&] {
    if (mode == "normal") {
      WriteLine(stdout, berth::plugin::FormatHandshake(handshake));
      // Output after the handshake line, which the host must keep draining.
      WriteLine(stdout, "fake plugin: handshake printed");
    } else if (mode == "bad") {
      WriteLine(stdout, "hello from a plugin that does not shake hands");
    }
  };
  const absl::Duration serve_delay = absl::GetFlag(FLAGS_serve_delay);
  if (serve_delay > absl::ZeroDuration()) {
    print_handshake();
    absl::SleepFor(serve_delay);  // the misbehaviour under test
  }

  State state;
  PluginServiceImpl plugin_service(&state);
  DriverServiceImpl driver_service(&state);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", socket_path),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&plugin_service);
  builder.RegisterService(&driver_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    LOG(ERROR) << "cannot serve on " << socket_path;
    return 1;
  }
  server->GetHealthCheckService()->SetServingStatus(
      berth::plugin::kHealthServiceName,
      absl::GetFlag(FLAGS_health) == "serving");
  LOG(INFO) << "serving on " << socket_path;
  if (serve_delay <= absl::ZeroDuration()) print_handshake();

  state.WaitForShutdownRequest();
  if (absl::GetFlag(FLAGS_shutdown) == "close_socket") {
    // First, so that a call that fails from here on finds the socket gone.
    unlink(socket_path.c_str());
  }
  state.Stop();
  LOG(INFO) << "shutting down the server";
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  LOG(INFO) << "server shut down";
  server.reset();
  if (absl::GetFlag(FLAGS_shutdown) == "close_socket") {
    LOG(INFO) << "closed " << socket_path << "; running on without it";
    while (true) pause();
  }
  LOG(INFO) << "shut down";
  return 0;
}
