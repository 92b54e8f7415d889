// The embedded backend of store/db.h: one SQLite connection and its prepared
// statements, over the sqlite3 C API.
//
// Error mapping (db.h): a trigger's RAISE(ABORT, ...) is the capacity
// guards' refusal; SQLITE_BUSY / SQLITE_LOCKED, a file that cannot be opened
// or written, and a full disk are Unavailable.
//
// Threading: neither class is thread-safe (db.h).
#ifndef HF_STORE_SQLITE_H_
#define HF_STORE_SQLITE_H_

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "store/db.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hf::store {

Status SqliteStatus(sqlite3* db, int rc, std::string_view what);

// Prepared statements not in use, by SQL.
using StmtCache = std::unordered_map<std::string, std::vector<sqlite3_stmt*>>;

class SqliteDb final : public Db {
 public:
  // Opens (creating when missing) the database file at `path` with extended
  // result codes on. Unavailable when the file cannot be opened.
  static Result<std::unique_ptr<SqliteDb>> Open(const std::string& path);

  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  ~SqliteDb() override;

  Dialect dialect() const override { return Dialect::kSqlite; }
  Status Exec(const std::string& sql) override;
  // The Stmt goes back to the cache (reset, bindings cleared) when destroyed.
  Result<Stmt> Prepare(std::string_view sql) override;
  int Changes() const override;
  bool InTransaction() const override;
  Status BeginWrite() override { return Exec("BEGIN IMMEDIATE"); }
  Status BeginRead() override { return Exec("BEGIN"); }
  Status SetLockTimeout(int ms) override { return Exec("PRAGMA busy_timeout = " + std::to_string(ms)); }

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  sqlite3* db_ = nullptr;
  StmtCache cache_;
};

}  // namespace hf::store

#endif  // HF_STORE_SQLITE_H_
