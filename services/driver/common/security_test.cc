#include "services/driver/common/security.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/driver/common/child_probe_testing.h"

namespace berth::driver_common {
namespace {

using Names = google::protobuf::RepeatedPtrField<std::string>;

Names Of(std::vector<std::string> names) {
  Names out;
  for (std::string& name : names) *out.Add() = std::move(name);
  return out;
}

TEST(CapabilitiesTest, TableCoversEveryCapabilityInOrder) {
  ASSERT_EQ(std::size(kCapabilityTable), size_t{kLastCapability + 1});
  for (int i = 0; i <= kLastCapability; ++i) {
    EXPECT_EQ(kCapabilityTable[i].number, i);
  }
  EXPECT_EQ(kDefaultCapabilities, uint64_t{0xa80425fb});
  EXPECT_EQ(CapabilityNumber("CHECKPOINT_RESTORE"), 40);
}

TEST(CapabilitiesTest, NamesWithOrWithoutPrefixInAnyCase) {
  EXPECT_EQ(CapabilityNumber("NET_ADMIN"), 12);
  EXPECT_EQ(CapabilityNumber("CAP_NET_ADMIN"), 12);
  EXPECT_EQ(CapabilityNumber("cap_net_admin"), 12);
  EXPECT_EQ(CapabilityNumber("Sys_Admin"), 21);
  EXPECT_EQ(CapabilityNumber("ALL"), std::nullopt);
  EXPECT_EQ(CapabilityNumber("CAP_"), std::nullopt);
}

TEST(CapabilitiesTest, DropsFirstThenAdds) {
  absl::StatusOr<uint64_t> caps = ResolveCapabilities(
      Of({"NET_ADMIN", "cap_sys_time"}), Of({"CHOWN", "CAP_NET_RAW"}), false);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(*caps,
            (kDefaultCapabilities & ~CapabilityBit(0) & ~CapabilityBit(13)) |
                CapabilityBit(12) | CapabilityBit(25));

  caps = ResolveCapabilities(Of({"CHOWN"}), Of({"all"}), false);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(*caps, CapabilityBit(0));

  caps = ResolveCapabilities(Of({"ALL"}), Of({"ALL"}), false);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(*caps, kAllCapabilities);

  caps = ResolveCapabilities(Of({}), Of({"ALL"}), true);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(*caps, kAllCapabilities);

  caps = ResolveCapabilities(Of({}), Of({}), false);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(*caps, kDefaultCapabilities);
}

TEST(CapabilitiesTest, UnknownNameNamesFieldAndIndex) {
  absl::StatusOr<uint64_t> caps =
      ResolveCapabilities(Of({"NET_ADMIN", "NET_ADMN"}), Of({}), false);
  ASSERT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(caps.status().message(),
            "isolation.cap_add[1]: \"NET_ADMN\" is not a capability");
  caps = ResolveCapabilities(Of({}), Of({"CAP_CHOWN", "CAP_"}), true);
  ASSERT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(caps.status().message(),
            "isolation.cap_drop[1]: \"CAP_\" is not a capability");
}

// Loads `filter` with no_new_privs in a forked child, runs `probe` there
// and returns what it wrote as "key value" lines.
std::map<std::string, std::string> InChild(
    const std::string& filter, const std::function<std::string()>& probe) {
  return ParseReport(OutputOfChild([&]() -> std::string {
    struct sock_fprog program = {};
    program.len =
        static_cast<unsigned short>(filter.size() / sizeof(struct sock_filter));
    program.filter =
        reinterpret_cast<struct sock_filter*>(const_cast<char*>(filter.data()));
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      return absl::StrCat("load_error ", errno, "\n");
    }
    return probe();
  }));
}

// "NAME RESULT ERRNO-NAME" for a call made through syscall(2).
std::string Result(const char* name, long result) {
  const int error = errno;
  return absl::StrCat(name, " ", result < 0 ? "-1" : "ok", " ",
                      result < 0 ? strerrorname_np(error) : "-", "\n");
}

// Result of `f()`, with errno cleared before it.
template <typename F>
std::string Call(const char* name, F f) {
  errno = 0;
  const long result = f();
  return Result(name, result);
}

// Every call is made so that it cannot change the machine even without
// the filter: nonexistent paths, invalid descriptors, clocks and flags. The
// unshares and the personality change only this short-lived child.
std::string ProbeDeniedCalls() {
  std::string out;
  auto call = [&](const char* name, auto&& f) { out += Call(name, f); };
  call("mount", [] {
    return mount("/nonexistent-berth-source", "/nonexistent-berth-target",
                 nullptr, MS_BIND, nullptr);
  });
  call("umount2",
       [] { return umount2("/nonexistent-berth-target", MNT_DETACH); });
  call("pivot_root", [] {
    return syscall(SYS_pivot_root, "/nonexistent-berth-a",
                   "/nonexistent-berth-b");
  });
  call("setns", [] { return setns(-1, 0); });
  // The task's PID 1 is berth's init: signal 0 and a limit read only.
  call("kill_pid1", [] { return syscall(SYS_kill, 1, 0); });
  call("tgkill_pid1", [] { return syscall(SYS_tgkill, 1, 1, 0); });
  call("pidfd_open_pid1", [] { return syscall(SYS_pidfd_open, 1, 0); });
  call("prlimit_pid1", [] {
    struct rlimit old;
    return syscall(SYS_prlimit64, 1, RLIMIT_NOFILE, nullptr, &old);
  });
  call("keyctl", [] { return syscall(SYS_keyctl, -1, 0, 0, 0, 0); });
  call("add_key", [] {
    return syscall(SYS_add_key, "berth-no-such-type", "x", nullptr, 0, 0);
  });
  call("request_key", [] {
    return syscall(SYS_request_key, "berth-no-such-type", "x", nullptr, 0);
  });
  call("bpf", [] { return syscall(SYS_bpf, -1, nullptr, 0); });
  call("perf_event_open",
       [] { return syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); });
  call("clock_settime", [] {
    struct timespec ts = {0, 0};
    return syscall(SYS_clock_settime, 12345, &ts);
  });
  call("settimeofday", [] {
    struct timeval tv = {0, 2000000};  // tv_usec out of range
    return syscall(SYS_settimeofday, &tv, nullptr);
  });
  call("clock_adjtime",
       [] { return syscall(SYS_clock_adjtime, 12345, nullptr); });
  call("userfaultfd", [] { return syscall(SYS_userfaultfd, ~0); });
  call("open_by_handle_at",
       [] { return syscall(SYS_open_by_handle_at, -1, nullptr, 0); });
  call("acct", [] { return acct("/nonexistent-berth-dir/acct"); });
  call("personality_addr_no_randomize",
       [] { return syscall(SYS_personality, ADDR_NO_RANDOMIZE); });
  call("finit_module", [] { return syscall(SYS_finit_module, -1, "", 0); });
  call("delete_module",
       [] { return syscall(SYS_delete_module, "berth-no-such-module", 0); });
  call("kexec_load",
       [] { return syscall(SYS_kexec_load, 0, 0, nullptr, ~0UL); });
  call("swapoff",
       [] { return syscall(SYS_swapoff, "/nonexistent-berth-swap"); });
  call("iopl", [] { return syscall(SYS_iopl, 99); });
  call("io_uring_setup",
       [] { return syscall(SYS_io_uring_setup, 0, nullptr); });
  call("clone3", [] { return syscall(SYS_clone3, nullptr, 0); });
  // Last: without the filter, the new user namespace would cost the calls
  // above their capabilities.
  call("unshare_user", [] { return unshare(CLONE_NEWUSER); });
  call("unshare_mnt", [] { return unshare(CLONE_NEWNS); });
  call("unshare_net", [] { return unshare(CLONE_NEWNET); });
  // Every single bit outside PER_LINUX32 and UNAME26, and values near the
  // query, all refused.
  int personality_allowed = 0;
  for (int bit = 0; bit < 32; ++bit) {
    if (bit == 3 || bit == 17) continue;
    if (syscall(SYS_personality, 1UL << bit) != -1 || errno != EPERM) {
      ++personality_allowed;
    }
  }
  for (unsigned long value : {0xfffffffeUL, 0x7fffffffUL, 0xfffffff7UL,
                              0xfffdffffUL, 0x20009UL, 0x100000000UL}) {
    if (syscall(SYS_personality, value) != -1 || errno != EPERM) {
      ++personality_allowed;
    }
  }
  out += absl::StrCat("personality_other_values_allowed ", personality_allowed,
                      "\n");
  return out;
}

std::string ProbeAllowedCalls() {
  std::string out;
  out += absl::StrCat("getpid ", syscall(SYS_getpid) == getpid() ? "ok" : "no",
                      "\n");
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  out += absl::StrCat("open ", fd >= 0 ? "ok" : strerrorname_np(errno), "\n");
  const pid_t child = fork();
  if (child == 0) {
    execl("/bin/true", "true", nullptr);
    _exit(127);
  }
  int status = -1;
  if (child > 0) waitpid(child, &status, 0);
  out += absl::StrCat("fork_exec_true ",
                      child > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                      "\n");
  errno = 0;
  const long query = syscall(SYS_personality, 0xffffffffUL);
  out += absl::StrCat("personality_query ", query >= 0 ? "ok" : "-1", "\n");
  errno = 0;
  const long to32 = syscall(SYS_personality, PER_LINUX32);
  const long back = syscall(SYS_personality, PER_LINUX);
  out += absl::StrCat("personality_linux32 ",
                      to32 >= 0 && back == PER_LINUX32 ? "ok" : "no", "\n");
  errno = 0;
  out += absl::StrCat("getppid ", syscall(SYS_getppid) > 0 ? "ok" : "no", "\n");
  out += absl::StrCat("kill_parent ",
                      syscall(SYS_kill, getppid(), 0) == 0 ? "ok" : "no", "\n");
  // A thread (clone without namespace flags) still starts.
  const pid_t thread_like = fork();
  if (thread_like == 0) _exit(0);
  if (thread_like > 0) waitpid(thread_like, nullptr, 0);
  out += absl::StrCat("fork ", thread_like > 0 ? "ok" : "no", "\n");
  return out;
}

class DefaultSeccompFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (prctl(PR_GET_SECCOMP) != 0) {
      GTEST_SKIP() << "already under a seccomp filter: results would mix";
    }
  }
};

TEST_F(DefaultSeccompFilterTest, RefusesWhatEscapesTheTask) {
  const absl::StatusOr<std::string>& filter = DefaultSeccompFilterOnce();
  ASSERT_TRUE(filter.ok()) << filter.status();
  std::printf("default filter: %zu instructions\n",
              filter->size() / sizeof(struct sock_filter));
  std::map<std::string, std::string> report =
      InChild(*filter, ProbeDeniedCalls);
  ASSERT_EQ(report.count("load_error"), 0u) << report["load_error"];
  for (const char* name : {"mount",
                           "umount2",
                           "pivot_root",
                           "unshare_user",
                           "unshare_mnt",
                           "unshare_net",
                           "setns",
                           "kill_pid1",
                           "tgkill_pid1",
                           "pidfd_open_pid1",
                           "prlimit_pid1",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "bpf",
                           "perf_event_open",
                           "clock_settime",
                           "settimeofday",
                           "clock_adjtime",
                           "userfaultfd",
                           "open_by_handle_at",
                           "acct",
                           "personality_addr_no_randomize",
                           "finit_module",
                           "delete_module",
                           "kexec_load",
                           "swapoff",
                           "iopl",
                           "io_uring_setup"}) {
    EXPECT_EQ(report[name], "-1 EPERM") << name;
  }
  EXPECT_EQ(report["clone3"], "-1 ENOSYS");
  EXPECT_EQ(report["personality_other_values_allowed"], "0");
}

// The probes tell the filter's EPERM from the kernel's own answer: without
// a filter (an allow-everything profile) they fail otherwise.
TEST_F(DefaultSeccompFilterTest, ProbesSeeTheKernelsErrorsWithoutIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: EPERM is the kernel's too";
  absl::StatusOr<std::string> allow_all =
      CompileSeccompProfile(R"({"defaultAction": "SCMP_ACT_ALLOW"})");
  ASSERT_TRUE(allow_all.ok()) << allow_all.status();
  std::map<std::string, std::string> report =
      InChild(*allow_all, ProbeDeniedCalls);
  EXPECT_EQ(report["mount"], "-1 ENOENT");
  // EBADF, or ENOSYS from a kernel without modules.
  EXPECT_NE(report["finit_module"], "-1 EPERM");
  EXPECT_EQ(report["clock_settime"], "-1 EINVAL");
  EXPECT_EQ(report["settimeofday"], "-1 EINVAL");
  EXPECT_EQ(report["acct"], "-1 ENOENT");
  EXPECT_EQ(report["kill_pid1"], "ok -");
  EXPECT_EQ(report["prlimit_pid1"], "ok -");
  EXPECT_EQ(report["unshare_mnt"], "ok -");
  EXPECT_EQ(report["clone3"], "-1 EINVAL");
  EXPECT_NE(report["personality_other_values_allowed"], "0");
}

TEST_F(DefaultSeccompFilterTest, AllowsEverydayCalls) {
  const absl::StatusOr<std::string>& filter = DefaultSeccompFilterOnce();
  ASSERT_TRUE(filter.ok()) << filter.status();
  std::map<std::string, std::string> report =
      InChild(*filter, ProbeAllowedCalls);
  ASSERT_EQ(report.count("load_error"), 0u) << report["load_error"];
  EXPECT_EQ(report["getpid"], "ok");
  EXPECT_EQ(report["open"], "ok");
  EXPECT_EQ(report["fork_exec_true"], "0");
  EXPECT_EQ(report["personality_query"], "ok");
  EXPECT_EQ(report["personality_linux32"], "ok");
  EXPECT_EQ(report["getppid"], "ok");
  EXPECT_EQ(report["kill_parent"], "ok");
  EXPECT_EQ(report["fork"], "ok");
}

TEST_F(DefaultSeccompFilterTest, CapabilitiesOpenTheirGroups) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to unshare a mount namespace";
  absl::StatusOr<std::string> filter = DefaultSeccompFilter(
      kDefaultCapabilities | CapabilityBit(21) | CapabilityBit(25));
  ASSERT_TRUE(filter.ok()) << filter.status();
  std::map<std::string, std::string> report = InChild(*filter, [] {
    std::string out;
    out += Call("unshare_mnt", [&] { return unshare(CLONE_NEWNS); });
    out += Call("umount2",
                [&] { return umount2("/nonexistent-berth-target", 0); });
    struct timespec ts = {0, 0};
    out += Call("clock_settime",
                [&] { return syscall(SYS_clock_settime, 12345, &ts); });
    out += Call("keyctl", [&] { return syscall(SYS_keyctl, -1, 0, 0, 0, 0); });
    return out;
  });
  EXPECT_EQ(report["unshare_mnt"], "ok -");
  EXPECT_EQ(report["umount2"], "-1 ENOENT");
  EXPECT_EQ(report["clock_settime"], "-1 EINVAL");
  EXPECT_EQ(report["keyctl"], "-1 EPERM");  // never allowed
}

TEST(SeccompProfileTest, DockerFormatErrnoRule) {
  absl::StatusOr<std::string> filter = CompileSeccompProfile(R"({
    "defaultAction": "SCMP_ACT_ALLOW",
    "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
                      "SCMP_ARCH_AARCH64"],
    "syscalls": [
      {"names": ["getppid", "berth_no_such_syscall"],
       "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
      {"name": "getpriority", "action": "SCMP_ACT_ERRNO",
       "args": [{"index": 0, "value": 1, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]},
      {"names": ["getpid"], "action": "SCMP_ACT_ALLOW"},
      {"names": ["getuid"], "action": "SCMP_ACT_ERRNO",
       "includes": {"caps": ["CAP_SYS_ADMIN"]}},
      {"names": ["getgid"], "action": "SCMP_ACT_ERRNO",
       "excludes": {"caps": ["CAP_SYS_ADMIN"]}, "comment": "applies"}
    ]})");
  ASSERT_TRUE(filter.ok()) << filter.status();
  std::map<std::string, std::string> report = InChild(*filter, [] {
    std::string out;
    out += Call("getppid", [&] { return syscall(SYS_getppid); });
    out += Call("getpriority_pgrp",
                [&] { return syscall(SYS_getpriority, PRIO_PGRP, 0); });
    out += Call("getpriority_process",
                [&] { return syscall(SYS_getpriority, PRIO_PROCESS, 0); });
    out += Call("getuid", [&] { return syscall(SYS_getuid); });
    out += Call("getgid", [&] { return syscall(SYS_getgid); });
    return out;
  });
  EXPECT_EQ(report["getppid"], "-1 ENOSYS");
  EXPECT_EQ(report["getpriority_pgrp"], "-1 EPERM");
  EXPECT_EQ(report["getpriority_process"], "ok -");
  EXPECT_EQ(report["getuid"], "ok -");
  EXPECT_EQ(report["getgid"], "-1 EPERM");
}

TEST(SeccompProfileTest, AllowlistWithDefaultErrno) {
  // An allowlist that permits what the probe needs and nothing else.
  absl::StatusOr<std::string> filter = CompileSeccompProfile(R"({
    "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
    "syscalls": [{"names": ["write", "exit", "exit_group", "getpid"],
                  "action": "SCMP_ACT_ALLOW"}]})");
  ASSERT_TRUE(filter.ok()) << filter.status();
  std::map<std::string, std::string> report = InChild(*filter, [] {
    std::string out;
    out += Call("getpid", [&] { return syscall(SYS_getpid); });
    out += Call("getppid", [&] { return syscall(SYS_getppid); });
    return out;
  });
  EXPECT_EQ(report["getpid"], "ok -");
  EXPECT_EQ(report["getppid"], "-1 EPERM");
}

TEST(SeccompProfileTest, MalformedProfilesNameThePath) {
  const std::string prefix = "isolation.seccomp.custom_profile_json: ";
  const std::pair<const char*, const char*> cases[] = {
      {"{", "is not JSON"},
      {"[]", "is not a JSON object"},
      {"{}", "defaultAction is missing"},
      {R"({"defaultAction": 7})", "defaultAction: 7 is not a string"},
      {R"({"defaultAction": "SCMP_ACT_NOPE"})",
       "defaultAction: \"SCMP_ACT_NOPE\" is not an action"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
          {"names": ["a"], "action": "SCMP_ACT_ERRNO"},
          {"names": ["b"], "action": "SCMP_ACT_ERRNO"},
          {"names": ["c"], "action": "SCMP_ACT_ERRNO"},
          {"names": ["getppid"], "action": "SCMP_ACT_NOPE"}]})",
       "syscalls[3].action: \"SCMP_ACT_NOPE\" is not an action"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
          {"names": ["getppid"], "action": "SCMP_ACT_ERRNO",
           "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_NOPE"}]}]})",
       "syscalls[0].args[0].op: \"SCMP_CMP_NOPE\" is not an operator"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
          {"names": ["getppid"], "action": "SCMP_ACT_ERRNO",
           "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}]})",
       "syscalls[0].args[0].index: 6 is not 0 to 5"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
          {"names": ["getppid"], "action": "SCMP_ACT_ERRNO",
           "args": [{"index": 0, "value": -1, "op": "SCMP_CMP_EQ"}]}]})",
       "syscalls[0].args[0].value: -1 is not a non-negative integer"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
          {"names": ["getppid"], "action": "SCMP_ACT_ERRNO",
           "errnoRet": 70000}]})",
       "syscalls[0].errnoRet: 70000 is above 65535"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
          {"names": "getppid", "action": "SCMP_ACT_ERRNO"}]})",
       "syscalls[0].names: is not an array"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
          {"action": "SCMP_ACT_ERRNO"}]})",
       "syscalls[0]: names is missing"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW",
           "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_NOPE"]})",
       "architectures[1]: \"SCMP_ARCH_NOPE\" is not an architecture"},
      // Found by seccomp_profile_fuzzer: major * 1000 overflowed an int.
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
          {"names": ["getppid"], "action": "SCMP_ACT_ERRNO",
           "includes": {"minKernel": "99999999.1"}}]})",
       "syscalls[0].includes.minKernel: \"99999999.1\" is not a kernel "
       "version"},
      {R"({"defaultAction": "SCMP_ACT_NOTIFY"})",
       "defaultAction: SCMP_ACT_NOTIFY is not supported (no agent listens for "
       "notifications)"},
  };
  for (const auto& [json, want] : cases) {
    absl::StatusOr<std::string> filter = CompileSeccompProfile(json);
    ASSERT_EQ(filter.status().code(), absl::StatusCode::kInvalidArgument)
        << json;
    EXPECT_EQ(filter.status().message(), prefix + want) << json;
  }
  // More rules than a filter may have instructions: the profile's fault.
  std::string rules;
  for (int i = 0; i < 6000; ++i) {
    absl::StrAppend(&rules, i == 0 ? "" : ",",
                    R"({"names": ["getppid"], "action": "SCMP_ACT_ERRNO",
                        "args": [{"index": 0, "value": )",
                    i + 1, R"(, "op": "SCMP_CMP_EQ"}]})");
  }
  absl::StatusOr<std::string> huge = CompileSeccompProfile(absl::StrCat(
      R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [)", rules, "]}"));
  ASSERT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument)
      << huge.status();
  EXPECT_THAT(std::string(huge.status().message()),
              ::testing::AllOf(::testing::StartsWith(prefix + "compiles to "),
                               ::testing::HasSubstr("more than the 4096")));
}

}  // namespace
}  // namespace berth::driver_common
