// What a task keeps of root's privileges, resolved on the driver's side:
// capability sets from Isolation.cap_add/cap_drop/privileged, and seccomp
// filters compiled with libseccomp into the raw struct sock_filter[] bytes
// that PrivilegeSpec.seccomp_filter carries to berth-task-init (which loads
// them with privileges.h, without libseccomp).

#ifndef SERVICES_DRIVER_COMMON_SECURITY_H_
#define SERVICES_DRIVER_COMMON_SECURITY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace berth::driver_common {

// Every capability name (without "CAP_") and its number, in order.
struct CapabilityEntry {
  const char* name;
  int number;
};
inline constexpr CapabilityEntry kCapabilityTable[] = {
    {"CHOWN", 0},
    {"DAC_OVERRIDE", 1},
    {"DAC_READ_SEARCH", 2},
    {"FOWNER", 3},
    {"FSETID", 4},
    {"KILL", 5},
    {"SETGID", 6},
    {"SETUID", 7},
    {"SETPCAP", 8},
    {"LINUX_IMMUTABLE", 9},
    {"NET_BIND_SERVICE", 10},
    {"NET_BROADCAST", 11},
    {"NET_ADMIN", 12},
    {"NET_RAW", 13},
    {"IPC_LOCK", 14},
    {"IPC_OWNER", 15},
    {"SYS_MODULE", 16},
    {"SYS_RAWIO", 17},
    {"SYS_CHROOT", 18},
    {"SYS_PTRACE", 19},
    {"SYS_PACCT", 20},
    {"SYS_ADMIN", 21},
    {"SYS_BOOT", 22},
    {"SYS_NICE", 23},
    {"SYS_RESOURCE", 24},
    {"SYS_TIME", 25},
    {"SYS_TTY_CONFIG", 26},
    {"MKNOD", 27},
    {"LEASE", 28},
    {"AUDIT_WRITE", 29},
    {"AUDIT_CONTROL", 30},
    {"SETFCAP", 31},
    {"MAC_OVERRIDE", 32},
    {"MAC_ADMIN", 33},
    {"SYSLOG", 34},
    {"WAKE_ALARM", 35},
    {"BLOCK_SUSPEND", 36},
    {"AUDIT_READ", 37},
    {"PERFMON", 38},
    {"BPF", 39},
    {"CHECKPOINT_RESTORE", 40},
};
inline constexpr int kLastCapability = 40;

constexpr uint64_t CapabilityBit(int number) { return uint64_t{1} << number; }

// Every capability this table knows (what `privileged` and "ALL" mean;
// berth-task-init keeps only those the kernel knows).
inline constexpr uint64_t kAllCapabilities =
    (uint64_t{1} << (kLastCapability + 1)) - 1;

// Docker's default set: CHOWN, DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW,
// SETGID, SETUID, SETFCAP, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT, KILL,
// AUDIT_WRITE (0xa80425fb, CapBnd in `docker run`).
inline constexpr uint64_t kDefaultCapabilities =
    CapabilityBit(0) | CapabilityBit(1) | CapabilityBit(4) | CapabilityBit(3) |
    CapabilityBit(27) | CapabilityBit(13) | CapabilityBit(6) |
    CapabilityBit(7) | CapabilityBit(31) | CapabilityBit(8) |
    CapabilityBit(10) | CapabilityBit(18) | CapabilityBit(5) |
    CapabilityBit(29);

// "NET_ADMIN", "CAP_NET_ADMIN", "net_admin" -> 12; nullopt for anything
// else ("ALL" included).
std::optional<int> CapabilityNumber(absl::string_view name);

// kDefaultCapabilities less `cap_drop`, plus `cap_add` (names as
// CapabilityNumber takes them, or "ALL"); every capability when
// `privileged`. INVALID_ARGUMENT naming the field and index of an unknown
// name: `isolation.cap_add[1]: "NET_ADMN" is not a capability`.
absl::StatusOr<uint64_t> ResolveCapabilities(
    const google::protobuf::RepeatedPtrField<std::string>& cap_add,
    const google::protobuf::RepeatedPtrField<std::string>& cap_drop,
    bool privileged);

// The default filter, with the intent of Docker's default profile but as a
// denylist: everything is allowed except what lets a task reach past its
// namespaces and capabilities (kernel modules, kexec, reboot, mounts and
// pivot_root, new namespaces and setns, the clock, keyrings, bpf and
// perf_event_open, userfaultfd, handles, accounting, quotas, swap, raw I/O
// ports, the kernel log, obsolete calls, io_uring, personalities other than
// Linux and its 32-bit and UNAME26 variants), which fail with EPERM (clone3
// with ENOSYS, so that glibc falls back to clone, whose flags can be seen).
// A denylist keeps every program working that a newer kernel's syscalls
// would otherwise break; the calls it names are listed in security.cc.
//
// Besides, the task's PID 1 (berth's init, or a sandbox container's holder)
// is out of its reach: kill, tkill, tgkill, rt_(tg)sigqueueinfo, pidfd_open,
// ptrace, process_vm_readv/writev, prlimit64, the sched_set* calls,
// setpriority, ioprio_set, migrate_pages, move_pages and kcmp naming pid 1
// fail with EPERM (a custom profile gets no such rules: it says what it
// allows).
//
// As in Docker, a group is allowed when `capabilities` holds the capability
// it needs (cap_add SYS_ADMIN lets mount, unshare and setns through, SYS_TIME
// the clock, ...). x86_64 with its x86 ABI; a call through the x32 ABI
// kills the caller.
absl::StatusOr<std::string> DefaultSeccompFilter(
    uint64_t capabilities = kDefaultCapabilities);

// DefaultSeccompFilter() for kDefaultCapabilities, compiled on the first
// call and kept for the life of the process (a driver calls it once at
// start-up; a task with other capabilities calls DefaultSeccompFilter).
const absl::StatusOr<std::string>& DefaultSeccompFilterOnce();

// Compiles a profile in the OCI runtime spec's (and Docker's) seccomp JSON
// format: defaultAction, defaultErrnoRet, architectures, archMap, and
// syscalls[] with names (or name), action, errnoRet, args[] {index, value,
// valueTwo, op} and Docker's includes/excludes {caps, arches, minKernel}
// (caps judged against `capabilities`). Syscall names this libseccomp does
// not know are skipped, as runc does; architectures other than the native
// one and its x86/x32 ABIs are skipped. A malformed document is
// INVALID_ARGUMENT naming the JSON path, e.g.
// `isolation.seccomp.custom_profile_json: syscalls[3].action:
// "SCMP_ACT_NOPE" is not an action`.
absl::StatusOr<std::string> CompileSeccompProfile(
    const std::string& json, uint64_t capabilities = kDefaultCapabilities);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_SECURITY_H_
