// A typed client of a driver plugin: berth.plugin.v1 and berth.driver.v1 over
// one channel, where every error after the plugin is gone is
// ErrPluginShutdown (errors.h).
//
//   std::shared_ptr<DriverClient> driver = plugin->client();
//   absl::StatusOr<driver::v1::StartTaskResponse> started =
//       driver->StartTask(request);
//   absl::StatusOr<std::unique_ptr<TaskStatsStream>> stats =
//       driver->TaskStats(stats_request);
//   while (true) {
//     absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>> usage =
//         (*stats)->Next();
//     if (!usage.ok()) ...          // IsPluginShutdown: relaunch, recover
//     if (!usage->has_value()) ...  // the plugin ended the stream
//   }
//
// How errors come back:
// - the plugin is gone (exited, closed its socket, or was stopped): every
//   call and every open stream fails with ErrPluginShutdown, at once when the
//   host knows, otherwise after an UNAVAILABLE or CANCELLED once the process
//   is seen to end (waiting for that up to Options::exit_wait);
// - the caller cancelled (CallCanceller, a stream's Cancel()): CANCELLED,
//   logged at VLOG(1) only;
// - the caller's deadline (CallOptions::deadline, a Next/Read deadline)
//   passed: DEADLINE_EXCEEDED;
// - anything the plugin returned: its code, with the message prefixed by
//   "plugin NAME: RPC (task ID): ".

#ifndef PLUGINS_HOST_DRIVER_CLIENT_H_
#define PLUGINS_HOST_DRIVER_CLIENT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "berth/plugin/v1/plugin.grpc.pb.h"
#include "berth/stats/v1/stats.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "plugins/host/errors.h"
#include "plugins/host/plugin_lifetime.h"

namespace berth::plugin::host {

namespace internal {
class Call;
struct ClientShared;
}  // namespace internal

// A handle with which a caller cancels its calls from another thread. Calls
// (and streams) given it in CallOptions are cancelled when Cancel() is called,
// and fail with CANCELLED; calls started after Cancel() fail at once.
//
// Thread-safe. Must outlive the calls given it.
class CallCanceller {
 public:
  CallCanceller() = default;
  CallCanceller(const CallCanceller&) = delete;
  CallCanceller& operator=(const CallCanceller&) = delete;

  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);
  bool cancelled() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class internal::Call;
  bool Register(grpc::ClientContext* context) ABSL_LOCKS_EXCLUDED(mu_);
  void Unregister(grpc::ClientContext* context) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
};

// Per-call options.
struct CallOptions {
  // The call (for a stream: the whole stream) fails with DEADLINE_EXCEEDED
  // after this.
  absl::Time deadline = absl::InfiniteFuture();
  // Cancels the call when cancelled; not owned; may be null.
  CallCanceller* canceller = nullptr;
};

// Messages of a server stream (Fingerprint, TaskEvents, TaskStats), read by
// one thread. Made by DriverClient. Destroying it cancels the stream quietly.
template <typename Response>
class ServerStream {
 public:
  ServerStream(std::unique_ptr<internal::Call> call,
               std::unique_ptr<grpc::ClientReader<Response>> reader);
  ~ServerStream();
  ServerStream(const ServerStream&) = delete;
  ServerStream& operator=(const ServerStream&) = delete;

  // The next message; std::nullopt once the plugin has ended the stream
  // (OK); an error as described at the top of this file. `deadline` bounds
  // this one wait: when it passes first, the stream is cancelled and this and
  // every later Next() returns DEADLINE_EXCEEDED. After the end or an error,
  // every later Next() returns the same.
  absl::StatusOr<std::optional<Response>> Next(
      absl::Time deadline = absl::InfiniteFuture());

  // Cancels the stream: a Next() blocked in another thread, and every later
  // one, returns CANCELLED (unless the stream had already ended). Thread-safe.
  void Cancel();

 private:
  std::unique_ptr<internal::Call> call_;
  std::unique_ptr<grpc::ClientReader<Response>> reader_;
  std::optional<absl::Status> final_;  // once the stream has ended
};

// Instantiated in driver_client.cc for these three.
extern template class ServerStream<driver::v1::FingerprintResponse>;
extern template class ServerStream<driver::v1::TaskEventsResponse>;
extern template class ServerStream<driver::v1::TaskStatsResponse>;

using FingerprintStream = ServerStream<driver::v1::FingerprintResponse>;
using TaskEventsStream = ServerStream<driver::v1::TaskEventsResponse>;

// DriverService.TaskStats: the samples of one task.
class TaskStatsStream {
 public:
  explicit TaskStatsStream(
      std::unique_ptr<ServerStream<driver::v1::TaskStatsResponse>> stream)
      : stream_(std::move(stream)) {}

  // The next sample; std::nullopt once the plugin ended the stream (the task
  // was destroyed). As ServerStream::Next.
  absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>> Next(
      absl::Time deadline = absl::InfiniteFuture());

  // As ServerStream::Cancel.
  void Cancel() { stream_->Cancel(); }

 private:
  std::unique_ptr<ServerStream<driver::v1::TaskStatsResponse>> stream_;
};

// A bidirectional stream as it is (DriverService.ExecTaskStreaming and
// AttachTask): the first request carries the setup. One thread may write
// (Write, WritesDone) while another reads (Read); Finish and Cancel from
// any. Destroying it cancels the call if it has not finished.
template <typename Request, typename Response>
class BidiStream {
 public:
  BidiStream(
      std::unique_ptr<internal::Call> call,
      std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> stream);
  ~BidiStream();
  BidiStream(const BidiStream&) = delete;
  BidiStream& operator=(const BidiStream&) = delete;

  // Sends one request. Fails with ErrPluginShutdown once the plugin is gone,
  // CANCELLED once cancelled by the caller, FAILED_PRECONDITION when the call
  // has ended otherwise (Read or Finish then tells how).
  absl::Status Write(const Request& request);

  // Half-closes the stream (for exec, which closes the command's stdin).
  // Errors as Write.
  absl::Status WritesDone();

  // The next response; std::nullopt once the plugin ended the call OK (for
  // exec, the last response was the exit); errors as ServerStream::Next.
  absl::StatusOr<std::optional<Response>> Read(
      absl::Time deadline = absl::InfiniteFuture());

  // Waits for the end of the call and returns its status, mapped as every
  // other; the same on every call. Responses not read are dropped: call it
  // from the reading thread, or when no Read runs.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels the call (for exec, which kills the command; an attach leaves
  // the task running). Thread-safe.
  void Cancel();

 private:
  std::unique_ptr<internal::Call> call_;
  std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> stream_;

  absl::Mutex mu_;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // final_ is set
  std::optional<absl::Status> final_ ABSL_GUARDED_BY(mu_);
};

// Instantiated in driver_client.cc for these two.
extern template class BidiStream<driver::v1::ExecTaskStreamingRequest,
                                 driver::v1::ExecTaskStreamingResponse>;
extern template class BidiStream<driver::v1::AttachTaskRequest,
                                 driver::v1::AttachTaskResponse>;

// DriverService.ExecTaskStreaming.
using ExecStream = BidiStream<driver::v1::ExecTaskStreamingRequest,
                              driver::v1::ExecTaskStreamingResponse>;
// DriverService.AttachTask.
using AttachStream =
    BidiStream<driver::v1::AttachTaskRequest, driver::v1::AttachTaskResponse>;

// The client. Thread-safe; calls may run concurrently. Every method takes the
// RPC's request and CallOptions and returns its response.
class DriverClient {
 public:
  struct Options {
    // The plugin's socket: probed after an UNAVAILABLE, so that a plugin that
    // closed it while its process lives on counts as gone. Empty: not probed.
    std::string socket_path;
    // After an UNAVAILABLE (or a CANCELLED not by the caller) from a plugin
    // whose socket still accepts connections, how long to wait for its
    // process to end before returning the error as it is.
    absl::Duration exit_wait = absl::Seconds(2);
  };

  // A client of the plugin lifetime->name() over `channel`; `lifetime` says
  // when it is gone (PluginProcess makes both).
  DriverClient(std::shared_ptr<grpc::Channel> channel,
               std::shared_ptr<PluginLifetime> lifetime, Options options);
  ~DriverClient();

  DriverClient(const DriverClient&) = delete;
  DriverClient& operator=(const DriverClient&) = delete;

  const std::string& name() const;

  // berth.plugin.v1.PluginService.
  absl::StatusOr<plugin::v1::GetPluginInfoResponse> GetPluginInfo(
      const plugin::v1::GetPluginInfoRequest& request = {},
      const CallOptions& options = {});
  absl::StatusOr<plugin::v1::GetCapabilitiesResponse> GetPluginCapabilities(
      const plugin::v1::GetCapabilitiesRequest& request = {},
      const CallOptions& options = {});
  absl::StatusOr<plugin::v1::GetConfigSchemaResponse> GetConfigSchema(
      const plugin::v1::GetConfigSchemaRequest& request = {},
      const CallOptions& options = {});
  absl::StatusOr<plugin::v1::SetConfigResponse> SetConfig(
      const plugin::v1::SetConfigRequest& request,
      const CallOptions& options = {});
  // The RPC; once it is answered, waits (up to the request's grace period,
  // 2 s if unset, or the call's deadline) until the plugin closes its
  // connection, so that its graceful stop is not held by this host's idle
  // connection. PluginProcess::Stop also waits for the exit and kills.
  absl::StatusOr<plugin::v1::ShutdownResponse> Shutdown(
      const plugin::v1::ShutdownRequest& request = {},
      const CallOptions& options = {});

  // berth.driver.v1.DriverService.
  absl::StatusOr<driver::v1::GetCapabilitiesResponse> GetCapabilities(
      const driver::v1::GetCapabilitiesRequest& request = {},
      const CallOptions& options = {});
  absl::StatusOr<std::unique_ptr<FingerprintStream>> Fingerprint(
      const driver::v1::FingerprintRequest& request = {},
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::StartTaskResponse> StartTask(
      const driver::v1::StartTaskRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::WaitTaskResponse> WaitTask(
      const driver::v1::WaitTaskRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::StopTaskResponse> StopTask(
      const driver::v1::StopTaskRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::DestroyTaskResponse> DestroyTask(
      const driver::v1::DestroyTaskRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::InspectTaskResponse> InspectTask(
      const driver::v1::InspectTaskRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::RecoverTaskResponse> RecoverTask(
      const driver::v1::RecoverTaskRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::SignalTaskResponse> SignalTask(
      const driver::v1::SignalTaskRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<std::unique_ptr<TaskEventsStream>> TaskEvents(
      const driver::v1::TaskEventsRequest& request = {},
      const CallOptions& options = {});
  absl::StatusOr<std::unique_ptr<TaskStatsStream>> TaskStats(
      const driver::v1::TaskStatsRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::ExecTaskResponse> ExecTask(
      const driver::v1::ExecTaskRequest& request,
      const CallOptions& options = {});
  // Opens the stream; the caller writes the setup first.
  absl::StatusOr<std::unique_ptr<ExecStream>> ExecTaskStreaming(
      const CallOptions& options = {});
  // Opens the stream; the caller writes the setup first.
  absl::StatusOr<std::unique_ptr<AttachStream>> AttachTask(
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::CreateNetworkResponse> CreateNetwork(
      const driver::v1::CreateNetworkRequest& request,
      const CallOptions& options = {});
  absl::StatusOr<driver::v1::DestroyNetworkResponse> DestroyNetwork(
      const driver::v1::DestroyNetworkRequest& request,
      const CallOptions& options = {});

 private:
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Unary(
      absl::string_view rpc, std::string subject, Stub* stub,
      grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                   Response*),
      const Request& request, const CallOptions& options);

  template <typename Request, typename Response>
  absl::StatusOr<std::unique_ptr<ServerStream<Response>>> OpenServerStream(
      absl::string_view rpc, std::string subject,
      std::unique_ptr<grpc::ClientReader<Response>> (
          driver::v1::DriverService::Stub::*method)(grpc::ClientContext*,
                                                    const Request&),
      const Request& request, const CallOptions& options);

  const std::shared_ptr<const internal::ClientShared> shared_;
  const std::unique_ptr<plugin::v1::PluginService::Stub> plugin_;
  const std::unique_ptr<driver::v1::DriverService::Stub> driver_;
};

}  // namespace berth::plugin::host

#endif  // PLUGINS_HOST_DRIVER_CLIENT_H_
