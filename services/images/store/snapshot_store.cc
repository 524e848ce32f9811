#include "services/images/store/snapshot_store.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "services/common/remove_tree.h"
#include "services/images/store/fs_util.h"

namespace berth::images {
namespace {

constexpr char kRecord[] = "snapshot.json";
// Each overlay keeps its own upper: no index (which ties an upper to the
// lower layers' file handles) and no metacopy (copy-up copies data, so an
// upper is whole on its own, whatever the module's defaults). Volatile: the
// overlay never syncs its upper file system (without it, every unmount
// syncs the whole file system the store is on, which takes as long as the
// other writers there make it: 8-22 ms under a build, 145 ms after 200 MB
// written elsewhere).
constexpr char kOverlayOptions[] = "index=off,metacopy=off,volatile";
// A released snapshot's directory is renamed to
// <kReleasedPrefix><id><kReleasedSeparator><random> (never an id: '~' is not
// allowed in ids; "tmp-" as the store's other temporary names) before it is
// removed.
constexpr char kReleasedPrefix[] = "tmp-";
constexpr char kReleasedSeparator[] = "~";
// What a volatile overlay leaves in its workdir (and what makes the kernel
// refuse to mount it again until it is removed).
constexpr char kVolatileMark[] = "work/incompat/volatile";

// This boot's id (/proc/sys/kernel/random/boot_id); empty if unreadable.
const std::string& BootId() {
  static const std::string* const boot_id = [] {
    absl::StatusOr<std::string> text =
        base::ReadFile("/proc/sys/kernel/random/boot_id", 256);
    return new std::string(
        text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "");
  }();
  return *boot_id;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// True when `path` is a mount point (it is on another device than its
// parent's: an overlay has a device of its own).
bool IsMountPoint(const std::string& path) {
  struct stat st, parent;
  return lstat(path.c_str(), &st) == 0 &&
         lstat(absl::StrCat(path, "/..").c_str(), &parent) == 0 &&
         st.st_dev != parent.st_dev;
}

// Unmounts whatever is mounted at `path` (lazily when busy).
absl::Status Unmount(const std::string& path) {
  for (int i = 0; i < 16 && IsMountPoint(path); ++i) {
    if (umount2(path.c_str(), UMOUNT_NOFOLLOW) == 0) continue;
    if (errno == EBUSY &&
        umount2(path.c_str(), UMOUNT_NOFOLLOW | MNT_DETACH) == 0) {
      LOG(WARNING) << path << " was busy; detached it";
      continue;
    }
    if (errno == EINVAL || errno == ENOENT) break;
    return absl::ErrnoToStatus(errno, absl::StrCat("unmounting ", path));
  }
  return absl::OkStatus();
}

// The messages the kernel left in a filesystem context ("e overlay: ...").
std::string ContextLog(int fs) {
  std::string log;
  char buffer[512];
  for (int i = 0; i < 8; ++i) {
    ssize_t n = read(fs, buffer, sizeof(buffer));
    if (n <= 0) break;
    absl::StrAppend(&log, log.empty() ? " (" : "; ",
                    absl::string_view(buffer, static_cast<size_t>(n)));
  }
  if (!log.empty()) log += ")";
  return log;
}

// A detached copy of the directory `dir` idmapped through `userns_fd`.
absl::StatusOr<base::UniqueFd> IdmappedTree(const std::string& dir,
                                            int userns_fd) {
  base::UniqueFd tree(
      open_tree(AT_FDCWD, dir.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  struct mount_attr attr = {};
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  if (!tree ||
      mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("idmapping layer ", dir));
  }
  return tree;
}

// Mounts the overlay with the new mount API, one "lowerdir+" per layer (no
// length limit on the layer list; Linux 6.8 and later), or with mount(2)
// and a "lowerdir=a:b" option where the kernel lacks that. With
// `userns_fd`, each layer is a detached copy idmapped through it, given by
// descriptor.
absl::Status MountOverlay(const std::vector<std::string>& lower,
                          const std::string& upper, const std::string& work,
                          const std::string& target, int userns_fd) {
  base::UniqueFd fs(fsopen("overlay", FSOPEN_CLOEXEC));
  auto set = [&](const char* key, const std::string& value) {
    return fsconfig(fs.get(), FSCONFIG_SET_STRING, key, value.c_str(), 0) == 0;
  };
  std::vector<base::UniqueFd> trees;
  auto add_lower = [&](const std::string& dir) -> absl::Status {
    if (userns_fd < 0) {
      if (set("lowerdir+", dir)) return absl::OkStatus();
      return absl::ErrnoToStatus(
          errno, absl::StrCat("overlay lowerdir ", dir, ContextLog(fs.get())));
    }
    absl::StatusOr<base::UniqueFd> tree = IdmappedTree(dir, userns_fd);
    if (!tree.ok()) return tree.status();
    // Kept open until the overlay is made: a detached tree whose last
    // descriptor is closed is unmounted (the create then fails, ENODATA).
    trees.push_back(*std::move(tree));
    if (fsconfig(fs.get(), FSCONFIG_SET_FD, "lowerdir+", nullptr,
                 trees.back().get()) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("overlay lowerdir ", dir, " by descriptor",
                              ContextLog(fs.get())));
    }
    return absl::OkStatus();
  };
  bool lowerdir_plus = fs.valid();
  if (lowerdir_plus) {
    absl::Status first = add_lower(lower[0]);
    if (!first.ok()) {
      if (!absl::IsInvalidArgument(first) || userns_fd >= 0) return first;
      lowerdir_plus = false;
    }
  } else if (userns_fd >= 0) {
    return absl::ErrnoToStatus(errno, "fsopen overlay (idmapped layers)");
  }
  if (lowerdir_plus) {
    for (size_t i = 1; i < lower.size(); ++i) {
      absl::Status added = add_lower(lower[i]);
      if (!added.ok()) return added;
    }
    if (!set("upperdir", upper) || !set("workdir", work) ||
        !set("index", "off") || !set("metacopy", "off") ||
        fsconfig(fs.get(), FSCONFIG_SET_FLAG, "volatile", nullptr, 0) != 0 ||
        !set("source", "berth-images") ||
        fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("creating the overlay for ", target,
                              ContextLog(fs.get())));
    }
    base::UniqueFd mnt(fsmount(fs.get(), FSMOUNT_CLOEXEC, 0));
    if (!mnt || move_mount(mnt.get(), "", AT_FDCWD, target.c_str(),
                           MOVE_MOUNT_F_EMPTY_PATH) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("mounting the overlay at ", target));
    }
    return absl::OkStatus();
  }
  for (const std::string& dir : lower) {
    if (dir.find_first_of(":,") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer directory ", dir, " has ':' or ','"));
    }
  }
  const std::string options =
      absl::StrCat("lowerdir=", absl::StrJoin(lower, ":"), ",upperdir=", upper,
                   ",workdir=", work, ",", kOverlayOptions);
  if (mount("berth-images", target.c_str(), "overlay", 0, options.c_str()) !=
      0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("mounting the overlay at ", target));
  }
  return absl::OkStatus();
}

// `boot_id`, when not null, is set to the boot the snapshot was last
// mounted in ("" when the record has none).
absl::StatusOr<SnapshotInfo> ParseRecord(const std::string& dir,
                                         absl::string_view text,
                                         std::string* boot_id = nullptr) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object() || !json.contains("id") || !json["layers"].is_array() ||
      !json["layer_dirs"].is_array()) {
    return absl::DataLossError(
        absl::StrCat("unreadable snapshot record ", dir, "/", kRecord));
  }
  SnapshotInfo info;
  info.id = json.value("id", "");
  info.rootfs = absl::StrCat(dir, "/rootfs");
  info.image_name = json.value("image_name", "");
  info.manifest_digest = json.value("manifest_digest", "");
  for (const auto& layer : json["layers"]) {
    if (layer.is_string()) info.layers.push_back(layer.get<std::string>());
  }
  info.created = absl::FromUnixNanos(json.value("created_ns", int64_t{0}));
  if (boot_id != nullptr) *boot_id = json.value("boot_id", "");
  return info;
}

// Writes the record of `info`, mounted in this boot: a temporary file
// renamed, so that a reader sees the whole record or none. Not synced:
// nothing of a snapshot is (see the header); after a crash of the host a
// record that did not reach the disk is missing or empty, and the snapshot
// then half-made.
absl::Status WriteRecord(const std::string& dir, const SnapshotInfo& info,
                         const std::vector<std::string>& layer_dirs) {
  const nlohmann::json json = {
      {"id", info.id},
      {"image_name", info.image_name},
      {"manifest_digest", info.manifest_digest},
      {"layers", info.layers},
      {"layer_dirs", layer_dirs},
      {"created_ns", absl::ToUnixNanos(info.created)},
      {"boot_id", BootId()},
  };
  const std::string path = absl::StrCat(dir, "/", kRecord);
  const std::string tmp =
      store_internal::RandomName(absl::StrCat(path, ".tmp-"));
  base::UniqueFd fd(
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
  absl::Status status = base::WriteAll(fd.get(), json.dump(2), tmp);
  fd.reset();
  if (status.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("renaming ", tmp));
  }
  if (!status.ok()) unlink(tmp.c_str());
  return status;
}

// Makes the empty upper directory `upper` with the owner and mode of the
// top layer's root (as the idmapped layer shows it): the root of the
// overlay takes those of the upper.
absl::Status MakeUpper(const SnapshotSpec& spec, const std::string& upper) {
  struct stat top;
  absl::StatusOr<base::UniqueFd> top_tree =
      spec.idmap_userns_fd < 0
          ? base::UniqueFd(open(spec.layer_dirs[0].c_str(),
                                O_PATH | O_DIRECTORY | O_CLOEXEC))
          : IdmappedTree(spec.layer_dirs[0], spec.idmap_userns_fd);
  if (!top_tree.ok()) return top_tree.status();
  if (!top_tree->valid() || fstat(top_tree->get(), &top) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("layer ", spec.layer_diff_ids[0], " at ",
                            spec.layer_dirs[0]));
  }
  if (mkdir(upper.c_str(), 0755) != 0 ||
      chown(upper.c_str(), top.st_uid, top.st_gid) != 0 ||
      chmod(upper.c_str(), top.st_mode & 07777) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("making ", upper));
  }
  return absl::OkStatus();
}

// Removes the snapshot directory `dir` (unmounted, released): first
// what a snapshot whose task wrote nothing holds, entry by entry, by name
// (no listing: a dozen system calls fewer than RemoveTree's walk, each of
// them slow on a busy file system), then RemoveTree for whatever is left
// (what the task wrote, or anything unexpected). rmdir removes only empty
// directories, so nothing of the task's is touched by name.
absl::Status RemoveSnapshotDir(const std::string& dir) {
  const std::string work_work = absl::StrCat(dir, "/work/work");
  if (unlink(absl::StrCat(work_work, "/incompat/volatile/dirty").c_str()) ==
          0 ||
      errno == ENOENT) {
    for (const std::string& empty : {
             absl::StrCat(work_work, "/incompat/volatile"),
             absl::StrCat(work_work, "/incompat"),
             work_work,
             absl::StrCat(dir, "/work"),
             absl::StrCat(dir, "/upper"),
             absl::StrCat(dir, "/rootfs"),
             dir,
         }) {
      if (rmdir(empty.c_str()) != 0 && errno != ENOENT) break;
    }
  }
  return RemoveTree(dir);
}

// The record of snapshot `id` in `dir`; NOT_FOUND naming it when there is
// none.
absl::StatusOr<SnapshotInfo> ReadRecord(const std::string& dir,
                                        absl::string_view id,
                                        std::string* boot_id = nullptr) {
  absl::StatusOr<std::string> text =
      base::ReadFile(absl::StrCat(dir, "/", kRecord), 1 << 20);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("snapshot ", id, " not found"));
  }
  return ParseRecord(dir, *text, boot_id);
}

// Mounts the recorded snapshot `info` in `dir` again (its mount is gone:
// the host restarted, or it was unmounted). The work directory is the
// overlay's scratch space, made anew. The upper is kept, unless the overlay
// was mounted (volatile, and so never synced) in another boot, or in a boot
// the record does not name, and its workdir holds the kernel's volatile
// mark: then what the task wrote may be half on disk, and the upper is
// made anew, empty, and a warning names the snapshot. The record then names
// this boot.
absl::Status Remount(const std::string& what, const std::string& dir,
                     const SnapshotInfo& info, const std::string& mounted_boot,
                     const SnapshotSpec& spec) {
  const std::string upper = absl::StrCat(dir, "/upper");
  const std::string work = absl::StrCat(dir, "/work");
  const bool same_boot = !mounted_boot.empty() && mounted_boot == BootId();
  if (!same_boot && IsDirectory(absl::StrCat(work, "/", kVolatileMark))) {
    LOG(WARNING) << what << ": its writable layer (" << upper
                 << ") is discarded: the host restarted since it was "
                    "mounted (boot "
                 << (mounted_boot.empty() ? "unknown" : mounted_boot)
                 << ", now " << BootId()
                 << ") and its overlay was volatile (never synced), so what "
                    "its task wrote was lost with the host's restart; the "
                    "task starts again on the image as it is";
    absl::Status removed = RemoveTree(upper);
    if (!removed.ok()) return removed;
    if (absl::Status made = MakeUpper(spec, upper); !made.ok()) return made;
  }
  absl::Status status = RemoveTree(work);
  if (status.ok() && mkdir(work.c_str(), 0700) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", work));
  }
  if (status.ok()) {
    status = MountOverlay(spec.layer_dirs, upper, work,
                          absl::StrCat(dir, "/rootfs"), spec.idmap_userns_fd);
  }
  if (!status.ok()) return status;
  LOG(INFO) << "remounted " << what;
  if (!same_boot) {
    // Else a later remount in this boot would discard the upper.
    absl::Status written = WriteRecord(dir, info, spec.layer_dirs);
    if (!written.ok()) LOG(WARNING) << what << ": " << written;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SnapshotStore::ValidateId(absl::string_view id) {
  bool ok = !id.empty() && id.size() <= 128 && id != "." &&
            !absl::StrContains(id, "..");
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')) {
      ok = false;
    }
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "snapshot id \"", absl::CHexEscape(id.substr(0, 200)),
      "\" is not 1 to 128 of [A-Za-z0-9_.-] (not \".\", without \"..\")"));
}

absl::StatusOr<std::unique_ptr<SnapshotStore>> SnapshotStore::Open(
    const std::string& dir) {
  absl::Status status = store_internal::MakeDirs(dir, 0711);
  if (!status.ok()) return status;
  std::unique_ptr<SnapshotStore> store(new SnapshotStore(dir));
  status = store->Recover();
  if (!status.ok()) return status;
  return store;
}

std::string SnapshotStore::SnapshotDir(absl::string_view id) const {
  return absl::StrCat(dir_, "/", id);
}

absl::Status SnapshotStore::Recover() {
  absl::StatusOr<std::vector<std::string>> names =
      store_internal::ListDir(dir_);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    const std::string path = SnapshotDir(name);
    if (!IsDirectory(path)) {
      LOG(WARNING) << "removing " << path << ": not a snapshot";
      unlink(path.c_str());
      continue;
    }
    if (absl::StartsWith(name, kReleasedPrefix) && !ValidateId(name).ok()) {
      // Released before a crash or a stop of the service.
      Discard(path);
      continue;
    }
    if (Get(name).ok()) {
      // Whole; perhaps a task runs on it. Only temporary files go.
      absl::StatusOr<std::vector<std::string>> entries =
          store_internal::ListDir(path);
      if (!entries.ok()) continue;
      for (const std::string& entry : *entries) {
        if (absl::StartsWith(entry, absl::StrCat(kRecord, ".tmp-"))) {
          unlink(absl::StrCat(path, "/", entry).c_str());
        }
      }
      continue;
    }
    LOG(INFO) << "removing the half-made snapshot " << path;
    absl::Status status = Unmount(absl::StrCat(path, "/rootfs"));
    if (status.ok()) status = RemoveTree(path);
    if (!status.ok()) LOG(WARNING) << status;
  }
  return absl::OkStatus();
}

absl::StatusOr<SnapshotInfo> SnapshotStore::Get(absl::string_view id) const {
  absl::Status valid = ValidateId(id);
  if (!valid.ok()) return valid;
  return ReadRecord(SnapshotDir(id), id);
}

absl::StatusOr<std::vector<SnapshotInfo>> SnapshotStore::List() const {
  absl::StatusOr<std::vector<std::string>> names =
      store_internal::ListDir(dir_);
  if (!names.ok()) return names.status();
  std::sort(names->begin(), names->end());
  std::vector<SnapshotInfo> snapshots;
  for (const std::string& name : *names) {
    absl::StatusOr<SnapshotInfo> info = Get(name);
    if (info.ok()) snapshots.push_back(*std::move(info));
  }
  return snapshots;
}

bool SnapshotStore::IsMounted(absl::string_view id) const {
  return ValidateId(id).ok() &&
         IsMountPoint(absl::StrCat(SnapshotDir(id), "/rootfs"));
}

absl::StatusOr<SnapshotInfo> SnapshotStore::Prepare(absl::string_view id,
                                                    const SnapshotSpec& spec) {
  absl::Status valid = ValidateId(id);
  if (!valid.ok()) return valid;
  const std::string what =
      absl::StrCat("snapshot ", id, " of image ", spec.image_name);
  if (spec.layer_dirs.empty() ||
      spec.layer_dirs.size() != spec.layer_diff_ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", spec.layer_dirs.size(), " layer directories, ",
                     spec.layer_diff_ids.size(), " diff_ids"));
  }
  const std::string dir = SnapshotDir(id);
  const std::string rootfs = absl::StrCat(dir, "/rootfs");
  const std::string upper = absl::StrCat(dir, "/upper");
  const std::string work = absl::StrCat(dir, "/work");
  absl::MutexLock lock(&mu_);

  std::string mounted_boot;
  absl::StatusOr<SnapshotInfo> existing = ReadRecord(dir, id, &mounted_boot);
  if (existing.ok()) {
    if (existing->manifest_digest != spec.manifest_digest) {
      return absl::AlreadyExistsError(absl::StrCat(
          "snapshot ", id, " exists, of image ", existing->image_name, " (",
          existing->manifest_digest, "), not of ", spec.image_name, " (",
          spec.manifest_digest, ")"));
    }
    if (!IsMountPoint(rootfs)) {
      absl::Status status = Remount(what, dir, *existing, mounted_boot, spec);
      if (!status.ok()) {
        return absl::Status(
            status.code(),
            absl::StrCat("remounting ", what, ": ", status.message()));
      }
    }
    return existing;
  }
  if (absl::Status status = Unmount(rootfs); !status.ok()) return status;
  if (absl::Status status = RemoveTree(dir); !status.ok()) return status;

  auto fail = [&](const absl::Status& status) -> absl::Status {
    absl::Status cleanup = Unmount(rootfs);
    if (cleanup.ok()) cleanup = RemoveTree(dir);
    if (!cleanup.ok()) LOG(WARNING) << cleanup;
    return absl::Status(status.code(), absl::StrCat("preparing ", what, ": ",
                                                    status.message()));
  };
  if (mkdir(dir.c_str(), 0711) != 0) {
    return fail(absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", dir)));
  }
  if (absl::Status status = MakeUpper(spec, upper); !status.ok()) {
    return fail(status);
  }
  if (mkdir(work.c_str(), 0700) != 0 || mkdir(rootfs.c_str(), 0755) != 0) {
    return fail(absl::ErrnoToStatus(errno, absl::StrCat("making ", dir)));
  }
  if (absl::Status status = MountOverlay(spec.layer_dirs, upper, work, rootfs,
                                         spec.idmap_userns_fd);
      !status.ok()) {
    return fail(status);
  }
  SnapshotInfo info;
  info.id = std::string(id);
  info.rootfs = rootfs;
  info.image_name = spec.image_name;
  info.manifest_digest = spec.manifest_digest;
  info.layers = spec.layer_diff_ids;
  info.created = absl::Now();
  if (absl::Status status = WriteRecord(dir, info, spec.layer_dirs);
      !status.ok()) {
    return fail(status);
  }
  return info;
}

absl::Status SnapshotStore::Release(absl::string_view id) {
  absl::Status valid = ValidateId(id);
  if (!valid.ok()) return valid;
  const std::string dir = SnapshotDir(id);
  absl::MutexLock lock(&mu_);
  if (!IsDirectory(dir)) return absl::OkStatus();
  absl::Status status = Unmount(absl::StrCat(dir, "/rootfs"));
  // Gone at once, record and all: renamed to a name that is never an id,
  // and removed by the remover (or, after a crash, from Open).
  const std::string released = store_internal::RandomName(
      absl::StrCat(dir_, "/", kReleasedPrefix, id, kReleasedSeparator));
  if (status.ok() && rename(dir.c_str(), released.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("renaming ", dir));
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("releasing snapshot ", id,
                                                    ": ", status.message()));
  }
  Discard(released);
  return absl::OkStatus();
}

SnapshotStore::SnapshotStore(std::string dir)
    : dir_(std::move(dir)), remover_([this] { RemoveReleased(); }) {}

SnapshotStore::~SnapshotStore() {
  {
    absl::MutexLock lock(&released_mu_);
    closing_ = true;
  }
  remover_.join();
}

void SnapshotStore::Discard(std::string path) {
  absl::MutexLock lock(&released_mu_);
  released_.push_back(std::move(path));
}

bool SnapshotStore::RemoverHasWork() const {
  return closing_ || !released_.empty();
}

void SnapshotStore::RemoveReleased() {
  for (;;) {
    std::string path;
    {
      absl::MutexLock lock(&released_mu_);
      released_mu_.Await(absl::Condition(this, &SnapshotStore::RemoverHasWork));
      // Closing: what is left is removed at the next Open.
      if (closing_) return;
      path = std::move(released_.front());
      released_.pop_front();
    }
    absl::Status removed = RemoveSnapshotDir(path);
    if (!removed.ok()) {
      LOG(WARNING) << removed << " (a released snapshot; removed at the "
                   << "next start)";
    }
  }
}

}  // namespace berth::images
