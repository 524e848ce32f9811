// berth-images as a child process: --help, bad flags, serving on
// <runtime_dir>/images.sock with its health, a clean exit on SIGTERM, and
// kill -9 at rest (a snapshot prepared), in the middle of an import and in
// the middle of a pull: after a restart the snapshot is still listed and
// mounted, and no image is listed that is not whole.

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/peer_test_util.h"
#include "services/common/test_util.h"
#include "services/images/test_util.h"
#include "services/images/testing/registry_fixture.h"

extern char** environ;

namespace berth::images {
namespace {

namespace pb = ::berth::image::v1;
using ::berth::images::testing::DirEntries;
using ::berth::testing::Caller;
using ::berth::testing::CallHealthAs;
using ::berth::testing::ChannelOverConnection;
using ::berth::testing::ConnectAs;
using ::berth::testing::FileMode;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// berth-images running with its output in files.
class Child {
 public:
  Child(const ShortTempDir& dir, const std::vector<std::string>& args,
        const std::string& tag = "")
      : stdout_(dir.Join("stdout" + tag)), stderr_(dir.Join("stderr" + tag)) {
    std::vector<std::string> storage = {
        RunfilePath("services/images/berth-images")};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string stdout_path = stdout_;
    const std::string stderr_path = stderr_;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int in = open("/dev/null", O_RDONLY);
      const int out =
          open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int err =
          open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (in < 0 || out < 0 || err < 0) _exit(126);
      dup2(in, 0);
      dup2(out, 1);
      dup2(err, 2);
      execve(argv[0], argv.data(), environ);
      _exit(127);
    }
    EXPECT_GT(pid_, 0) << "fork: " << std::strerror(errno);
  }

  ~Child() { Kill(); }

  void Kill() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      exited_ = true;
    }
  }

  bool Running() {
    if (pid_ <= 0 || exited_) return false;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    return !exited_;
  }

  // The exit code once it exits (-1 after a signal or if it does not).
  int Wait() {
    if (!WaitFor([this] { return !Running(); })) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }

  pid_t pid() const { return pid_; }
  std::string out() const { return ReadFileOrEmpty(stdout_); }
  std::string err() const { return ReadFileOrEmpty(stderr_); }

 private:
  const std::string stdout_;
  const std::string stderr_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// Whether `path` is a mount point (in /proc/self/mountinfo).
bool Mounted(const std::string& path) {
  for (absl::string_view line :
       absl::StrSplit(ReadFileOrEmpty("/proc/self/mountinfo"), '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() > 4 && fields[4] == path) return true;
  }
  return false;
}

// Unmounts whatever is mounted below `dir` (what a failed test left).
void UnmountBelow(const std::string& dir) {
  for (absl::string_view line :
       absl::StrSplit(ReadFileOrEmpty("/proc/self/mountinfo"), '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() > 4 && absl::StartsWith(fields[4], dir + "/")) {
      umount2(std::string(fields[4]).c_str(), MNT_DETACH);
    }
  }
}

class MainTest : public ::testing::Test {
 protected:
  ~MainTest() override { UnmountBelow(dir_.path()); }

  std::vector<std::string> Flags() const {
    return {"--runtime_dir=" + dir_.Join("run"),
            "--state_dir=" + dir_.Join("state"),
            "--registries_config=" + dir_.Join("registries.json")};
  }

  std::string Socket() const { return dir_.Join("run/images.sock"); }

  std::unique_ptr<pb::ImageService::Stub> Connect() {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(Socket(), absl::Seconds(30));
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return nullptr;
    channel_ = *channel;
    return pb::ImageService::NewStub(*channel);
  }

  void Disconnect(std::unique_ptr<pb::ImageService::Stub>* stub) {
    stub->reset();
    channel_.reset();
  }

  std::vector<pb::Image> List(pb::ImageService::Stub* stub) {
    grpc::ClientContext context;
    pb::ListImagesResponse response;
    grpc::Status status =
        stub->ListImages(&context, pb::ListImagesRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.images().begin(), response.images().end()};
  }

  // Imports `archive` in one message, named `name`.
  grpc::Status Import(pb::ImageService::Stub* stub, const std::string& archive,
                      const std::string& name) {
    grpc::ClientContext context;
    pb::ImportImageResponse response;
    std::unique_ptr<grpc::ClientWriter<pb::ImportImageRequest>> writer =
        stub->ImportImage(&context, &response);
    pb::ImportImageRequest request;
    request.mutable_options()->set_name(name);
    request.set_chunk(ReadFileOrEmpty(archive));
    writer->Write(request);
    writer->WritesDone();
    return writer->Finish();
  }

  ShortTempDir dir_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(MainTest, HelpExitsZeroAndListsTheFlags) {
  Child child(dir_, {"--help"});
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_THAT(child.out(), HasSubstr("usage: berth-images"));
  for (const char* flag : {"runtime_dir", "state_dir", "registries_config",
                           "max_concurrent_downloads", "platform"}) {
    EXPECT_THAT(child.out(), HasSubstr(flag));
  }
}

TEST_F(MainTest, BadFlagsExitNonZeroNamingThem) {
  {
    Child child(dir_, {"--no_such_flag=1"});
    EXPECT_NE(child.Wait(), 0);
    EXPECT_THAT(child.err(), HasSubstr("no_such_flag"));
  }
  {
    std::vector<std::string> flags = Flags();
    flags.push_back("--max_concurrent_downloads=0");
    Child child(dir_, flags);
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_THAT(child.err(), HasSubstr("--max_concurrent_downloads"));
  }
  {
    std::vector<std::string> flags = Flags();
    flags.push_back("--platform=linux");
    Child child(dir_, flags);
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_THAT(child.err(), HasSubstr("--platform"));
  }
  {
    std::ofstream(dir_.Join("registries.json"))
        << R"({"registries": {"r.test": {"mirrorz": []}}})";
    Child child(dir_, Flags());
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_THAT(child.err(), HasSubstr(dir_.Join("registries.json")));
    EXPECT_THAT(child.err(), HasSubstr("mirrorz"));
  }
  EXPECT_FALSE(PathExists(Socket()));
}

TEST_F(MainTest, ServesOnTheRuntimeDirAndStopsCleanlyOnSigterm) {
  Child child(dir_, Flags());
  std::unique_ptr<pb::ImageService::Stub> stub = Connect();
  ASSERT_NE(stub, nullptr) << child.err();
  EXPECT_EQ(FileMode(Socket()), 0600) << "root's (and the service's uid's)";
  EXPECT_THAT(List(stub.get()), IsEmpty());
  {
    // A caller of another uid past the file's permissions: refused by the
    // server, for every call.
    grpc::Status status = CallHealthAs(Socket(), Caller{});
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << status.error_message();
    EXPECT_THAT(status.error_message(),
                HasSubstr("uid 65534 may not call " + Socket()));
    absl::StatusOr<base::UniqueFd> fd = ConnectAs(Socket(), Caller{});
    ASSERT_TRUE(fd.ok()) << fd.status();
    std::unique_ptr<pb::ImageService::Stub> other =
        pb::ImageService::NewStub(ChannelOverConnection(*std::move(fd)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    pb::ListImagesResponse response;
    status = other->ListImages(&context, pb::ListImagesRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("uid 65534"));
  }
  {
    std::unique_ptr<grpc::health::v1::Health::Stub> health =
        grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(
        health
            ->Check(&context, grpc::health::v1::HealthCheckRequest(), &response)
            .ok());
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING);
  }
  EXPECT_TRUE(PathExists(dir_.Join("state/images/blobs")));
  // An idle client reads the server's GOAWAY only when gRPC's backup
  // poller runs (every 5 s), and the server's shutdown waits for it: gone
  // first, the shutdown is not held.
  Disconnect(&stub);
  kill(child.pid(), SIGTERM);
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_FALSE(PathExists(Socket()));
}

TEST_F(MainTest, AfterKill9TheSnapshotIsStillMountedAndNoPartialImageIsListed) {
  auto child = std::make_unique<Child>(dir_, Flags(), "-1");
  std::unique_ptr<pb::ImageService::Stub> stub = Connect();
  ASSERT_NE(stub, nullptr) << child->err();
  grpc::Status status =
      Import(stub.get(), TestImagePath("busybox-docker.tar"), "");
  ASSERT_TRUE(status.ok()) << status.error_message();
  const bool root = geteuid() == 0;
  std::string rootfs;
  if (root) {
    grpc::ClientContext context;
    pb::PrepareSnapshotRequest request;
    request.set_id("task-1");
    request.set_reference("busybox");
    pb::PrepareSnapshotResponse response;
    status = stub->PrepareSnapshot(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    rootfs = response.rootfs();
    ASSERT_TRUE(Mounted(rootfs));
  } else {
    std::cout << "not root: no snapshot is prepared (overlay mounts need "
                 "root)\n";
  }

  // Killed in the middle of an import: half the archive sent.
  {
    grpc::ClientContext context;
    pb::ImportImageResponse response;
    std::unique_ptr<grpc::ClientWriter<pb::ImportImageRequest>> writer =
        stub->ImportImage(&context, &response);
    const std::string bytes =
        ReadFileOrEmpty(TestImagePath("multilayer-oci.tar"));
    pb::ImportImageRequest request;
    request.mutable_options()->set_name("half:1");
    request.set_chunk(bytes.substr(0, bytes.size() / 2));
    ASSERT_TRUE(writer->Write(request));
    // Arrived: the import file holds it.
    ASSERT_TRUE(WaitFor([&] {
      for (const std::string& name :
           DirEntries(dir_.Join("state/images/import"))) {
        struct stat st;
        if (stat(dir_.Join("state/images/import/" + name).c_str(), &st) == 0 &&
            st.st_size > 0) {
          return true;
        }
      }
      return false;
    }));
    child->Kill();
    context.TryCancel();
  }
  if (root) {
    EXPECT_TRUE(Mounted(rootfs)) << "kill -9 unmounted the snapshot";
  }

  child = std::make_unique<Child>(dir_, Flags(), "-2");
  stub = Connect();
  ASSERT_NE(stub, nullptr) << child->err();
  std::vector<pb::Image> images = List(stub.get());
  ASSERT_THAT(images, SizeIs(1));
  EXPECT_EQ(images[0].name(), "docker.io/library/busybox:latest");
  EXPECT_THAT(DirEntries(dir_.Join("state/images/import")), IsEmpty());
  if (root) {
    grpc::ClientContext context;
    pb::ListSnapshotsResponse snapshots;
    ASSERT_TRUE(
        stub->ListSnapshots(&context, pb::ListSnapshotsRequest(), &snapshots)
            .ok());
    ASSERT_THAT(snapshots.snapshots(), SizeIs(1));
    EXPECT_EQ(snapshots.snapshots(0).id(), "task-1");
    EXPECT_EQ(snapshots.snapshots(0).rootfs(), rootfs);
    EXPECT_TRUE(Mounted(rootfs));
    EXPECT_TRUE(PathExists(rootfs + "/bin/busybox"));
    grpc::ClientContext release_context;
    pb::ReleaseSnapshotRequest release;
    release.set_id("task-1");
    pb::ReleaseSnapshotResponse released;
    ASSERT_TRUE(
        stub->ReleaseSnapshot(&release_context, release, &released).ok());
    EXPECT_FALSE(Mounted(rootfs));
  }
  Disconnect(&stub);
  kill(child->pid(), SIGTERM);
  EXPECT_EQ(child->Wait(), 0) << child->err();
}

TEST_F(MainTest, AfterKill9InThePullOfAnImageItIsListedWholeOrNotAtAll) {
  absl::StatusOr<std::unique_ptr<RegistryFixture>> registry =
      RegistryFixture::Start();
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE(
      (*registry)->Push(TestImagePath("multilayer"), "team/multilayer:1").ok());
  std::ofstream(dir_.Join("registries.json"))
      << R"({"registries": {")" << (*registry)->endpoint()
      << R"(": {"insecure": true}}})";
  const std::string reference =
      absl::StrCat((*registry)->endpoint(), "/team/multilayer:1");
  std::vector<std::string> flags = Flags();
  flags.push_back("--max_concurrent_downloads=1");

  auto child = std::make_unique<Child>(dir_, flags, "-1");
  std::unique_ptr<pb::ImageService::Stub> stub = Connect();
  ASSERT_NE(stub, nullptr) << child->err();
  {
    grpc::ClientContext context;
    pb::PullImageRequest request;
    request.set_reference(reference);
    std::unique_ptr<grpc::ClientReader<pb::PullImageProgress>> reader =
        stub->PullImage(&context, request);
    // Killed as soon as the layers are known.
    pb::PullImageProgress message;
    bool layers_known = false;
    while (!layers_known && reader->Read(&message)) {
      layers_known = message.layers_size() > 0;
    }
    EXPECT_TRUE(layers_known);
    child->Kill();
    context.TryCancel();
  }
  child = std::make_unique<Child>(dir_, flags, "-2");
  stub = Connect();
  ASSERT_NE(stub, nullptr) << child->err();
  std::vector<pb::Image> images = List(stub.get());
  // Listed only when whole: every layer of it unpacked.
  for (const pb::Image& image : images) {
    EXPECT_EQ(image.layers_size(), 4);
    for (const pb::Layer& layer : image.layers()) {
      const std::string hex = layer.diff_id().substr(7);
      EXPECT_TRUE(PathExists(dir_.Join("state/images/layers/" + hex + ".json")))
          << layer.diff_id();
    }
  }
  std::cout << (images.empty() ? "killed before the image was stored"
                               : "the pull had finished before the kill")
            << "\n";
  // No half-unpacked layer left.
  for (const std::string& name : DirEntries(dir_.Join("state/images/layers"))) {
    EXPECT_FALSE(absl::StartsWith(name, "tmp-")) << name;
  }
  // And the pull completes now.
  {
    grpc::ClientContext context;
    pb::PullImageRequest request;
    request.set_reference(reference);
    std::unique_ptr<grpc::ClientReader<pb::PullImageProgress>> reader =
        stub->PullImage(&context, request);
    pb::PullImageProgress message;
    pb::Image image;
    while (reader->Read(&message)) {
      if (message.has_image()) image = message.image();
    }
    grpc::Status status = reader->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(image.name(), reference);
  }
  EXPECT_THAT(List(stub.get()), SizeIs(1));
  Disconnect(&stub);
  kill(child->pid(), SIGTERM);
  EXPECT_EQ(child->Wait(), 0) << child->err();
}

}  // namespace
}  // namespace berth::images
