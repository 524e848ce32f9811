#include "services/driver/common/task_spec.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/host_name.h"
#include "base/io.h"
#include "base/path.h"
#include "base/rlimits.h"
#include "base/unique_fd.h"
#include "plugins/sdk/config.h"
#include "services/driver/common/security.h"

namespace berth::driver_common {
namespace {

using driver::v1::NetworkIsolationMode;

// "/a/./b/../c/" → "/a/c"; "" for a path that is not absolute.
std::string NormalizeAbsolute(absl::string_view path) {
  if (path.empty() || path[0] != '/') return "";
  return base::LexicallyNormal(path);
}

bool IsInside(const std::string& path, const std::string& dir) {
  return path == dir || absl::StartsWith(path, dir == "/" ? "/" : dir + "/");
}

std::string StringField(const google::protobuf::Struct& config,
                        const std::string& name) {
  auto it = config.fields().find(name);
  if (it == config.fields().end() || !it->second.has_string_value()) return "";
  return it->second.string_value();
}

}  // namespace

std::string DefaultTaskDir(const std::string& state_dir,
                           const std::string& task_id) {
  return absl::StrCat(state_dir, "/tasks/", task_id);
}

namespace {

// A host name as sethostname(2) and RFC 1123 take it: 1-63 letters, digits,
// '-' and '.', starting and ending with a letter or a digit.
absl::Status CheckHostname(const std::string& hostname) {
  char bad = 0;
  switch (base::CheckHostName(hostname, 63, &bad)) {
    case base::HostNameFault::kNone:
      return absl::OkStatus();
    case base::HostNameFault::kLength:
      return absl::InvalidArgumentError(
          absl::StrCat("hostname \"", absl::CHexEscape(hostname),
                       "\" must be 1 to 63 letters, digits, '-' or '.'"));
    case base::HostNameFault::kCharacter:
      return absl::InvalidArgumentError(
          absl::StrCat("hostname \"", absl::CHexEscape(hostname), "\" has '",
                       absl::CHexEscape(std::string(1, bad)),
                       "': only letters, digits, '-' and '.' are allowed"));
    case base::HostNameFault::kEdge:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("hostname \"", hostname,
                   "\" must start and end with a letter or a digit"));
}

}  // namespace

absl::StatusOr<std::vector<RlimitSpec>> ResolveRlimits(
    const google::protobuf::RepeatedPtrField<driver::v1::Rlimit>& rlimits) {
  std::vector<RlimitSpec> resolved;
  for (int i = 0; i < rlimits.size(); ++i) {
    const driver::v1::Rlimit& rlimit = rlimits[i];
    const base::RlimitName* found = base::FindRlimitByType(rlimit.type());
    if (found == nullptr) {
      std::vector<std::string> names;
      for (const base::RlimitName& name : base::RlimitNames()) {
        names.push_back(name.type);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "rlimits[", i, "].type \"", absl::CHexEscape(rlimit.type()),
          "\" is not a resource limit (", absl::StrJoin(names, ", "), ")"));
    }
    for (const RlimitSpec& earlier : resolved) {
      if (earlier.resource == found->resource) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rlimits[", i, "].type ", rlimit.type(), " is given twice"));
      }
    }
    if (rlimit.soft() > rlimit.hard()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rlimits[", i, "].soft ", rlimit.soft(), " of ", rlimit.type(),
          " is above its hard limit ", rlimit.hard()));
    }
    // setrlimit(2) refuses an RLIMIT_NOFILE above fs.nr_open (RLIM_INFINITY
    // included) even to root: said here, naming the field, rather than by
    // the task's init once everything is made.
    if (found->resource == RLIMIT_NOFILE) {
      const absl::StatusOr<std::string> nr_open =
          base::ReadFile("/proc/sys/fs/nr_open", 64);
      uint64_t most = 0;
      if (nr_open.ok() &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(*nr_open), &most) &&
          rlimit.hard() > most) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rlimits[", i, "].hard ", rlimit.hard(),
            " of RLIMIT_NOFILE is above this node's fs.nr_open, ", most));
      }
    }
    resolved.push_back({found->resource, rlimit.soft(), rlimit.hard()});
  }
  return resolved;
}

absl::Status CheckTaskId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') {
    return absl::InvalidArgumentError(absl::StrCat(
        "task.id \"", id,
        "\" must be 1 to 128 letters, digits, '.', '_' or '-', not starting "
        "with '.'"));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "task.id \"", id, "\" has '", std::string(1, c),
          "': only letters, digits, '.', '_' and '-' are allowed"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ResolvedUser> ResolveUser(const std::string& user,
                                         const std::string& field) {
  if (user.empty()) return RootUser();
  absl::StatusOr<std::optional<uint32_t>> id = NumericId(user, field);
  if (!id.ok()) return id.status();
  const bool numeric = id->has_value();
  const uint32_t number = id->value_or(0);
  std::vector<char> buffer(16384);
  struct passwd entry;
  struct passwd* found = nullptr;
  const int err =
      numeric ? getpwuid_r(number, &entry, buffer.data(), buffer.size(), &found)
              : getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(),
                           &found);
  if (found == nullptr) {
    if (numeric) return UnlistedUser(number, user);
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": no user named \"", user, "\" on this node",
        err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : ""));
  }
  ResolvedUser resolved;
  resolved.uid = entry.pw_uid;
  resolved.gid = entry.pw_gid;
  resolved.name = entry.pw_name;
  resolved.home = entry.pw_dir;
  int count = 64;
  std::vector<gid_t> groups(count);
  if (getgrouplist(entry.pw_name, entry.pw_gid, groups.data(), &count) < 0) {
    groups.resize(count);
    getgrouplist(entry.pw_name, entry.pw_gid, groups.data(), &count);
  }
  groups.resize(count);
  resolved.groups = groups;
  return resolved;
}

absl::StatusOr<gid_t> ResolveGroup(const std::string& group,
                                   const std::string& field) {
  absl::StatusOr<std::optional<uint32_t>> id = NumericId(group, field);
  if (!id.ok()) return id.status();
  if (id->has_value()) return static_cast<gid_t>(**id);
  std::vector<char> buffer(16384);
  struct group entry;
  struct group* found = nullptr;
  getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": no group named \"", group, "\" on this node"));
  }
  return entry.gr_gid;
}

namespace {

// Where the task's `path` is on the host: `*base`, the directory its view
// is rooted in (a bind mount's source, the task directory, the image root,
// or "/" for the host's own read-only directories), and `*rest` below it.
// False when its root has nothing there (or a tmpfs).
bool LocateInRoot(const TaskSpec& spec, const std::string& path,
                  std::string* base, std::string* rest) {
  const std::string normal = NormalizeAbsolute(path);
  if (normal.empty()) return false;
  // The last mount over a path is the one the task sees.
  for (auto it = spec.root.mounts.rbegin(); it != spec.root.mounts.rend();
       ++it) {
    if (!IsInside(normal, it->destination)) continue;
    if (it->kind != MountSpec::Kind::kBind) return false;
    *base = it->source;
    *rest = normal.substr(it->destination.size());
    return true;
  }
  if (IsInside(normal, kTaskDirInRoot)) {
    *base = spec.task_dir;
    *rest = normal.substr(strlen(kTaskDirInRoot));
    return true;
  }
  if (!spec.root.rootfs.empty()) {
    *base = spec.root.rootfs;
    *rest = normal;
    return true;
  }
  for (const std::string& dir : spec.root.host_dirs) {
    if (IsInside(normal, dir)) {
      *base = "/";
      *rest = normal;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string HostPathInRoot(const TaskSpec& spec, const std::string& path) {
  std::string base, rest;
  if (!LocateInRoot(spec, path, &base, &rest)) return "";
  return base == "/" ? rest : absl::StrCat(base, rest);
}

namespace {

// The task's `path` opened with `flags` as StatInRoot describes.
absl::StatusOr<base::UniqueFd> OpenInRoot(const TaskSpec& spec,
                                          const std::string& path, int flags) {
  std::string holder, rest;
  if (!LocateInRoot(spec, path, &holder, &rest)) {
    return absl::NotFoundError(
        absl::StrCat(path, " is not in the task's root"));
  }
  // The host's own system directories (their links are the host's), or a
  // bind mount's source itself (a file bound alone: the node resolved it).
  if (holder == "/" || rest.empty()) {
    const std::string& host = holder == "/" ? rest : holder;
    base::UniqueFd fd(open(host.c_str(), flags | O_CLOEXEC));
    if (!fd.valid()) return absl::ErrnoToStatus(errno, path);
    return fd;
  }
  // An image, a bind source or the task directory holds what a task or an
  // image's author put there: its links resolve inside it, never on the
  // host, as they will for the task.
  const base::UniqueFd dir(
      open(holder.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return absl::ErrnoToStatus(errno, holder);
  struct open_how how;
  std::memset(&how, 0, sizeof(how));
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const std::string relative = rest.empty() ? "." : rest.substr(1);
  long fd;  // NOLINT(runtime/int): syscall(2)'s type
  // EAGAIN: a rename raced the lookup (RESOLVE_IN_ROOT); a few tries only,
  // so that a task renaming without end cannot hold StartTask.
  int tries = 0;
  do {
    fd = syscall(SYS_openat2, dir.get(), relative.c_str(), &how, sizeof(how));
  } while (fd < 0 && (errno == EAGAIN || errno == EINTR) && ++tries < 16);
  if (fd < 0) return absl::ErrnoToStatus(errno, path);
  return base::UniqueFd(static_cast<int>(fd));
}

}  // namespace

absl::StatusOr<struct stat> StatInRoot(const TaskSpec& spec,
                                       const std::string& path) {
  absl::StatusOr<base::UniqueFd> fd = OpenInRoot(spec, path, O_PATH);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (fstat(fd->get(), &st) != 0) return absl::ErrnoToStatus(errno, path);
  return st;
}

absl::StatusOr<std::string> ReadFileInRoot(const TaskSpec& spec,
                                           const std::string& path,
                                           size_t max_bytes) {
  absl::StatusOr<base::UniqueFd> found = OpenInRoot(spec, path, O_PATH);
  if (!found.ok()) return found.status();
  struct stat st;
  if (fstat(found->get(), &st) != 0) return absl::ErrnoToStatus(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file"));
  }
  // The very file found, opened for reading.
  const base::UniqueFd fd(
      open(absl::StrCat("/proc/self/fd/", found->get()).c_str(),
           O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, path);
  return base::ReadAll(fd.get(), path, max_bytes);
}

absl::StatusOr<std::string> FindProgram(
    const std::string& command, const std::string& path_env,
    const std::string& work_dir, const std::string& field,
    const std::function<absl::StatusOr<struct stat>(const std::string&)>&
        stat_in_task) {
  if (command.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  }
  auto check = [&](const std::string& in_task) -> absl::Status {
    struct stat st;
    if (stat_in_task) {
      absl::StatusOr<struct stat> found = stat_in_task(in_task);
      if (!found.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": ", found.status().message()));
      }
      st = *found;
    } else if (stat(in_task.c_str(), &st) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", in_task, ": ", std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", in_task, " is not a regular file"));
    }
    if ((st.st_mode & 0111) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", in_task, " is not executable"));
    }
    return absl::OkStatus();
  };
  if (absl::StrContains(command, '/')) {
    const std::string path =
        command[0] == '/' ? command : absl::StrCat(work_dir, "/", command);
    if (absl::Status status = check(path); !status.ok()) return status;
    return path;
  }
  for (absl::string_view dir : absl::StrSplit(path_env, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = absl::StrCat(dir, "/", command);
    if (check(candidate).ok()) return candidate;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": \"", command, "\" is not on the task's PATH (", path_env, ")"));
}

namespace {

absl::Status NulError(absl::string_view field) {
  return absl::InvalidArgumentError(
      absl::StrCat(field,
                   " holds a NUL byte, which no argument, variable "
                   "or path may"));
}

// A NUL byte in any string of `value` (field `field`).
absl::Status CheckNoNul(const google::protobuf::Value& value,
                        const std::string& field) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kStringValue:
      if (absl::StrContains(value.string_value(), '\0')) {
        return NulError(field);
      }
      return absl::OkStatus();
    case google::protobuf::Value::kListValue:
      for (int i = 0; i < value.list_value().values_size(); ++i) {
        if (absl::Status s = CheckNoNul(value.list_value().values(i),
                                        absl::StrCat(field, "[", i, "]"));
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    case google::protobuf::Value::kStructValue:
      for (const auto& [key, child] : value.struct_value().fields()) {
        const std::string child_field = absl::StrCat(field, ".", key);
        if (absl::StrContains(key, '\0')) return NulError(child_field);
        if (absl::Status s = CheckNoNul(child, child_field); !s.ok()) return s;
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

// Strings reach the init as NUL-ended records and execve(2) as C strings:
// one with a NUL byte inside would add a record or lose its end.
absl::Status CheckNoNulBytes(const driver::v1::TaskConfig& task) {
  for (const auto& [field, text] :
       {std::pair<const char*, const std::string*>{"name", &task.name()},
        {"task_dir", &task.task_dir()},
        {"working_dir", &task.working_dir()},
        {"user", &task.user()},
        {"group", &task.group()},
        {"network.namespace_path", &task.network().namespace_path()}}) {
    if (absl::StrContains(*text, '\0')) return NulError(field);
  }
  for (const auto& [key, value] : task.env()) {
    if (absl::StrContains(key, '\0') || absl::StrContains(value, '\0')) {
      return NulError(absl::StrCat("env[\"", absl::CHexEscape(key), "\"]"));
    }
  }
  google::protobuf::Value config;
  *config.mutable_struct_value() = task.driver_config();
  return CheckNoNul(config, "driver_config");
}

}  // namespace

namespace {

// The content of the task's `path` (/etc/passwd or /etc/group of its
// image), nullopt when its root has none; another error names `field`.
absl::StatusOr<std::optional<std::string>> ReadUserFile(
    const TaskSpec& spec, const std::string& path, const std::string& field) {
  absl::StatusOr<std::string> content =
      ReadFileInRoot(spec, path, kMaxUserFileBytes);
  if (absl::IsNotFound(content.status())) return std::optional<std::string>();
  if (!content.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": the image's ", path, ": ", content.status().message()));
  }
  return std::optional<std::string>(*std::move(content));
}

// The image's /etc/passwd and /etc/group, those asked for.
absl::StatusOr<UserFiles> ReadUserFiles(const TaskSpec& spec, bool passwd,
                                        bool group) {
  UserFiles files;
  if (passwd) {
    absl::StatusOr<std::optional<std::string>> content =
        ReadUserFile(spec, "/etc/passwd", "user");
    if (!content.ok()) return content.status();
    files.passwd = *std::move(content);
  }
  if (group) {
    absl::StatusOr<std::optional<std::string>> content =
        ReadUserFile(spec, "/etc/group", passwd ? "user" : "group");
    if (!content.ok()) return content.status();
    files.group = *std::move(content);
  }
  return files;
}

// `path` (inside `task_dir`) as the task sees it in its own root.
std::string InRoot(const std::string& path, const std::string& task_dir) {
  return absl::StrCat(kTaskDirInRoot, path.substr(task_dir.size()));
}

absl::Status ResolveMounts(const driver::v1::Isolation& isolation,
                           RootSpec* root) {
  for (int i = 0; i < isolation.mounts_size(); ++i) {
    const driver::v1::Mount& mount = isolation.mounts(i);
    const std::string field = absl::StrCat("isolation.mounts[", i, "]");
    MountSpec resolved;
    resolved.read_only = mount.read_only();
    resolved.destination = NormalizeAbsolute(mount.destination());
    if (resolved.destination.empty() || resolved.destination == "/" ||
        absl::StrContains(mount.destination(), "..")) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".destination \"", mount.destination(),
                       "\" must be an absolute path below / without \"..\""));
    }
    switch (mount.type()) {
      case driver::v1::MOUNT_TYPE_BIND: {
        resolved.kind = MountSpec::Kind::kBind;
        resolved.source = NormalizeAbsolute(mount.source());
        struct stat st;
        if (resolved.source.empty() ||
            stat(resolved.source.c_str(), &st) != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, ".source \"", mount.source(), "\": ",
                           resolved.source.empty() ? "not an absolute path"
                                                   : std::strerror(errno)));
        }
        break;
      }
      case driver::v1::MOUNT_TYPE_TMPFS:
        resolved.kind = MountSpec::Kind::kTmpfs;
        if (!mount.source().empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, ".source: a tmpfs mount takes no source"));
        }
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".type must be MOUNT_TYPE_BIND or TMPFS"));
    }
    root->mounts.push_back(std::move(resolved));
  }
  return absl::OkStatus();
}

}  // namespace

driver::v1::IsolationCapabilities OwnRootIsolationCapabilities() {
  driver::v1::IsolationCapabilities isolation;
  isolation.set_own_root(true);
  isolation.set_image_rootfs(true);
  isolation.set_mounts(true);
  isolation.set_capabilities(true);
  isolation.set_no_new_privileges(true);
  isolation.set_seccomp(true);
  isolation.set_masked_paths(true);
  isolation.set_user_namespaces(true);
  isolation.set_rootfs_idmapped(true);
  return isolation;
}

absl::Status ResolveIsolation(const driver::v1::Isolation& isolation,
                              const IsolationDefaults& defaults,
                              TaskSpec* spec) {
  for (const std::string* text :
       {&isolation.rootfs(), &isolation.seccomp().custom_profile_json()}) {
    if (absl::StrContains(*text, '\0')) {
      return NulError(text == &isolation.rootfs()
                          ? "isolation.rootfs"
                          : "isolation.seccomp.custom_profile_json");
    }
  }
  for (int i = 0; i < isolation.mounts_size(); ++i) {
    if (absl::StrContains(isolation.mounts(i).source(), '\0') ||
        absl::StrContains(isolation.mounts(i).destination(), '\0')) {
      return NulError(absl::StrCat("isolation.mounts[", i, "]"));
    }
  }
  if (!defaults.own_root) {
    // This driver keeps the host's root (sandbox tasks are isolated by
    // their sandbox); it claims none of Isolation and the node refuses
    // tasks asking for it.
    return absl::OkStatus();
  }
  RootSpec& root = spec->root;
  root.enabled = true;
  root.rootfs = isolation.rootfs();
  if (!root.rootfs.empty()) {
    root.rootfs = NormalizeAbsolute(isolation.rootfs());
    struct stat st;
    if (root.rootfs.empty() || stat(root.rootfs.c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("isolation.rootfs \"", isolation.rootfs(),
                       "\" is not an absolute path of a directory"));
    }
  }
  if (isolation.rootfs_idmapped()) {
    if (root.rootfs.empty()) {
      return absl::InvalidArgumentError(
          "isolation.rootfs_idmapped: set without isolation.rootfs (only an "
          "image's root can be mapped already)");
    }
    if (isolation.user_namespace().uid_mappings().empty() &&
        isolation.user_namespace().gid_mappings().empty()) {
      return absl::InvalidArgumentError(
          "isolation.rootfs_idmapped: set without isolation.user_namespace "
          "(a root mapped for a user namespace needs the task in one)");
    }
  }
  spec->rootfs_idmapped = isolation.rootfs_idmapped();
  root.host_dirs = defaults.host_dirs;
  root.readonly_rootfs = isolation.readonly_rootfs();
  root.task_dir = spec->task_dir;
  root.privileged = isolation.privileged();
  spec->limits.restrict_devices = !isolation.privileged();
  if (absl::Status status = ResolveMounts(isolation, &root); !status.ok()) {
    return status;
  }

  PrivilegeSpec& privileges = spec->privileges;
  privileges.enabled = true;
  absl::StatusOr<uint64_t> capabilities = ResolveCapabilities(
      isolation.cap_add(), isolation.cap_drop(), isolation.privileged());
  if (!capabilities.ok()) return capabilities.status();
  privileges.capabilities = *capabilities;
  privileges.no_new_privs = !isolation.allow_privilege_escalation();
  if (isolation.privileged()) return absl::OkStatus();  // no seccomp
  switch (isolation.seccomp().type()) {
    case driver::v1::SECCOMP_PROFILE_TYPE_UNSPECIFIED:
    case driver::v1::SECCOMP_PROFILE_TYPE_RUNTIME_DEFAULT:
      if (privileges.capabilities == kDefaultCapabilities) {
        privileges.seccomp_filter = defaults.seccomp_filter;
        break;
      }
      {
        // Added capabilities open the calls they govern, as in Docker.
        absl::StatusOr<std::string> filter =
            DefaultSeccompFilter(privileges.capabilities);
        if (!filter.ok()) return filter.status();
        privileges.seccomp_filter = *std::move(filter);
      }
      break;
    case driver::v1::SECCOMP_PROFILE_TYPE_UNCONFINED:
      break;
    case driver::v1::SECCOMP_PROFILE_TYPE_CUSTOM: {
      absl::StatusOr<std::string> filter = CompileSeccompProfile(
          isolation.seccomp().custom_profile_json(), privileges.capabilities);
      if (!filter.ok()) return filter.status();
      privileges.seccomp_filter = *std::move(filter);
      break;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("isolation.seccomp.type ", isolation.seccomp().type(),
                       " is not a seccomp profile type"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskSpec> ResolveTaskSpec(const driver::v1::TaskConfig& task,
                                         const std::string& state_dir,
                                         const IsolationDefaults& defaults) {
  if (absl::Status status = CheckTaskId(task.id()); !status.ok()) {
    return status;
  }
  const std::string prefix = absl::StrCat("task ", task.id(), ": ");
  auto invalid = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
  };
  if (absl::Status status = CheckNoNulBytes(task); !status.ok()) {
    return invalid(status);
  }
  TaskSpec spec;
  spec.id = task.id();
  if (!task.hostname().empty()) {
    if (absl::Status status = CheckHostname(task.hostname()); !status.ok()) {
      return invalid(status);
    }
    spec.hostname = task.hostname();
  } else {
    spec.hostname = task.name().empty() ? task.id() : task.name();
    if (spec.hostname.size() > 63) spec.hostname.resize(63);
  }
  absl::StatusOr<std::vector<RlimitSpec>> rlimits =
      ResolveRlimits(task.rlimits());
  if (!rlimits.ok()) return invalid(rlimits.status());
  spec.rlimits = *std::move(rlimits);

  // Task directory and working directory.
  if (task.task_dir().empty()) {
    if (state_dir.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          prefix,
          "task_dir is empty and the driver has no state directory "
          "(SetConfig's node.state_dir) to make one in"));
    }
    spec.task_dir = DefaultTaskDir(state_dir, task.id());
  } else {
    spec.task_dir = NormalizeAbsolute(task.task_dir());
    if (spec.task_dir.empty() || spec.task_dir == "/") {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "task_dir \"", task.task_dir(),
                       "\" must be an absolute path below /"));
    }
  }
  const std::string work_dir = StringField(task.driver_config(), "work_dir");
  if (work_dir.empty()) {
    spec.work_dir = spec.task_dir;
  } else {
    spec.work_dir = NormalizeAbsolute(
        work_dir[0] == '/' ? work_dir
                           : absl::StrCat(spec.task_dir, "/", work_dir));
    if (!IsInside(spec.work_dir, spec.task_dir)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "driver_config.work_dir \"", work_dir,
                       "\" is outside the task directory ", spec.task_dir));
    }
  }

  // The task's own root first: a task on an image has its users there.
  if (absl::Status status = ResolveIsolation(task.isolation(), defaults, &spec);
      !status.ok()) {
    return invalid(status);
  }

  // User and group. A task on an image has them in the image's own
  // /etc/passwd and /etc/group, as Docker, runc and containerd look them
  // up (an image's "app" is no user of the host's, and the host's "nginx"
  // need not be the image's); any other task, on the host.
  const bool on_image = !spec.root.rootfs.empty();
  UserFiles files;
  if (on_image) {
    absl::StatusOr<UserFiles> read =
        ReadUserFiles(spec, !task.user().empty(),
                      !task.user().empty() || !task.group().empty());
    if (!read.ok()) return invalid(read.status());
    files = *std::move(read);
  }
  absl::StatusOr<ResolvedUser> user =
      on_image ? ResolveUserInFiles(task.user(), files, "user")
               : ResolveUser(task.user(), "user");
  if (!user.ok()) return invalid(user.status());
  spec.uid = user->uid;
  spec.gid = user->gid;
  spec.groups = user->groups;
  if (!task.group().empty()) {
    absl::StatusOr<gid_t> gid =
        on_image ? ResolveGroupInFiles(task.group(), files, "group")
                 : ResolveGroup(task.group(), "group");
    if (!gid.ok()) return invalid(gid.status());
    spec.gid = *gid;
  }

  // Environment.
  std::map<std::string, std::string> env(task.env().begin(), task.env().end());
  for (const auto& [name, value] : env) {
    if (name.empty() || absl::StrContains(name, '=')) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "env: \"", name, "\" is not a valid variable name"));
    }
  }
  env.emplace("PATH", kDefaultPath);
  env.emplace("HOME", user->home);
  env.emplace("USER", user->name);
  env.emplace("BERTH_TASK_ID", task.id());
  env.emplace("BERTH_TASK_NAME", task.name());
  env.emplace("BERTH_ALLOC_ID", task.allocation_id());
  env.emplace("BERTH_TASK_DIR",
              defaults.own_root ? kTaskDirInRoot : spec.task_dir);
  for (const auto& [name, value] : env) {
    spec.env.push_back(absl::StrCat(name, "=", value));
  }

  // Program and arguments.
  const std::string command = StringField(task.driver_config(), "command");
  if (command.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "driver_config.command is required"));
  }
  // In its own root the task sees the task directory at kTaskDirInRoot and
  // its mounts: the program is looked up as the task will see it.
  spec.cwd =
      defaults.own_root ? InRoot(spec.work_dir, spec.task_dir) : spec.work_dir;
  // An image's WorkingDir: a directory of the task's own root.
  if (!task.working_dir().empty()) {
    const std::string in_root = NormalizeAbsolute(task.working_dir());
    if (in_root.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "working_dir \"", absl::CHexEscape(task.working_dir()),
          "\" is not an absolute path"));
    }
    if (!defaults.own_root) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix,
          "working_dir: this driver runs tasks in the host's root; "
          "set driver_config.work_dir instead"));
    }
    spec.cwd = in_root;
  }
  absl::StatusOr<std::string> path = FindProgram(
      command, env["PATH"], spec.cwd, "driver_config.command",
      spec.root.enabled
          ? std::function<absl::StatusOr<struct stat>(const std::string&)>(
                [&spec](const std::string& in_root) {
                  return StatInRoot(spec, in_root);
                })
          : nullptr);
  if (!path.ok()) return invalid(path.status());
  spec.path = *path;
  spec.args.push_back(command);
  auto args = task.driver_config().fields().find("args");
  if (args != task.driver_config().fields().end() &&
      args->second.has_list_value()) {
    for (const auto& value : args->second.list_value().values()) {
      spec.args.push_back(value.string_value());
    }
  }

  // Resources.
  const driver::v1::Resources& resources = task.resources();
  if (resources.memory_bytes() != 0 &&
      resources.memory_bytes() < kMinMemoryBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "resources.memory_bytes ",
                     resources.memory_bytes(), " is below the ",
                     kMinMemoryBytes, " bytes (4 MiB) a task needs to start"));
  }
  if (resources.pids_limit() != 0 && resources.pids_limit() < kMinPids) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "resources.pids_limit ", resources.pids_limit(),
                     " is below the ", kMinPids,
                     " processes a task needs (its init and its program)"));
  }
  if (resources.memory_bytes() > kMaxMemoryBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "resources.memory_bytes ", resources.memory_bytes(),
        " is above ", kMaxMemoryBytes, ", the most a cgroup can limit"));
  }
  if (resources.pids_limit() > kMaxPids) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "resources.pids_limit ", resources.pids_limit(), " is above ",
        kMaxPids, ", the most pids.max takes (the kernel's PID_MAX_LIMIT)"));
  }
  if (resources.cpu_millicores() > kMaxCpuMillicores) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "resources.cpu_millicores ", resources.cpu_millicores(),
        " is above ", kMaxCpuMillicores, " (a million cores)"));
  }
  if (resources.cpu_shares() > kMaxCpuShares) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "resources.cpu_shares ", resources.cpu_shares(),
                     " is above ", kMaxCpuShares, ", the most cgroups take"));
  }
  spec.limits.cpu_shares = resources.cpu_shares();
  spec.limits.cpu_millicores = resources.cpu_millicores();
  spec.limits.memory_bytes = resources.memory_bytes();
  spec.limits.pids_limit = resources.pids_limit();

  // Network.
  switch (task.network().mode()) {
    case driver::v1::NETWORK_ISOLATION_MODE_UNSPECIFIED:
    case driver::v1::NETWORK_ISOLATION_MODE_HOST:
      break;
    case driver::v1::NETWORK_ISOLATION_MODE_GROUP: {
      const std::string& ns = task.network().namespace_path();
      struct stat st;
      if (ns.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            prefix, "network.namespace_path is required for mode GROUP"));
      }
      if (stat(ns.c_str(), &st) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            prefix, "network.namespace_path ", ns, ": ", std::strerror(errno)));
      }
      spec.netns_path = ns;
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "network.mode ",
          driver::v1::NetworkIsolationMode_Name(task.network().mode()),
          " is not supported by the exec driver (HOST or GROUP)"));
  }

  // Logs.
  if (task.logs().max_files() > kMaxLogFiles) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "logs.max_files ", task.logs().max_files(), " is above ",
        kMaxLogFiles, ", the most rotated files kept per stream"));
  }
  if (task.logs().max_file_bytes() != 0) {
    spec.log_max_bytes = task.logs().max_file_bytes();
  }
  if (task.logs().max_files() != 0)
    spec.log_max_files = task.logs().max_files();
  return spec;
}

plugin::v1::ConfigSchema DriverConfigSchema() {
  plugin::v1::ConfigSchema schema;
  plugin::AddConfigField(
      &schema, "command", plugin::v1::CONFIG_FIELD_TYPE_STRING, true,
      "The program: a path, or a name looked up on the task's PATH.");
  plugin::AddConfigField(&schema, "args",
                         plugin::v1::CONFIG_FIELD_TYPE_STRING_LIST, false,
                         "Its arguments.");
  plugin::AddConfigField(
      &schema, "work_dir", plugin::v1::CONFIG_FIELD_TYPE_STRING, false,
      "Working directory, inside the task directory (relative to it, or "
      "absolute below it); made if missing. Default: the task directory.");
  return schema;
}

}  // namespace berth::driver_common
