// What berth-netns keeps of each allocation, one JSON file per allocation in
// its state directory, written atomically (a temporary file, fsync, rename,
// fsync of the directory) before and after each step of Prerun and Postrun,
// so that a restart finds out what a crash left half-made.

#ifndef SERVICES_NETNS_HOOK_ALLOCATION_STORE_H_
#define SERVICES_NETNS_HOOK_ALLOCATION_STORE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/network/v1/network.pb.h"
#include "nlohmann/json.hpp"

namespace berth::netns_hook {

// One allocation's network, as far as it got.
struct AllocationRecord {
  enum class Phase {
    // Prerun is making it: whatever exists of it is to be removed if the
    // service restarts now.
    kCreating,
    // Prerun finished; Postrun removes it.
    kReady,
    // Postrun is removing it.
    kDeleting,
  };

  std::string allocation_id;
  network::v1::NetworkMode mode = network::v1::NETWORK_MODE_UNSPECIFIED;
  Phase phase = Phase::kCreating;
  // The namespace's name in the namespace directory (berth-<allocation>);
  // empty for host mode.
  std::string namespace_name;
  std::string namespace_path;
  // Whether the namespace was made (a crash between the steps says which).
  bool namespace_made = false;
  // The CNI network (conflist name) and the interface inside.
  std::string cni_network;
  std::string interface_name;
  // Whether CNI ADD was started (DEL is then needed), and its result once it
  // succeeded (DEL's and CHECK's prevResult).
  bool cni_added = false;
  nlohmann::json cni_result;
  std::vector<network::v1::PortMapping> port_mappings;
  network::v1::DnsConfig dns;
  std::string hostname;
  absl::Time created_at = absl::UnixEpoch();
};

std::string PhaseName(AllocationRecord::Phase phase);

// The record as JSON and back; INVALID_ARGUMENT naming the field at fault.
nlohmann::json RecordToJson(const AllocationRecord& record);
absl::StatusOr<AllocationRecord> RecordFromJson(const nlohmann::json& json);

class AllocationStore {
 public:
  // Records are <dir>/<allocation>.json; the directory is made (0700) by
  // Prepare.
  explicit AllocationStore(std::string dir);

  // Makes the directory and removes the "<allocation>.json.tmp" files a
  // berth-netns killed while writing left: their rename never happened, so
  // the record in force is the one before (a record is written before what
  // it describes is made). Call once, before any Write.
  absl::Status Prepare() const;

  // Replaces the allocation's record atomically.
  absl::Status Write(const AllocationRecord& record) const;

  // The allocation's record; nullopt when there is none.
  absl::StatusOr<std::optional<AllocationRecord>> Read(
      absl::string_view allocation_id) const;

  // Removes the record; OK when there is none.
  absl::Status Remove(absl::string_view allocation_id) const;

  // Every record, by allocation id. A file that cannot be parsed is an error
  // naming it (it is never silently dropped: it may stand for leaked
  // resources).
  absl::StatusOr<std::vector<AllocationRecord>> List() const;

  const std::string& dir() const { return dir_; }

 private:
  std::string PathOf(absl::string_view allocation_id) const;

  const std::string dir_;
};

// An allocation id usable in a file name, a namespace name and a CNI
// container id: 1-64 of [A-Za-z0-9._-], not starting with '.' or '-'.
// INVALID_ARGUMENT naming allocation_id otherwise.
absl::Status CheckAllocationId(absl::string_view allocation_id);

}  // namespace berth::netns_hook

#endif  // SERVICES_NETNS_HOOK_ALLOCATION_STORE_H_
