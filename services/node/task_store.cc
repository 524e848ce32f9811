#include "services/node/task_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/proto_time.h"

namespace berth::node {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS tasks (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_ns INTEGER NOT NULL,
  record BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS plugins (
  name TEXT PRIMARY KEY,
  reattach TEXT NOT NULL
);
)sql";

absl::StatusOr<internal::TaskRecord> ParseRecord(const std::string& id,
                                                 const std::string& blob) {
  internal::TaskRecord record;
  if (!record.ParseFromString(blob)) {
    return absl::DataLossError(
        absl::StrCat("task ", id, ": its stored record does not parse"));
  }
  return record;
}

}  // namespace

absl::Status MakeStateDir(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), i == path.size() ? 0700 : 0755) != 0 &&
        errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make the state directory ", prefix, ": ",
                       std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TaskStore>> TaskStore::Open(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path);
  if (!db.ok()) return db.status();
  if (absl::Status s = (*db)->Exec(kSchema); !s.ok()) return s;
  return std::unique_ptr<TaskStore>(new TaskStore(*std::move(db)));
}

absl::Status TaskStore::Put(const internal::TaskRecord& record) {
  const std::string& id = record.task().id();
  if (id.empty())
    return absl::InvalidArgumentError("a task record needs an id");
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteDb::Statement> put = db_->Prepare(
      "INSERT INTO tasks (id, name, created_ns, record) VALUES (?1, ?2, ?3, "
      "?4) ON CONFLICT(id) DO UPDATE SET name = ?2, record = ?4");
  if (!put.ok()) return put.status();
  const int64_t created_ns =
      absl::ToUnixNanos(base::FromProtoTimestamp(record.task().created_at()));
  absl::Status s = put->BindText(1, id);
  if (s.ok()) s = put->BindText(2, record.task().spec().name());
  if (s.ok()) s = put->BindInt(3, created_ns);
  if (s.ok()) s = put->BindBlob(4, record.SerializeAsString());
  if (s.ok()) s = put->Run();
  if (!absl::IsAlreadyExists(s)) return s;
  // Only the name is UNIQUE besides the id: say which task holds it.
  absl::StatusOr<SqliteDb::Statement> owner =
      db_->Prepare("SELECT id FROM tasks WHERE name = ?1");
  if (!owner.ok()) return owner.status();
  if (absl::Status bound = owner->BindText(1, record.task().spec().name());
      !bound.ok()) {
    return bound;
  }
  absl::StatusOr<bool> row = owner->Step();
  if (!row.ok()) return row.status();
  if (!*row) return s;
  return absl::AlreadyExistsError(
      absl::StrCat("the name ", record.task().spec().name(),
                   " is used by task ", owner->ColumnText(0)));
}

absl::StatusOr<std::optional<internal::TaskRecord>> TaskStore::Get(
    const std::string& id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteDb::Statement> get =
      db_->Prepare("SELECT record FROM tasks WHERE id = ?1");
  if (!get.ok()) return get.status();
  if (absl::Status s = get->BindText(1, id); !s.ok()) return s;
  absl::StatusOr<bool> row = get->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::nullopt;
  absl::StatusOr<internal::TaskRecord> record =
      ParseRecord(id, get->ColumnBlob(0));
  if (!record.ok()) return record.status();
  return *std::move(record);
}

absl::StatusOr<std::vector<internal::TaskRecord>> TaskStore::List() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteDb::Statement> list =
      db_->Prepare("SELECT id, record FROM tasks ORDER BY created_ns, id");
  if (!list.ok()) return list.status();
  std::vector<internal::TaskRecord> records;
  while (true) {
    absl::StatusOr<bool> row = list->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    absl::StatusOr<internal::TaskRecord> record =
        ParseRecord(list->ColumnText(0), list->ColumnBlob(1));
    if (!record.ok()) return record.status();
    records.push_back(*std::move(record));
  }
  return records;
}

absl::Status TaskStore::Delete(const std::string& id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteDb::Statement> del =
      db_->Prepare("DELETE FROM tasks WHERE id = ?1");
  if (!del.ok()) return del.status();
  if (absl::Status s = del->BindText(1, id); !s.ok()) return s;
  return del->Run();
}

absl::Status TaskStore::PutPlugin(const std::string& name,
                                  const std::string& reattach) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteDb::Statement> put = db_->Prepare(
      "INSERT INTO plugins (name, reattach) VALUES (?1, ?2) "
      "ON CONFLICT(name) DO UPDATE SET reattach = ?2");
  if (!put.ok()) return put.status();
  absl::Status s = put->BindText(1, name);
  if (s.ok()) s = put->BindText(2, reattach);
  if (s.ok()) s = put->Run();
  return s;
}

absl::StatusOr<std::map<std::string, std::string>> TaskStore::Plugins() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteDb::Statement> list =
      db_->Prepare("SELECT name, reattach FROM plugins");
  if (!list.ok()) return list.status();
  std::map<std::string, std::string> plugins;
  while (true) {
    absl::StatusOr<bool> row = list->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    plugins[list->ColumnText(0)] = list->ColumnText(1);
  }
  return plugins;
}

absl::Status TaskStore::DeletePlugin(const std::string& name) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SqliteDb::Statement> del =
      db_->Prepare("DELETE FROM plugins WHERE name = ?1");
  if (!del.ok()) return del.status();
  if (absl::Status s = del->BindText(1, name); !s.ok()) return s;
  return del->Run();
}

}  // namespace berth::node
