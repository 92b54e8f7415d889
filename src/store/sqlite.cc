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

Result<Db> Db::Open(const std::string& path) {
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
  return Db(raw);
}

Db::Db(Db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), cache_(std::move(other.cache_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    Close();
    db_ = std::exchange(other.db_, nullptr);
    cache_ = std::move(other.cache_);
  }
  return *this;
}

Db::~Db() { Close(); }

void Db::Close() {
  if (cache_) {
    for (auto& [sql, stmts] : *cache_) {
      for (sqlite3_stmt* s : stmts) sqlite3_finalize(s);
    }
    cache_->clear();
  }
  // sqlite3_close (not _v2) fails while statements are open; every Stmt is
  // scoped inside a Store call, so none can be open here.
  if (db_ != nullptr) sqlite3_close(db_);
  db_ = nullptr;
}

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  return SqliteStatus(db_, rc, "execute \"" + sql.substr(0, 60) + "\"");
}

Result<Stmt> Db::Prepare(std::string_view sql) {
  if (auto it = cache_->find(std::string(sql)); it != cache_->end() && !it->second.empty()) {
    sqlite3_stmt* stmt = it->second.back();
    it->second.pop_back();
    return Stmt(db_, stmt, it->first, cache_.get());
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteStatus(db_, rc, "prepare \"" + std::string(sql.substr(0, 60)) + "\"");
  }
  return Stmt(db_, stmt, std::string(sql), cache_.get());
}

int64_t Db::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Db::Changes() const { return sqlite3_changes(db_); }

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      sql_(std::move(other.sql_)),
      cache_(other.cache_) {}

Stmt& Stmt::operator=(Stmt&& other) noexcept {
  if (this != &other) {
    Release();
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
    cache_ = other.cache_;
  }
  return *this;
}

Stmt::~Stmt() { Release(); }

void Stmt::Release() {
  if (stmt_ == nullptr) return;
  if (cache_ == nullptr) {
    sqlite3_finalize(std::exchange(stmt_, nullptr));
    return;
  }
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  (*cache_)[sql_].push_back(std::exchange(stmt_, nullptr));
}

Stmt& Stmt::Bind(int pos, int64_t v) {
  sqlite3_bind_int64(stmt_, pos, v);
  return *this;
}

Stmt& Stmt::Bind(int pos, std::string_view v) {
  sqlite3_bind_text(stmt_, pos, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::Bind(int pos, const std::optional<int64_t>& v) {
  if (v.has_value()) return Bind(pos, *v);
  return BindNull(pos);
}

Stmt& Stmt::BindNull(int pos) {
  sqlite3_bind_null(stmt_, pos);
  return *this;
}

Result<bool> Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(db_, rc, "run \"" + sql_.substr(0, 60) + "\"");
}

Status Stmt::Run() {
  Result<bool> r = Step();
  if (!r.ok()) return r.status();
  if (*r) return Internal("statement returned rows where none were expected: " + sql_);
  return Status::Ok();
}

int64_t Stmt::Int(int col) const { return sqlite3_column_int64(stmt_, col); }

std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

bool Stmt::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

std::optional<int64_t> Stmt::OptInt(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Int(col);
}

}  // namespace hf::store
