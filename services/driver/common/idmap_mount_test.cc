#include "services/driver/common/idmap_mount.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::driver_common {
namespace {

bool WriteFile(const std::string& path, const std::string& data) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok =
      write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  close(fd);
  return ok;
}

// A user namespace mapping ids 0..65535 to host ids 200000.., held by a
// child that waits to be killed.
class MappedNamespace {
 public:
  MappedNamespace() {
    int ready[2];
    if (pipe(ready) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      if (unshare(CLONE_NEWUSER) != 0) _exit(1);
      close(ready[1]);
      while (true) pause();
    }
    close(ready[1]);
    char c;
    (void)!read(ready[0], &c, 1);  // EOF once unshared
    close(ready[0]);
    const std::string proc = "/proc/" + std::to_string(pid_);
    if (!WriteFile(proc + "/uid_map", "0 200000 65536\n") ||
        !WriteFile(proc + "/gid_map", "0 300000 65536\n")) {
      return;
    }
    fd_ = open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
  }
  ~MappedNamespace() {
    if (fd_ >= 0) close(fd_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int fd() const { return fd_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

TEST(IdmapMountTest, RootOwnedFilesShowAsTheNamespacesRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (mount_setattr)";
  const char* tmp = getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/idmapXXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::ofstream(dir + "/root-file") << "x";
  std::ofstream(dir + "/user-file") << "y";
  ASSERT_EQ(chown((dir + "/root-file").c_str(), 0, 0), 0);
  ASSERT_EQ(chown((dir + "/user-file").c_str(), 1000, 1000), 0);

  MappedNamespace userns;
  ASSERT_GE(userns.fd(), 0)
      << "making a user namespace: " << std::strerror(errno);
  std::string what;
  int err = 0;
  const int tree =
      OpenIdmappedTree(dir, userns.fd(), /*recursive=*/true, &what, &err);
  if (tree < 0 && err == EINVAL) {
    GTEST_SKIP() << what << ": " << std::strerror(err)
                 << " (no idmapped mounts on the file system of " << dir << ")";
  }
  ASSERT_GE(tree, 0) << what << ": " << std::strerror(err);
  struct stat st;
  ASSERT_EQ(fstatat(tree, "root-file", &st, 0), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_uid, 200000u);
  EXPECT_EQ(st.st_gid, 300000u);
  ASSERT_EQ(fstatat(tree, "user-file", &st, 0), 0);
  EXPECT_EQ(st.st_uid, 201000u);
  EXPECT_EQ(st.st_gid, 301000u);
  // The directory itself is untouched.
  ASSERT_EQ(stat((dir + "/root-file").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);

  // An attached mount cannot be idmapped.
  const int attached = open(dir.c_str(), O_PATH | O_CLOEXEC);
  EXPECT_FALSE(IdmapMount(attached, userns.fd(), false, &what, &err));
  EXPECT_EQ(err, EINVAL);
  close(attached);
  close(tree);
}

TEST(IdmapMountTest, MadeNamespaceIdmapsABindTreeWithItsAttributes) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (mount_setattr)";
  const char* tmp = getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/idmapXXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::ofstream(dir + "/root-file") << "x";
  ASSERT_EQ(chown((dir + "/root-file").c_str(), 0, 0), 0);

  std::string what;
  int err = 0;
  const int userns =
      MakeUserNamespace("0 200000 65536\n", "0 300000 1000\n", &what, &err);
  ASSERT_GE(userns, 0) << what << ": " << std::strerror(err);
  // The holder is gone (reaped), the namespace kept by the descriptor.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG | __WALL), -1);
  EXPECT_EQ(errno, ECHILD);
  const int tree = OpenBindTree(dir, MOUNT_ATTR_RDONLY, /*recursive=*/true,
                                &what, &err, userns);
  if (tree < 0 && err == EINVAL) {
    GTEST_SKIP() << what << ": " << std::strerror(err)
                 << " (no idmapped mounts on the file system of " << dir << ")";
  }
  ASSERT_GE(tree, 0) << what << ": " << std::strerror(err);
  struct stat st;
  ASSERT_EQ(fstatat(tree, "root-file", &st, 0), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_uid, 200000u);
  EXPECT_EQ(st.st_gid, 300000u);
  // Read-only as asked.
  EXPECT_LT(openat(tree, "root-file", O_WRONLY | O_CLOEXEC), 0);
  EXPECT_EQ(errno, EROFS);
  close(tree);
  close(userns);

  // Maps the kernel refuses (host root's range twice) name the map.
  EXPECT_LT(MakeUserNamespace("0 200000 10\n0 200005 10\n", "0 300000 1\n",
                              &what, &err),
            0);
  EXPECT_THAT(what, ::testing::HasSubstr("uid map"));
  EXPECT_EQ(err, EINVAL);
  unlink((dir + "/root-file").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace berth::driver_common
