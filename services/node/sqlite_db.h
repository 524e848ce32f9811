// A small wrapper of SQLite 3 (Debian's libsqlite3): one connection, prepared
// statements with RAII, errors as absl::Status naming the database file and
// the statement.
//
//   absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path);
//   absl::Status s = (*db)->Exec("CREATE TABLE IF NOT EXISTS t (k TEXT)");
//   absl::StatusOr<SqliteDb::Statement> put =
//       (*db)->Prepare("INSERT INTO t VALUES (?1)");
//   put->BindText(1, "x");
//   absl::StatusOr<bool> row = put->Step();  // false: done
//
// Not thread-safe: callers serialize (TaskStore holds a mutex).

#ifndef SERVICES_NODE_SQLITE_DB_H_
#define SERVICES_NODE_SQLITE_DB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace berth::node {

class SqliteDb {
 public:
  // A prepared statement; finalized when destroyed.
  class Statement {
   public:
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&& other) noexcept;
    ~Statement();

    // Parameters are numbered from 1, as in SQL's ?1.
    absl::Status BindText(int index, absl::string_view value);
    absl::Status BindBlob(int index, absl::string_view value);
    absl::Status BindInt(int index, int64_t value);

    // Runs one step: true when a row is ready to read, false when done. A
    // step that would break a UNIQUE or PRIMARY KEY constraint fails with
    // ALREADY_EXISTS.
    absl::StatusOr<bool> Step();
    // Step until done; for statements that return no rows.
    absl::Status Run();
    // Resets to run again; bindings are cleared.
    void Reset();

    // Columns of the current row, numbered from 0.
    std::string ColumnText(int column) const;
    std::string ColumnBlob(int column) const;
    int64_t ColumnInt(int column) const;

   private:
    friend class SqliteDb;
    Statement(const SqliteDb* db, sqlite3_stmt* stmt, std::string sql)
        : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
    absl::Status Error(absl::string_view what, int code) const;

    const SqliteDb* db_;
    sqlite3_stmt* stmt_;
    std::string sql_;
  };

  // Opens (creating if missing, 0600) the database at `path`, in WAL mode
  // with synchronous=FULL, so that a committed transaction survives a crash
  // of the process or of the machine.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(
      const std::string& path);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs statements that return no rows.
  absl::Status Exec(absl::string_view sql);
  absl::StatusOr<Statement> Prepare(absl::string_view sql);

  const std::string& path() const { return path_; }

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  std::string LastError() const;

  sqlite3* db_;
  std::string path_;
};

}  // namespace berth::node

#endif  // SERVICES_NODE_SQLITE_DB_H_
