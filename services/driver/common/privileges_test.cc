#include "services/driver/common/privileges.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "services/driver/common/child_probe_testing.h"

namespace berth::driver_common {
namespace {

// Docker's default capability set (security.h's kDefaultCapabilities; this
// test may not link Abseil's side): CHOWN DAC_OVERRIDE FOWNER FSETID KILL
// SETGID SETUID SETPCAP NET_BIND_SERVICE NET_RAW SYS_CHROOT MKNOD
// AUDIT_WRITE SETFCAP, as `docker run` shows it in CapBnd.
constexpr uint64_t kDockerDefault = 0x00000000a80425fb;

// What the child saw after DropPrivileges: the /proc/self/status lines named
// below, "error" (the step and errno) and whatever the check added.
using Report = std::map<std::string, std::string>;

// Runs DropPrivileges in a forked child, then `after` (which may add
// "key value" lines or execute a program that does), and returns the
// child's report.
template <typename After>
Report RunChild(const PrivilegeSpec& spec, uid_t uid, gid_t gid,
                const std::vector<gid_t>& groups, After after) {
  return ParseReport(OutputOfChild([&]() -> std::string {
    std::string what;
    int error_number = 0;
    if (!DropPrivileges(spec, uid, gid, groups, &what, &error_number)) {
      return "error " + std::to_string(error_number) + " " + what + "\n";
    }
    std::string out;
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
      for (const char* key :
           {"Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:",
            "CapBnd:", "CapAmb:", "NoNewPrivs:", "Seccomp:"}) {
        if (line.rfind(key, 0) == 0) out += line + "\n";
      }
    }
    // Before `after`, which may execute another program.
    (void)!write(STDOUT_FILENO, out.data(), out.size());
    return after();
  }));
}

Report RunChild(const PrivilegeSpec& spec, uid_t uid, gid_t gid,
                const std::vector<gid_t>& groups) {
  return RunChild(spec, uid, gid, groups, [] { return std::string(); });
}

uint64_t Mask(const Report& report, const std::string& key) {
  auto it = report.find(key);
  if (it == report.end()) {
    ADD_FAILURE() << key << " missing";
    return ~uint64_t{0};
  }
  return std::stoull(it->second, nullptr, 16);
}

// A filter that makes getppid fail with EPERM and allows everything else
// (and every other architecture: it only has to work in this test).
std::string GetppidEpermFilter() {
  const struct sock_filter program[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getppid, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  return std::string(reinterpret_cast<const char*>(program), sizeof(program));
}

std::string GetppidResult() {
  // Not glibc's getppid(), which cannot fail and so never sets errno.
  errno = 0;
  const long parent = syscall(SYS_getppid);
  return "getppid " + std::to_string(parent) + " " + std::to_string(errno) +
         "\n";
}

class PrivilegesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (capset, setuid)";
    std::ifstream status("/proc/self/status");
    std::string line, effective, bounding;
    while (std::getline(status, line)) {
      if (line.rfind("CapEff:", 0) == 0) effective = line.substr(7);
      if (line.rfind("CapBnd:", 0) == 0) bounding = line.substr(7);
    }
    if (effective != bounding) {
      GTEST_SKIP() << "root here lacks part of its bounding set";
    }
  }
};

TEST_F(PrivilegesTest, RootKeepsTheGivenSetInEverySetButAmbient) {
  PrivilegeSpec spec;
  spec.enabled = true;
  spec.capabilities = kDockerDefault;
  Report report = RunChild(spec, 0, 0, {});
  EXPECT_EQ(report.count("error"), 0u) << report["error"];
  EXPECT_EQ(Mask(report, "CapBnd"), kDockerDefault);
  EXPECT_EQ(Mask(report, "CapPrm"), kDockerDefault);
  EXPECT_EQ(Mask(report, "CapEff"), kDockerDefault);
  EXPECT_EQ(Mask(report, "CapInh"), kDockerDefault);
  EXPECT_EQ(Mask(report, "CapAmb"), 0u);
  EXPECT_EQ(report["NoNewPrivs"], "1");
  EXPECT_EQ(report["Seccomp"], "0");
}

TEST_F(PrivilegesTest, NonRootKeepsNothing) {
  PrivilegeSpec spec;
  spec.enabled = true;
  spec.capabilities = kDockerDefault;
  Report report = RunChild(spec, 65534, 65534, {65533});
  EXPECT_EQ(report.count("error"), 0u) << report["error"];
  EXPECT_EQ(report["Uid"], "65534\t65534\t65534\t65534");
  EXPECT_EQ(report["Gid"], "65534\t65534\t65534\t65534");
  EXPECT_EQ(report["Groups"], "65533");
  // The bounding set is reduced all the same: a setuid-root binary (were
  // no_new_privs off) could not get more than the set.
  EXPECT_EQ(Mask(report, "CapBnd"), kDockerDefault);
  EXPECT_EQ(Mask(report, "CapPrm"), 0u);
  EXPECT_EQ(Mask(report, "CapEff"), 0u);
  EXPECT_EQ(Mask(report, "CapInh"), 0u);
  EXPECT_EQ(Mask(report, "CapAmb"), 0u);
  EXPECT_EQ(report["NoNewPrivs"], "1");
}

TEST_F(PrivilegesTest, CapabilitiesAboveTheKernelsLastAreIgnored) {
  PrivilegeSpec spec;
  spec.enabled = true;
  spec.capabilities = ~uint64_t{0};
  spec.no_new_privs = false;
  Report report = RunChild(spec, 0, 0, {});
  EXPECT_EQ(report.count("error"), 0u) << report["error"];
  EXPECT_EQ(Mask(report, "CapEff"), Mask(report, "CapBnd"));
  EXPECT_NE(Mask(report, "CapEff"), 0u);
  EXPECT_EQ(report["NoNewPrivs"], "0");
}

TEST_F(PrivilegesTest, DisabledOnlyChangesTheIdentity) {
  Report before = RunChild(PrivilegeSpec(), 0, 0, {});
  PrivilegeSpec spec;  // enabled = false
  spec.capabilities = kDockerDefault;
  spec.seccomp_filter = GetppidEpermFilter();
  Report report = RunChild(spec, 65534, 65534, {}, GetppidResult);
  EXPECT_EQ(report.count("error"), 0u) << report["error"];
  EXPECT_EQ(report["Uid"], "65534\t65534\t65534\t65534");
  EXPECT_EQ(Mask(report, "CapBnd"), Mask(before, "CapBnd"));
  EXPECT_EQ(report["NoNewPrivs"], "0");
  EXPECT_EQ(report["Seccomp"], "0");
  EXPECT_EQ(report["getppid"], std::to_string(getpid()) + " 0");
}

TEST_F(PrivilegesTest, LoadsTheFilterLastWithNoNewPrivs) {
  PrivilegeSpec spec;
  spec.enabled = true;
  spec.capabilities = kDockerDefault;
  spec.seccomp_filter = GetppidEpermFilter();
  Report report = RunChild(spec, 65534, 65534, {}, GetppidResult);
  EXPECT_EQ(report.count("error"), 0u) << report["error"];
  EXPECT_EQ(report["NoNewPrivs"], "1");
  EXPECT_EQ(report["Seccomp"], "2");
  EXPECT_EQ(report["getppid"], "-1 " + std::to_string(EPERM));
}

TEST_F(PrivilegesTest, LoadsTheFilterWhileRootWithoutNoNewPrivs) {
  PrivilegeSpec spec;
  spec.enabled = true;
  spec.capabilities = kDockerDefault;
  spec.no_new_privs = false;
  spec.seccomp_filter = GetppidEpermFilter();
  // Non-root: loading it last would need no_new_privs or CAP_SYS_ADMIN,
  // neither of which is left by then.
  Report report = RunChild(spec, 65534, 65534, {}, GetppidResult);
  EXPECT_EQ(report.count("error"), 0u) << report["error"];
  EXPECT_EQ(report["NoNewPrivs"], "0");
  EXPECT_EQ(report["Seccomp"], "2");
  EXPECT_EQ(Mask(report, "CapEff"), 0u);
  EXPECT_EQ(report["getppid"], "-1 " + std::to_string(EPERM));
}

TEST_F(PrivilegesTest, RefusesAFilterThatIsNotWholeInstructions) {
  PrivilegeSpec spec;
  spec.enabled = true;
  spec.capabilities = kDockerDefault;
  spec.seccomp_filter = GetppidEpermFilter() + "xyz";
  Report report = RunChild(spec, 65534, 65534, {});
  ASSERT_EQ(report.count("error"), 1u);
  EXPECT_EQ(
      report["error"].rfind(
          std::to_string(EINVAL) + " loading the seccomp filter: 51 bytes", 0),
      0u)
      << report["error"];
}

TEST_F(PrivilegesTest, NamesTheStepThatFailed) {
  // A group list longer than NGROUPS_MAX (65536) is refused by setgroups.
  std::vector<gid_t> groups(65537, 100);
  PrivilegeSpec spec;
  spec.enabled = true;
  Report report = RunChild(spec, 65534, 65534, groups);
  EXPECT_EQ(report["error"],
            std::to_string(EINVAL) + " setting supplementary groups");
}

TEST_F(PrivilegesTest, DescriptorsOpenedWithoutCloexecDoNotReachTheProgram) {
  for (bool enabled : {false, true}) {
    SCOPED_TRACE(enabled ? "enabled" : "disabled");
    const int leaked = open("/dev/null", O_RDONLY);  // no O_CLOEXEC
    ASSERT_GE(leaked, 3);
    PrivilegeSpec spec;
    spec.enabled = enabled;
    spec.capabilities = kDockerDefault;
    const std::string path = "/proc/self/fd/" + std::to_string(leaked);
    Report report = RunChild(spec, 65534, 65534, {}, [&] {
      std::string out =
          "cloexec " +
          std::to_string((fcntl(leaked, F_GETFD) & FD_CLOEXEC) != 0) + "\n";
      // The exec'd shell writes after this child's own lines.
      (void)!write(STDOUT_FILENO, out.data(), out.size());
      const std::string script = "if [ -e " + path +
                                 " ]; then echo after_exec open; else echo "
                                 "after_exec closed; fi";
      execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
      return std::string("after_exec exec-failed\n");
    });
    close(leaked);
    EXPECT_EQ(report.count("error"), 0u) << report["error"];
    EXPECT_EQ(report["cloexec"], "1");
    EXPECT_EQ(report["after_exec"], "closed");
  }
}

}  // namespace
}  // namespace berth::driver_common
