// berth-node's state in SQLite: one row per task (its TaskRecord), one per
// plugin (how to find it again after a restart). Every write is one
// transaction, durable when the call returns.

#ifndef SERVICES_NODE_TASK_STORE_H_
#define SERVICES_NODE_TASK_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/node/node_state.pb.h"
#include "services/node/sqlite_db.h"

namespace berth::node {

// Makes berth-node's state directory (and its parents), 0700.
absl::Status MakeStateDir(const std::string& path);

// Thread-safe.
class TaskStore {
 public:
  // Opens or creates the database at `path` and its tables.
  static absl::StatusOr<std::unique_ptr<TaskStore>> Open(
      const std::string& path);

  // Inserts or replaces the record of record.task().id(). A name already
  // used by another task is refused with ALREADY_EXISTS naming it.
  absl::Status Put(const internal::TaskRecord& record) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<internal::TaskRecord>> Get(const std::string& id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every record, oldest first.
  absl::StatusOr<std::vector<internal::TaskRecord>> List()
      ABSL_LOCKS_EXCLUDED(mu_);
  // OK when absent.
  absl::Status Delete(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);

  // Plugins: name → serialized ReattachConfig.
  absl::Status PutPlugin(const std::string& name, const std::string& reattach)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::map<std::string, std::string>> Plugins()
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DeletePlugin(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit TaskStore(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}

  absl::Mutex mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::node

#endif  // SERVICES_NODE_TASK_STORE_H_
