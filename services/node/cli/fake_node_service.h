// A berth.node.v1.NodeService for tests of the command line: it records
// every request and answers from what the test scripted (tasks, log chunks,
// stats samples, exec frames, node status, errors). And a
// berth.image.v1.ImageService, which berth-node forwards on the same socket:
// a store of images, scripted pulls, imports and prunes.

#ifndef SERVICES_NODE_CLI_FAKE_NODE_SERVICE_H_
#define SERVICES_NODE_CLI_FAKE_NODE_SERVICE_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "berth/image/v1/image.pb.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "berth/node/v1/node.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"

namespace berth::cli::testing {

class FakeNodeService final : public node::v1::NodeService::Service {
 public:
  using ExecStream =
      grpc::ServerReaderWriter<driver::v1::ExecTaskStreamingResponse,
                               driver::v1::ExecTaskStreamingRequest>;
  // Handles one ExecTaskStreaming call; requests it reads should be passed
  // to RecordExecRequest.
  using ExecHandler =
      std::function<grpc::Status(grpc::ServerContext*, ExecStream*)>;
  using AttachStream = grpc::ServerReaderWriter<driver::v1::AttachTaskResponse,
                                                driver::v1::AttachTaskRequest>;
  // Handles one AttachTask call; requests it reads should be passed to
  // RecordAttachRequest.
  using AttachHandler =
      std::function<grpc::Status(grpc::ServerContext*, AttachStream*)>;

  FakeNodeService();

  // --- Script.

  // A task the node knows (found by id, unique id prefix or name).
  void AddTask(const node::v1::Task& task) ABSL_LOCKS_EXCLUDED(mu_);
  // What RunTask makes: a task with `outcome`'s id and the request's spec,
  // answered in TASK_STATE_PENDING and then running; it becomes `outcome`
  // (with the spec) when TaskLogs has been called `logs_calls` times for it.
  // Default: id "00112233445566778899aabbccddeeff", exited with code 0,
  // after one TaskLogs call.
  void SetRunOutcome(const node::v1::Task& outcome, int logs_calls = 1)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What TaskLogs sends for the task (before it ends the stream).
  void SetLogs(const std::string& task_id,
               std::vector<node::v1::TaskLogsResponse> chunks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What TaskStats sends for the task; then it ends the stream, or, with
  // `hold_open`, waits for the caller to cancel or EndHeldStreams().
  void SetStats(const std::string& task_id,
                std::vector<node::v1::TaskStatsResponse> samples,
                bool hold_open) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the TaskStats streams held open (and those held later).
  void EndHeldStreams() ABSL_LOCKS_EXCLUDED(mu_);
  void SetNodeStatus(const node::v1::GetNodeStatusResponse& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What Events sends (before it ends the stream).
  void SetEvents(std::vector<node::v1::EventsResponse> events)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every call of `method` ("RunTask", "StopTask", ...) fails with `status`.
  void FailCalls(const std::string& method, const grpc::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces the default exec behaviour: read the setup, send `exec_output`,
  // echo stdin as stdout until stdin_close or the half-close, without a tty
  // wait for the half-close, send an exit with `exec_exit`.
  void SetExecHandler(ExecHandler handler) ABSL_LOCKS_EXCLUDED(mu_);
  void SetExecScript(std::vector<driver::v1::ExecTaskStreamingResponse> output,
                     const driver::v1::ExitResult& exit)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces the default attach behaviour: read the setup (NOT_FOUND for an
  // unknown task, FAILED_PRECONDITION for stdin to a task without
  // stdin_open or to one not running), send `attach_output`; with stdin,
  // echo it as stdout until stdin_close (a cancel or half-close first: end
  // CANCELLED, the task left running); then the task ends: a task RunTask
  // made becomes its outcome (see SetRunOutcome), another one exits with
  // `attach_exit`; the exit frame (none for a FAILED outcome), OK.
  void SetAttachHandler(AttachHandler handler) ABSL_LOCKS_EXCLUDED(mu_);
  void SetAttachScript(std::vector<driver::v1::AttachTaskResponse> output,
                       const driver::v1::ExitResult& exit)
      ABSL_LOCKS_EXCLUDED(mu_);

  // For an AttachHandler: the task `task_id` (RunTask made) ends as its
  // outcome says; returns its exit result.
  driver::v1::ExitResult EndRun(const std::string& task_id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // --- What was asked.

  std::vector<node::v1::RunTaskRequest> run_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<node::v1::ListTasksRequest> list_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<node::v1::StopTaskRequest> stop_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<node::v1::RemoveTaskRequest> remove_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<node::v1::TaskLogsRequest> logs_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<node::v1::TaskStatsRequest> stats_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every ExecTaskStreaming request, in order, and whether the caller
  // half-closed.
  std::vector<driver::v1::ExecTaskStreamingRequest> exec_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  bool exec_half_closed() const ABSL_LOCKS_EXCLUDED(mu_);
  // Every AttachTask request, in order, and whether a call ended because
  // the caller cancelled it.
  std::vector<driver::v1::AttachTaskRequest> attach_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  bool attach_cancelled() const ABSL_LOCKS_EXCLUDED(mu_);
  void RecordAttachRequest(const driver::v1::AttachTaskRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RecordExecRequest(const driver::v1::ExecTaskStreamingRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // --- NodeService.

  grpc::Status RunTask(grpc::ServerContext* context,
                       const node::v1::RunTaskRequest* request,
                       node::v1::RunTaskResponse* response) override;
  grpc::Status ListTasks(grpc::ServerContext* context,
                         const node::v1::ListTasksRequest* request,
                         node::v1::ListTasksResponse* response) override;
  grpc::Status InspectTask(grpc::ServerContext* context,
                           const node::v1::InspectTaskRequest* request,
                           node::v1::InspectTaskResponse* response) override;
  grpc::Status StopTask(grpc::ServerContext* context,
                        const node::v1::StopTaskRequest* request,
                        node::v1::StopTaskResponse* response) override;
  grpc::Status RemoveTask(grpc::ServerContext* context,
                          const node::v1::RemoveTaskRequest* request,
                          node::v1::RemoveTaskResponse* response) override;
  grpc::Status ExecTaskStreaming(grpc::ServerContext* context,
                                 ExecStream* stream) override;
  grpc::Status AttachTask(grpc::ServerContext* context,
                          AttachStream* stream) override;
  grpc::Status TaskStats(
      grpc::ServerContext* context, const node::v1::TaskStatsRequest* request,
      grpc::ServerWriter<node::v1::TaskStatsResponse>* writer) override;
  grpc::Status TaskLogs(
      grpc::ServerContext* context, const node::v1::TaskLogsRequest* request,
      grpc::ServerWriter<node::v1::TaskLogsResponse>* writer) override;
  grpc::Status GetNodeStatus(
      grpc::ServerContext* context,
      const node::v1::GetNodeStatusRequest* request,
      node::v1::GetNodeStatusResponse* response) override;
  grpc::Status Events(
      grpc::ServerContext* context, const node::v1::EventsRequest* request,
      grpc::ServerWriter<node::v1::EventsResponse>* writer) override;

 private:
  // The scripted failure of `method`, or OK.
  grpc::Status Failure(const std::string& method) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The task `name` names (id, unique prefix, name); nullptr if none.
  node::v1::Task* Find(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  grpc::Status DefaultExec(grpc::ServerContext* context, ExecStream* stream);
  grpc::Status DefaultAttach(grpc::ServerContext* context,
                             AttachStream* stream);

  mutable absl::Mutex mu_;
  std::vector<node::v1::Task> tasks_ ABSL_GUARDED_BY(mu_);
  node::v1::Task run_outcome_ ABSL_GUARDED_BY(mu_);
  int run_outcome_logs_calls_ ABSL_GUARDED_BY(mu_) = 1;
  struct PendingOutcome {
    node::v1::Task outcome;
    int logs_calls_left = 0;
  };
  // By task id: what a task RunTask made becomes.
  std::map<std::string, PendingOutcome> pending_outcomes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<node::v1::TaskLogsResponse>> logs_
      ABSL_GUARDED_BY(mu_);
  struct StatsScript {
    std::vector<node::v1::TaskStatsResponse> samples;
    bool hold_open = false;
  };
  std::map<std::string, StatsScript> stats_ ABSL_GUARDED_BY(mu_);
  node::v1::GetNodeStatusResponse node_status_ ABSL_GUARDED_BY(mu_);
  std::vector<node::v1::EventsResponse> events_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, grpc::Status> failures_ ABSL_GUARDED_BY(mu_);
  ExecHandler exec_handler_ ABSL_GUARDED_BY(mu_);
  std::vector<driver::v1::ExecTaskStreamingResponse> exec_output_
      ABSL_GUARDED_BY(mu_);
  driver::v1::ExitResult exec_exit_ ABSL_GUARDED_BY(mu_);

  std::vector<node::v1::RunTaskRequest> run_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<node::v1::ListTasksRequest> list_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<node::v1::StopTaskRequest> stop_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<node::v1::RemoveTaskRequest> remove_requests_
      ABSL_GUARDED_BY(mu_);
  std::vector<node::v1::TaskLogsRequest> logs_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<node::v1::TaskStatsRequest> stats_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<driver::v1::ExecTaskStreamingRequest> exec_requests_
      ABSL_GUARDED_BY(mu_);
  bool exec_half_closed_ ABSL_GUARDED_BY(mu_) = false;
  AttachHandler attach_handler_ ABSL_GUARDED_BY(mu_);
  std::vector<driver::v1::AttachTaskResponse> attach_output_
      ABSL_GUARDED_BY(mu_);
  driver::v1::ExitResult attach_exit_ ABSL_GUARDED_BY(mu_);
  std::vector<driver::v1::AttachTaskRequest> attach_requests_
      ABSL_GUARDED_BY(mu_);
  bool attach_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool end_held_streams_ ABSL_GUARDED_BY(mu_) = false;
};

class FakeImageService final : public image::v1::ImageService::Service {
 public:
  // --- Script.

  // An image in the store, found by its name, by a short name that
  // normalises to it ("busybox" for docker.io/library/busybox:latest), by
  // its digest or by a prefix of its config digest's hex.
  void AddImage(const image::v1::Image& image) ABSL_LOCKS_EXCLUDED(mu_);
  // What PullImage of `reference` sends; the image of the last message is
  // stored then. A reference without a script is NOT_FOUND.
  void SetPull(const std::string& reference,
               std::vector<image::v1::PullImageProgress> messages)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After its messages PullImage waits until the caller cancels.
  void HoldPullsOpen() ABSL_LOCKS_EXCLUDED(mu_);
  // What ImportImage answers (its images are stored).
  void SetImportResponse(const image::v1::ImportImageResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What PruneImages answers.
  void SetPruneResponse(const image::v1::PruneImagesResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every call of `method` ("PullImage", "RemoveImage", ...) fails with
  // `status`.
  void FailCalls(const std::string& method, const grpc::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);

  // --- What was asked.

  std::vector<image::v1::PullImageRequest> pull_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  // A held pull ended because the caller cancelled it.
  bool pull_cancelled() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<image::v1::InspectImageRequest> inspect_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The first message of the last import, and the sizes of its chunks.
  image::v1::ImportImageRequest import_first() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<size_t> import_chunk_sizes() const ABSL_LOCKS_EXCLUDED(mu_);
  // The bytes the last import sent.
  std::string import_data() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<image::v1::RemoveImageRequest> remove_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<image::v1::TagImageRequest> tag_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<image::v1::PruneImagesRequest> prune_requests() const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<image::v1::Image> images() const ABSL_LOCKS_EXCLUDED(mu_);

  // --- ImageService.

  grpc::Status PullImage(
      grpc::ServerContext* context, const image::v1::PullImageRequest* request,
      grpc::ServerWriter<image::v1::PullImageProgress>* writer) override;
  grpc::Status ImportImage(
      grpc::ServerContext* context,
      grpc::ServerReader<image::v1::ImportImageRequest>* reader,
      image::v1::ImportImageResponse* response) override;
  grpc::Status ListImages(grpc::ServerContext* context,
                          const image::v1::ListImagesRequest* request,
                          image::v1::ListImagesResponse* response) override;
  grpc::Status InspectImage(grpc::ServerContext* context,
                            const image::v1::InspectImageRequest* request,
                            image::v1::InspectImageResponse* response) override;
  grpc::Status RemoveImage(grpc::ServerContext* context,
                           const image::v1::RemoveImageRequest* request,
                           image::v1::RemoveImageResponse* response) override;
  grpc::Status TagImage(grpc::ServerContext* context,
                        const image::v1::TagImageRequest* request,
                        image::v1::TagImageResponse* response) override;
  grpc::Status PruneImages(grpc::ServerContext* context,
                           const image::v1::PruneImagesRequest* request,
                           image::v1::PruneImagesResponse* response) override;

 private:
  grpc::Status Failure(const std::string& method) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The stored image `reference` names; nullptr if none.
  image::v1::Image* Find(const std::string& reference)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `image`, replacing one of the same name.
  void Store(const image::v1::Image& image) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<image::v1::Image> images_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<image::v1::PullImageProgress>> pulls_
      ABSL_GUARDED_BY(mu_);
  bool hold_pulls_ ABSL_GUARDED_BY(mu_) = false;
  bool pull_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  image::v1::ImportImageResponse import_response_ ABSL_GUARDED_BY(mu_);
  image::v1::PruneImagesResponse prune_response_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, grpc::Status> failures_ ABSL_GUARDED_BY(mu_);

  std::vector<image::v1::PullImageRequest> pull_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<image::v1::InspectImageRequest> inspect_requests_
      ABSL_GUARDED_BY(mu_);
  image::v1::ImportImageRequest import_first_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> import_chunk_sizes_ ABSL_GUARDED_BY(mu_);
  std::string import_data_ ABSL_GUARDED_BY(mu_);
  std::vector<image::v1::RemoveImageRequest> remove_requests_
      ABSL_GUARDED_BY(mu_);
  std::vector<image::v1::TagImageRequest> tag_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<image::v1::PruneImagesRequest> prune_requests_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::cli::testing

#endif  // SERVICES_NODE_CLI_FAKE_NODE_SERVICE_H_
