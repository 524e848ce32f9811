#include "services/images/store/snapshot_store.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/images/store/fs_util.h"

namespace berth::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kManifest[] =
    "sha256:1111111111111111111111111111111111111111111111111111111111111111";
constexpr char kOtherManifest[] =
    "sha256:2222222222222222222222222222222222222222222222222222222222222222";

void WriteFile(const std::string& path, const std::string& content) {
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  fputs(content.c_str(), f);
  fclose(f);
}

std::string Layer(int i) {
  return absl::StrCat("sha256:", std::string(63, 'a' + i), i);
}

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "mounting overlays needs root";
    // Three layers, base first: base has /etc/os and /bin/sh and /gone;
    // middle overrides /etc/os; top whites out /gone.
    for (int i = 0; i < 3; ++i) {
      const std::string dir = dir_.Join(absl::StrCat("layer", i));
      ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
      layer_dirs_.insert(layer_dirs_.begin(), dir);  // top first
      diff_ids_.insert(diff_ids_.begin(), Layer(i));
    }
    ASSERT_EQ(mkdir(dir_.Join("layer0/etc").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(dir_.Join("layer0/bin").c_str(), 0755), 0);
    WriteFile(dir_.Join("layer0/etc/os"), "base");
    WriteFile(dir_.Join("layer0/bin/sh"), "shell");
    WriteFile(dir_.Join("layer0/gone"), "x");
    ASSERT_EQ(mkdir(dir_.Join("layer1/etc").c_str(), 0755), 0);
    WriteFile(dir_.Join("layer1/etc/os"), "middle");
    ASSERT_EQ(
        mknod(dir_.Join("layer2/gone").c_str(), S_IFCHR | 0, makedev(0, 0)), 0);
    spec_.image_name = "docker.io/library/test:latest";
    spec_.manifest_digest = kManifest;
    spec_.layer_diff_ids = diff_ids_;
    spec_.layer_dirs = layer_dirs_;
    root_ = dir_.Join("snapshots");
    auto store = SnapshotStore::Open(root_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  void TearDown() override {
    // Nothing stays mounted in the temporary directory.
    const std::vector<std::string> ids =
        store_internal::ListDir(root_).value_or(std::vector<std::string>());
    for (const std::string& id : ids) {
      const std::string rootfs = absl::StrCat(root_, "/", id, "/rootfs");
      while (umount2(rootfs.c_str(), MNT_DETACH) == 0) {
      }
    }
  }

  std::string ReadOrEmpty(const std::string& path) {
    return testing::ReadFileOrEmpty(path);
  }

  testing::ShortTempDir dir_;
  std::vector<std::string> layer_dirs_;
  std::vector<std::string> diff_ids_;
  SnapshotSpec spec_;
  std::string root_;
  std::unique_ptr<SnapshotStore> store_;
};

TEST_F(SnapshotStoreTest, PreparesAnOverlayOfTheLayersTopFirst) {
  auto snapshot = store_->Prepare("task1", spec_);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->rootfs, absl::StrCat(root_, "/task1/rootfs"));
  EXPECT_TRUE(store_->IsMounted("task1"));
  EXPECT_EQ(ReadOrEmpty(snapshot->rootfs + "/etc/os"), "middle");
  EXPECT_EQ(ReadOrEmpty(snapshot->rootfs + "/bin/sh"), "shell");
  EXPECT_FALSE(testing::PathExists(snapshot->rootfs + "/gone"));
  // Writes go to the snapshot's upper; the layers stay as they were.
  WriteFile(snapshot->rootfs + "/etc/os", "changed");
  WriteFile(snapshot->rootfs + "/new", "new");
  ASSERT_EQ(unlink((snapshot->rootfs + "/bin/sh").c_str()), 0);
  EXPECT_EQ(ReadOrEmpty(snapshot->rootfs + "/etc/os"), "changed");
  EXPECT_EQ(ReadOrEmpty(dir_.Join("layer1/etc/os")), "middle");
  EXPECT_EQ(ReadOrEmpty(dir_.Join("layer0/bin/sh")), "shell");
  EXPECT_EQ(ReadOrEmpty(absl::StrCat(root_, "/task1/upper/new")), "new");

  // A second snapshot of the same layers sees none of it.
  auto other = store_->Prepare("task2", spec_);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(ReadOrEmpty(other->rootfs + "/etc/os"), "middle");
  EXPECT_FALSE(testing::PathExists(other->rootfs + "/new"));

  auto list = store_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, "task1");
  EXPECT_EQ((*list)[0].image_name, "docker.io/library/test:latest");
  EXPECT_EQ((*list)[0].manifest_digest, kManifest);
  EXPECT_EQ((*list)[0].layers, diff_ids_);
  EXPECT_EQ((*list)[1].id, "task2");

  ASSERT_TRUE(store_->Release("task1").ok());
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/task1")));
  ASSERT_TRUE(store_->Release("task1").ok());  // idempotent
  ASSERT_TRUE(store_->Release("never-made").ok());
  ASSERT_TRUE(store_->Release("task2").ok());
  EXPECT_THAT(*store_->List(), IsEmpty());
  // Their directories are removed by the store's thread.
  EXPECT_TRUE(testing::WaitFor(
      [&] { return store_internal::ListDir(root_)->empty(); }));
}

TEST_F(SnapshotStoreTest, SingleLayerImageIsStillAWritableOverlay) {
  SnapshotSpec spec = spec_;
  spec.layer_dirs = {dir_.Join("layer0")};
  spec.layer_diff_ids = {Layer(0)};
  auto snapshot = store_->Prepare("one", spec);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_TRUE(store_->IsMounted("one"));
  WriteFile(snapshot->rootfs + "/etc/os", "written");
  EXPECT_EQ(ReadOrEmpty(dir_.Join("layer0/etc/os")), "base");
  ASSERT_TRUE(store_->Release("one").ok());
}

TEST_F(SnapshotStoreTest, RootTakesTheTopLayersModeAndOwner) {
  ASSERT_EQ(chmod(layer_dirs_[0].c_str(), 0750), 0);
  ASSERT_EQ(chown(layer_dirs_[0].c_str(), 123, 456), 0);
  auto snapshot = store_->Prepare("mode", spec_);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  struct stat st;
  ASSERT_EQ(stat(snapshot->rootfs.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_EQ(st.st_uid, 123u);
  EXPECT_EQ(st.st_gid, 456u);
  ASSERT_TRUE(store_->Release("mode").ok());
}

TEST_F(SnapshotStoreTest, PrepareAgainReturnsItAndRemountsAfterRestart) {
  auto first = store_->Prepare("task", spec_);
  ASSERT_TRUE(first.ok()) << first.status();
  WriteFile(first->rootfs + "/kept", "kept");
  // Same image: the same snapshot.
  auto again = store_->Prepare("task", spec_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->created, first->created);
  // Another image: refused, naming both.
  SnapshotSpec other = spec_;
  other.image_name = "other:1";
  other.manifest_digest = kOtherManifest;
  absl::Status refused = store_->Prepare("task", other).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.message(), HasSubstr(kManifest));
  EXPECT_THAT(refused.message(), HasSubstr("other:1"));

  // A restart of the service keeps it mounted and listed.
  store_.reset();
  store_ = *SnapshotStore::Open(root_);
  EXPECT_TRUE(store_->IsMounted("task"));
  auto listed = store_->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, "task");
  EXPECT_EQ((*listed)[0].created, first->created);

  // The mount gone in this boot (unmounted; the kernel's volatile mark is
  // left in the workdir): Prepare mounts it again, upper kept.
  ASSERT_EQ(umount2(first->rootfs.c_str(), 0), 0);
  EXPECT_TRUE(testing::PathExists(
      absl::StrCat(root_, "/task/work/work/incompat/volatile")));
  store_.reset();
  store_ = *SnapshotStore::Open(root_);
  EXPECT_FALSE(store_->IsMounted("task"));
  EXPECT_THAT(*store_->List(), ::testing::SizeIs(1));
  auto remounted = store_->Prepare("task", spec_);
  ASSERT_TRUE(remounted.ok()) << remounted.status();
  EXPECT_TRUE(store_->IsMounted("task"));
  EXPECT_EQ(ReadOrEmpty(remounted->rootfs + "/kept"), "kept");
  EXPECT_EQ(ReadOrEmpty(remounted->rootfs + "/etc/os"), "middle");
  ASSERT_TRUE(store_->Release("task").ok());
}

// The options of the mount at `path` in /proc/self/mountinfo ("" if none).
std::string MountOptions(const std::string& path) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  std::string options;
  while (std::getline(mountinfo, line)) {
    std::istringstream fields(line);
    std::vector<std::string> field;
    for (std::string f; fields >> f;) field.push_back(f);
    if (field.size() > 4 && field[4] == path) options = field.back();
  }
  return options;
}

TEST_F(SnapshotStoreTest, HostRestartDiscardsTheVolatileUpper) {
  auto first = store_->Prepare("task", spec_);
  ASSERT_TRUE(first.ok()) << first.status();
  // Volatile ("fsync=volatile" on Linux 6.12 and later): never synced.
  EXPECT_THAT(MountOptions(first->rootfs), HasSubstr("volatile"));
  WriteFile(first->rootfs + "/lost", "lost");
  ASSERT_EQ(unlink((first->rootfs + "/bin/sh").c_str()), 0);
  ASSERT_EQ(chmod(layer_dirs_[0].c_str(), 0750), 0);

  // A restart of the host: the mount gone, the volatile mark the kernel
  // made in the workdir left, and the record naming another boot.
  ASSERT_EQ(umount2(first->rootfs.c_str(), 0), 0);
  const std::string mark =
      absl::StrCat(root_, "/task/work/work/incompat/volatile");
  ASSERT_TRUE(testing::PathExists(mark));
  const std::string record = absl::StrCat(root_, "/task/snapshot.json");
  const std::string boot_id = ReadOrEmpty("/proc/sys/kernel/random/boot_id");
  ASSERT_GT(boot_id.size(), 30u);
  std::string text = ReadOrEmpty(record);
  const size_t at = text.find(boot_id.substr(0, 30));
  ASSERT_NE(at, std::string::npos) << "the record names this boot: " << text;
  text.replace(at, 8, "00000000");
  WriteFile(record, text);
  store_.reset();
  store_ = *SnapshotStore::Open(root_);
  EXPECT_THAT(*store_->List(), ::testing::SizeIs(1));

  auto remounted = store_->Prepare("task", spec_);
  ASSERT_TRUE(remounted.ok()) << remounted.status();
  EXPECT_TRUE(store_->IsMounted("task"));
  EXPECT_EQ(remounted->created, first->created);
  // An empty upper: the image as it is, with the top layer's root mode.
  EXPECT_THAT(*store_internal::ListDir(absl::StrCat(root_, "/task/upper")),
              IsEmpty());
  EXPECT_FALSE(testing::PathExists(remounted->rootfs + "/lost"));
  EXPECT_EQ(ReadOrEmpty(remounted->rootfs + "/bin/sh"), "shell");
  EXPECT_EQ(ReadOrEmpty(remounted->rootfs + "/etc/os"), "middle");
  struct stat st;
  ASSERT_EQ(stat(remounted->rootfs.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  WriteFile(remounted->rootfs + "/after", "after");
  EXPECT_EQ(ReadOrEmpty(absl::StrCat(root_, "/task/upper/after")), "after");

  // The record names this boot again: the mount gone once more in this
  // boot, the upper is kept.
  EXPECT_THAT(ReadOrEmpty(record), HasSubstr(boot_id.substr(0, 30)));
  ASSERT_EQ(umount2(remounted->rootfs.c_str(), 0), 0);
  ASSERT_TRUE(testing::PathExists(mark));
  auto again = store_->Prepare("task", spec_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ReadOrEmpty(again->rootfs + "/after"), "after");
  ASSERT_TRUE(store_->Release("task").ok());
}

TEST_F(SnapshotStoreTest, ReleaseOfABusySnapshotDetachesIt) {
  auto snapshot = store_->Prepare("busy", spec_);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  // An open directory keeps the mount busy.
  const int fd = open(snapshot->rootfs.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  // (An open descriptor does not make umount2 fail with EBUSY on its own;
  // a working directory does: chdir in a child.)
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (fchdir(fd) != 0) _exit(1);
    pause();
    _exit(0);
  }
  ASSERT_TRUE(testing::WaitFor([&] {
    char link[256] = {};
    const std::string cwd = absl::StrCat("/proc/", child, "/cwd");
    return readlink(cwd.c_str(), link, sizeof(link) - 1) > 0 &&
           snapshot->rootfs == link;
  }));
  absl::Status released = store_->Release("busy");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(fd);
  ASSERT_TRUE(released.ok()) << released;
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/busy")));
}

TEST_F(SnapshotStoreTest, ValidatesIds) {
  for (const std::string& bad :
       {std::string(""), std::string("."), std::string(".."),
        std::string("a/b"), std::string("../x"), std::string("a..b"),
        std::string(129, 'a'), std::string("a b"), std::string("a\0b", 3)}) {
    absl::Status status = store_->Prepare(bad, spec_).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store_->Release(bad).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(store_->Prepare(std::string(128, 'a'), spec_).ok());
  EXPECT_TRUE(store_->Prepare("0123456789abcdef0123456789abcdef", spec_).ok());
  EXPECT_TRUE(store_->Prepare("a_b.c-D", spec_).ok());
  EXPECT_THAT(*store_->List(), ::testing::SizeIs(3));
  const std::vector<SnapshotInfo> snapshots = *store_->List();
  for (const SnapshotInfo& snapshot : snapshots) {
    EXPECT_TRUE(store_->Release(snapshot.id).ok());
  }
  EXPECT_THAT(*store_->List(), IsEmpty());
}

TEST_F(SnapshotStoreTest, FailedPrepareLeavesNothing) {
  SnapshotSpec bad = spec_;
  bad.layer_dirs[1] = dir_.Join("missing-layer");
  absl::Status status = store_->Prepare("fails", bad).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("docker.io/library/test:latest"));
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/fails")));
  EXPECT_THAT(*store_->List(), IsEmpty());
}

TEST_F(SnapshotStoreTest, OpenRemovesHalfMadeSnapshots) {
  auto whole = store_->Prepare("whole", spec_);
  ASSERT_TRUE(whole.ok());
  // A crash after the mount, before the record: mounted, no snapshot.json.
  auto half = store_->Prepare("half", spec_);
  ASSERT_TRUE(half.ok());
  ASSERT_EQ(unlink(absl::StrCat(root_, "/half/snapshot.json").c_str()), 0);
  // A crash before the mount.
  ASSERT_EQ(mkdir(absl::StrCat(root_, "/early").c_str(), 0711), 0);
  ASSERT_EQ(mkdir(absl::StrCat(root_, "/early/upper").c_str(), 0755), 0);
  // A record being written.
  WriteFile(absl::StrCat(root_, "/whole/snapshot.json.tmp-1234"), "{");
  // A released snapshot not yet removed (renamed to a name no id has).
  auto released = store_->Prepare("released", spec_);
  ASSERT_TRUE(released.ok());
  WriteFile(released->rootfs + "/written", "x");
  ASSERT_EQ(umount2(released->rootfs.c_str(), 0), 0);
  const std::string trash = absl::StrCat(root_, "/tmp-released~1234");
  ASSERT_EQ(rename(absl::StrCat(root_, "/released").c_str(), trash.c_str()), 0);
  // A record cut short (a crash of the machine before it reached the disk).
  auto cut = store_->Prepare("cut", spec_);
  ASSERT_TRUE(cut.ok());
  WriteFile(absl::StrCat(root_, "/cut/snapshot.json"), "");
  EXPECT_THAT(*store_->List(), ::testing::SizeIs(1));

  store_.reset();
  store_ = *SnapshotStore::Open(root_);
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/half")));
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/early")));
  EXPECT_FALSE(testing::PathExists(absl::StrCat(root_, "/cut")));
  EXPECT_FALSE(testing::PathExists(
      absl::StrCat(root_, "/whole/snapshot.json.tmp-1234")));
  EXPECT_TRUE(testing::WaitFor([&] { return !testing::PathExists(trash); }));
  EXPECT_TRUE(store_->IsMounted("whole"));
  EXPECT_EQ(ReadOrEmpty(whole->rootfs + "/etc/os"), "middle");
  auto list = store_->List();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "whole");
  ASSERT_TRUE(store_->Release("whole").ok());
}

// A user namespace mapping 0..65535 to 200000..265535, held by a child.
class UserNamespace {
 public:
  UserNamespace() {
    int go[2];
    if (pipe(go) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(go[1]);
      char byte;
      if (unshare(CLONE_NEWUSER) != 0) _exit(1);
      (void)!read(go[0], &byte, 1);
      _exit(0);
    }
    close(go[0]);
    hold_ = go[1];
    const std::string proc = absl::StrCat("/proc/", pid_);
    // Until the child has unshared, its namespace is ours.
    const std::string own = ReadLink("/proc/self/ns/user");
    if (!testing::WaitFor([&] { return ReadLink(proc + "/ns/user") != own; })) {
      return;
    }
    for (const char* map : {"/uid_map", "/gid_map"}) {
      std::ofstream(proc + map) << "0 200000 65536\n";
    }
    fd_ = open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
  }
  ~UserNamespace() {
    if (fd_ >= 0) close(fd_);
    if (hold_ >= 0) close(hold_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  int fd() const { return fd_; }

 private:
  static std::string ReadLink(const std::string& path) {
    char target[256] = {};
    return readlink(path.c_str(), target, sizeof(target) - 1) > 0 ? target : "";
  }
  pid_t pid_ = -1;
  int hold_ = -1;
  int fd_ = -1;
};

TEST_F(SnapshotStoreTest, IdmappedLayersShowRootFilesAsTheNamespacesRoot) {
  UserNamespace userns;
  ASSERT_GE(userns.fd(), 0) << "making a user namespace";
  SnapshotSpec spec = spec_;
  spec.idmap_userns_fd = userns.fd();
  auto snapshot = store_->Prepare("mapped", spec);
  if (absl::IsInvalidArgument(snapshot.status())) {
    GTEST_SKIP() << snapshot.status()
                 << " (this kernel cannot give overlayfs idmapped layers)";
  }
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  struct stat st;
  // Owned by 0 on disk; shown as 200000, the namespace's root.
  ASSERT_EQ(stat((snapshot->rootfs + "/etc/os").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 200000u);
  EXPECT_EQ(st.st_gid, 200000u);
  ASSERT_EQ(stat(snapshot->rootfs.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 200000u);
  EXPECT_EQ(ReadOrEmpty(snapshot->rootfs + "/etc/os"), "middle");
  // The layers on disk are untouched.
  ASSERT_EQ(stat(dir_.Join("layer1/etc/os").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_TRUE(store_->Release("mapped").ok());
}

}  // namespace
}  // namespace berth::images
