// Host id ranges for tasks' user namespaces (--userns auto): each task's root
// maps to a range of unprivileged host uids and gids of its own, taken from
// the subordinate ids of one user in /etc/subuid and /etc/subgid (as Docker's
// userns-remap takes "dockremap"'s) or from a configured base. Ranges never
// overlap; a task keeps its range across its restarts and the node's (the
// range is in its TaskRecord, Restore rebuilds the allocator) until removed.

#ifndef SERVICES_NODE_ID_RANGES_H_
#define SERVICES_NODE_ID_RANGES_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace berth::node {

// Host ids [start, start + count).
struct IdSpan {
  uint32_t start = 0;
  uint32_t count = 0;

  uint64_t end() const { return uint64_t{start} + count; }
  bool operator==(const IdSpan& other) const {
    return start == other.start && count == other.count;
  }
};

// The spans of /etc/subuid or /etc/subgid content ("NAME:START:COUNT" lines)
// that belong to `user`, whose line may also name it by `uid`. Blank lines
// and '#' comments are skipped, and so are malformed lines of other users;
// a malformed line of `user` (or a span reaching past 2^32 - 1) is
// INVALID_ARGUMENT naming `path` and the line number.
absl::StatusOr<std::vector<IdSpan>> ParseSubIds(absl::string_view content,
                                                absl::string_view path,
                                                absl::string_view user,
                                                std::optional<uid_t> uid);

// One task's ranges: container ids 0..size-1 map to host uids
// [uid_start, uid_start + size) and gids [gid_start, gid_start + size).
struct IdRange {
  uint32_t uid_start = 0;
  uint32_t gid_start = 0;
  uint32_t size = 0;

  bool operator==(const IdRange& other) const {
    return uid_start == other.uid_start && gid_start == other.gid_start &&
           size == other.size;
  }
};

// Thread-safe.
class IdRangeAllocator {
 public:
  struct Options {
    // Whose subordinate ids are used (by name or by uid in the files).
    std::string subid_user = "berth";
    std::string subuid_path = "/etc/subuid";
    std::string subgid_path = "/etc/subgid";
    // Non-zero: the pool is [base, base + count) for uids and gids alike and
    // the files are not read. At least 65536, so that no task's root is one
    // of the host's ordinary users.
    uint32_t base = 0;
    uint32_t count = 0;
    // Ids per task.
    uint32_t size = 65536;
  };

  // Reads the subid files (a missing file has no entries) or checks the
  // base. An empty pool is not an error here: Allocate says what is missing,
  // so a node without an entry runs every task that does not ask for one.
  static absl::StatusOr<std::unique_ptr<IdRangeAllocator>> Create(
      const Options& options);

  // A pool given directly; `source` describes it in errors.
  IdRangeAllocator(std::vector<IdSpan> uids, std::vector<IdSpan> gids,
                   uint32_t size, std::string source);

  // The task's range: the one it has, else the first free one.
  // FAILED_PRECONDITION naming the files and user when the pool is empty,
  // RESOURCE_EXHAUSTED when every range is taken.
  absl::StatusOr<IdRange> Allocate(const std::string& task_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The task's range is free again; nothing when it has none.
  void Release(const std::string& task_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Records a range allocated before a restart (even one outside today's
  // pool: its ids are still in use). ALREADY_EXISTS when it overlaps
  // another task's.
  absl::Status Restore(const std::string& task_id, const IdRange& range)
      ABSL_LOCKS_EXCLUDED(mu_);

  uint32_t size() const { return size_; }

 private:
  const std::vector<IdSpan> uid_pool_;
  const std::vector<IdSpan> gid_pool_;
  const uint32_t size_;
  const std::string source_;

  absl::Mutex mu_;
  std::map<std::string, IdRange> allocated_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::node

#endif  // SERVICES_NODE_ID_RANGES_H_
