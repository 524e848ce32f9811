// Per-task overlay snapshots under <root>/snapshots/<id>/: the image's
// layers read-only below (lowerdir, top layer first), upper/ and work/ of
// the snapshot's own, mounted at rootfs/ (overlayfs, index=off,
// metacopy=off, volatile). A single-layer image is an overlay too, so the
// task always has a writable upper. The record snapshots/<id>/snapshot.json
// (naming the boot it was mounted in) is written last: a snapshot directory
// without a readable one is half-made and removed at Open (unmounted
// first). Snapshots with a record are left as they are at Open (a task may
// run on one); Prepare of such an id remounts it if the mount is gone.
// Release renames the directory to tmp-<id>~<random> (never an id) and
// returns; a thread of the store's removes it (and Open those a crash or a
// stop left).
//
// Nothing of a snapshot is synced to disk: the overlay is volatile (Linux
// 5.10 and later: it never syncs its upper), the record and the directories
// are not synced either. So neither Prepare, what a task writes, nor the
// unmount at Release waits for the other writers of the file system the
// store is on (an unmount of a plain overlay syncs that whole file system;
// an fsync waits for the journal's commit of everything written
// meanwhile). The price: a task's writable layer survives restarts of the
// service (and unmounts within a boot) but not a restart of the host. After
// one, a snapshot is either gone (its record had not reached the disk: a
// Prepare of its id makes it anew) or, when Prepare remounts it in another
// boot than the one its record names and its overlay left the kernel's
// volatile mark (work/work/incompat/volatile, which also makes the kernel
// refuse to mount it again), comes back with an empty upper (the image as
// it is) and a warning naming it. Either way its task starts again on the
// image as it is. Thread-safe.

#ifndef SERVICES_IMAGES_STORE_SNAPSHOT_STORE_H_
#define SERVICES_IMAGES_STORE_SNAPSHOT_STORE_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace berth::images {

struct SnapshotInfo {
  std::string id;
  // snapshots/<id>/rootfs: the mounted root.
  std::string rootfs;
  // The image's name and manifest digest when prepared.
  std::string image_name;
  std::string manifest_digest;
  // The layers' diff_ids, top first (as the lowerdir lists them).
  std::vector<std::string> layers;
  absl::Time created;
};

// What Prepare mounts: the image it is of and its layers, top first, as
// diff_ids and as directories (LayerStore paths).
struct SnapshotSpec {
  std::string image_name;
  std::string manifest_digest;
  std::vector<std::string> layer_diff_ids;
  std::vector<std::string> layer_dirs;
  // For a task in a user namespace: an open /proc/PID/ns/user (or a
  // namespace with the task's maps) through which the layers are idmapped
  // (each a detached idmapped copy handed to overlayfs by descriptor; Linux
  // 6.13 and later), so that files root owns on disk show as the task's
  // root. An overlay mount itself cannot be idmapped (mount_setattr fails
  // with EINVAL on Linux 6.18). The upper is not idmapped: what the task
  // writes is stored with its mapped ids. -1: no idmapping. Not kept: a
  // remount (after a reboot) idmaps with what the Prepare that remounts
  // passes.
  int idmap_userns_fd = -1;
};

class SnapshotStore {
 public:
  // `dir` (created 0711 if missing) holds the snapshots. Recovery: a
  // directory without its record is unmounted and removed, as are
  // temporary files; released ones are removed by the store's thread.
  static absl::StatusOr<std::unique_ptr<SnapshotStore>> Open(
      const std::string& dir);
  // Waits for the removal of a released snapshot in progress; those not
  // yet removed are removed after the next Open.
  ~SnapshotStore();

  // Prepares snapshot `id` ([A-Za-z0-9_.-]{1,128}, not "." and without
  // "..").
  // An existing snapshot of the same manifest digest is returned (remounted
  // if its mount is gone; with an empty upper after a restart of the host,
  // see above); of another image, ALREADY_EXISTS names both.
  // On error nothing is left behind.
  absl::StatusOr<SnapshotInfo> Prepare(absl::string_view id,
                                       const SnapshotSpec& spec)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Unmounts (lazily if busy) and removes snapshot `id`: gone when it
  // returns (renamed), its files removed by the store's thread; an unknown
  // id is OK.
  absl::Status Release(absl::string_view id) ABSL_LOCKS_EXCLUDED(mu_);
  // NOT_FOUND names the id.
  absl::StatusOr<SnapshotInfo> Get(absl::string_view id) const;
  // Every snapshot with a record, by id.
  absl::StatusOr<std::vector<SnapshotInfo>> List() const;
  // Whether `id`'s rootfs is mounted.
  bool IsMounted(absl::string_view id) const;

  const std::string& dir() const { return dir_; }

  // The id check Prepare makes (INVALID_ARGUMENT naming it).
  static absl::Status ValidateId(absl::string_view id);

 private:
  explicit SnapshotStore(std::string dir);
  absl::Status Recover();
  std::string SnapshotDir(absl::string_view id) const;
  // Queues the directory `path` of a released snapshot for the remover.
  void Discard(std::string path) ABSL_LOCKS_EXCLUDED(released_mu_);
  bool RemoverHasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(released_mu_);
  // The remover thread's loop.
  void RemoveReleased() ABSL_LOCKS_EXCLUDED(released_mu_);

  const std::string dir_;
  // Serialises Prepare and Release (each takes a millisecond or so).
  absl::Mutex mu_;
  absl::Mutex released_mu_;
  // Directories of released snapshots, to be removed.
  std::deque<std::string> released_ ABSL_GUARDED_BY(released_mu_);
  bool closing_ ABSL_GUARDED_BY(released_mu_) = false;
  // Removes the directories of released snapshots (as big as what their
  // tasks wrote), so that Release does not wait for it.
  std::thread remover_;
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_STORE_SNAPSHOT_STORE_H_
