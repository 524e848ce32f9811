// berth.node.v1.NodeService: the gRPC edge of berth-node. Task lifecycle is
// TaskManager's; this turns calls into its methods, passes exec and stats
// streams through to the task's driver, reads logs and streams events.

#ifndef SERVICES_NODE_NODE_SERVICE_H_
#define SERVICES_NODE_NODE_SERVICE_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "plugins/host/driver_client.h"
#include "services/node/event_bus.h"
#include "services/node/images_client.h"
#include "services/node/plugin_manager.h"
#include "services/node/stream_limiter.h"
#include "services/node/task_manager.h"

namespace berth::node {

class NodeServiceImpl final
    : public v1::NodeService::WithCallbackMethod_ExecTaskStreaming<
          v1::NodeService::WithCallbackMethod_AttachTask<
              v1::NodeService::Service>> {
 public:
  struct Options {
    std::string version;
    // Neighbours whose health GetNodeStatus reports; empty: not configured.
    std::string stats_socket;
    std::string proxy_socket;
    // berth-images, whose health GetNodeStatus reports; null: not
    // configured.
    ImagesClient* images = nullptr;
    // Bounds each client's streaming calls (Events, TaskLogs, TaskStats,
    // ExecTaskStreaming, AttachTask); null: no bound.
    StreamLimiter* streams = nullptr;
  };

  NodeServiceImpl(Options options, TaskManager* tasks, PluginManager* plugins,
                  EventBus* events);

  // Ends open streams (logs, events, stats) so that the server can stop.
  void Shutdown();

  grpc::Status RunTask(grpc::ServerContext* context,
                       const v1::RunTaskRequest* request,
                       v1::RunTaskResponse* response) override;
  grpc::Status ListTasks(grpc::ServerContext* context,
                         const v1::ListTasksRequest* request,
                         v1::ListTasksResponse* response) override;
  grpc::Status InspectTask(grpc::ServerContext* context,
                           const v1::InspectTaskRequest* request,
                           v1::InspectTaskResponse* response) override;
  grpc::Status StopTask(grpc::ServerContext* context,
                        const v1::StopTaskRequest* request,
                        v1::StopTaskResponse* response) override;
  grpc::Status RemoveTask(grpc::ServerContext* context,
                          const v1::RemoveTaskRequest* request,
                          v1::RemoveTaskResponse* response) override;
  // Callback API: the command may end while the caller still holds its
  // half of the stream open, and the call must then end with the driver's
  // status, which a blocked synchronous Read would not allow.
  grpc::ServerBidiReactor<driver::v1::ExecTaskStreamingRequest,
                          driver::v1::ExecTaskStreamingResponse>*
  ExecTaskStreaming(grpc::CallbackServerContext* context) override;
  // Callback API, as ExecTaskStreaming: the task's driver's AttachTask
  // relayed both ways, then the run's exit (TaskManager::AwaitRunExit) as
  // the last frame when the driver sent none.
  grpc::ServerBidiReactor<driver::v1::AttachTaskRequest,
                          driver::v1::AttachTaskResponse>*
  AttachTask(grpc::CallbackServerContext* context) override;
  grpc::Status TaskStats(
      grpc::ServerContext* context, const v1::TaskStatsRequest* request,
      grpc::ServerWriter<v1::TaskStatsResponse>* writer) override;
  grpc::Status TaskLogs(
      grpc::ServerContext* context, const v1::TaskLogsRequest* request,
      grpc::ServerWriter<v1::TaskLogsResponse>* writer) override;
  grpc::Status Events(grpc::ServerContext* context,
                      const v1::EventsRequest* request,
                      grpc::ServerWriter<v1::EventsResponse>* writer) override;
  grpc::Status GetNodeStatus(grpc::ServerContext* context,
                             const v1::GetNodeStatusRequest* request,
                             v1::GetNodeStatusResponse* response) override;

  // AttachTask calls open at once on one task, at most: each holds threads
  // here and in the driver and a connection of the task's holder. One more
  // is RESOURCE_EXHAUSTED.
  static constexpr int kMaxAttachesPerTask = 32;
  // For AttachTask's relays: a place among the task's attached callers
  // (false: there are kMaxAttachesPerTask), and its release.
  bool AcquireAttachSlot(const std::string& task_id);
  void ReleaseAttachSlot(const std::string& task_id);
  // A place among the streaming calls of `context`'s client
  // (Options::streams): RESOURCE_EXHAUSTED naming --max_streams_per_client
  // when it has as many as allowed; an empty slot without a limiter.
  absl::StatusOr<StreamLimiter::Slot> AcquireStream(
      const grpc::ServerContextBase& context, absl::string_view rpc);

 private:
  bool stopping() const;
  // The task's samples from its driver until the stream ends; `wrote` says
  // whether one reached the caller, `driver_error` why the driver's stream
  // failed, if it did.
  grpc::Status StreamStats(
      grpc::ServerContext* context,
      const std::shared_ptr<plugin::host::DriverClient>& driver,
      const driver::v1::TaskStatsRequest& request,
      plugin::host::CallCanceller* canceller,
      grpc::ServerWriter<v1::TaskStatsResponse>* writer, bool* wrote,
      absl::Status* driver_error);
  // StreamStats, resumed on the relaunched driver when the driver goes away.
  grpc::Status ResumingStats(grpc::ServerContext* context,
                             TaskManager::Target target,
                             const driver::v1::TaskStatsRequest& request,
                             plugin::host::CallCanceller* canceller,
                             grpc::ServerWriter<v1::TaskStatsResponse>* writer);

  const Options options_;
  TaskManager* const tasks_;
  PluginManager* const plugins_;
  EventBus* const events_;
  const absl::Time started_at_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Cancelled by Shutdown: the driver streams of open TaskStats calls.
  std::set<plugin::host::CallCanceller*> stats_streams_ ABSL_GUARDED_BY(mu_);
  // AttachTask calls open, by task id.
  std::map<std::string, int> attaches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::node

#endif  // SERVICES_NODE_NODE_SERVICE_H_
