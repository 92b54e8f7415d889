// A thin RAII layer over the sqlite3 C API: one connection (Db) and its
// prepared statements (Stmt), with every failure turned into a Status.
//
// Error mapping (so callers and the HTTP layer can tell failures apart):
//   a trigger's RAISE(ABORT, ...)         -> ResourceExhausted (capacity guards)
//   UNIQUE / PRIMARY KEY violation        -> AlreadyExists
//   FOREIGN KEY violation                 -> FailedPrecondition
//   CHECK / NOT NULL violation            -> InvalidArgument
//   SQLITE_BUSY / SQLITE_LOCKED           -> Unavailable (retry later)
//   anything else                         -> Internal
// Messages carry SQLite's own text, which names the table or trigger.
//
// Threading: neither class is thread-safe; Store serialises access with its
// own mutex. A Stmt must not outlive the Db that prepared it.
#ifndef HF_STORE_SQLITE_H_
#define HF_STORE_SQLITE_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hf::store {

// Builds a Status from an SQLite result code and the connection's message.
// `what` says what we were doing ("insert task"), for the message.
Status SqliteStatus(sqlite3* db, int rc, std::string_view what);

class Stmt;

// Prepared statements not in use, by SQL text, so that a statement run again
// is reset rather than compiled again (compiling is most of the CPU of a
// write batch). Owned by a Db; a Stmt made from it returns itself there.
using StmtCache = std::unordered_map<std::string, std::vector<sqlite3_stmt*>>;

class Db {
 public:
  // Opens (creating when missing) the database file at `path` with extended
  // result codes on. Unavailable when the file cannot be opened.
  static Result<Db> Open(const std::string& path);

  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  // Runs one or more statements that return no rows we need (DDL, PRAGMA,
  // BEGIN/COMMIT).
  Status Exec(const std::string& sql);
  // Prepares one statement, or takes the same SQL's compiled statement from
  // the cache (reset, bindings cleared). The Stmt goes back to the cache when
  // destroyed, so it must not outlive the Db.
  Result<Stmt> Prepare(std::string_view sql);
  // The rowid of the last successful INSERT on this connection.
  int64_t LastInsertRowId() const;
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int Changes() const;

  sqlite3* raw() const { return db_; }

 private:
  explicit Db(sqlite3* db) : db_(db), cache_(std::make_unique<StmtCache>()) {}
  void Close();
  sqlite3* db_ = nullptr;
  std::unique_ptr<StmtCache> cache_;  // on the heap: Stmts point at it across moves
};

class Stmt {
 public:
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  // Binds parameters by 1-based position. Binding never fails for a valid
  // position; a bad position is a programming error caught by Step's status.
  Stmt& Bind(int pos, int64_t v);
  Stmt& Bind(int pos, std::string_view v);
  Stmt& Bind(int pos, const std::optional<int64_t>& v);
  Stmt& BindNull(int pos);

  // Advances: true when a row is available, false when done.
  Result<bool> Step();
  // Steps a statement that must not return rows (INSERT/UPDATE/DELETE).
  Status Run();

  int64_t Int(int col) const;
  std::string Text(int col) const;
  bool IsNull(int col) const;
  std::optional<int64_t> OptInt(int col) const;

 private:
  friend class Db;
  Stmt(sqlite3* db, sqlite3_stmt* stmt, std::string sql, StmtCache* cache)
      : db_(db), stmt_(stmt), sql_(std::move(sql)), cache_(cache) {}
  // Returns the statement to the cache (or finalizes it without one).
  void Release();
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
  StmtCache* cache_ = nullptr;
};

}  // namespace hf::store

#endif  // HF_STORE_SQLITE_H_
