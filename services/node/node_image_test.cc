// berth-node's image tasks in-process: a NodeServer with the real exec
// driver and a fake berth-images (an in-process ImageService on a socket of
// the test's) whose snapshots are directories holding a static busybox. A
// task runs in the snapshot prepared for it (its id, its reference) with the
// image's command, environment, working directory and user under the
// spec's; Task.image shows the image; the snapshot is released at removal
// and when the start fails, prepared again (the same one, mounted again if
// its mount went) by a restart, and released at the node's start when it is
// no task's; berth-images away fails image tasks only.
// And berth.image.v1.ImageService forwarded on node.sock: every call, the
// pull's and the import's streams, cancellation both ways.
//
// Root (the exec driver's namespaces, cgroups and mounts), outside Bazel's
// sandbox.

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/node/node_server.h"
#include "services/node/node_test_client.h"
#include "services/node/task_store.h"

namespace berth::node {
namespace {

namespace imagepb = ::berth::image::v1;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kBusybox[] = "/bin/busybox";
constexpr uint32_t kUsernsBase = 4200000;

// berth-images as the node sees it. Images are registered by the test,
// found by reference or manifest digest; a snapshot is
// <dir>/snapshots/<id>/rootfs, a root holding busybox and a file /snapshot
// naming its id. As berth-images does, a Prepare of an existing id checks
// its image and mappings and "mounts it again" when the test unmounted it
// (Unmount: its root moved aside, an empty directory left in its place).
class FakeImages final : public imagepb::ImageService::Service {
 public:
  explicit FakeImages(std::string dir) : dir_(std::move(dir)) {}

  void AddImage(const std::string& reference, imagepb::Image image) {
    absl::MutexLock lock(&mu_);
    images_[reference] = std::move(image);
  }
  void RemoveImage(const std::string& reference) {
    absl::MutexLock lock(&mu_);
    images_.erase(reference);
  }
  // As a host restart or an umount leaves snapshot `id`: an empty directory
  // where its root was. What its task runs on stays (moved aside, as an
  // overlay's upper stays), for a Prepare to put back.
  bool Unmount(const std::string& id) {
    const std::string rootfs = RootOf(id);
    return rename(rootfs.c_str(), (rootfs + ".unmounted").c_str()) == 0 &&
           mkdir(rootfs.c_str(), 0755) == 0;
  }
  int remounts() const {
    absl::MutexLock lock(&mu_);
    return remounts_;
  }
  // A snapshot berth-images has without the node asking.
  void AddSnapshot(const std::string& id) {
    absl::MutexLock lock(&mu_);
    imagepb::Snapshot& snapshot = snapshots_[id];
    snapshot.set_id(id);
    snapshot.set_rootfs(absl::StrCat(dir_, "/snapshots/", id, "/rootfs"));
    snapshot.set_image_name("docker.io/library/left:behind");
  }

  std::vector<std::pair<std::string, std::string>> prepared() const {
    absl::MutexLock lock(&mu_);
    return prepared_;
  }
  std::vector<imagepb::PrepareSnapshotRequest> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  std::vector<std::string> released() const {
    absl::MutexLock lock(&mu_);
    return released_;
  }
  std::set<std::string> snapshot_ids() const {
    absl::MutexLock lock(&mu_);
    std::set<std::string> ids;
    for (const auto& [id, snapshot] : snapshots_) ids.insert(id);
    return ids;
  }
  bool pull_cancelled() const {
    absl::MutexLock lock(&mu_);
    return pull_cancelled_;
  }
  bool import_cancelled() const {
    absl::MutexLock lock(&mu_);
    return import_cancelled_;
  }
  // Imports whose first message came, and those that stored an image.
  int imports_begun() const {
    absl::MutexLock lock(&mu_);
    return imports_begun_;
  }
  int imports_completed() const {
    absl::MutexLock lock(&mu_);
    return imports_completed_;
  }

  grpc::Status PrepareSnapshot(
      grpc::ServerContext*, const imagepb::PrepareSnapshotRequest* request,
      imagepb::PrepareSnapshotResponse* response) override {
    absl::MutexLock lock(&mu_);
    prepared_.emplace_back(request->id(), request->reference());
    requests_.push_back(*request);
    auto image = images_.find(request->reference());
    for (auto it = images_.begin();
         image == images_.end() && it != images_.end(); ++it) {
      if (it->second.manifest_digest() == request->reference()) image = it;
    }
    if (image == images_.end()) {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          absl::StrCat("no image ", request->reference(), " in the store"));
    }
    if (auto existing = snapshots_.find(request->id());
        existing != snapshots_.end()) {
      return PrepareExisting(existing->second, *request, image->second,
                             response);
    }
    const std::string rootfs = RootOf(request->id());
    if (!MakeRoot(rootfs, request->id())) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "cannot make " + rootfs);
    }
    // Idmapped as berth-images' idmapped layers show it: what root owns is
    // the namespace's root's (container id 0's host ids).
    if (!request->uid_mappings().empty() &&
        std::system(
            absl::StrCat("chown -R ", request->uid_mappings(0).host_id(), ":",
                         request->gid_mappings(0).host_id(), " '", rootfs, "'")
                .c_str()) != 0) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "cannot chown " + rootfs);
    }
    imagepb::Snapshot& snapshot = snapshots_[request->id()];
    snapshot.set_id(request->id());
    snapshot.set_rootfs(rootfs);
    snapshot.set_image_name(image->second.name());
    snapshot.set_manifest_digest(image->second.manifest_digest());
    *snapshot.mutable_uid_mappings() = request->uid_mappings();
    *snapshot.mutable_gid_mappings() = request->gid_mappings();
    response->set_rootfs(rootfs);
    *response->mutable_image() = image->second;
    return grpc::Status::OK;
  }
  grpc::Status ReleaseSnapshot(grpc::ServerContext*,
                               const imagepb::ReleaseSnapshotRequest* request,
                               imagepb::ReleaseSnapshotResponse*) override {
    absl::MutexLock lock(&mu_);
    released_.push_back(request->id());
    snapshots_.erase(request->id());
    const std::string dir = absl::StrCat(dir_, "/snapshots/", request->id());
    if (PathExists(dir)) {
      std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
    }
    return grpc::Status::OK;
  }
  grpc::Status ListSnapshots(
      grpc::ServerContext*, const imagepb::ListSnapshotsRequest*,
      imagepb::ListSnapshotsResponse* response) override {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, snapshot] : snapshots_) {
      *response->add_snapshots() = snapshot;
    }
    return grpc::Status::OK;
  }

  // "slow": one message, then waits for the caller to go away. "fail": one
  // message, then ABORTED. Else three messages, the image on the last.
  grpc::Status PullImage(
      grpc::ServerContext* context, const imagepb::PullImageRequest* request,
      grpc::ServerWriter<imagepb::PullImageProgress>* writer) override {
    imagepb::PullImageProgress progress;
    progress.set_status(absl::StrCat("resolving ", request->reference()));
    writer->Write(progress);
    if (request->reference() == "slow") {
      while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(10));
      absl::MutexLock lock(&mu_);
      pull_cancelled_ = true;
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    if (request->reference() == "fail") {
      return grpc::Status(grpc::StatusCode::ABORTED, "the registry went away");
    }
    for (int i = 1; i <= 2; ++i) {
      progress.Clear();
      imagepb::LayerProgress* layer = progress.add_layers();
      layer->set_digest("sha256:layer");
      layer->set_size(2);
      layer->set_downloaded(i);
      if (i == 2) progress.mutable_image()->set_name(request->reference());
      writer->Write(progress);
    }
    return grpc::Status::OK;
  }

  // Counts the bytes (the first message has the options).
  grpc::Status ImportImage(
      grpc::ServerContext* context,
      grpc::ServerReader<imagepb::ImportImageRequest>* reader,
      imagepb::ImportImageResponse* response) override {
    imagepb::ImportImageRequest message;
    std::string name;
    int64_t bytes = 0;
    while (reader->Read(&message)) {
      if (message.has_options()) {
        name = message.options().name();
        absl::MutexLock lock(&mu_);
        ++imports_begun_;
      }
      bytes += static_cast<int64_t>(message.chunk().size());
    }
    absl::MutexLock lock(&mu_);
    if (context->IsCancelled()) {
      import_cancelled_ = true;
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    ++imports_completed_;
    imagepb::Image* image = response->add_images();
    image->set_name(name);
    image->set_size(bytes);
    return grpc::Status::OK;
  }

  grpc::Status ListImages(grpc::ServerContext*,
                          const imagepb::ListImagesRequest* request,
                          imagepb::ListImagesResponse* response) override {
    response->add_images()->set_name(request->name_prefix() + "listed");
    return grpc::Status::OK;
  }
  grpc::Status InspectImage(grpc::ServerContext*,
                            const imagepb::InspectImageRequest* request,
                            imagepb::InspectImageResponse* response) override {
    absl::MutexLock lock(&mu_);
    auto image = images_.find(request->reference());
    if (image == images_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no image ", request->reference()));
    }
    *response->mutable_image() = image->second;
    return grpc::Status::OK;
  }
  grpc::Status RemoveImage(grpc::ServerContext*,
                           const imagepb::RemoveImageRequest* request,
                           imagepb::RemoveImageResponse* response) override {
    response->add_untagged(absl::StrCat(request->reference(),
                                        request->force() ? " (forced)" : ""));
    return grpc::Status::OK;
  }
  grpc::Status TagImage(grpc::ServerContext*,
                        const imagepb::TagImageRequest* request,
                        imagepb::TagImageResponse* response) override {
    response->mutable_image()->set_name(request->target());
    response->mutable_image()->add_other_names(request->source());
    return grpc::Status::OK;
  }
  grpc::Status PruneImages(grpc::ServerContext*,
                           const imagepb::PruneImagesRequest* request,
                           imagepb::PruneImagesResponse* response) override {
    response->set_reclaimed_bytes(request->all() ? 2048 : 1024);
    return grpc::Status::OK;
  }

 private:
  std::string RootOf(const std::string& id) const {
    return absl::StrCat(dir_, "/snapshots/", id, "/rootfs");
  }

  // A Prepare of `snapshot`, which exists: of its image and mappings only
  // (as berth-images: ALREADY_EXISTS, FAILED_PRECONDITION), its root put
  // back if the test unmounted it.
  grpc::Status PrepareExisting(const imagepb::Snapshot& snapshot,
                               const imagepb::PrepareSnapshotRequest& request,
                               const imagepb::Image& image,
                               imagepb::PrepareSnapshotResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (snapshot.manifest_digest() != image.manifest_digest()) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                          absl::StrCat("snapshot ", snapshot.id(),
                                       " exists, of another image"));
    }
    if (snapshot.uid_mappings_size() != request.uid_mappings_size() ||
        (request.uid_mappings_size() > 0 &&
         snapshot.uid_mappings(0).host_id() !=
             request.uid_mappings(0).host_id())) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("snapshot ", snapshot.id(),
                                       " exists with other id mappings"));
    }
    const std::string unmounted = snapshot.rootfs() + ".unmounted";
    if (PathExists(unmounted)) {
      if (rmdir(snapshot.rootfs().c_str()) != 0 ||
          rename(unmounted.c_str(), snapshot.rootfs().c_str()) != 0) {
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            "cannot mount " + snapshot.rootfs() + " again");
      }
      ++remounts_;
    }
    response->set_rootfs(snapshot.rootfs());
    *response->mutable_image() = image;
    return grpc::Status::OK;
  }

  // A root with busybox, its applets, and /snapshot naming `id`.
  static bool MakeRoot(const std::string& rootfs, const std::string& id) {
    if (PathExists(rootfs)) return true;
    const std::string command = absl::StrCat(
        "set -e; mkdir -p '", rootfs, "/bin' '", rootfs, "/etc'; cp ", kBusybox,
        " '", rootfs, "/bin/busybox'; for a in sh cat id wc ls ",
        "true sleep env pwd; do ln -s busybox '", rootfs, "/bin/'$a; done; ",
        "echo 'snapshot ", id, "' > '", rootfs, "/snapshot'");
    return std::system(command.c_str()) == 0;
  }

  const std::string dir_;
  mutable absl::Mutex mu_;
  std::map<std::string, imagepb::Image> images_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, imagepb::Snapshot> snapshots_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> prepared_
      ABSL_GUARDED_BY(mu_);
  std::vector<imagepb::PrepareSnapshotRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> released_ ABSL_GUARDED_BY(mu_);
  bool pull_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool import_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int imports_begun_ ABSL_GUARDED_BY(mu_) = 0;
  int imports_completed_ ABSL_GUARDED_BY(mu_) = 0;
  int remounts_ ABSL_GUARDED_BY(mu_) = 0;
};

imagepb::Image Image(const std::string& name,
                     std::vector<std::string> entrypoint,
                     std::vector<std::string> cmd) {
  imagepb::Image image;
  image.set_name(name);
  // Digests of the image's own (a restart prepares its snapshot by the
  // manifest's).
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016zx", std::hash<std::string>()(name));
  image.set_digest(absl::StrCat("sha256:", std::string(48, 'a'), hash));
  image.set_manifest_digest(
      absl::StrCat("sha256:", std::string(48, 'b'), hash));
  image.set_config_digest(absl::StrCat("sha256:", std::string(48, 'c'), hash));
  for (const std::string& part : entrypoint) {
    image.mutable_config()->add_entrypoint(part);
  }
  for (const std::string& part : cmd) image.mutable_config()->add_cmd(part);
  image.mutable_config()->add_env("PATH=/bin");
  return image;
}

class NodeImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root (the exec driver's namespaces and cgroups)";
    }
    if (!PathExists(kBusybox)) {
      GTEST_SKIP() << kBusybox << " is missing (Debian's busybox-static)";
    }
    UnixGrpcServer::Options options;
    options.socket_path = dir_.Join("images.sock");
    options.services = {&images_};
    auto server = UnixGrpcServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    images_server_ = *std::move(server);
  }

  void TearDown() override {
    if (node_ != nullptr) {
      for (const v1::Task& task : List()) (void)Remove(task.id(), true);
    }
    StopNode();
    if (images_server_ != nullptr) images_server_->Shutdown(absl::Seconds(1));
    for (const char* hierarchy :
         {"cpu", "cpuacct", "memory", "pids", "freezer", "devices",
          "cpu,cpuacct", "blkio", "cpuset", "unified", ""}) {
      rmdir(absl::StrCat("/sys/fs/cgroup/", hierarchy, "/", cgroup_parent_)
                .c_str());
    }
  }

  void StartNode(std::string images_socket = "") {
    NodeServer::Options options;
    options.runtime_dir = dir_.Join("run");
    options.state_dir = dir_.Join("state");
    PluginSpec exec;
    exec.name = "exec";
    exec.binary = RunfilePath("services/driver/exec/berth-driver-exec");
    // berth-task-init is found in the test's runfiles (TEST_SRCDIR).
    exec.args = {absl::StrCat("--cgroup_parent=/", cgroup_parent_)};
    options.plugins = {exec};
    options.images_socket =
        images_socket.empty() ? dir_.Join("images.sock") : images_socket;
    options.images_connect_wait = absl::Milliseconds(500);
    // For userns "auto": host ids no file here owns.
    options.id_ranges.base = kUsernsBase;
    options.id_ranges.count = 4 * 65536;
    options.node_id = "test";
    options.version = "test";
    options.plugin_options.min_backoff = absl::Milliseconds(50);
    options.grace = absl::Seconds(1);
    options.max_streams_per_client = max_streams_per_client_;
    auto node = NodeServer::BuildAndStart(std::move(options));
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = *std::move(node);
    auto channel =
        grpc::CreateChannel(absl::StrCat("unix:", node_->socket_path()),
                            grpc::InsecureChannelCredentials());
    stub_ = v1::NodeService::NewStub(channel);
    image_stub_ = imagepb::ImageService::NewStub(channel);
    ASSERT_TRUE(WaitFor([this] {
      for (const v1::ComponentStatus& status : node_->plugins().Status()) {
        if (status.name() == "exec" && status.healthy()) return true;
      }
      return false;
    })) << "the exec driver did not come up";
  }

  void StopNode() {
    stub_.reset();
    image_stub_.reset();
    if (node_ != nullptr) node_->Shutdown();
    node_.reset();
  }

  static v1::TaskSpec ImageSpec(const std::string& reference,
                                const std::string& script = "") {
    v1::TaskSpec spec = testing::ShellSpec("exec", script);
    spec.mutable_image()->set_reference(reference);
    // Without a script: the image's command.
    if (script.empty()) spec.clear_driver_config();
    return spec;
  }

  absl::StatusOr<v1::Task> Run(const v1::TaskSpec& spec) {
    return testing::RunTask(*stub_, spec);
  }
  // Runs `spec` restarted on failure up to `attempts` times, calls
  // `started` with the task's id, and waits until it has been restarted and
  // has exited.
  absl::StatusOr<v1::Task> RunRestarting(
      v1::TaskSpec spec, int attempts,
      const std::function<void(const std::string&)>& started = nullptr) {
    spec.mutable_restart()->set_mode(v1::RESTART_MODE_ON_FAILURE);
    spec.mutable_restart()->set_attempts(attempts);
    spec.mutable_restart()->mutable_delay()->set_nanos(10'000'000);
    absl::StatusOr<v1::Task> task = Run(spec);
    if (!task.ok()) return task;
    if (started) started(task->id());
    if (!WaitFor([&] {
          const v1::Task now = Inspect(task->id());
          return now.restarts() == static_cast<uint32_t>(attempts) &&
                 now.state() == v1::TASK_STATE_EXITED;
        })) {
      return absl::DeadlineExceededError(
          absl::StrCat("task ", task->id(), " was not restarted ", attempts,
                       " times: ", Inspect(task->id()).DebugString()));
    }
    return Inspect(task->id());
  }
  v1::Task Inspect(const std::string& id) {
    return testing::InspectTask(*stub_, id);
  }
  std::vector<v1::Task> List() { return testing::ListTasks(*stub_, true); }
  grpc::Status Remove(const std::string& id, bool force) {
    return testing::RemoveTask(*stub_, id, force);
  }

  // The task's output once it has exited.
  std::string Output(const std::string& id) {
    EXPECT_TRUE(WaitFor([&] {
      return Inspect(id).state() == v1::TASK_STATE_EXITED;
    })) << v1::TaskState_Name(Inspect(id).state());
    return ReadFileOrEmpty(node_->tasks().LogDir(id) + "/stdout.log");
  }

  std::string TaskCgroup(const std::string& id) const {
    return absl::StrCat("/sys/fs/cgroup/pids/", cgroup_parent_, "/", id);
  }

  const std::string cgroup_parent_ = absl::StrCat("berth-imgtest-", getpid());
  ShortTempDir dir_;
  FakeImages images_{dir_.path()};
  std::unique_ptr<UnixGrpcServer> images_server_;
  // --max_streams_per_client of the nodes StartNode starts.
  int max_streams_per_client_ = 64;
  std::unique_ptr<NodeServer> node_;
  std::unique_ptr<v1::NodeService::Stub> stub_;
  std::unique_ptr<imagepb::ImageService::Stub> image_stub_;
};

TEST_F(NodeImageTest, ATaskRunsOnItsSnapshotWithTheImagesConfiguration) {
  imagepb::Image image = Image("docker.io/library/demo:1", {"/bin/sh", "-c"},
                               {"echo default command"});
  image.mutable_config()->add_env("MODE=image");
  image.mutable_config()->add_env("FROM_IMAGE=yes");
  image.mutable_config()->set_working_dir("/work/dir");
  images_.AddImage("demo:1", image);
  StartNode();

  // The spec's command after the image's entrypoint; its env on top.
  v1::TaskSpec spec = ImageSpec("demo:1");
  (*spec.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      "echo $MODE $FROM_IMAGE $(pwd) $(id -u); cat /snapshot");
  (*spec.mutable_env())["MODE"] = "spec";
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string id = task->id();
  EXPECT_EQ(Output(id),
            absl::StrCat("spec yes /work/dir 0\nsnapshot ", id, "\n"));
  EXPECT_THAT(images_.prepared(), ElementsAre(std::pair(id, "demo:1")));
  const std::string rootfs =
      dir_.Join(absl::StrCat("snapshots/", id, "/rootfs"));
  const v1::Task shown = Inspect(id);
  EXPECT_EQ(shown.image().name(), "docker.io/library/demo:1");
  EXPECT_EQ(shown.image().digest(), image.digest());
  EXPECT_EQ(shown.image().manifest_digest(), image.manifest_digest());
  EXPECT_EQ(shown.image().config_digest(), image.config_digest());
  EXPECT_EQ(shown.image().rootfs(), rootfs);
  EXPECT_TRUE(PathExists(rootfs + "/work/dir"));

  // Without a command of its own: the image's Cmd.
  absl::StatusOr<v1::Task> plain = Run(ImageSpec("demo:1"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(Output(plain->id()), "default command\n");

  // Removed: its snapshot is released; the other's stays.
  ASSERT_TRUE(Remove(id, false).ok());
  EXPECT_THAT(images_.released(), ElementsAre(id));
  EXPECT_FALSE(PathExists(rootfs));
  EXPECT_THAT(images_.snapshot_ids(), ElementsAre(plain->id()));
}

TEST_F(NodeImageTest, TheTaskGetsItsOwnHostsHostnameAndResolvConf) {
  // busybox's root has no /etc/hosts, /etc/hostname nor /etc/resolv.conf:
  // the driver makes the mount points.
  images_.AddImage("etc:1", Image("docker.io/library/etc:1", {}, {}));
  StartNode();
  v1::TaskSpec spec = ImageSpec(
      "etc:1",
      "cat /etc/hostname; grep db.internal /etc/hosts; hostname; "
      "grep -c localhost /etc/hosts; grep nameserver /etc/resolv.conf; "
      "grep search /etc/resolv.conf; echo mine > /etc/hosts && cat /etc/hosts");
  spec.set_hostname("box");
  v1::HostEntry* db = spec.add_extra_hosts();
  db->set_hostname("db.internal");
  db->set_ip("192.0.2.10");
  spec.mutable_network()->mutable_dns()->add_servers("192.0.2.53");
  spec.mutable_network()->mutable_dns()->add_searches("example.test");
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(Output(task->id()),
            "box\n192.0.2.10\tdb.internal\nbox\n2\nnameserver 192.0.2.53\n"
            "search example.test\nmine\n");
  // Read-write, and the node's, in the task directory (not the image's).
  EXPECT_EQ(ReadFileOrEmpty(dir_.Join(
                absl::StrCat("state/node/tasks/", task->id(), "/etc/hosts"))),
            "mine\n");

  // Without a host name of its own: its name, made a host name.
  v1::TaskSpec named = ImageSpec("etc:1", "hostname; cat /etc/hostname");
  named.set_name("web_1");
  task = Run(named);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(Output(task->id()), "web-1\nweb-1\n");
}

TEST_F(NodeImageTest, StopSendsTheImagesStopSignalWhenNoneIsGiven) {
  imagepb::Image image = Image("docker.io/library/quit:1", {}, {});
  image.mutable_config()->set_stop_signal("SIGQUIT");
  images_.AddImage("quit:1", image);
  StartNode();
  absl::StatusOr<v1::Task> task = Run(
      ImageSpec("quit:1", "trap 'exit 9' QUIT; while :; do sleep 0.05; done"));
  ASSERT_TRUE(task.ok()) << task.status();
  v1::StopTaskRequest request;
  request.set_task_id(task->id());
  v1::StopTaskResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->StopTask(&context, request, &response).ok());
  // SIGQUIT reached the shell: its trap ran (exit 9), or, when the stop
  // came before the shell had set the trap, the signal killed it. SIGTERM,
  // the default, would have killed it with 15.
  const driver::v1::ExitResult& exit = response.task().exit_result();
  EXPECT_TRUE((exit.exit_code() == 9 && exit.signal() == 0) ||
              exit.signal() == SIGQUIT)
      << response.task().DebugString();
}

TEST_F(NodeImageTest, AttachJoinsAnInteractiveTasksStdinAndOutput) {
  images_.AddImage("cat:1", Image("docker.io/library/cat:1", {}, {}));
  StartNode();
  v1::TaskSpec spec = ImageSpec("cat:1", "echo ready; exec cat");
  spec.set_name("cat");
  spec.set_stdin_open(true);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<driver::v1::AttachTaskRequest,
                                           driver::v1::AttachTaskResponse>>
      stream = stub_->AttachTask(&context);
  driver::v1::AttachTaskRequest request;
  request.mutable_setup()->set_task_id("cat");
  request.mutable_setup()->set_stdin(true);
  ASSERT_TRUE(stream->Write(request));
  request.set_stdin("hi\n");
  ASSERT_TRUE(stream->Write(request));
  request.mutable_stdin_close();
  ASSERT_TRUE(stream->Write(request));
  // What it wrote before the first attach, then the echo, then its exit.
  std::string output;
  std::optional<driver::v1::ExitResult> exit;
  driver::v1::AttachTaskResponse response;
  while (stream->Read(&response)) {
    EXPECT_FALSE(exit.has_value()) << "a frame after the exit";
    if (response.has_exit()) exit = response.exit();
    output += response.stdout();
  }
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(output, "ready\nhi\n");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code(), 0);
  EXPECT_EQ(Output(task->id()), "ready\nhi\n");
}

TEST_F(NodeImageTest, TheImagesUserUnlessTheSpecGivesOne) {
  imagepb::Image image = Image("docker.io/library/user:1", {}, {});
  image.mutable_config()->set_user("1234:2345");
  images_.AddImage("user:1", image);
  StartNode();
  absl::StatusOr<v1::Task> task = Run(ImageSpec("user:1", "id -u; id -g"));
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(Output(task->id()), "1234\n2345\n");

  v1::TaskSpec spec = ImageSpec("user:1", "id -u; id -g");
  spec.set_user("4321:5432");
  task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(Output(task->id()), "4321\n5432\n");
}

TEST_F(NodeImageTest, AnImageWithoutACommandIsRefusedAndReleased) {
  images_.AddImage("empty:1", Image("docker.io/library/empty:1", {}, {}));
  StartNode();
  absl::StatusOr<v1::Task> task = Run(ImageSpec("empty:1"));
  ASSERT_FALSE(task.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(task.status())) << task.status();
  EXPECT_THAT(task.status().message(),
              HasSubstr("spec.image: image \"empty:1\" has no command: give "
                        "one"));
  ASSERT_EQ(images_.prepared().size(), 1u);
  EXPECT_THAT(images_.released(), ElementsAre(images_.prepared()[0].first));
  EXPECT_TRUE(images_.snapshot_ids().empty());
}

TEST_F(NodeImageTest, AnImageNotInTheStoreFailsTheStartLeavingNothing) {
  StartNode();
  absl::StatusOr<v1::Task> task = Run(ImageSpec("nosuch:1", "true"));
  ASSERT_FALSE(task.ok());
  EXPECT_TRUE(absl::IsNotFound(task.status())) << task.status();
  EXPECT_THAT(task.status().message(),
              HasSubstr("image \"nosuch:1\": not found in the image store; "
                        "pull it first: berth image pull nosuch:1"));
  ASSERT_EQ(images_.prepared().size(), 1u);
  const std::string id = images_.prepared()[0].first;
  const v1::Task failed = Inspect(id);
  EXPECT_EQ(failed.state(), v1::TASK_STATE_FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("nosuch:1"));
  EXPECT_TRUE(images_.snapshot_ids().empty());
  EXPECT_FALSE(PathExists(TaskCgroup(id)));
  EXPECT_FALSE(PathExists(node_->tasks().LogDir(id)));
}

TEST_F(NodeImageTest, AStartTheDriverRefusesReleasesTheSnapshot) {
  images_.AddImage("broken:1", Image("docker.io/library/broken:1",
                                     {"/no/such/program"}, {}));
  StartNode();
  absl::StatusOr<v1::Task> task = Run(ImageSpec("broken:1"));
  ASSERT_FALSE(task.ok());
  EXPECT_THAT(task.status().message(), HasSubstr("/no/such/program"));
  ASSERT_EQ(images_.prepared().size(), 1u);
  const std::string id = images_.prepared()[0].first;
  EXPECT_THAT(images_.released(), ElementsAre(id));
  EXPECT_TRUE(images_.snapshot_ids().empty());
  EXPECT_FALSE(PathExists(TaskCgroup(id)));
  // The record keeps which image it was, not a root that is gone.
  EXPECT_EQ(Inspect(id).image().name(), "docker.io/library/broken:1");
  EXPECT_EQ(Inspect(id).image().rootfs(), "");
  // Removing it asks berth-images again, which does not mind.
  EXPECT_TRUE(Remove(id, false).ok());
}

// A restart keeps the container's writable layer, as docker does: the runs
// write to the same snapshot, which each run prepares (the first by the
// spec's reference, the restarts by the image's manifest digest: the
// reference may name another image by then).
TEST_F(NodeImageTest, ARestartReusesTheSnapshot) {
  const imagepb::Image image = Image("docker.io/library/count:1", {}, {});
  images_.AddImage("count:1", image);
  StartNode();
  absl::StatusOr<v1::Task> task = RunRestarting(
      ImageSpec("count:1", "echo run >> /runs; wc -l < /runs; exit 1"), 2);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(absl::StripAsciiWhitespace(Output(task->id())), "3");
  const std::string& id = task->id();
  EXPECT_THAT(images_.prepared(),
              ElementsAre(std::pair(id, "count:1"),
                          std::pair(id, image.manifest_digest()),
                          std::pair(id, image.manifest_digest())));
  EXPECT_EQ(images_.remounts(), 0);
  EXPECT_TRUE(images_.released().empty());
  EXPECT_EQ(Inspect(id).image().name(), "docker.io/library/count:1");
}

// A snapshot whose mount went while its task ran (a host restart, an
// umount: an empty directory where its root was) is mounted again by
// berth-images when the restart prepares it, with what the first run wrote;
// a restart that only looked the snapshot up would run on the empty
// directory.
TEST_F(NodeImageTest, ARestartMountsAVanishedSnapshotAgain) {
  images_.AddImage("again:1", Image("docker.io/library/again:1", {}, {}));
  StartNode();
  // The first run waits for /go and fails; the second shows both runs.
  absl::StatusOr<v1::Task> task = RunRestarting(
      ImageSpec("again:1",
                "echo run >> /runs; if [ $(wc -l < /runs) -eq 1 ]; then "
                "while [ ! -e /go ]; do sleep 0.05; done; exit 1; fi; "
                "cat /runs"),
      1, [&](const std::string& id) {
        const std::string rootfs = dir_.Join("snapshots/" + id + "/rootfs");
        ASSERT_TRUE(WaitFor([&] { return PathExists(rootfs + "/runs"); }));
        ASSERT_TRUE(images_.Unmount(id));
        EXPECT_FALSE(PathExists(rootfs + "/runs"));
        // Where the first run's root went (its mount stays its own).
        ASSERT_EQ(mkdir((rootfs + ".unmounted/go").c_str(), 0755), 0);
      });
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->exit_result().exit_code(), 0)
      << ReadFileOrEmpty(node_->tasks().LogDir(task->id()) + "/stderr.log");
  EXPECT_EQ(Output(task->id()), "run\nrun\n");
  EXPECT_EQ(images_.remounts(), 1);
  ASSERT_EQ(images_.requests().size(), 2u);
  EXPECT_EQ(images_.requests()[1].id(), task->id());
  EXPECT_TRUE(images_.released().empty());
}

// A restart whose image was removed (berth rm --force) while its task kept
// it: berth-images no longer finds the image, and the task runs on its
// snapshot as long as it is mounted; one that is no longer mounted fails,
// naming the image.
TEST_F(NodeImageTest, ARestartWhoseImageWasRemovedNeedsItsSnapshotMounted) {
  const imagepb::Image image = Image("docker.io/library/gone:1", {}, {});
  images_.AddImage("gone:1", image);
  StartNode();
  const std::string script =
      "echo run >> /runs; if [ $(wc -l < /runs) -eq 1 ]; then "
      "while [ ! -e /go ]; do sleep 0.05; done; exit 1; fi; cat /runs";
  v1::TaskSpec spec = ImageSpec("gone:1", script);
  spec.mutable_restart()->set_mode(v1::RESTART_MODE_ON_FAILURE);
  spec.mutable_restart()->set_attempts(1);
  absl::StatusOr<v1::Task> unmounted = Run(spec);
  ASSERT_TRUE(unmounted.ok()) << unmounted.status();
  const std::string unmounted_root =
      dir_.Join("snapshots/" + unmounted->id() + "/rootfs");
  std::string mounted_root;
  bool bound = false;
  absl::Cleanup unbind = [&] {
    if (bound) umount2(mounted_root.c_str(), MNT_DETACH);
  };
  absl::StatusOr<v1::Task> mounted =
      RunRestarting(spec, 1, [&](const std::string& id) {
        mounted_root = dir_.Join("snapshots/" + id + "/rootfs");
        for (const std::string& root : {mounted_root, unmounted_root}) {
          ASSERT_TRUE(WaitFor([&] { return PathExists(root + "/runs"); }));
        }
        images_.RemoveImage("gone:1");
        // The fake's snapshots are directories; berth-images' are mounts.
        ASSERT_EQ(mount(mounted_root.c_str(), mounted_root.c_str(), nullptr,
                        MS_BIND, nullptr),
                  0);
        bound = true;
        ASSERT_TRUE(images_.Unmount(unmounted->id()));
        ASSERT_EQ(mkdir((mounted_root + "/go").c_str(), 0755), 0);
        ASSERT_EQ(mkdir((unmounted_root + ".unmounted/go").c_str(), 0755), 0);
      });
  ASSERT_TRUE(mounted.ok()) << mounted.status();
  EXPECT_EQ(mounted->exit_result().exit_code(), 0);
  EXPECT_EQ(Output(mounted->id()), "run\nrun\n");
  EXPECT_EQ(Inspect(mounted->id()).image().rootfs(), mounted_root);

  ASSERT_TRUE(WaitFor([&] {
    return Inspect(unmounted->id()).state() == v1::TASK_STATE_FAILED;
  })) << Inspect(unmounted->id()).DebugString();
  const std::string error = Inspect(unmounted->id()).error();
  EXPECT_THAT(error,
              HasSubstr("is no longer mounted and its image "
                        "docker.io/library/gone:1 (" +
                        image.manifest_digest() + ") is no longer stored"));
}

// A task in a user namespace gets a snapshot idmapped to its mappings (the
// request carries them), which the driver is told to bind as it is
// (isolation.rootfs_idmapped, in the handle); the working directory the node
// makes in it is the task's root's; a restart prepares it again with the
// same mappings. A task without one asks for no idmapping.
TEST_F(NodeImageTest, AUserNamespacedTaskGetsAnIdmappedSnapshot) {
  imagepb::Image image = Image("docker.io/library/mapped:1", {}, {});
  image.mutable_config()->set_working_dir("/wd");
  images_.AddImage("mapped:1", image);
  // The task's mapped ids reach the driver's root mount point below it, as
  // below a node's state directory (0711).
  ASSERT_EQ(chmod(dir_.path().c_str(), 0711), 0);
  StartNode();
  v1::TaskSpec spec = ImageSpec(
      "mapped:1",
      "echo run >> /runs; id -u; busybox stat -c %u:%g /snapshot /wd; pwd; "
      "test $(wc -l < /runs) -ge 2");
  spec.set_userns("auto");
  absl::StatusOr<v1::Task> task = RunRestarting(spec, 1);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->exit_result().exit_code(), 0)
      << ReadFileOrEmpty(node_->tasks().LogDir(task->id()) + "/stderr.log");
  // Both runs saw the image's files and the made /wd as their root's.
  EXPECT_THAT(Output(task->id()), HasSubstr("0\n0:0\n0:0\n/wd\n"));

  ASSERT_EQ(images_.requests().size(), 2u);
  const imagepb::PrepareSnapshotRequest request = images_.requests()[0];
  const imagepb::PrepareSnapshotRequest restart = images_.requests()[1];
  EXPECT_EQ(restart.id(), request.id());
  EXPECT_EQ(restart.uid_mappings().size(), 1);
  EXPECT_EQ(restart.uid_mappings(0).DebugString(),
            request.uid_mappings(0).DebugString());
  EXPECT_EQ(restart.gid_mappings(0).DebugString(),
            request.gid_mappings(0).DebugString());
  ASSERT_EQ(request.uid_mappings_size(), 1);
  ASSERT_EQ(request.gid_mappings_size(), 1);
  const uint32_t uid = request.uid_mappings(0).host_id();
  const uint32_t gid = request.gid_mappings(0).host_id();
  EXPECT_EQ(request.uid_mappings(0).container_id(), 0u);
  EXPECT_GE(uid, kUsernsBase);
  EXPECT_EQ(request.uid_mappings(0).size(), 65536u);
  // On the host, what the node made and the task wrote are its mapped ids.
  const std::string rootfs = Inspect(task->id()).image().rootfs();
  struct stat st;
  for (const char* path : {"/wd", "/runs"}) {
    ASSERT_EQ(stat((rootfs + path).c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, uid) << path;
    EXPECT_EQ(st.st_gid, gid) << path;
  }

  // Without a user namespace: no mappings asked for.
  v1::TaskSpec plain = ImageSpec("mapped:1", "id -u");
  plain.set_userns("host");
  absl::StatusOr<v1::Task> host = Run(plain);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(Output(host->id()), "0\n");
  ASSERT_EQ(images_.requests().size(), 3u);
  EXPECT_EQ(images_.requests()[2].uid_mappings_size(), 0);
  EXPECT_EQ(images_.requests()[2].gid_mappings_size(), 0);

  // What the driver was given, as the node keeps it.
  StopNode();
  {
    absl::StatusOr<std::unique_ptr<TaskStore>> store =
        TaskStore::Open(dir_.Join("state/node/state.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    for (const auto& [id, idmapped] :
         {std::pair{task->id(), true}, std::pair{host->id(), false}}) {
      absl::StatusOr<std::optional<internal::TaskRecord>> record =
          (*store)->Get(id);
      ASSERT_TRUE(record.ok() && record->has_value()) << id;
      const driver::v1::Isolation& isolation =
          (*record)->handle().config().isolation();
      EXPECT_EQ(isolation.rootfs_idmapped(), idmapped) << id;
      EXPECT_EQ(isolation.rootfs(), (*record)->task().image().rootfs()) << id;
      if (idmapped) {
        ASSERT_EQ(isolation.user_namespace().uid_mappings_size(), 1);
        EXPECT_EQ(isolation.user_namespace().uid_mappings(0).host_id(), uid);
      }
    }
  }
  StartNode();
}

// At its start the node releases the snapshots that are no task's (a node
// killed between a prepare and its record, a task removed while berth-images
// was away), and only those.
TEST_F(NodeImageTest, TheNodesStartReleasesSnapshotsOfNoTask) {
  images_.AddImage("keep:1", Image("docker.io/library/keep:1", {}, {"true"}));
  StartNode();
  absl::StatusOr<v1::Task> task = Run(ImageSpec("keep:1"));
  ASSERT_TRUE(task.ok()) << task.status();
  Output(task->id());
  StopNode();
  images_.AddSnapshot("orphan-1");
  StartNode();
  ASSERT_TRUE(WaitFor([&] {
    return images_.snapshot_ids() == std::set<std::string>{task->id()};
  })) << "snapshots left: "
      << images_.snapshot_ids().size();
  EXPECT_THAT(images_.released(), ElementsAre("orphan-1"));
}

TEST_F(NodeImageTest, WithoutBerthImagesOnlyImageTasksFail) {
  const std::string absent = dir_.Join("absent.sock");
  StartNode(absent);
  absl::StatusOr<v1::Task> task = Run(ImageSpec("demo:1", "true"));
  ASSERT_FALSE(task.ok());
  EXPECT_TRUE(absl::IsUnavailable(task.status())) << task.status();
  EXPECT_THAT(task.status().message(),
              HasSubstr("berth-images is not reachable at " + absent));
  EXPECT_THAT(task.status().message(), HasSubstr("image \"demo:1\""));

  // A task without an image runs (the host's directories as its root).
  v1::TaskSpec plain = ImageSpec("x", "echo imageless");
  plain.clear_image();
  absl::StatusOr<v1::Task> ran = Run(plain);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(Output(ran->id()), "imageless\n");

  // Removing the image task does not need berth-images: it never had a
  // snapshot.
  for (const v1::Task& listed : List()) {
    if (listed.spec().has_image()) {
      EXPECT_TRUE(Remove(listed.id(), false).ok());
    }
  }

  v1::GetNodeStatusResponse status;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->GetNodeStatus(&context, {}, &status).ok());
  ASSERT_EQ(status.services_size(), 1);
  EXPECT_EQ(status.services(0).name(), "berth-images");
  EXPECT_EQ(status.services(0).socket(), absent);
  EXPECT_FALSE(status.services(0).healthy());
  EXPECT_THAT(status.services(0).message(),
              HasSubstr("berth-images is not reachable"));

  // The forwarded service says so too.
  imagepb::ListImagesResponse images;
  grpc::ClientContext list_context;
  grpc::Status listed = image_stub_->ListImages(&list_context, {}, &images);
  EXPECT_EQ(listed.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(listed.error_message(),
              HasSubstr("berth-images is not reachable at " + absent));
}

TEST_F(NodeImageTest, NodeStatusShowsBerthImagesHealthy) {
  StartNode();
  v1::GetNodeStatusResponse status;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->GetNodeStatus(&context, {}, &status).ok());
  ASSERT_EQ(status.services_size(), 1);
  EXPECT_EQ(status.services(0).name(), "berth-images");
  EXPECT_EQ(status.services(0).socket(), dir_.Join("images.sock"));
  EXPECT_TRUE(status.services(0).healthy()) << status.services(0).message();
}

TEST_F(NodeImageTest, EveryUnaryCallIsForwarded) {
  images_.AddImage("demo:1", Image("docker.io/library/demo:1", {}, {"true"}));
  StartNode();
  {
    imagepb::ListImagesRequest request;
    request.set_name_prefix("docker.io/");
    imagepb::ListImagesResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(image_stub_->ListImages(&context, request, &response).ok());
    ASSERT_EQ(response.images_size(), 1);
    EXPECT_EQ(response.images(0).name(), "docker.io/listed");
  }
  {
    imagepb::InspectImageRequest request;
    request.set_reference("demo:1");
    imagepb::InspectImageResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(image_stub_->InspectImage(&context, request, &response).ok());
    EXPECT_EQ(response.image().name(), "docker.io/library/demo:1");
    EXPECT_EQ(response.image().config().cmd(0), "true");
    // berth-images' own errors come through as they are.
    request.set_reference("missing");
    grpc::ClientContext missing;
    grpc::Status s = image_stub_->InspectImage(&missing, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(s.error_message(), "no image missing");
  }
  {
    imagepb::RemoveImageRequest request;
    request.set_reference("demo:1");
    request.set_force(true);
    imagepb::RemoveImageResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(image_stub_->RemoveImage(&context, request, &response).ok());
    EXPECT_THAT(response.untagged(), ElementsAre("demo:1 (forced)"));
  }
  {
    imagepb::TagImageRequest request;
    request.set_source("demo:1");
    request.set_target("demo:2");
    imagepb::TagImageResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(image_stub_->TagImage(&context, request, &response).ok());
    EXPECT_EQ(response.image().name(), "demo:2");
    EXPECT_THAT(response.image().other_names(), ElementsAre("demo:1"));
  }
  {
    imagepb::PruneImagesRequest request;
    request.set_all(true);
    imagepb::PruneImagesResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(image_stub_->PruneImages(&context, request, &response).ok());
    EXPECT_EQ(response.reclaimed_bytes(), 2048);
  }
  {
    imagepb::PrepareSnapshotRequest request;
    request.set_id("by-hand");
    request.set_reference("demo:1");
    imagepb::PrepareSnapshotResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(
        image_stub_->PrepareSnapshot(&context, request, &response).ok());
    EXPECT_EQ(response.rootfs(), dir_.Join("snapshots/by-hand/rootfs"));
    imagepb::ListSnapshotsResponse listed;
    grpc::ClientContext list_context;
    ASSERT_TRUE(image_stub_->ListSnapshots(&list_context, {}, &listed).ok());
    ASSERT_EQ(listed.snapshots_size(), 1);
    EXPECT_EQ(listed.snapshots(0).id(), "by-hand");
    imagepb::ReleaseSnapshotRequest release;
    release.set_id("by-hand");
    imagepb::ReleaseSnapshotResponse released;
    grpc::ClientContext release_context;
    ASSERT_TRUE(
        image_stub_->ReleaseSnapshot(&release_context, release, &released)
            .ok());
    EXPECT_THAT(images_.released(), ElementsAre("by-hand"));
  }
  // A task's snapshot is the node's.
  absl::StatusOr<v1::Task> task = Run(ImageSpec("demo:1"));
  ASSERT_TRUE(task.ok()) << task.status();
  imagepb::ReleaseSnapshotRequest release;
  release.set_id(task->id());
  imagepb::ReleaseSnapshotResponse released;
  grpc::ClientContext context;
  grpc::Status s = image_stub_->ReleaseSnapshot(&context, release, &released);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("is the root of task"));
  EXPECT_THAT(images_.released(), Not(Contains(task->id())));
}

TEST_F(NodeImageTest, APullIsRelayedMessageByMessage) {
  StartNode();
  imagepb::PullImageRequest request;
  request.set_reference("busybox");
  grpc::ClientContext context;
  auto reader = image_stub_->PullImage(&context, request);
  std::vector<imagepb::PullImageProgress> messages;
  imagepb::PullImageProgress progress;
  while (reader->Read(&progress)) messages.push_back(progress);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0].status(), "resolving busybox");
  EXPECT_EQ(messages[1].layers(0).downloaded(), 1);
  EXPECT_EQ(messages[2].layers(0).downloaded(), 2);
  EXPECT_EQ(messages[2].image().name(), "busybox");

  // berth-images ending the stream with an error ends the caller's.
  request.set_reference("fail");
  grpc::ClientContext failing;
  reader = image_stub_->PullImage(&failing, request);
  EXPECT_TRUE(reader->Read(&progress));
  EXPECT_FALSE(reader->Read(&progress));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(s.error_message(), "the registry went away");
}

TEST_F(NodeImageTest, ACallerCancellingAPullCancelsBerthImagesPull) {
  StartNode();
  imagepb::PullImageRequest request;
  request.set_reference("slow");
  grpc::ClientContext context;
  auto reader = image_stub_->PullImage(&context, request);
  imagepb::PullImageProgress progress;
  ASSERT_TRUE(reader->Read(&progress));
  EXPECT_EQ(progress.status(), "resolving slow");
  EXPECT_FALSE(images_.pull_cancelled());
  context.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return images_.pull_cancelled(); }))
      << "berth-images' pull went on after the caller cancelled";
}

// The forwarded image streams count among the client's streams
// (--max_streams_per_client), with NodeService's.
TEST_F(NodeImageTest, PullsCountAmongTheClientsStreams) {
  max_streams_per_client_ = 1;
  StartNode();
  imagepb::PullImageRequest request;
  request.set_reference("slow");
  grpc::ClientContext context;
  auto reader = image_stub_->PullImage(&context, request);
  imagepb::PullImageProgress progress;
  ASSERT_TRUE(reader->Read(&progress));
  // A second pull, or any other stream, is refused naming the bound.
  request.set_reference("busybox");
  grpc::ClientContext second;
  auto refused = image_stub_->PullImage(&second, request);
  EXPECT_FALSE(refused->Read(&progress));
  grpc::Status s = refused->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("PullImage: this client"));
  EXPECT_THAT(s.error_message(), HasSubstr("--max_streams_per_client (1)"));
  {
    grpc::ClientContext events_context;
    auto events = stub_->Events(&events_context, v1::EventsRequest());
    v1::EventsResponse event;
    EXPECT_FALSE(events->Read(&event));
    EXPECT_EQ(events->Finish().error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Once the first pull is cancelled, its place is free again.
  context.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] {
    grpc::ClientContext again;
    auto pull = image_stub_->PullImage(&again, request);
    while (pull->Read(&progress)) {
    }
    return pull->Finish().ok();
  }));
}

TEST_F(NodeImageTest, AnImportIsRelayedChunkByChunk) {
  StartNode();
  imagepb::ImportImageResponse response;
  grpc::ClientContext context;
  auto writer = image_stub_->ImportImage(&context, &response);
  imagepb::ImportImageRequest first;
  first.mutable_options()->set_name("imported:1");
  first.set_chunk(std::string(1000, 'a'));
  ASSERT_TRUE(writer->Write(first));
  for (int i = 0; i < 3; ++i) {
    imagepb::ImportImageRequest chunk;
    chunk.set_chunk(std::string(100'000, 'b'));
    ASSERT_TRUE(writer->Write(chunk));
  }
  ASSERT_TRUE(writer->WritesDone());
  grpc::Status s = writer->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.images_size(), 1);
  EXPECT_EQ(response.images(0).name(), "imported:1");
  EXPECT_EQ(response.images(0).size(), 301'000);

  // Cancelled mid-archive, once berth-images has the call (a cancellation
  // that reaches its server before the call does drops the call unseen):
  // berth-images sees the cancellation, not an end, and stores nothing.
  grpc::ClientContext cancelled;
  writer = image_stub_->ImportImage(&cancelled, &response);
  ASSERT_TRUE(writer->Write(first));
  ASSERT_TRUE(WaitFor([&] { return images_.imports_begun() == 2; }));
  EXPECT_FALSE(images_.import_cancelled());
  cancelled.TryCancel();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return images_.import_cancelled(); }))
      << "berth-images took a cancelled import for a whole archive";
  EXPECT_EQ(images_.imports_completed(), 1);
}

}  // namespace
}  // namespace berth::node
