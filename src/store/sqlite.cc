#include "store/sqlite.h"

#include <sqlite3.h>

#include <utility>

namespace hf::store {

Status SqliteStatus(sqlite3* db, int rc, std::string_view what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::Ok();
  std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string text = std::string(what) + ": " + msg;
  switch (rc) {
    case SQLITE_CONSTRAINT_TRIGGER:
      return ResourceExhausted(std::move(text));
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
      return AlreadyExists(std::move(text));
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return FailedPrecondition(std::move(text));
    case SQLITE_CONSTRAINT_CHECK:
    case SQLITE_CONSTRAINT_NOTNULL:
      return InvalidArgument(std::move(text));
    default:
      break;
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable(std::move(text) + " (the database is busy; retry)");
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_FULL:
      return Unavailable(std::move(text));
    default:
      return Internal(std::move(text));
  }
}

namespace {

class SqliteStmt final : public StmtImpl {
 public:
  SqliteStmt(sqlite3* db, sqlite3_stmt* stmt, std::string sql, StmtCache* cache)
      : db_(db), stmt_(stmt), sql_(std::move(sql)), cache_(cache) {}
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;
  // Back to the cache, reset and with its bindings cleared.
  ~SqliteStmt() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    (*cache_)[sql_].push_back(stmt_);
  }

  void Bind(int pos, int64_t v) override { sqlite3_bind_int64(stmt_, pos, v); }
  void Bind(int pos, std::string_view v) override {
    sqlite3_bind_text(stmt_, pos, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void BindNull(int pos) override { sqlite3_bind_null(stmt_, pos); }
  Result<bool> Step() override {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteStatus(db_, rc, "run \"" + sql_.substr(0, 60) + "\"");
  }
  int64_t Int(int col) const override { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) const override {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    if (p == nullptr) return std::string();
    return std::string(reinterpret_cast<const char*>(p),
                       static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  bool IsNull(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  const std::string& sql() const override { return sql_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
  StmtCache* cache_;
};

}  // namespace

Result<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqliteStatus(raw, rc, "open database " + path);
    sqlite3_close(raw);
    if (s.code() == StatusCode::kInternal) return Unavailable(s.message());
    return s;
  }
  sqlite3_extended_result_codes(raw, 1);
  return std::unique_ptr<SqliteDb>(new SqliteDb(raw));
}

SqliteDb::~SqliteDb() {
  for (auto& [sql, stmts] : cache_) {
    for (sqlite3_stmt* s : stmts) sqlite3_finalize(s);
  }
  // sqlite3_close (not _v2) fails while statements are open; every Stmt is
  // scoped inside a Store call, so none can be open here.
  sqlite3_close(db_);
}

Status SqliteDb::Exec(const std::string& sql) {
  // One statement (BEGIN, SAVEPOINT, RELEASE and COMMIT run several times
  // per commit) is prepared once and kept in the cache; a script of several
  // (a migration) goes through sqlite3_exec.
  if (sql.find(';') == std::string::npos) {
    Result<Stmt> stmt = Prepare(sql);
    if (!stmt.ok()) return stmt.status();
    for (;;) {
      Result<bool> row = stmt->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
    }
  }
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc == SQLITE_OK) return Status::Ok();
  return SqliteStatus(db_, rc, "execute \"" + sql.substr(0, 60) + "\"");
}

Result<Stmt> SqliteDb::Prepare(std::string_view sql) {
  if (auto it = cache_.find(std::string(sql)); it != cache_.end() && !it->second.empty()) {
    sqlite3_stmt* stmt = it->second.back();
    it->second.pop_back();
    return Stmt(std::make_unique<SqliteStmt>(db_, stmt, it->first, &cache_));
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteStatus(db_, rc, "prepare \"" + std::string(sql.substr(0, 60)) + "\"");
  }
  return Stmt(std::make_unique<SqliteStmt>(db_, stmt, std::string(sql), &cache_));
}

int SqliteDb::Changes() const { return sqlite3_changes(db_); }

bool SqliteDb::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

}  // namespace hf::store
