#include "services/driver/common/init_spec.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace berth::driver_common {
namespace {

void Put(std::string* out, const char* key, const std::string& value) {
  out->append(key);
  out->push_back(' ');
  out->append(std::to_string(value.size()));
  out->push_back(':');
  out->append(value);
}

void PutFlag(std::string* out, const char* key, bool value) {
  Put(out, key, value ? "1" : "0");
}

// A descriptor number; none (-1) is left out.
void PutFd(std::string* out, const char* key, int fd) {
  if (fd >= 0) Put(out, key, std::to_string(fd));
}

// Reads the record at `*pos`: "KEY LENGTH:VALUE". False with `*error` set
// when it is malformed or runs past the end.
bool NextRecord(const std::string& data, size_t* pos, std::string* key,
                std::string* value, std::string* error) {
  const size_t space = data.find(' ', *pos);
  if (space == std::string::npos || space == *pos) {
    *error = "record without a key at byte " + std::to_string(*pos);
    return false;
  }
  *key = data.substr(*pos, space - *pos);
  size_t cursor = space + 1;
  uint64_t length = 0;
  size_t digits = 0;
  while (cursor < data.size() && data[cursor] >= '0' && data[cursor] <= '9') {
    if (++digits > 9) {
      *error = *key + ": length too large";
      return false;
    }
    length = length * 10 + static_cast<uint64_t>(data[cursor] - '0');
    ++cursor;
  }
  if (digits == 0 || cursor >= data.size() || data[cursor] != ':') {
    *error = *key + ": malformed length";
    return false;
  }
  ++cursor;
  if (length > data.size() - cursor) {
    *error = *key + ": value runs past the end of the spec";
    return false;
  }
  *value = data.substr(cursor, length);
  *pos = cursor + length;
  return true;
}

// Decimal digits only, the whole of `text`: strtoull alone would stop at a
// NUL byte (taking "5\0garbage" for 5) and allow white space and signs.
bool ParseUnsigned(const std::string& text, uint64_t* value) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return false;
  *value = parsed;
  return true;
}

// An optional '-' then decimal digits, the whole of `text` (as ParseUnsigned).
bool ParseSigned(const std::string& text, int64_t* value) {
  const size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() <= digits || text[digits] < '0' || text[digits] > '9') {
    return false;
  }
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return false;
  *value = parsed;
  return true;
}

bool FitsInt(int64_t value) {
  return value >= std::numeric_limits<int>::min() &&
         value <= std::numeric_limits<int>::max();
}

// Splits `line` at spaces into at most `max` fields (the last keeps the rest).
std::vector<std::string> Fields(const std::string& line, size_t max) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (start <= line.size() && fields.size() + 1 < max) {
    const size_t space = line.find(' ', start);
    if (space == std::string::npos) break;
    fields.push_back(line.substr(start, space - start));
    start = space + 1;
  }
  fields.push_back(line.substr(start));
  return fields;
}

std::string WithoutNewline(const std::string& data) {
  if (!data.empty() && data.back() == '\n') {
    return data.substr(0, data.size() - 1);
  }
  return data;
}

}  // namespace

std::string EncodeInitSpec(const InitSpec& spec) {
  std::string out;
  Put(&out, "path", spec.path);
  for (const std::string& arg : spec.args) Put(&out, "arg", arg);
  for (const std::string& env : spec.env) Put(&out, "env", env);
  Put(&out, "uid", std::to_string(spec.uid));
  Put(&out, "gid", std::to_string(spec.gid));
  for (gid_t group : spec.groups) Put(&out, "group", std::to_string(group));
  Put(&out, "cwd", spec.cwd);
  PutFlag(&out, "tty", spec.tty);
  PutFlag(&out, "join_user_namespace", spec.join_user_namespace);
  for (const RlimitSpec& rlimit : spec.rlimits) {
    Put(&out, "rlimit",
        std::to_string(rlimit.resource) + " " + std::to_string(rlimit.soft) +
            " " + std::to_string(rlimit.hard));
  }
  const PrivilegeSpec& privileges = spec.privileges;
  PutFlag(&out, "privileges", privileges.enabled);
  Put(&out, "capabilities", std::to_string(privileges.capabilities));
  PutFlag(&out, "no_new_privs", privileges.no_new_privs);
  Put(&out, "seccomp_filter", privileges.seccomp_filter);
  Put(&out, "hostname", spec.hostname);
  Put(&out, "netns", spec.netns);
  for (const std::string& procs : spec.cgroup_procs) {
    Put(&out, "cgroup_procs", procs);
  }
  Put(&out, "log_dir", spec.log_dir);
  Put(&out, "log_max_bytes", std::to_string(spec.log_max_bytes));
  Put(&out, "log_max_files", std::to_string(spec.log_max_files));
  Put(&out, "exit_file", spec.exit_file);
  PutFd(&out, "log_dir_fd", spec.log_dir_fd);
  PutFd(&out, "exit_dir_fd", spec.exit_dir_fd);
  const RootSpec& root = spec.root;
  PutFlag(&out, "root", root.enabled);
  Put(&out, "root.mount_point", root.mount_point);
  Put(&out, "root.rootfs", root.rootfs);
  for (const std::string& dir : root.host_dirs) {
    Put(&out, "root.host_dir", dir);
  }
  PutFlag(&out, "root.readonly", root.readonly_rootfs);
  Put(&out, "root.task_dir", root.task_dir);
  PutFd(&out, "root.rootfs_fd", root.rootfs_fd);
  PutFd(&out, "root.task_dir_fd", root.task_dir_fd);
  for (const MountSpec& mount : root.mounts) {
    // One record per mount's field, started by its kind.
    Put(&out, "mount.kind",
        mount.kind == MountSpec::Kind::kTmpfs ? "tmpfs" : "bind");
    Put(&out, "mount.source", mount.source);
    Put(&out, "mount.destination", mount.destination);
    PutFlag(&out, "mount.read_only", mount.read_only);
    PutFd(&out, "mount.source_fd", mount.source_fd);
  }
  PutFlag(&out, "root.privileged", root.privileged);
  PutFlag(&out, "root.cgroup_namespace", root.cgroup_namespace);
  PutFlag(&out, "stdin_open", spec.stdin_open);
  PutFd(&out, "attach_fd", spec.attach_fd);
  PutFd(&out, "go_fd", spec.go_fd);
  return out;
}

bool DecodeInitSpec(const std::string& data, InitSpec* spec,
                    std::string* error) {
  *spec = InitSpec();
  size_t pos = 0;
  std::string key, value;
  while (pos < data.size()) {
    if (!NextRecord(data, &pos, &key, &value, error)) return false;
    uint64_t number = 0;
    const auto need_number = [&]() {
      if (ParseUnsigned(value, &number)) return true;
      *error = key + " is not a number: " + value;
      return false;
    };
    // A uid or gid: below 2^32 - 1, which is (uid_t)-1, "leave unchanged"
    // to setresuid (a cut or sentinel value could leave the task root).
    const auto need_id = [&]() {
      if (!need_number()) return false;
      if (number >= std::numeric_limits<uint32_t>::max()) {
        *error = key + " is not a user or group id: " + value;
        return false;
      }
      return true;
    };
    const auto need_flag = [&](bool* flag) {
      if (value != "0" && value != "1") {
        *error = key + " is not 0 or 1: " + value;
        return false;
      }
      *flag = value == "1";
      return true;
    };
    const auto need_fd = [&](int* fd) {
      if (!need_number()) return false;
      if (number > 1 << 20) {
        *error = key + " is not a descriptor: " + value;
        return false;
      }
      *fd = static_cast<int>(number);
      return true;
    };
    const auto need_mount = [&]() -> MountSpec* {
      if (spec->root.mounts.empty()) {
        *error = key + " before mount.kind";
        return nullptr;
      }
      return &spec->root.mounts.back();
    };
    if (key == "path") {
      spec->path = value;
    } else if (key == "arg") {
      spec->args.push_back(value);
    } else if (key == "env") {
      spec->env.push_back(value);
    } else if (key == "uid") {
      if (!need_id()) return false;
      spec->uid = static_cast<uid_t>(number);
    } else if (key == "gid") {
      if (!need_id()) return false;
      spec->gid = static_cast<gid_t>(number);
    } else if (key == "group") {
      if (!need_id()) return false;
      spec->groups.push_back(static_cast<gid_t>(number));
    } else if (key == "cwd") {
      spec->cwd = value;
    } else if (key == "tty") {
      if (!need_flag(&spec->tty)) return false;
    } else if (key == "join_user_namespace") {
      if (!need_flag(&spec->join_user_namespace)) return false;
    } else if (key == "rlimit") {
      const std::vector<std::string> fields = Fields(value, 3);
      uint64_t resource = 0;
      RlimitSpec rlimit;
      if (fields.size() != 3 || !ParseUnsigned(fields[0], &resource) ||
          resource > 64 || !ParseUnsigned(fields[1], &rlimit.soft) ||
          !ParseUnsigned(fields[2], &rlimit.hard)) {
        *error = "rlimit is not RESOURCE SOFT HARD: " + value;
        return false;
      }
      rlimit.resource = static_cast<int>(resource);
      spec->rlimits.push_back(rlimit);
    } else if (key == "stdin_open") {
      if (!need_flag(&spec->stdin_open)) return false;
    } else if (key == "attach_fd") {
      if (!need_fd(&spec->attach_fd)) return false;
    } else if (key == "go_fd") {
      if (!need_fd(&spec->go_fd)) return false;
    } else if (key == "privileges") {
      if (!need_flag(&spec->privileges.enabled)) return false;
    } else if (key == "capabilities") {
      if (!need_number()) return false;
      spec->privileges.capabilities = number;
    } else if (key == "no_new_privs") {
      if (!need_flag(&spec->privileges.no_new_privs)) return false;
    } else if (key == "seccomp_filter") {
      spec->privileges.seccomp_filter = value;
    } else if (key == "hostname") {
      spec->hostname = value;
    } else if (key == "netns") {
      spec->netns = value;
    } else if (key == "cgroup_procs") {
      spec->cgroup_procs.push_back(value);
    } else if (key == "log_dir") {
      spec->log_dir = value;
    } else if (key == "log_max_bytes") {
      if (!need_number()) return false;
      spec->log_max_bytes = number;
    } else if (key == "log_max_files") {
      if (!need_number()) return false;
      if (number > std::numeric_limits<uint32_t>::max()) {
        *error = key + " is out of range: " + value;
        return false;
      }
      spec->log_max_files = static_cast<uint32_t>(number);
    } else if (key == "exit_file") {
      spec->exit_file = value;
    } else if (key == "root") {
      if (!need_flag(&spec->root.enabled)) return false;
    } else if (key == "root.mount_point") {
      spec->root.mount_point = value;
    } else if (key == "root.rootfs") {
      spec->root.rootfs = value;
    } else if (key == "root.host_dir") {
      spec->root.host_dirs.push_back(value);
    } else if (key == "root.readonly") {
      if (!need_flag(&spec->root.readonly_rootfs)) return false;
    } else if (key == "root.task_dir") {
      spec->root.task_dir = value;
    } else if (key == "root.rootfs_fd") {
      if (!need_fd(&spec->root.rootfs_fd)) return false;
    } else if (key == "root.task_dir_fd") {
      if (!need_fd(&spec->root.task_dir_fd)) return false;
    } else if (key == "log_dir_fd") {
      if (!need_fd(&spec->log_dir_fd)) return false;
    } else if (key == "exit_dir_fd") {
      if (!need_fd(&spec->exit_dir_fd)) return false;
    } else if (key == "mount.source_fd") {
      MountSpec* mount = need_mount();
      if (mount == nullptr || !need_fd(&mount->source_fd)) return false;
    } else if (key == "mount.kind") {
      MountSpec mount;
      if (value == "tmpfs") {
        mount.kind = MountSpec::Kind::kTmpfs;
      } else if (value != "bind") {
        *error = "mount.kind is neither bind nor tmpfs: " + value;
        return false;
      }
      spec->root.mounts.push_back(mount);
    } else if (key == "mount.source") {
      MountSpec* mount = need_mount();
      if (mount == nullptr) return false;
      mount->source = value;
    } else if (key == "mount.destination") {
      MountSpec* mount = need_mount();
      if (mount == nullptr) return false;
      mount->destination = value;
    } else if (key == "mount.read_only") {
      MountSpec* mount = need_mount();
      if (mount == nullptr || !need_flag(&mount->read_only)) return false;
    } else if (key == "root.privileged") {
      if (!need_flag(&spec->root.privileged)) return false;
    } else if (key == "root.cgroup_namespace") {
      if (!need_flag(&spec->root.cgroup_namespace)) return false;
    } else {
      *error = "unknown key " + key;
      return false;
    }
  }
  if (spec->path.empty() || spec->args.empty()) {
    *error = "path and arg are required";
    return false;
  }
  return true;
}

std::string EncodeExitRecord(const ExitRecord& record) {
  return "berth-exit v1 " + std::to_string(record.exit_code) + " " +
         std::to_string(record.signal) + " " +
         std::to_string(record.exited_at_unix_nanos) + "\n";
}

bool DecodeExitRecord(const std::string& data, ExitRecord* record) {
  if (data.size() > kMaxExitRecordBytes) return false;
  const std::vector<std::string> fields = Fields(WithoutNewline(data), 5);
  if (fields.size() != 5 || fields[0] != "berth-exit" || fields[1] != "v1") {
    return false;
  }
  int64_t code = 0, signal = 0, nanos = 0;
  if (!ParseSigned(fields[2], &code) || !ParseSigned(fields[3], &signal) ||
      !ParseSigned(fields[4], &nanos) || !FitsInt(code) || !FitsInt(signal)) {
    return false;
  }
  record->exit_code = static_cast<int>(code);
  record->signal = static_cast<int>(signal);
  record->exited_at_unix_nanos = nanos;
  return true;
}

std::string EncodeInitReport(const InitReport& report) {
  switch (report.kind) {
    case InitReport::Kind::kStarted:
      return "started\n";
    case InitReport::Kind::kExited:
      return "exit " + std::to_string(report.wait_status) + "\n";
    case InitReport::Kind::kFailed:
      break;
  }
  std::string what = report.what;
  for (char& c : what) {
    if (c == '\n') c = ' ';
  }
  return "error " + std::to_string(report.error_number) + " " + what + "\n";
}

bool DecodeInitReport(const std::string& data, InitReport* report) {
  *report = InitReport();
  const std::string line = WithoutNewline(data);
  // One line: a newline or NUL inside would let what follows pass as part of
  // `what` (and forge lines where it is logged).
  if (line.find_first_of(std::string("\n\0", 2)) != std::string::npos) {
    return false;
  }
  if (line == "started") {
    report->kind = InitReport::Kind::kStarted;
    return true;
  }
  const std::vector<std::string> fields = Fields(line, 3);
  int64_t number = 0;
  if (fields.size() == 2 && fields[0] == "exit" &&
      ParseSigned(fields[1], &number) && FitsInt(number)) {
    report->kind = InitReport::Kind::kExited;
    report->wait_status = static_cast<int>(number);
    return true;
  }
  if (fields.size() == 3 && fields[0] == "error" &&
      ParseSigned(fields[1], &number) && FitsInt(number)) {
    report->kind = InitReport::Kind::kFailed;
    report->error_number = static_cast<int>(number);
    report->what = fields[2];
    return true;
  }
  return false;
}

}  // namespace berth::driver_common
