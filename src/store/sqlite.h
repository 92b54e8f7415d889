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
  // Prepares one statement.
  Result<Stmt> Prepare(std::string_view sql);
  // The rowid of the last successful INSERT on this connection.
  int64_t LastInsertRowId() const;
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int Changes() const;

  sqlite3* raw() const { return db_; }

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_ = nullptr;
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
  Stmt(sqlite3* db, sqlite3_stmt* stmt, std::string sql)
      : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

}  // namespace hf::store

#endif  // HF_STORE_SQLITE_H_
