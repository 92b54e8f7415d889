// One connection to the store's database, embedded SQLite (store/sqlite.h)
// or PostgreSQL (store/postgres.h), and its prepared statements: the few
// operations the store's SQL needs, with every failure turned into a Status.
//
// The SQL the store runs is written once for both: parameters are `?` or
// `?N` (PostgreSQL's connection turns them into `$N`), upserts are
// `ON CONFLICT ... DO UPDATE`, new ids come back with `RETURNING id`. Where
// the dialects differ (DDL, the order a table's rows were inserted in) the
// caller asks dialect().
//
// Error mapping, the same for both (so callers and the HTTP layer can tell
// failures apart):
//   a capacity trigger's refusal          -> ResourceExhausted
//   UNIQUE / PRIMARY KEY violation        -> AlreadyExists
//   FOREIGN KEY violation                 -> FailedPrecondition
//   CHECK / NOT NULL violation            -> InvalidArgument
//   busy, locked, lost connection, full   -> Unavailable (retry later)
//   anything else                         -> Internal
// Messages carry the database's own text, which names the table, constraint
// or trigger.
//
// Threading: neither class is thread-safe; Store serialises access with its
// own mutexes. A Stmt must not outlive the Db that prepared it.
#ifndef HF_STORE_DB_H_
#define HF_STORE_DB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace hf::store {

enum class Dialect { kSqlite, kPostgres };

// What a backend's statement does; Stmt is the value callers hold.
class StmtImpl {
 public:
  virtual ~StmtImpl() = default;
  // 1-based positions. Binding never fails for a valid position; a bad one
  // is a programming error that Step reports.
  virtual void Bind(int pos, int64_t v) = 0;
  virtual void Bind(int pos, std::string_view v) = 0;
  virtual void BindNull(int pos) = 0;
  // Advances: true when a row is available, false when done.
  virtual Result<bool> Step() = 0;
  virtual int64_t Int(int col) const = 0;
  virtual std::string Text(int col) const = 0;
  virtual bool IsNull(int col) const = 0;
  // For messages: the statement's SQL.
  virtual const std::string& sql() const = 0;
};

class Stmt {
 public:
  explicit Stmt(std::unique_ptr<StmtImpl> impl) : impl_(std::move(impl)) {}

  Stmt& Bind(int pos, int64_t v) {
    impl_->Bind(pos, v);
    return *this;
  }
  Stmt& Bind(int pos, std::string_view v) {
    impl_->Bind(pos, v);
    return *this;
  }
  Stmt& Bind(int pos, const std::optional<int64_t>& v) {
    if (v.has_value()) return Bind(pos, *v);
    return BindNull(pos);
  }
  Stmt& BindNull(int pos) {
    impl_->BindNull(pos);
    return *this;
  }

  Result<bool> Step() { return impl_->Step(); }
  // Steps a statement that must not return rows (INSERT/UPDATE/DELETE).
  Status Run();

  int64_t Int(int col) const { return impl_->Int(col); }
  std::string Text(int col) const { return impl_->Text(col); }
  bool IsNull(int col) const { return impl_->IsNull(col); }
  std::optional<int64_t> OptInt(int col) const {
    if (IsNull(col)) return std::nullopt;
    return Int(col);
  }

 private:
  std::unique_ptr<StmtImpl> impl_;
};

class Db {
 public:
  virtual ~Db() = default;

  virtual Dialect dialect() const = 0;
  // Runs one or more statements that return no rows we need (DDL, settings,
  // BEGIN/COMMIT).
  virtual Status Exec(const std::string& sql) = 0;
  // Prepares one statement, or takes the same SQL's prepared statement from
  // the connection's cache.
  virtual Result<Stmt> Prepare(std::string_view sql) = 0;
  // Rows changed by the last INSERT/UPDATE/DELETE.
  virtual int Changes() const = 0;
  // Whether a transaction is open on the connection.
  virtual bool InTransaction() const = 0;
  // Starts a write transaction: SQLite takes the write lock at once (BEGIN
  // IMMEDIATE), so a busy database fails here and not halfway through.
  virtual Status BeginWrite() = 0;
  // Starts a read transaction: one consistent snapshot, no writes.
  virtual Status BeginRead() = 0;
  // How long a statement waits for a lock held elsewhere before failing
  // with Unavailable.
  virtual Status SetLockTimeout(int ms) = 0;
};

}  // namespace hf::store

#endif  // HF_STORE_DB_H_
