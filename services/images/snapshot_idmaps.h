// The id mappings of user-namespaced tasks' snapshots
// (PrepareSnapshotRequest.uid_mappings and gid_mappings): checked, turned
// into a user namespace through which the store idmaps the layers, and
// remembered per snapshot (the store keeps no mappings), so that
// ListSnapshots shows them and a Prepare of an existing id with other
// mappings is refused. One file per snapshot, <dir>/<id>.pb (a
// berth.image.v1.Snapshot holding only the mappings), written atomically
// before the snapshot is made and removed after it is released; files of
// snapshots that do not exist (a crash in between) are removed at start.

#ifndef SERVICES_IMAGES_SNAPSHOT_IDMAPS_H_
#define SERVICES_IMAGES_SNAPSHOT_IDMAPS_H_

#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/unique_fd.h"
#include "berth/image/v1/image.pb.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace berth::images {

using IdMappings = google::protobuf::RepeatedPtrField<image::v1::IdMapping>;

// Both or neither; at most 8 ranges each, of a size above 0, ending at or
// below 2^32, not overlapping inside or on the host. INVALID_ARGUMENT
// naming the field ("uid_mappings[1].size") otherwise.
absl::Status ValidateIdMappings(const IdMappings& uid_mappings,
                                const IdMappings& gid_mappings);

// "CONTAINER HOST SIZE\n" lines, as /proc/PID/uid_map takes them.
std::string IdMapText(const IdMappings& mappings);

// Whether two sets of mappings are the same, range by range.
bool SameIdMappings(const IdMappings& a, const IdMappings& b);

// A user namespace with these (valid, non-empty) mappings, held by its
// descriptor only: what the store idmaps the layers through. Needs host
// root. Errors name the step.
absl::StatusOr<base::UniqueFd> MakeIdmapNamespace(
    const IdMappings& uid_mappings, const IdMappings& gid_mappings);

class SnapshotIdMaps {
 public:
  // `dir` is created (0700) if missing.
  static absl::StatusOr<std::unique_ptr<SnapshotIdMaps>> Open(
      const std::string& dir);

  // The mappings of snapshot `id` (in a Snapshot's uid_mappings and
  // gid_mappings); empty when it has none.
  absl::StatusOr<image::v1::Snapshot> Get(absl::string_view id) const;
  // Records `id`'s mappings (replacing any).
  absl::Status Put(absl::string_view id, const IdMappings& uid_mappings,
                   const IdMappings& gid_mappings);
  // Forgets `id`'s; OK when it has none.
  absl::Status Remove(absl::string_view id);
  // Removes the records of every snapshot not in `snapshots`.
  void Clean(const std::set<std::string>& snapshots);

  const std::string& dir() const { return dir_; }

 private:
  explicit SnapshotIdMaps(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(absl::string_view id) const;

  const std::string dir_;
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_SNAPSHOT_IDMAPS_H_
