// TaskManager's image snapshots (task_manager.h): a task with spec.image
// runs on a snapshot berth-images prepares for it (id = the task id),
// prepared at its first start, prepared again (the same snapshot, mounted
// again if its mount went) at each restart, released when it is removed or
// fails to start; at the node's start, snapshots that are no task's are
// released.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "services/node/task_image.h"
#include "services/node/task_manager.h"

namespace berth::node {
namespace {

// The error of a snapshot that could not be prepared, naming the image.
absl::Status PrepareError(const std::string& reference,
                          const absl::Status& error) {
  if (absl::IsNotFound(error)) {
    return absl::NotFoundError(absl::StrCat(
        "spec.image: image \"", reference,
        "\": not found in the image store; pull it first: berth image pull ",
        reference));
  }
  return absl::Status(
      error.code(),
      absl::StrCat("spec.image: image \"", reference,
                   "\": cannot prepare the task's root: ", error.message()));
}

using IdMappings = google::protobuf::RepeatedPtrField<driver::v1::IdMapping>;
using SnapshotIdMappings =
    google::protobuf::RepeatedPtrField<image::v1::IdMapping>;

// Whether a snapshot's mappings (as ListSnapshots shows them) are `map`.
bool SameMappings(const SnapshotIdMappings& snapshot, const IdMappings& map) {
  if (snapshot.size() != map.size()) return false;
  for (int i = 0; i < map.size(); ++i) {
    if (snapshot[i].container_id() != map[i].container_id() ||
        snapshot[i].host_id() != map[i].host_id() ||
        snapshot[i].size() != map[i].size()) {
      return false;
    }
  }
  return true;
}

// "0:HOST:SIZE ..." for messages.
template <typename Mappings>
std::string MappingsText(const Mappings& map) {
  std::string text;
  for (const auto& range : map) {
    absl::StrAppend(&text, text.empty() ? "" : " ", range.container_id(), ":",
                    range.host_id(), ":", range.size());
  }
  return text.empty() ? "none" : text;
}

// Whether `path` is the root of a mount (statx's STATX_ATTR_MOUNT_ROOT;
// before Linux 5.8, on another device than its parent: an overlay has one
// of its own).
bool IsMountRoot(const std::string& path) {
  struct statx stx;
  if (statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS,
            &stx) != 0) {
    return false;
  }
  if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0) {
    return (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  }
  struct stat parent;
  return stat(absl::StrCat(path, "/..").c_str(), &parent) == 0 &&
         makedev(stx.stx_dev_major, stx.stx_dev_minor) != parent.st_dev;
}

// The host id the namespace's root (container id 0) is.
uint32_t HostRoot(const IdMappings& map) {
  for (const driver::v1::IdMapping& range : map) {
    if (range.container_id() == 0) return range.host_id();
  }
  return 0;
}

}  // namespace

absl::Status TaskManager::PrepareImage(Entry& entry, const v1::TaskSpec& spec,
                                       bool driver_binds_idmapped,
                                       driver::v1::TaskConfig* config) {
  const std::string& reference = spec.image().reference();
  if (options_.images == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "spec.image: image \"", reference,
        "\": this node runs without berth-images (--images_socket=none)"));
  }
  // A task in a user namespace gets a snapshot over layers idmapped to its
  // mappings (an overlay cannot be idmapped itself), which its driver binds
  // as it is; for a driver that cannot, the snapshot is left unmapped.
  const driver::v1::UserNamespace& userns =
      config->isolation().user_namespace();
  const bool idmap = driver_binds_idmapped && !userns.uid_mappings().empty();
  std::string id;
  image::v1::Image image;
  std::string rootfs;
  bool rootfs_idmapped = false;
  bool had_snapshot;
  {
    absl::MutexLock lock(&mu_);
    id = entry.record.task().id();
    had_snapshot = entry.record.has_image() &&
                   !entry.record.task().image().rootfs().empty();
    if (had_snapshot) image = entry.record.image();
  }
  // On a restart, the snapshot the task has, as berth-images lists it.
  std::optional<image::v1::Snapshot> listed;
  if (had_snapshot) {
    absl::StatusOr<std::vector<image::v1::Snapshot>> snapshots =
        options_.images->ListSnapshots();
    if (!snapshots.ok()) return PrepareError(reference, snapshots.status());
    for (image::v1::Snapshot& snapshot : *snapshots) {
      if (snapshot.id() == id) listed = std::move(snapshot);
    }
  }
  if (listed.has_value()) {
    // A restart runs on the same snapshot (what the last run wrote stays,
    // as in a docker container), of the image it was prepared from. The
    // task keeps its range across restarts, so its mappings are the
    // snapshot's, unless the node's --default_userns changed meanwhile.
    rootfs_idmapped = !listed->uid_mappings().empty();
    if (rootfs_idmapped &&
        (!idmap ||
         !SameMappings(listed->uid_mappings(), userns.uid_mappings()) ||
         !SameMappings(listed->gid_mappings(), userns.gid_mappings()))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "spec.image: image \"", reference, "\": the task's snapshot ", id,
          " is idmapped for uids ", MappingsText(listed->uid_mappings()),
          ", this run's user namespace maps ",
          MappingsText(userns.uid_mappings()),
          ": remove the task and run it again"));
    }
    // Prepared again all the same, with the image it is of (by digest: the
    // reference may name another image since) and the mappings it has:
    // berth-images gives it back as it is, mounted again if its mount went
    // (a host restart, an unmount), which a listing does not.
    const std::string& digest = listed->manifest_digest().empty()
                                    ? image.manifest_digest()
                                    : listed->manifest_digest();
    absl::StatusOr<image::v1::PrepareSnapshotResponse> prepared =
        options_.images->PrepareSnapshot(id,
                                         digest.empty() ? reference : digest,
                                         rootfs_idmapped ? &userns : nullptr);
    if (prepared.ok()) {
      rootfs = prepared->rootfs();
    } else if (absl::IsNotFound(prepared.status()) &&
               IsMountRoot(listed->rootfs())) {
      // Its image was removed (--force) while the task kept it: the
      // snapshot stays as long as it is mounted.
      LOG(WARNING) << "task " << id << ": image " << listed->image_name()
                   << " (" << digest << ") is no longer stored; running on "
                   << "its snapshot as it is mounted: " << prepared.status();
      rootfs = listed->rootfs();
    } else if (absl::IsNotFound(prepared.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "spec.image: image \"", reference, "\": the task's snapshot ", id,
          " is no longer mounted and its image ", listed->image_name(), " (",
          digest,
          ") is no longer stored to mount it from: remove the task "
          "and run it again"));
    } else {
      return PrepareError(reference, prepared.status());
    }
  } else {
    // A first run, or a restart whose snapshot berth-images lost: a new
    // snapshot.
    absl::StatusOr<image::v1::PrepareSnapshotResponse> prepared =
        options_.images->PrepareSnapshot(id, reference,
                                         idmap ? &userns : nullptr);
    if (!prepared.ok()) return PrepareError(reference, prepared.status());
    rootfs = prepared->rootfs();
    image = prepared->image();
    rootfs_idmapped = idmap;
  }
  if (rootfs.empty() || rootfs[0] != '/') {
    return absl::InternalError(absl::StrCat(
        "spec.image: image \"", reference, "\": berth-images gave the root \"",
        rootfs, "\", not an absolute path"));
  }
  {
    // In memory now; stored with the run (or with the failure, and the
    // snapshot released then).
    absl::MutexLock lock(&mu_);
    *entry.record.mutable_image() = image;
    *entry.record.mutable_task()->mutable_image() =
        ImageStatusOf(image, rootfs);
  }
  if (absl::Status s = ApplyImageConfig(spec, image.config(), config);
      !s.ok()) {
    return s;
  }
  config->mutable_isolation()->set_rootfs(rootfs);
  config->mutable_isolation()->set_rootfs_idmapped(rootfs_idmapped);
  if (!config->working_dir().empty() && config->working_dir() != "/") {
    // In an idmapped snapshot, owned by the task's root as it sees it.
    if (absl::Status s = MakeDirInRoot(
            rootfs, config->working_dir(),
            rootfs_idmapped ? HostRoot(userns.uid_mappings()) : 0,
            rootfs_idmapped ? HostRoot(userns.gid_mappings()) : 0);
        !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("spec.image: image \"", reference,
                                 "\": cannot make its working directory ",
                                 config->working_dir(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status TaskManager::ReleaseImage(Entry& entry) {
  std::string id;
  bool had_snapshot;
  {
    absl::MutexLock lock(&mu_);
    if (!entry.record.task().spec().has_image()) return absl::OkStatus();
    id = entry.record.task().id();
    had_snapshot = !entry.record.task().image().rootfs().empty();
  }
  if (options_.images == nullptr) return absl::OkStatus();
  absl::Status s = options_.images->ReleaseSnapshot(id);
  if (!s.ok() && !had_snapshot && absl::IsUnavailable(s)) {
    // Never prepared as far as the node knows; one whose answer was lost is
    // released when the node next starts (ReconcileSnapshots).
    LOG(WARNING) << "task " << id
                 << ": cannot make sure it has no snapshot: " << s;
    return absl::OkStatus();
  }
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("releasing the snapshot of "
                                               "image task ",
                                               id, ": ", s.message()));
  }
  {
    absl::MutexLock lock(&mu_);
    entry.record.mutable_task()->mutable_image()->clear_rootfs();
  }
  return absl::OkStatus();
}

void TaskManager::ReconcileSnapshots() {
  while (!shutting_down()) {
    // In slices of a second: a node shutting down meanwhile is held no
    // longer.
    if (!options_.images->Connect(absl::Seconds(1)).ok()) continue;
    absl::StatusOr<std::vector<image::v1::Snapshot>> snapshots =
        options_.images->ListSnapshots();
    if (!snapshots.ok()) {
      const bool away = absl::IsUnavailable(snapshots.status());
      if (!away) {
        LOG(WARNING) << "cannot list berth-images' snapshots: "
                     << snapshots.status() << "; trying again";
      }
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&shutting_down_),
                           away ? absl::Seconds(1) : absl::Seconds(5));
      continue;
    }
    int released = 0;
    for (const image::v1::Snapshot& snapshot : *snapshots) {
      // A task made after the list has no snapshot in it: each task is
      // known before its snapshot is prepared.
      if (IsTask(snapshot.id())) continue;
      if (absl::Status s = options_.images->ReleaseSnapshot(snapshot.id());
          !s.ok()) {
        LOG(WARNING) << "cannot release snapshot " << snapshot.id()
                     << ", which is no task's: " << s;
        continue;
      }
      LOG(INFO) << "released snapshot " << snapshot.id() << " (image "
                << snapshot.image_name() << "), which is no task's";
      ++released;
    }
    LOG(INFO) << "snapshots reconciled: " << snapshots->size() << " found, "
              << released << " released";
    return;
  }
}

bool TaskManager::IsTask(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return tasks_.count(id) > 0;
}

}  // namespace berth::node
