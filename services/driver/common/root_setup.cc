#include "services/driver/common/root_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace berth::driver_common {
namespace {

// A descriptor closed when it goes out of scope (base/unique_fd.h, written
// again: the init links nothing of base/).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }

  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // The path through which mount(2) reaches what the descriptor names.
  std::string ProcPath() const {
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  void Close() {
    if (fd_ >= 0) {
      const int saved = errno;
      close(fd_);
      errno = saved;
    }
    fd_ = -1;
  }
  int fd_;
};

// What a missing last component of a path is made as.
enum class Create { kNothing, kDirectory, kFile };

// The paths a non-privileged task sees masked (the OCI runtime spec's
// defaults, as Docker and containerd apply them).
constexpr const char* kMaskedPaths[] = {
    "/proc/acpi",          "/proc/kcore",      "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
    "/proc/sched_debug",   "/proc/scsi",       "/sys/firmware",
};
constexpr const char* kReadOnlyPaths[] = {
    "/proc/asound", "/proc/bus", "/proc/fs",
    "/proc/irq",    "/proc/sys", "/proc/sysrq-trigger",
};

struct DeviceNode {
  const char* name;
  unsigned int major;
  unsigned int minor;
};
constexpr DeviceNode kDevices[] = {
    {"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
    {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
};

constexpr char kHostCgroupRoot[] = "/sys/fs/cgroup";

// One cgroup hierarchy of the host, mounted at /sys/fs/cgroup/RELATIVE
// (RELATIVE empty: cgroup2 at /sys/fs/cgroup itself).
struct CgroupMount {
  std::string relative;
  std::string fstype;   // "cgroup" or "cgroup2"
  std::string options;  // v1: the controllers and name=, nothing else
};

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string::npos) end = text.size();
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// The components of an absolute or relative path, without "" and ".".
std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> result;
  for (std::string& part : Split(path, '/')) {
    if (!part.empty() && part != ".") result.push_back(std::move(part));
  }
  return result;
}

bool IsOctal(char c) { return c >= '0' && c <= '7'; }

// mountinfo escapes space, tab, newline and backslash as \ooo. (As
// services/common/stats/cgroup_layout.cc's UnescapeMountField, written again
// without Abseil for the static init.)
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && IsOctal(field[i + 1]) &&
        IsOctal(field[i + 2]) && IsOctal(field[i + 3])) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 +
                                      (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

// The super options of a v1 hierarchy that name it (its controllers,
// name=, none). Flags are left out: a new mount of an existing hierarchy
// that repeats them gains nothing, and release_agent may not be given.
std::string CgroupV1Options(const std::string& super_options) {
  static constexpr const char* kFlags[] = {
      "rw",          "ro",    "clone_children",
      "noprefix",    "xattr", "cpuset_v2_mode",
      "favordynmods"};
  std::string out;
  for (const std::string& option : Split(super_options, ',')) {
    if (option.empty() || option.rfind("release_agent=", 0) == 0) continue;
    bool flag = false;
    for (const char* f : kFlags) flag = flag || option == f;
    if (flag) continue;
    if (!out.empty()) out.push_back(',');
    out.append(option);
  }
  return out;
}

bool ReadFile(const char* path, std::string* out) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[16384];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      close(fd);
      errno = saved;
      return false;
    }
    out->append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return true;
}

class RootBuilder {
 public:
  explicit RootBuilder(const RootSpec& root) : root_(root) {}

  bool Build() {
    // Nothing mounted from here on propagates back to the host, while the
    // host's later mounts still show up.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
      return Fail("making every mount a slave of the host's");
    }
    if (root_.cgroup_namespace && !ReadHostCgroups()) return false;
    if (!MountRoot()) return false;
    if (!MountFs("/tmp", "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")) {
      return false;
    }
    if (!root_.task_dir.empty() && !MountTaskDir()) return false;
    if (!MountProc() || !MountSys() || !MountDev()) return false;
    for (const MountSpec& spec : root_.mounts) {
      if (!MountUserMount(spec)) return false;
    }
    if (!root_.privileged && !MaskPaths()) return false;
    if (root_.readonly_rootfs &&
        !SetAttributes(root_fd_, MOUNT_ATTR_RDONLY, /*recursive=*/false)) {
      return Fail("making the root read-only");
    }
    return Enter();
  }

  const std::string& what() const { return what_; }
  int error_number() const { return error_number_; }

 private:
  // Records errno and the step; always false.
  bool Fail(const std::string& what) {
    error_number_ = errno != 0 ? errno : EINVAL;
    what_ = what;
    return false;
  }

  // An O_PATH descriptor of `path` inside the root, symlinks resolved as if
  // the root were "/" (never out of it) and no magic links (/proc/N/root).
  Fd OpenInRoot(const std::string& path, int flags = 0) const {
    struct open_how how;
    std::memset(&how, 0, sizeof(how));
    how.flags = static_cast<uint64_t>(O_PATH | O_CLOEXEC | flags);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    std::string relative;
    for (const std::string& part : Components(path)) {
      if (!relative.empty()) relative.push_back('/');
      relative.append(part);
    }
    if (relative.empty()) relative = ".";
    return Fd(static_cast<int>(syscall(SYS_openat2, root_fd_.get(),
                                       relative.c_str(), &how, sizeof(how))));
  }

  // Resolves `path` inside the root, making what is missing one component
  // at a time (directories; the last one as `create` says). A dangling
  // symlink on the way is followed, inside the root, to what it names,
  // which is made there. Not ok with errno set on failure.
  //
  // A task's start resolves some sixty paths: the common cases (the path
  // is there, or all but its last component) cost one or two openat2, and
  // a walk keeps the descriptor of what it has resolved so far.
  Fd ResolveInRoot(const std::string& path, Create create) const {
    {
      Fd whole = OpenInRoot(path);
      if (whole.ok() || errno != ENOENT || create == Create::kNothing) {
        return whole;
      }
    }
    std::vector<std::string> components = Components(path);
    if (components.empty()) return OpenInRoot(".");
    // Start below the parent when it is there.
    std::string prefix;
    Fd prefix_fd;
    size_t i = 0;
    {
      std::string parent;
      for (size_t j = 0; j + 1 < components.size(); ++j) {
        parent += "/" + components[j];
      }
      Fd parent_fd = OpenInRoot(parent.empty() ? "." : parent, O_DIRECTORY);
      if (parent_fd.ok()) {
        prefix = parent;
        prefix_fd = std::move(parent_fd);
        i = components.size() - 1;
      } else {
        prefix_fd = OpenInRoot(".", O_DIRECTORY);
        if (!prefix_fd.ok()) return Fd();
      }
    }
    int steps = 0;
    while (i < components.size()) {
      // Bounds symlink chains and anything that keeps changing under us.
      if (++steps > 4096) {
        errno = ELOOP;
        return Fd();
      }
      const std::string next = prefix + "/" + components[i];
      {
        Fd fd = OpenInRoot(next);
        if (fd.ok()) {
          prefix = next;
          prefix_fd = std::move(fd);
          ++i;
          continue;
        }
      }
      if (errno != ENOENT) return Fd();
      const std::string& name = components[i];
      char target[PATH_MAX];
      const ssize_t length =
          readlinkat(prefix_fd.get(), name.c_str(), target, sizeof(target) - 1);
      if (length > 0) {
        // A dangling symlink: go on from what it names.
        std::vector<std::string> rest(components.begin() + i + 1,
                                      components.end());
        const std::string link(target, static_cast<size_t>(length));
        components = Components(link);
        components.insert(components.end(), rest.begin(), rest.end());
        if (link[0] == '/') {
          prefix.clear();
          prefix_fd = OpenInRoot(".", O_DIRECTORY);
          if (!prefix_fd.ok()) return Fd();
        }
        i = 0;
        continue;
      }
      const bool last = i + 1 == components.size();
      if (last && create == Create::kFile) {
        const int fd =
            openat(prefix_fd.get(), name.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) return Fd();
        if (fd >= 0) close(fd);
      } else if (mkdirat(prefix_fd.get(), name.c_str(), 0755) != 0 &&
                 errno != EEXIST) {
        return Fd();
      }
      // Made here, by us: opened without following anything.
      Fd made(openat(prefix_fd.get(), name.c_str(),
                     O_PATH | O_NOFOLLOW | O_CLOEXEC));
      if (!made.ok()) continue;  // the next round resolves it
      prefix = next;
      prefix_fd = std::move(made);
      ++i;
    }
    return prefix_fd;
  }

  // A new file system of `fstype` at `path` in the root.
  bool MountFs(const std::string& path, const char* source, const char* fstype,
               unsigned long flags, const char* data,
               Create create = Create::kDirectory) {
    Fd target = ResolveInRoot(path, create);
    if (!target.ok()) return Fail("making " + path + " in the root");
    if (mount(source, target.ProcPath().c_str(), fstype, flags, data) != 0) {
      return Fail(std::string("mounting ") + fstype + " at " + path);
    }
    return true;
  }

  // Sets `attributes` on the mount `fd` names (and those below it when
  // `recursive`). Only sets: a flag the mount has (nodev, noexec) stays, as
  // a bind remount would have to repeat it, and unlike a remount this
  // reaches the mounts below too.
  static bool SetAttributes(const Fd& fd, uint64_t attributes, bool recursive) {
    struct mount_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.attr_set = attributes;
    return mount_setattr(fd.get(), "",
                         AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
                         sizeof(attr)) == 0;
  }

  // Binds what `source` names (a detached copy of its mount tree, or of its
  // top mount only) at `destination`, with `attributes` set on the copy
  // before it is attached. `what` names the step.
  bool BindAt(const Fd& source, const Fd& destination, uint64_t attributes,
              bool recursive, const std::string& what) {
    Fd tree(open_tree(source.get(), "",
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                          (recursive ? AT_RECURSIVE : 0)));
    if (!tree.ok()) return Fail(what);
    if (attributes != 0 && !SetAttributes(tree, attributes, recursive)) {
      return Fail(what);
    }
    if (move_mount(tree.get(), "", destination.get(), "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
      return Fail(what);
    }
    return true;
  }

  // Binds the host path `source` at `destination` in the root, made as a
  // directory or an empty file as the source is.
  bool BindHostPath(const std::string& source, const std::string& destination,
                    uint64_t attributes) {
    const std::string what = "binding " + source + " at " + destination;
    Fd from(open(source.c_str(), O_PATH | O_CLOEXEC));
    struct stat st;
    if (!from.ok() || fstat(from.get(), &st) != 0) return Fail(what);
    Fd to = ResolveInRoot(
        destination, S_ISDIR(st.st_mode) ? Create::kDirectory : Create::kFile);
    if (!to.ok()) return Fail("making " + destination + " in the root");
    return BindAt(from, to, attributes, /*recursive=*/true, what);
  }

  // Attaches `tree`, a detached mount tree the driver made of `source` (its
  // attributes set), at `destination` in the root, made as a directory or
  // an empty file as the tree's top is.
  bool AttachTree(int tree, const std::string& source,
                  const std::string& destination) {
    const std::string what = "binding " + source + " at " + destination;
    struct stat st;
    if (fstat(tree, &st) != 0) return Fail(what);
    Fd to = ResolveInRoot(
        destination, S_ISDIR(st.st_mode) ? Create::kDirectory : Create::kFile);
    if (!to.ok()) return Fail("making " + destination + " in the root");
    if (move_mount(tree, "", to.get(), "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
      return Fail(what);
    }
    return true;
  }

  bool MountRoot() {
    const char* mount_point = root_.mount_point.c_str();
    if (root_.rootfs_fd >= 0) {
      if (move_mount(root_.rootfs_fd, "", AT_FDCWD, mount_point,
                     MOVE_MOUNT_F_EMPTY_PATH) != 0) {
        return Fail("binding rootfs " + root_.rootfs + " at " +
                    root_.mount_point);
      }
    } else if (!root_.rootfs.empty()) {
      if (mount(root_.rootfs.c_str(), mount_point, nullptr, MS_BIND | MS_REC,
                nullptr) != 0) {
        return Fail("binding rootfs " + root_.rootfs + " at " +
                    root_.mount_point);
      }
    } else if (mount("tmpfs", mount_point, "tmpfs", MS_NOSUID | MS_NODEV,
                     "mode=0755") != 0) {
      return Fail("mounting the root's tmpfs at " + root_.mount_point);
    }
    // Opened after the mount: the root of the new mount, from which every
    // path inside is resolved.
    root_fd_ = Fd(open(mount_point, O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd_.ok()) return Fail("opening the root " + root_.mount_point);
    if (!root_.rootfs.empty()) return true;
    for (const std::string& dir : root_.host_dirs) {
      if (!AddHostDir(dir)) return false;
    }
    return true;
  }

  bool AddHostDir(const std::string& dir) {
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0) {
      if (errno == ENOENT) return true;
      return Fail("looking at host directory " + dir);
    }
    if (!S_ISLNK(st.st_mode)) {
      return BindHostPath(
          dir, dir, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    }
    char target[PATH_MAX];
    const ssize_t length = readlink(dir.c_str(), target, sizeof(target) - 1);
    if (length < 0) return Fail("reading host symlink " + dir);
    target[length] = '\0';
    const size_t slash = dir.find_last_of('/');
    const std::string parent_path = dir.substr(0, slash);
    const std::string name = dir.substr(slash + 1);
    Fd parent = ResolveInRoot(parent_path, Create::kDirectory);
    if (!parent.ok()) return Fail("making " + parent_path + " in the root");
    if (symlinkat(target, parent.get(), name.c_str()) != 0 && errno != EEXIST) {
      return Fail("making symlink " + dir + " in the root");
    }
    return true;
  }

  // The task's directory at kTaskDirInRoot, its `.berth` and `logs` (the
  // driver's and the node's) covered by empty read-only directories.
  bool MountTaskDir() {
    if (root_.task_dir_fd >= 0
            ? !AttachTree(root_.task_dir_fd, root_.task_dir, kTaskDirInRoot)
            : !BindHostPath(root_.task_dir, kTaskDirInRoot,
                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) {
      return false;
    }
    // The bind's root, now on top of kTaskDirInRoot.
    Fd task = OpenInRoot(kTaskDirInRoot, O_DIRECTORY);
    if (!task.ok()) {
      return Fail(std::string("opening ") + kTaskDirInRoot + " in the root");
    }
    for (const char* hidden : {".berth", "logs"}) {
      const std::string path = std::string(kTaskDirInRoot) + "/" + hidden;
      // Never a symlink: what is covered must be that directory.
      Fd fd(openat(task.get(), hidden,
                   O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd.ok()) {
        if (errno == ENOENT) continue;
        return Fail("opening " + path + " in the root");
      }
      if (mount("tmpfs", fd.ProcPath().c_str(), "tmpfs",
                MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                "mode=0555") != 0) {
        return Fail("covering " + path);
      }
    }
    return true;
  }

  bool MountUserMount(const MountSpec& spec) {
    if (spec.kind == MountSpec::Kind::kTmpfs) {
      return MountFs(spec.destination, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV,
                     "mode=1777");
    }
    if (spec.source_fd >= 0) {
      return AttachTree(spec.source_fd, spec.source, spec.destination);
    }
    return BindHostPath(spec.source, spec.destination,
                        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                            (spec.read_only ? MOUNT_ATTR_RDONLY : 0));
  }

  bool MountProc() {
    return MountFs("/proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   nullptr);
  }

  bool MountSys() {
    const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    Fd target = ResolveInRoot("/sys", Create::kDirectory);
    if (!target.ok()) return Fail("making /sys in the root");
    if (mount("sysfs", target.ProcPath().c_str(), "sysfs",
              flags | (root_.privileged ? 0 : MS_RDONLY), nullptr) != 0) {
      // A network namespace owned by another user namespace: the host's
      // sysfs, as it is.
      if (errno != EPERM) return Fail("mounting sysfs at /sys");
      Fd host(open("/sys", O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (!host.ok()) return Fail("opening the host's /sys");
      if (!BindAt(host, target,
                  MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC |
                      (root_.privileged ? 0 : MOUNT_ATTR_RDONLY),
                  /*recursive=*/true, "binding the host's /sys at /sys")) {
        return false;
      }
    }
    if (!root_.cgroup_namespace) return true;
    return MountCgroups();
  }

  // Before anything is mounted: how the host lays out /sys/fs/cgroup.
  bool ReadHostCgroups() {
    std::string mountinfo;
    if (!ReadFile("/proc/self/mountinfo", &mountinfo)) {
      return Fail("reading /proc/self/mountinfo");
    }
    const std::string prefix = std::string(kHostCgroupRoot) + "/";
    for (const std::string& line : Split(mountinfo, '\n')) {
      const std::vector<std::string> fields = Split(line, ' ');
      size_t dash = 6;
      while (dash < fields.size() && fields[dash] != "-") ++dash;
      if (dash + 3 >= fields.size()) continue;
      const std::string& fstype = fields[dash + 1];
      if (fstype != "cgroup" && fstype != "cgroup2") continue;
      const std::string mount_point = Unescape(fields[4]);
      std::string relative;
      if (mount_point != kHostCgroupRoot) {
        if (mount_point.rfind(prefix, 0) != 0) continue;
        relative = mount_point.substr(prefix.size());
        if (relative.empty() || relative.find('/') != std::string::npos) {
          continue;
        }
      }
      CgroupMount cgroup;
      cgroup.relative = relative;
      cgroup.fstype = fstype;
      if (fstype == "cgroup")
        cgroup.options = CgroupV1Options(fields[dash + 3]);
      // A later mount at the same place covers an earlier one.
      bool replaced = false;
      for (CgroupMount& known : cgroups_) {
        if (known.relative == relative) {
          known = cgroup;
          replaced = true;
        }
      }
      if (!replaced) cgroups_.push_back(cgroup);
    }
    DIR* dir = opendir(kHostCgroupRoot);
    if (dir == nullptr) return true;  // no cgroups mounted there
    while (const struct dirent* entry = readdir(dir)) {
      if (entry->d_type != DT_LNK) continue;
      char target[PATH_MAX];
      const ssize_t length =
          readlinkat(dirfd(dir), entry->d_name, target, sizeof(target) - 1);
      if (length <= 0) continue;
      cgroup_links_.emplace_back(
          entry->d_name, std::string(target, static_cast<size_t>(length)));
    }
    closedir(dir);
    return true;
  }

  // /sys/fs/cgroup as the host has it, each hierarchy mounted anew: in the
  // task's cgroup namespace its root is the task's cgroup.
  bool MountCgroups() {
    if (cgroups_.empty()) return true;
    const unsigned long flags =
        MS_NOSUID | MS_NODEV | MS_NOEXEC | (root_.privileged ? 0 : MS_RDONLY);
    const std::string top = kHostCgroupRoot;
    for (const CgroupMount& cgroup : cgroups_) {
      // Pure cgroup v2: the one hierarchy is /sys/fs/cgroup itself.
      if (cgroup.relative.empty()) {
        return MountFs(top, cgroup.fstype.c_str(), cgroup.fstype.c_str(), flags,
                       nullptr, Create::kNothing);
      }
    }
    if (!MountFs(top, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "mode=0755", Create::kNothing)) {
      return false;
    }
    for (const CgroupMount& cgroup : cgroups_) {
      const std::string path = top + "/" + cgroup.relative;
      if (!MountFs(path, cgroup.fstype.c_str(), cgroup.fstype.c_str(), flags,
                   cgroup.options.empty() ? nullptr : cgroup.options.c_str())) {
        return false;
      }
    }
    Fd dir = OpenInRoot(top, O_DIRECTORY);
    if (!dir.ok()) return Fail("opening " + top + " in the root");
    for (const auto& [name, target] : cgroup_links_) {
      if (symlinkat(target.c_str(), dir.get(), name.c_str()) != 0 &&
          errno != EEXIST) {
        return Fail("making symlink " + top + "/" + name);
      }
    }
    if (!root_.privileged && !SetAttributes(dir, MOUNT_ATTR_RDONLY, false)) {
      return Fail("making " + top + " read-only");
    }
    return true;
  }

  bool MountDev() {
    if (root_.privileged) {
      Fd host(open("/dev", O_PATH | O_DIRECTORY | O_CLOEXEC));
      Fd target = ResolveInRoot("/dev", Create::kDirectory);
      if (!host.ok() || !target.ok()) return Fail("making /dev in the root");
      return BindAt(host, target, 0, /*recursive=*/true,
                    "binding the host's /dev at /dev");
    }
    if (!MountFs("/dev", "tmpfs", "tmpfs", MS_NOSUID | MS_NOEXEC,
                 "mode=0755,size=65536k")) {
      return false;
    }
    Fd dev = OpenInRoot("/dev", O_DIRECTORY);
    if (!dev.ok()) return Fail("opening /dev in the root");
    for (const DeviceNode& node : kDevices) {
      const std::string what = std::string("making /dev/") + node.name;
      if (mknodat(dev.get(), node.name, S_IFCHR | 0666,
                  makedev(node.major, node.minor)) == 0) {
        if (fchmodat(dev.get(), node.name, 0666, 0) != 0) return Fail(what);
        continue;
      }
      // In a user namespace of its own the init may not make devices: the
      // host's node, bound onto an empty file (its mount's flags locked).
      if (errno != EPERM) return Fail(what);
      if (!BindHostDevice(dev, node.name)) return false;
    }
    static constexpr std::pair<const char*, const char*> kLinks[] = {
        {"ptmx", "pts/ptmx"},          {"fd", "/proc/self/fd"},
        {"stdin", "/proc/self/fd/0"},  {"stdout", "/proc/self/fd/1"},
        {"stderr", "/proc/self/fd/2"},
    };
    for (const auto& [name, target] : kLinks) {
      if (symlinkat(target, dev.get(), name) != 0) {
        return Fail(std::string("making symlink /dev/") + name);
      }
    }
    return MountFs("/dev/pts", "devpts", "devpts", MS_NOSUID | MS_NOEXEC,
                   "newinstance,ptmxmode=0666,mode=0620,gid=5") &&
           MountFs("/dev/shm", "shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   "mode=1777") &&
           MountFs("/dev/mqueue", "mqueue", "mqueue",
                   MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  }

  // Binds the host's /dev/NAME onto an empty file NAME made in `dev`.
  bool BindHostDevice(const Fd& dev, const char* name) {
    const std::string path = std::string("/dev/") + name;
    const std::string what = "binding the host's " + path + " at " + path;
    Fd host(open(path.c_str(), O_PATH | O_CLOEXEC));
    struct stat st;
    if (!host.ok() || fstat(host.get(), &st) != 0) return Fail(what);
    if (!S_ISCHR(st.st_mode)) {
      errno = ENODEV;
      return Fail(what + " (not a character device)");
    }
    const int made =
        openat(dev.get(), name,
               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (made < 0) return Fail("making " + path + " in the root");
    close(made);
    Fd target(openat(dev.get(), name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!target.ok()) return Fail("opening " + path + " in the root");
    return BindAt(host, target, 0, /*recursive=*/false, what);
  }

  bool MaskPaths() {
    Fd null = OpenInRoot("/dev/null");
    if (!null.ok()) return Fail("opening /dev/null in the root");
    for (const char* path : kMaskedPaths) {
      Fd fd = OpenInRoot(path);
      if (!fd.ok()) {
        if (errno == ENOENT) continue;
        return Fail(std::string("opening ") + path + " in the root");
      }
      struct stat st;
      if (fstat(fd.get(), &st) != 0) {
        return Fail(std::string("looking at ") + path);
      }
      if (S_ISDIR(st.st_mode)) {
        if (mount("tmpfs", fd.ProcPath().c_str(), "tmpfs",
                  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0555") != 0) {
          return Fail(std::string("masking ") + path);
        }
      } else if (!BindAt(null, fd, 0, /*recursive=*/false,
                         std::string("masking ") + path)) {
        return false;
      }
    }
    for (const char* path : kReadOnlyPaths) {
      Fd fd = OpenInRoot(path);
      if (!fd.ok()) {
        if (errno == ENOENT) continue;
        return Fail(std::string("opening ") + path + " in the root");
      }
      if (!BindAt(fd, fd,
                  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                      MOUNT_ATTR_NOEXEC,
                  /*recursive=*/true,
                  std::string("making ") + path + " read-only")) {
        return false;
      }
    }
    return true;
  }

  bool Enter() {
    // pivot_root(".", ".") stacks the old root on the new one; detaching
    // "." then removes it (pivot_root(2), "NOTES").
    if (fchdir(root_fd_.get()) != 0) {
      return Fail("changing to the root " + root_.mount_point);
    }
    if (syscall(SYS_pivot_root, ".", ".") != 0) {
      return Fail("entering the root " + root_.mount_point + " (pivot_root)");
    }
    if (umount2(".", MNT_DETACH) != 0) return Fail("detaching the old root");
    if (chdir("/") != 0) return Fail("changing to / in the root");
    root_fd_ = Fd();
    return true;
  }

  const RootSpec& root_;
  Fd root_fd_;
  std::vector<CgroupMount> cgroups_;
  std::vector<std::pair<std::string, std::string>> cgroup_links_;
  std::string what_;
  int error_number_ = 0;
};

}  // namespace

bool SetUpRoot(const RootSpec& root, std::string* what, int* error_number) {
  RootBuilder builder(root);
  if (builder.Build()) return true;
  *what = builder.what();
  *error_number = builder.error_number();
  return false;
}

}  // namespace berth::driver_common
