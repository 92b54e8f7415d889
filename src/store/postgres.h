// The PostgreSQL backend of store/db.h: one libpq connection and its
// prepared statements (docs/STORE.md, "PostgreSQL").
//
// SQL in SQLite's parameter style (`?`, `?N`) is turned into PostgreSQL's:
// each distinct parameter number gets a `$k` of its own, numbered in order of
// first use, so a statement may leave numbers out (the task list binds ?1 and
// ?6 only when its filters ask for them). Values go as text; the server
// infers each parameter's type from where it is used.
//
// Error mapping (db.h), by SQLSTATE: 23505 AlreadyExists, 23503
// FailedPrecondition, 23514 and 23502 InvalidArgument, P0001 (a capacity
// trigger's RAISE EXCEPTION) ResourceExhausted; a lost connection (class 08,
// or no result), serialization failures and deadlocks (40001, 40P01), lock
// and statement timeouts (55P03, 57014), shutdowns (57P01-57P03), a read-only
// server (25006: a standby) and insufficient resources (class 53) are
// Unavailable; HF001 (kFencedState: heteroflow_fence or heteroflow_renew
// refused a deposed leader's epoch, docs/HA.md) is FailedPrecondition.
//
// A connection that broke is reset (reconnected, following the connection
// string's hosts, e.g. to a promoted standby) at the next call made outside
// a transaction; its prepared statements are prepared again.
//
// Threading: not thread-safe (db.h).
#ifndef HF_STORE_POSTGRES_H_
#define HF_STORE_POSTGRES_H_

#include <cstdint>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "store/db.h"

struct pg_conn;
struct pg_result;

namespace hf::store {

// Whether `target` names a PostgreSQL database (a postgresql:// or
// postgres:// URI) rather than a SQLite file.
bool IsPostgresUri(std::string_view target);

// The SQLSTATE the schema's fencing functions raise (migrations.cc, v11).
inline constexpr std::string_view kFencedState = "HF001";

// `uri` with any password left out (user:password@, password=...), for logs
// and messages.
std::string RedactedUri(std::string_view uri);

// `sql` with SQLite's `?` and `?N` parameters as PostgreSQL's `$k`; `order`
// gets, for each `$k`, the SQLite number it stands for. Quoted text and
// identifiers are left alone. Exposed for tests.
std::string PostgresParameters(std::string_view sql, std::vector<int>& order);

class PgDb final : public Db {
 public:
  // Connects with a libpq URI (several hosts allowed). Unavailable when no
  // server answers. Messages never carry the password.
  static Result<std::unique_ptr<PgDb>> Connect(const std::string& uri);

  PgDb(const PgDb&) = delete;
  PgDb& operator=(const PgDb&) = delete;
  ~PgDb() override;

  Dialect dialect() const override { return Dialect::kPostgres; }
  Status Exec(const std::string& sql) override;
  Result<Stmt> Prepare(std::string_view sql) override;
  int Changes() const override { return changes_; }
  bool InTransaction() const override;
  Status BeginWrite() override { return Exec("BEGIN"); }
  Status BeginRead() override { return Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); }
  Status SetLockTimeout(int ms) override;

  // Takes the session-level advisory lock `key` on this connection and keeps
  // it: taken again whenever the connection is made again. FailedPrecondition
  // when another session holds it; after a reconnect that finds it held,
  // every call fails with Unavailable until the lock is had again.
  Status HoldLock(int64_t key);

  // LISTEN on `channel` (an SQL identifier of ours), now and after every
  // reconnect.
  Status Listen(const std::string& channel);
  // Waits up to `timeout` for a NOTIFY on a channel this connection
  // listens on: its payload, or nullopt when none came. Unavailable when
  // the connection broke (it is made again at the next call).
  Result<std::optional<std::string>> WaitForNotification(std::chrono::milliseconds timeout);

  // The status of a failed result (or of the connection, when `res` is
  // null), prefixed with `what`.
  Status StatusOf(const pg_result* res, std::string_view what) const;

 private:
  friend class PgStmt;
  PgDb(pg_conn* conn, std::string uri) : conn_(conn), uri_(std::move(uri)) {}
  // Reconnects a broken connection when no transaction is open.
  Status EnsureConnected();

  // Whether the connection is gone (until EnsureConnected makes it again).
  bool Broken() const;
  // Records whether a transaction is open, after a command.
  void NoteTransaction();

  struct Prepared {
    std::string name;        // the server-side statement
    std::vector<int> order;  // $k -> the SQLite parameter number
  };
  pg_conn* conn_;
  std::string uri_;
  // By the SQL as written; shared with the statements in use, which keep
  // theirs should a reconnect empty the cache.
  std::unordered_map<std::string, std::shared_ptr<const Prepared>> prepared_;
  uint64_t statements_ = 0;  // names given, for the next one
  // Whether a transaction is open: libpq's own answer, kept while the
  // connection is gone, so that nothing reconnects and runs in autocommit
  // the rest of a transaction that was lost; only ROLLBACK ends it then.
  bool in_transaction_ = false;
  int changes_ = 0;
  int lock_timeout_ms_ = -1;  // as last set; set again after a reconnect
  std::optional<int64_t> held_lock_;  // HoldLock's key, taken again after a reconnect
  std::vector<std::string> channels_;  // listened on (Listen), again after a reconnect
  bool lock_lost_ = false;  // a reconnect found held_lock_ taken by another session
};

}  // namespace hf::store

#endif  // HF_STORE_POSTGRES_H_
