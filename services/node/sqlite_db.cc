#include "services/node/sqlite_db.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace berth::node {

SqliteDb::Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), sql_(std::move(other.sql_)) {
  other.stmt_ = nullptr;
}

SqliteDb::Statement& SqliteDb::Statement::operator=(
    Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    sql_ = std::move(other.sql_);
    other.stmt_ = nullptr;
  }
  return *this;
}

SqliteDb::Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

absl::Status SqliteDb::Statement::Error(absl::string_view what,
                                        int code) const {
  std::string message =
      absl::StrCat("sqlite ", db_->path(), ": ", what, " of \"", sql_,
                   "\": ", sqlite3_errstr(code), " (", db_->LastError(), ")");
  if ((code & 0xff) == SQLITE_CONSTRAINT) {
    return absl::AlreadyExistsError(std::move(message));
  }
  return absl::InternalError(std::move(message));
}

absl::Status SqliteDb::Statement::BindText(int index, absl::string_view value) {
  int rc = sqlite3_bind_text(stmt_, index, value.data(),
                             static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return rc == SQLITE_OK ? absl::OkStatus() : Error("bind", rc);
}

absl::Status SqliteDb::Statement::BindBlob(int index, absl::string_view value) {
  int rc = sqlite3_bind_blob(stmt_, index, value.data(),
                             static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return rc == SQLITE_OK ? absl::OkStatus() : Error("bind", rc);
}

absl::Status SqliteDb::Statement::BindInt(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  return rc == SQLITE_OK ? absl::OkStatus() : Error("bind", rc);
}

absl::StatusOr<bool> SqliteDb::Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error("step", rc);
}

absl::Status SqliteDb::Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void SqliteDb::Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string SqliteDb::Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     sqlite3_column_bytes(stmt_, column));
}

std::string SqliteDb::Statement::ColumnBlob(int column) const {
  const void* blob = sqlite3_column_blob(stmt_, column);
  if (blob == nullptr) return "";
  return std::string(static_cast<const char*>(blob),
                     sqlite3_column_bytes(stmt_, column));
}

int64_t SqliteDb::Statement::ColumnInt(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(
    const std::string& path) {
  sqlite3* db = nullptr;
  mode_t old_mask = umask(077);
  int rc = sqlite3_open_v2(
      path.c_str(), &db,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
      nullptr);
  umask(old_mask);
  if (rc != SQLITE_OK) {
    std::string message =
        db != nullptr ? sqlite3_errmsg(db) : std::string(sqlite3_errstr(rc));
    sqlite3_close(db);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the state database ", path, ": ", message));
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SqliteDb> result(new SqliteDb(db, path));
  // WAL with synchronous=NORMAL: a commit is durable once it is in the
  // WAL, which survives a kill -9 of the node (what its recovery is built
  // for); only a power loss can take back the last commits, and with it every
  // task is gone too. FULL cost five fdatasyncs (5-6 ms) per task run.
  for (absl::string_view pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
        "PRAGMA foreign_keys=ON"}) {
    // journal_mode returns a row; Prepare+Step handles both kinds.
    absl::StatusOr<Statement> statement = result->Prepare(pragma);
    if (!statement.ok()) return statement.status();
    if (absl::StatusOr<bool> row = statement->Step(); !row.ok()) {
      return row.status();
    }
  }
  return result;
}

SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

std::string SqliteDb::LastError() const { return sqlite3_errmsg(db_); }

absl::Status SqliteDb::Exec(absl::string_view sql) {
  std::string text(sql);
  char* message = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return absl::OkStatus();
  absl::Status status = absl::InternalError(
      absl::StrCat("sqlite ", path_, ": \"", sql,
                   "\": ", message != nullptr ? message : sqlite3_errstr(rc)));
  sqlite3_free(message);
  return status;
}

absl::StatusOr<SqliteDb::Statement> SqliteDb::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()),
                              &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("sqlite ", path_, ": prepare \"",
                                            sql, "\": ", LastError()));
  }
  return Statement(this, stmt, std::string(sql));
}

}  // namespace berth::node
