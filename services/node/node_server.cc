#include "services/node/node_server.h"

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/io.h"
#include "berth/network/v1/network.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "services/common/dial.h"
#include "services/node/orphans.h"

namespace berth::node {

namespace {

// Removes the cgroups (and their processes) under the plugins' cgroup
// parents, and the shims, of tasks `store` has no record of. Logs what it
// removes and what it cannot; the node starts either way.
void RemoveOrphanTasks(TaskStore& store, const std::vector<PluginSpec>& plugins,
                       const std::string& state_dir) {
  absl::StatusOr<std::vector<internal::TaskRecord>> records = store.List();
  if (!records.ok()) {
    LOG(ERROR) << "not looking for orphan tasks: " << records.status();
    return;
  }
  std::set<std::string> known;
  for (const internal::TaskRecord& record : *records) {
    known.insert(record.task().id());
  }
  std::vector<std::string> parents;
  for (const PluginSpec& plugin : plugins) {
    for (std::string& parent : CgroupParentsOf(plugin.args)) {
      parents.push_back(std::move(parent));
    }
  }
  const std::vector<pid_t> shims =
      KillOrphanShims(absl::StrCat(state_dir, "/tasks"), known);
  if (parents.empty()) return;
  absl::StatusOr<std::string> mountinfo =
      base::ReadFile("/proc/self/mountinfo");
  if (!mountinfo.ok()) {
    LOG(ERROR) << "not looking for orphan tasks: " << mountinfo.status();
    return;
  }
  absl::StatusOr<OrphanTasksRemoved> removed =
      RemoveOrphanTaskCgroups(CgroupMountPoints(*mountinfo), parents, known);
  if (!removed.ok()) {
    LOG(ERROR) << removed.status().message();
  } else if (!removed->tasks.empty() || !shims.empty()) {
    LOG(WARNING) << "removed " << removed->tasks.size()
                 << " tasks this node has no record of (its state is gone?): "
                 << absl::StrJoin(removed->tasks, ", ") << "; killed "
                 << removed->processes_killed << " of their processes and "
                 << shims.size() << " shims";
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeServer>> NodeServer::BuildAndStart(
    Options options) {
  auto node = std::unique_ptr<NodeServer>(new NodeServer());
  node->grace_ = options.grace;
  const std::string state_dir = absl::StrCat(options.state_dir, "/node");
  if (absl::Status s = MakeStateDir(state_dir); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<TaskStore>> store =
      TaskStore::Open(absl::StrCat(state_dir, "/state.db"));
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  // What is left of tasks the store does not know (a wiped state directory
  // under running plugins and tasks): removed before anything starts.
  RemoveOrphanTasks(*node->store_, options.plugins, state_dir);

  node->events_ = std::make_unique<EventBus>();
  absl::StatusOr<std::unique_ptr<IdRangeAllocator>> id_ranges =
      IdRangeAllocator::Create(options.id_ranges);
  if (!id_ranges.ok()) return id_ranges.status();
  node->id_ranges_ = *std::move(id_ranges);

  if (!options.images_socket.empty()) {
    ImagesClient::Options images;
    images.socket = options.images_socket;
    images.connect_wait = options.images_connect_wait;
    node->images_ = std::make_unique<ImagesClient>(std::move(images));
  }

  PluginManager::Options plugin_options = options.plugin_options;
  plugin_options.socket_dir = absl::StrCat(options.runtime_dir, "/plugins");
  plugin_options.store = node->store_.get();
  plugin_options.node.set_node_id(options.node_id);
  plugin_options.node.set_runtime_dir(options.runtime_dir);
  plugin_options.node.set_state_dir(options.state_dir);
  plugin_options.node.set_stats_socket(options.stats_socket);
  plugin_options.node.set_proxy_socket(options.proxy_socket);
  node->plugins_ = std::make_unique<PluginManager>(std::move(plugin_options),
                                                   std::move(options.plugins));

  TaskManager::Options task_options = options.task_options;
  task_options.state_dir = state_dir;
  task_options.netns_socket = options.netns_socket;
  task_options.id_ranges = node->id_ranges_.get();
  task_options.images = node->images_.get();
  task_options.protected_dirs = {options.runtime_dir, options.state_dir};
  node->tasks_ =
      std::make_unique<TaskManager>(std::move(task_options), node->store_.get(),
                                    node->plugins_.get(), node->events_.get());
  EventBus* events = node->events_.get();
  node->plugins_->Start(
      [events](const std::string& name) {
        events->Publish(v1::EVENT_TYPE_NODE, "",
                        absl::StrCat("plugin ", name, " is up"));
      },
      [events](const std::string& name,
               const driver::v1::TaskEventsResponse& event) {
        events->Publish(v1::EVENT_TYPE_DRIVER, event.task_id(),
                        absl::StrCat(name, ": ", event.message()));
      });
  if (absl::Status s = node->tasks_->Recover(); !s.ok()) return s;
  if (!options.netns_socket.empty()) {
    NodeServer* self = node.get();
    node->network_reconciler_ =
        std::thread([self, socket = options.netns_socket] {
          self->ReconcileNetworks(socket);
        });
  }

  node->streams_ =
      std::make_unique<StreamLimiter>(options.max_streams_per_client);
  NodeServiceImpl::Options service_options;
  service_options.streams = node->streams_.get();
  service_options.version = options.version;
  service_options.stats_socket = options.stats_socket;
  service_options.proxy_socket = options.proxy_socket;
  service_options.images = node->images_.get();
  node->service_ = std::make_unique<NodeServiceImpl>(
      service_options, node->tasks_.get(), node->plugins_.get(),
      node->events_.get());
  UnixGrpcServer::Options server_options;
  server_options.socket_path = absl::StrCat(options.runtime_dir, "/node.sock");
  server_options.services = {node->service_.get()};
  server_options.access = options.socket_access;
  server_options.max_message_bytes = options.max_message_bytes;
  if (node->images_ != nullptr) {
    TaskManager* tasks = node->tasks_.get();
    node->image_forwarder_ = std::make_unique<ImageForwarder>(
        node->images_.get(),
        [tasks](const std::string& id) { return tasks->IsTask(id); },
        node->streams_.get());
    server_options.services.push_back(node->image_forwarder_.get());
  }
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start(server_options);
  if (!server.ok()) return server.status();
  node->server_ = *std::move(server);
  node->socket_path_ = server_options.socket_path;
  LOG(INFO) << "serving on " << node->socket_path_ << "; state in "
            << state_dir;
  return node;
}

NodeServer::~NodeServer() { Shutdown(); }

void NodeServer::ReconcileNetworks(const std::string& socket) {
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      absl::StrCat("unix:", socket), grpc::InsecureChannelCredentials(),
      UnixChannelArguments());
  std::unique_ptr<network::v1::NetworkService::Stub> stub =
      network::v1::NetworkService::NewStub(channel);
  while (!stop_reconciling_.HasBeenNotified()) {
    grpc::ClientContext context;
    // In slices of a second: a node shutting down meanwhile is held no
    // longer.
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    context.set_wait_for_ready(true);
    network::v1::ListNetworksResponse listed;
    const grpc::Status s = stub->ListNetworks(
        &context, network::v1::ListNetworksRequest(), &listed);
    if (!s.ok()) {
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
          s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        LOG(WARNING) << "cannot list berth-netns' networks: "
                     << s.error_message() << "; trying again";
        stop_reconciling_.WaitForNotificationWithTimeout(absl::Seconds(5));
      }
      continue;
    }
    int removed = 0;
    for (const network::v1::NetworkStatus& network : listed.networks()) {
      const std::string& id = network.allocation_id();
      // A task made after the list has no network in it: each task is known
      // before its Prerun.
      if (id.empty() || tasks_->IsTask(id)) continue;
      if (stop_reconciling_.HasBeenNotified()) return;
      grpc::ClientContext postrun_context;
      postrun_context.set_deadline(
          absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      network::v1::PostrunRequest request;
      request.set_allocation_id(id);
      network::v1::PostrunResponse response;
      if (const grpc::Status p =
              stub->Postrun(&postrun_context, request, &response);
          !p.ok()) {
        LOG(WARNING) << "cannot remove the network of allocation " << id
                     << ", which is no task of this node: "
                     << p.error_message();
        continue;
      }
      LOG(INFO) << "removed the network of allocation " << id
                << ", which is no task of this node";
      ++removed;
    }
    LOG(INFO) << "networks reconciled: " << listed.networks_size() << " found, "
              << removed << " removed";
    return;
  }
}

void NodeServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stop_reconciling_.Notify();
  if (network_reconciler_.joinable()) network_reconciler_.join();
  if (service_ != nullptr) service_->Shutdown();
  if (tasks_ != nullptr) tasks_->Shutdown();
  if (server_ != nullptr) server_->Shutdown(grace_);
  if (plugins_ != nullptr) plugins_->Stop();
}

}  // namespace berth::node
