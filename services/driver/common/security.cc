#include "services/driver/common/security.h"

#include <errno.h>
#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

namespace berth::driver_common {
namespace {

constexpr char kProfileField[] = "isolation.seccomp.custom_profile_json: ";

struct ContextDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Context = std::unique_ptr<void, ContextDeleter>;

absl::StatusOr<uint64_t> ResolveNames(
    const google::protobuf::RepeatedPtrField<std::string>& names,
    absl::string_view field) {
  uint64_t set = 0;
  for (int i = 0; i < names.size(); ++i) {
    if (absl::EqualsIgnoreCase(names[i], "ALL")) {
      set |= kAllCapabilities;
      continue;
    }
    std::optional<int> number = CapabilityNumber(names[i]);
    if (!number) {
      return absl::InvalidArgumentError(
          absl::StrCat("isolation.", field, "[", i, "]: \"",
                       absl::CEscape(names[i]), "\" is not a capability"));
    }
    set |= CapabilityBit(*number);
  }
  return set;
}

// The native ABI and, on x86_64, the x86 and x32 ones (which a task may use
// from the same machine): other architectures cannot run here.
bool ArchitectureRunsHere(uint32_t arch) {
  const uint32_t native = seccomp_arch_native();
  return arch == native || (native == SCMP_ARCH_X86_64 &&
                            (arch == SCMP_ARCH_X86 || arch == SCMP_ARCH_X32));
}

absl::Status AddArchitecture(scmp_filter_ctx ctx, uint32_t arch) {
  if (!ArchitectureRunsHere(arch) || seccomp_arch_exist(ctx, arch) == 0) {
    return absl::OkStatus();
  }
  const int rc = seccomp_arch_add(ctx, arch);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("adding seccomp architecture ",
                                            arch, ": ", std::strerror(-rc)));
  }
  return absl::OkStatus();
}

// The filter as struct sock_filter[] bytes, through a memfd: libseccomp
// 2.5 exports only to a file descriptor.
absl::StatusOr<std::string> Export(scmp_filter_ctx ctx) {
  const int fd = memfd_create("berth-seccomp", MFD_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat(
        "memfd_create for the seccomp filter: ", std::strerror(errno)));
  }
  std::string bytes;
  int rc = seccomp_export_bpf(ctx, fd);
  if (rc == 0 && lseek(fd, 0, SEEK_SET) != 0) rc = -errno;
  char buffer[8192];
  while (rc == 0) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) rc = -errno;
    if (n <= 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("exporting the seccomp filter: ", std::strerror(-rc)));
  }
  if (bytes.empty() || bytes.size() % sizeof(struct sock_filter) != 0) {
    return absl::InternalError(absl::StrCat("the exported seccomp filter has ",
                                            bytes.size(), " bytes, not 1 to ",
                                            BPF_MAXINSNS, " instructions"));
  }
  if (const size_t instructions = bytes.size() / sizeof(struct sock_filter);
      instructions > BPF_MAXINSNS) {
    // Too many rules: the caller's input, not berth's fault.
    return absl::OutOfRangeError(absl::StrCat(
        "compiles to ", instructions, " instructions, more than the ",
        BPF_MAXINSNS, " the kernel takes in a filter"));
  }
  return bytes;
}

// ---- the default filter ----

// Adds `action` for `name` with `conditions`; a name this architecture set
// does not have is skipped.
absl::Status Deny(scmp_filter_ctx ctx, const char* name, uint32_t action,
                  const std::vector<scmp_arg_cmp>& conditions = {}) {
  const int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return absl::OkStatus();
  const int rc = seccomp_rule_add_array(ctx, action, nr, conditions.size(),
                                        conditions.data());
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("adding the seccomp rule for ",
                                            name, ": ", std::strerror(-rc)));
  }
  return absl::OkStatus();
}

// A group of calls refused unless the task holds one of `unless` (0: always
// refused).
struct DeniedGroup {
  uint64_t unless;
  std::vector<const char*> names;
};

constexpr uint64_t Cap(int number) { return CapabilityBit(number); }

// Docker gates these groups by capability the same way (CAP_SYS_ADMIN and
// the rest); what it allows to everyone (ptrace, kcmp and process_vm_* since
// Linux 4.8, adjtimex, which changes the clock only with CAP_SYS_TIME) is
// allowed here too.
const std::vector<DeniedGroup>& DeniedGroups() {
  static const auto* groups = new std::vector<DeniedGroup>{
      // Keyrings are not namespaced; userfaultfd stalls the kernel on
      // faults an exploit chooses; the rest are obsolete or unneeded.
      {0,
       {"add_key", "keyctl", "request_key", "userfaultfd", "uselib", "ustat",
        "sysfs", "_sysctl", "nfsservctl", "create_module", "get_kernel_syms",
        "query_module", "vm86", "vm86old", "io_uring_setup", "io_uring_enter",
        "io_uring_register"}},
      {Cap(16), {"init_module", "finit_module", "delete_module"}},
      {Cap(22), {"reboot", "kexec_load", "kexec_file_load"}},
      {Cap(21),
       {"mount", "umount", "umount2", "pivot_root", "swapon", "swapoff",
        "quotactl", "quotactl_fd", "setns", "fsopen", "fsconfig", "fsmount",
        "fspick", "move_mount", "open_tree", "mount_setattr",
        "name_to_handle_at", "fanotify_init", "lookup_dcookie"}},
      {Cap(21) | Cap(39), {"bpf"}},
      {Cap(21) | Cap(38), {"perf_event_open"}},
      {Cap(25),
       {"settimeofday", "stime", "clock_settime", "clock_settime64",
        "clock_adjtime", "clock_adjtime64"}},
      {Cap(20), {"acct"}},
      {Cap(17), {"iopl", "ioperm"}},
      {Cap(26), {"vhangup"}},
      {Cap(34), {"syslog"}},
      {Cap(2), {"open_by_handle_at"}},
      {Cap(23), {"get_mempolicy", "mbind", "set_mempolicy"}},
  };
  return *groups;
}

// The namespace flags of clone (whose low byte is the exit signal, so
// CLONE_NEWTIME's 0x80 cannot be told from it) and unshare.
constexpr uint64_t kCloneNamespaceFlags[] = {
    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};

// personality(2) is allowed with 0 (PER_LINUX), 8 (PER_LINUX32), 0x20000
// (UNAME26), 0x20008 and 0xffffffff (the query), as Docker allows it; every
// other value is refused. libseccomp compares an argument once per rule,
// so "none of these" is a union of rules, each one masked comparison:
// with M the bits other than 3 and 17, a value outside the set has a bit of
// M set and is not 0xffffffff. For M's bits in a cycle b0 -> b1 -> ... ->
// b0, the rule "bit b set, next bit clear" catches every such value that
// lacks some bit of M; one that has them all lacks bit 3 or bit 17, caught
// by "bit b0 set, bit 3 (17) clear". Values above 32 bits are refused too.
absl::Status AddPersonalityRules(scmp_filter_ctx ctx) {
  const uint32_t action = SCMP_ACT_ERRNO(EPERM);
  std::vector<int> bits;
  for (int bit = 0; bit < 32; ++bit) {
    if (bit != 3 && bit != 17) bits.push_back(bit);
  }
  auto masked = [](int set, int clear) {
    const uint64_t mask = (uint64_t{1} << set) | (uint64_t{1} << clear);
    return SCMP_A0(SCMP_CMP_MASKED_EQ, mask, uint64_t{1} << set);
  };
  for (size_t i = 0; i < bits.size(); ++i) {
    const int next = bits[(i + 1) % bits.size()];
    if (absl::Status s =
            Deny(ctx, "personality", action, {masked(bits[i], next)});
        !s.ok()) {
      return s;
    }
  }
  for (int clear : {3, 17}) {
    if (absl::Status s =
            Deny(ctx, "personality", action, {masked(bits[0], clear)});
        !s.ok()) {
      return s;
    }
  }
  return Deny(ctx, "personality", action,
              {SCMP_A0(SCMP_CMP_GT, uint64_t{0xffffffff})});
}

absl::Status AddNamespaceRules(scmp_filter_ctx ctx) {
  const uint32_t action = SCMP_ACT_ERRNO(EPERM);
  std::vector<uint64_t> unshare_flags(std::begin(kCloneNamespaceFlags),
                                      std::end(kCloneNamespaceFlags));
  unshare_flags.push_back(CLONE_NEWTIME);
  for (uint64_t flag : kCloneNamespaceFlags) {
    // clone's flags are its first argument on x86, x86_64 and x32.
    if (absl::Status s = Deny(ctx, "clone", action,
                              {SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)});
        !s.ok()) {
      return s;
    }
  }
  for (uint64_t flag : unshare_flags) {
    if (absl::Status s = Deny(ctx, "unshare", action,
                              {SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)});
        !s.ok()) {
      return s;
    }
  }
  // clone3's flags are behind a pointer, which a filter cannot read: as
  // Docker does, ENOSYS, on which glibc retries with clone.
  return Deny(ctx, "clone3", SCMP_ACT_ERRNO(ENOSYS));
}

// ---- profiles ----

absl::Status ProfileError(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(kProfileField, path.empty() ? "" : path + ": ", what));
}

std::string Quoted(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/true,
                    nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<std::string> StringAt(const nlohmann::json& object,
                                     const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end())
    return ProfileError(path, absl::StrCat(key, " is missing"));
  if (!it->is_string()) {
    return ProfileError(absl::StrCat(path.empty() ? "" : path + ".", key),
                        Quoted(*it) + " is not a string");
  }
  return it->get<std::string>();
}

absl::StatusOr<uint64_t> UnsignedAt(const nlohmann::json& value,
                                    const std::string& path) {
  if (!value.is_number_unsigned() &&
      !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
    return ProfileError(path, Quoted(value) + " is not a non-negative integer");
  }
  return value.get<uint64_t>();
}

// An errno a filter may return (SECCOMP_RET_DATA holds 16 bits).
absl::StatusOr<uint16_t> ErrnoAt(const nlohmann::json& object, const char* key,
                                 const std::string& path, uint16_t fallback) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  const std::string field = absl::StrCat(path, path.empty() ? "" : ".", key);
  absl::StatusOr<uint64_t> value = UnsignedAt(*it, field);
  if (!value.ok()) return value.status();
  if (*value > 0xffff) {
    return ProfileError(field, absl::StrCat(*value, " is above 65535"));
  }
  return static_cast<uint16_t>(*value);
}

absl::StatusOr<uint32_t> ActionAt(const std::string& name,
                                  const std::string& path, uint16_t errno_ret) {
  if (name == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
  if (name == "SCMP_ACT_ERRNO") return SCMP_ACT_ERRNO(errno_ret);
  if (name == "SCMP_ACT_KILL" || name == "SCMP_ACT_KILL_THREAD") {
    return SCMP_ACT_KILL_THREAD;
  }
  if (name == "SCMP_ACT_KILL_PROCESS") return SCMP_ACT_KILL_PROCESS;
  if (name == "SCMP_ACT_TRAP") return SCMP_ACT_TRAP;
  if (name == "SCMP_ACT_LOG") return SCMP_ACT_LOG;
  if (name == "SCMP_ACT_TRACE") return SCMP_ACT_TRACE(errno_ret);
  if (name == "SCMP_ACT_NOTIFY") {
    return ProfileError(path,
                        "SCMP_ACT_NOTIFY is not supported (no agent "
                        "listens for notifications)");
  }
  return ProfileError(path, Quoted(nlohmann::json(name)) + " is not an action");
}

absl::StatusOr<scmp_compare> OperatorAt(const std::string& name,
                                        const std::string& path) {
  static constexpr struct {
    const char* name;
    scmp_compare op;
  } kOperators[] = {
      {"SCMP_CMP_NE", SCMP_CMP_NE},
      {"SCMP_CMP_LT", SCMP_CMP_LT},
      {"SCMP_CMP_LE", SCMP_CMP_LE},
      {"SCMP_CMP_EQ", SCMP_CMP_EQ},
      {"SCMP_CMP_GE", SCMP_CMP_GE},
      {"SCMP_CMP_GT", SCMP_CMP_GT},
      {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
  };
  for (const auto& op : kOperators) {
    if (name == op.name) return op.op;
  }
  return ProfileError(path,
                      Quoted(nlohmann::json(name)) + " is not an operator");
}

// "SCMP_ARCH_X86_64" -> libseccomp's token.
absl::StatusOr<uint32_t> ArchitectureAt(const nlohmann::json& value,
                                        const std::string& path) {
  if (!value.is_string()) {
    return ProfileError(path, Quoted(value) + " is not a string");
  }
  const std::string name = value.get<std::string>();
  uint32_t arch = 0;
  if (absl::StartsWith(name, "SCMP_ARCH_")) {
    arch = seccomp_arch_resolve_name(
        absl::AsciiStrToLower(name.substr(strlen("SCMP_ARCH_"))).c_str());
  }
  if (arch == 0) {
    return ProfileError(path, Quoted(value) + " is not an architecture");
  }
  return arch;
}

// Docker's includes/excludes name Go's architectures.
bool IsNativeGoArch(const std::string& name) {
  switch (seccomp_arch_native()) {
    case SCMP_ARCH_X86_64:
      return name == "amd64" || name == "x86_64";
    case SCMP_ARCH_AARCH64:
      return name == "arm64" || name == "aarch64";
    default:
      return false;
  }
}

// The running kernel's "major.minor" as one comparable number (a major
// above 99999 or a minor above 999 is not a kernel's: it would overflow or
// compare wrong).
std::optional<int> KernelVersion(absl::string_view release) {
  std::vector<absl::string_view> parts = absl::StrSplit(release, '.');
  if (parts.size() < 2) return std::nullopt;
  int major = 0, minor = 0;
  absl::string_view minor_digits = parts[1];
  size_t digits = 0;
  while (digits < minor_digits.size() &&
         absl::ascii_isdigit(minor_digits[digits])) {
    ++digits;
  }
  if (!absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(minor_digits.substr(0, digits), &minor) || major < 0 ||
      major > 99999 || minor > 999) {
    return std::nullopt;
  }
  return major * 1000 + minor;
}

// Whether a syscalls[] entry applies here, by Docker's includes/excludes.
absl::StatusOr<bool> Applies(const nlohmann::json& entry,
                             const std::string& path, uint64_t capabilities) {
  for (const char* key : {"includes", "excludes"}) {
    const auto it = entry.find(key);
    if (it == entry.end() || it->is_null()) continue;
    const std::string field = absl::StrCat(path, ".", key);
    if (!it->is_object()) {
      return ProfileError(field, Quoted(*it) + " is not an object");
    }
    const bool include = std::strcmp(key, "includes") == 0;
    const auto caps = it->find("caps");
    if (caps != it->end() && !caps->is_null()) {
      if (!caps->is_array()) {
        return ProfileError(field + ".caps", "is not an array");
      }
      for (size_t i = 0; i < caps->size(); ++i) {
        const nlohmann::json& cap = (*caps)[i];
        if (!cap.is_string()) {
          return ProfileError(absl::StrCat(field, ".caps[", i, "]"),
                              Quoted(cap) + " is not a string");
        }
        // A name this table does not know is a capability nobody holds.
        std::optional<int> number = CapabilityNumber(cap.get<std::string>());
        const bool held =
            number && (capabilities & CapabilityBit(*number)) != 0;
        if (include && !held) return false;  // needs every one
        if (!include && held) return false;  // any one excludes
      }
    }
    const auto arches = it->find("arches");
    if (arches != it->end() && !arches->is_null()) {
      if (!arches->is_array()) {
        return ProfileError(field + ".arches", "is not an array");
      }
      bool native = false;
      for (size_t i = 0; i < arches->size(); ++i) {
        if (!(*arches)[i].is_string()) {
          return ProfileError(absl::StrCat(field, ".arches[", i, "]"),
                              Quoted((*arches)[i]) + " is not a string");
        }
        native = native || IsNativeGoArch((*arches)[i].get<std::string>());
      }
      if (!arches->empty() && include != native) return false;
    }
    const auto min_kernel = it->find("minKernel");
    if (min_kernel != it->end() && !min_kernel->is_null()) {
      std::optional<int> wanted;
      if (min_kernel->is_string()) {
        wanted = KernelVersion(min_kernel->get<std::string>());
      }
      if (!wanted) {
        return ProfileError(field + ".minKernel",
                            Quoted(*min_kernel) + " is not a kernel version");
      }
      struct utsname uts;
      std::optional<int> running;
      if (uname(&uts) == 0) running = KernelVersion(uts.release);
      const bool new_enough = running && *running >= *wanted;
      if (include != new_enough) return false;
    }
  }
  return true;
}

absl::Status AddProfileRule(scmp_filter_ctx ctx, const nlohmann::json& entry,
                            const std::string& path, uint32_t default_action,
                            uint64_t capabilities) {
  if (!entry.is_object()) {
    return ProfileError(path, Quoted(entry) + " is not an object");
  }
  std::vector<std::string> names;
  const auto names_it = entry.find("names");
  const auto name_it = entry.find("name");
  if (names_it != entry.end() && !names_it->is_null()) {
    if (!names_it->is_array()) {
      return ProfileError(path + ".names", "is not an array");
    }
    for (size_t i = 0; i < names_it->size(); ++i) {
      if (!(*names_it)[i].is_string()) {
        return ProfileError(absl::StrCat(path, ".names[", i, "]"),
                            Quoted((*names_it)[i]) + " is not a string");
      }
      names.push_back((*names_it)[i].get<std::string>());
    }
  } else if (name_it != entry.end()) {
    absl::StatusOr<std::string> name = StringAt(entry, "name", path);
    if (!name.ok()) return name.status();
    names.push_back(*name);
  } else {
    return ProfileError(path, "names is missing");
  }
  absl::StatusOr<uint16_t> errno_ret = ErrnoAt(entry, "errnoRet", path, EPERM);
  if (!errno_ret.ok()) return errno_ret.status();
  absl::StatusOr<std::string> action_name = StringAt(entry, "action", path);
  if (!action_name.ok()) return action_name.status();
  absl::StatusOr<uint32_t> action =
      ActionAt(*action_name, path + ".action", *errno_ret);
  if (!action.ok()) return action.status();

  std::vector<scmp_arg_cmp> conditions;
  const auto args = entry.find("args");
  if (args != entry.end() && !args->is_null()) {
    if (!args->is_array())
      return ProfileError(path + ".args", "is not an array");
    for (size_t i = 0; i < args->size(); ++i) {
      const nlohmann::json& arg = (*args)[i];
      const std::string arg_path = absl::StrCat(path, ".args[", i, "]");
      if (!arg.is_object()) {
        return ProfileError(arg_path, Quoted(arg) + " is not an object");
      }
      const auto index_it = arg.find("index");
      if (index_it == arg.end())
        return ProfileError(arg_path, "index is missing");
      absl::StatusOr<uint64_t> index =
          UnsignedAt(*index_it, arg_path + ".index");
      if (!index.ok()) return index.status();
      if (*index > 5) {
        return ProfileError(arg_path + ".index",
                            absl::StrCat(*index, " is not 0 to 5"));
      }
      uint64_t values[2] = {0, 0};
      const char* keys[2] = {"value", "valueTwo"};
      for (int k = 0; k < 2; ++k) {
        const auto value_it = arg.find(keys[k]);
        if (value_it == arg.end() || value_it->is_null()) continue;
        absl::StatusOr<uint64_t> value =
            UnsignedAt(*value_it, absl::StrCat(arg_path, ".", keys[k]));
        if (!value.ok()) return value.status();
        values[k] = *value;
      }
      absl::StatusOr<std::string> op_name = StringAt(arg, "op", arg_path);
      if (!op_name.ok()) return op_name.status();
      absl::StatusOr<scmp_compare> op = OperatorAt(*op_name, arg_path + ".op");
      if (!op.ok()) return op.status();
      conditions.push_back(
          SCMP_CMP(static_cast<unsigned>(*index), *op, values[0], values[1]));
    }
  }

  absl::StatusOr<bool> applies = Applies(entry, path, capabilities);
  if (!applies.ok()) return applies.status();
  // runc skips a rule that repeats the default action (libseccomp refuses it).
  if (!*applies || *action == default_action) return absl::OkStatus();

  // As runc: the comparisons form one rule when each names another
  // argument; otherwise (libseccomp compares an argument once per rule)
  // each is a rule of its own, any of which matches.
  bool distinct = true;
  for (size_t i = 0; i < conditions.size(); ++i) {
    for (size_t j = i + 1; j < conditions.size(); ++j) {
      distinct = distinct && conditions[i].arg != conditions[j].arg;
    }
  }
  std::vector<std::vector<scmp_arg_cmp>> rules;
  if (distinct) {
    rules.push_back(conditions);
  } else {
    for (const scmp_arg_cmp& condition : conditions)
      rules.push_back({condition});
  }
  for (const std::string& name : names) {
    const int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // unknown here, as runc does
    for (const std::vector<scmp_arg_cmp>& rule : rules) {
      const int rc =
          seccomp_rule_add_array(ctx, *action, nr, rule.size(), rule.data());
      if (rc != 0) {
        return ProfileError(path, absl::StrCat("the rule for \"", name,
                                               "\" is refused by libseccomp: ",
                                               std::strerror(-rc)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<int> CapabilityNumber(absl::string_view name) {
  if (absl::StartsWithIgnoreCase(name, "CAP_")) name.remove_prefix(4);
  for (const CapabilityEntry& entry : kCapabilityTable) {
    if (absl::EqualsIgnoreCase(name, entry.name)) return entry.number;
  }
  return std::nullopt;
}

absl::StatusOr<uint64_t> ResolveCapabilities(
    const google::protobuf::RepeatedPtrField<std::string>& cap_add,
    const google::protobuf::RepeatedPtrField<std::string>& cap_drop,
    bool privileged) {
  // Names are checked even when privileged makes them moot.
  absl::StatusOr<uint64_t> add = ResolveNames(cap_add, "cap_add");
  if (!add.ok()) return add.status();
  absl::StatusOr<uint64_t> drop = ResolveNames(cap_drop, "cap_drop");
  if (!drop.ok()) return drop.status();
  if (privileged) return kAllCapabilities;
  return (kDefaultCapabilities & ~*drop) | *add;
}

// A task's PID 1 is berth's (berth-task-init, or a sandbox container's
// holder): the task may not signal it, trace it, read or write its memory,
// nor change its limits or scheduling. Root in the task holds CAP_KILL and
// shares its uid, so only the filter can say no; what the init forwards
// comes from the driver, outside the task's pid namespace.
absl::Status AddPidOneRules(scmp_filter_ctx ctx) {
  const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
  const scmp_arg_cmp first_is_one = SCMP_A0(SCMP_CMP_EQ, 1);
  for (const char* name :
       {"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
        "pidfd_open", "process_vm_readv", "process_vm_writev", "prlimit64",
        "sched_setaffinity", "sched_setscheduler", "sched_setparam",
        "migrate_pages", "move_pages", "kcmp"}) {
    if (absl::Status s = Deny(ctx, name, refuse, {first_is_one}); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = Deny(ctx, "ptrace", refuse, {SCMP_A1(SCMP_CMP_EQ, 1)});
      !s.ok()) {
    return s;
  }
  // setpriority(PRIO_PROCESS, 1, ...) and ioprio_set(IOPRIO_WHO_PROCESS, 1).
  if (absl::Status s = Deny(ctx, "setpriority", refuse,
                            {SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A1(SCMP_CMP_EQ, 1)});
      !s.ok()) {
    return s;
  }
  return Deny(ctx, "ioprio_set", refuse,
              {SCMP_A0(SCMP_CMP_EQ, 1), SCMP_A1(SCMP_CMP_EQ, 1)});
}

absl::StatusOr<std::string> DefaultSeccompFilter(uint64_t capabilities) {
  Context ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  // x86 (32-bit programs) but not x32, whose system calls then meet
  // libseccomp's bad-architecture action and kill the caller: no Debian
  // program uses that ABI, and it makes the filter a seventh longer (each
  // task loads it: 508 instructions with it, 440 without).
  for (uint32_t arch : {SCMP_ARCH_X86}) {
    if (absl::Status s = AddArchitecture(ctx.get(), arch); !s.ok()) return s;
  }
  for (const DeniedGroup& group : DeniedGroups()) {
    if ((capabilities & group.unless) != 0) continue;
    for (const char* name : group.names) {
      if (absl::Status s = Deny(ctx.get(), name, SCMP_ACT_ERRNO(EPERM));
          !s.ok()) {
        return s;
      }
    }
  }
  if ((capabilities & Cap(21)) == 0) {
    if (absl::Status s = AddNamespaceRules(ctx.get()); !s.ok()) return s;
  }
  if (absl::Status s = AddPersonalityRules(ctx.get()); !s.ok()) return s;
  if (absl::Status s = AddPidOneRules(ctx.get()); !s.ok()) return s;
  return Export(ctx.get());
}

const absl::StatusOr<std::string>& DefaultSeccompFilterOnce() {
  static const auto* filter =
      new absl::StatusOr<std::string>(DefaultSeccompFilter());
  return *filter;
}

absl::StatusOr<std::string> CompileSeccompProfile(const std::string& json,
                                                  uint64_t capabilities) {
  const nlohmann::json profile =
      nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (profile.is_discarded()) return ProfileError("", "is not JSON");
  if (!profile.is_object()) {
    return ProfileError("", "is not a JSON object");
  }
  absl::StatusOr<std::string> default_name =
      StringAt(profile, "defaultAction", "");
  if (!default_name.ok()) return default_name.status();
  absl::StatusOr<uint16_t> default_errno =
      ErrnoAt(profile, "defaultErrnoRet", "", EPERM);
  if (!default_errno.ok()) return default_errno.status();
  absl::StatusOr<uint32_t> default_action =
      ActionAt(*default_name, "defaultAction", *default_errno);
  if (!default_action.ok()) return default_action.status();

  Context ctx(seccomp_init(*default_action));
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  // A profile loaded without no_new_privs is the init's business
  // (privileges.h); libseccomp's setting only matters to seccomp_load.
  seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0);

  const auto architectures = profile.find("architectures");
  if (architectures != profile.end() && !architectures->is_null()) {
    if (!architectures->is_array()) {
      return ProfileError("architectures", "is not an array");
    }
    for (size_t i = 0; i < architectures->size(); ++i) {
      absl::StatusOr<uint32_t> arch = ArchitectureAt(
          (*architectures)[i], absl::StrCat("architectures[", i, "]"));
      if (!arch.ok()) return arch.status();
      if (absl::Status s = AddArchitecture(ctx.get(), *arch); !s.ok()) return s;
    }
  }
  // Docker's archMap: the entry of the native architecture adds its
  // sub-architectures.
  const auto arch_map = profile.find("archMap");
  if (arch_map != profile.end() && !arch_map->is_null()) {
    if (!arch_map->is_array())
      return ProfileError("archMap", "is not an array");
    for (size_t i = 0; i < arch_map->size(); ++i) {
      const nlohmann::json& entry = (*arch_map)[i];
      const std::string path = absl::StrCat("archMap[", i, "]");
      if (!entry.is_object() || !entry.contains("architecture")) {
        return ProfileError(path, "is not an object with an architecture");
      }
      absl::StatusOr<uint32_t> arch =
          ArchitectureAt(entry["architecture"], path + ".architecture");
      if (!arch.ok()) return arch.status();
      const auto subs = entry.find("subArchitectures");
      if (subs == entry.end() || subs->is_null()) continue;
      if (!subs->is_array()) {
        return ProfileError(path + ".subArchitectures", "is not an array");
      }
      for (size_t j = 0; j < subs->size(); ++j) {
        absl::StatusOr<uint32_t> sub = ArchitectureAt(
            (*subs)[j], absl::StrCat(path, ".subArchitectures[", j, "]"));
        if (!sub.ok()) return sub.status();
        if (*arch != seccomp_arch_native()) continue;
        if (absl::Status s = AddArchitecture(ctx.get(), *sub); !s.ok()) {
          return s;
        }
      }
    }
  }

  const auto syscalls = profile.find("syscalls");
  if (syscalls != profile.end() && !syscalls->is_null()) {
    if (!syscalls->is_array())
      return ProfileError("syscalls", "is not an array");
    for (size_t i = 0; i < syscalls->size(); ++i) {
      if (absl::Status s = AddProfileRule(ctx.get(), (*syscalls)[i],
                                          absl::StrCat("syscalls[", i, "]"),
                                          *default_action, capabilities);
          !s.ok()) {
        return s;
      }
    }
  }
  absl::StatusOr<std::string> filter = Export(ctx.get());
  if (absl::IsOutOfRange(filter.status())) {
    return ProfileError("", std::string(filter.status().message()));
  }
  return filter;
}

}  // namespace berth::driver_common
