#include "store/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <exception>
#include <utility>

#include "store/migrations.h"

namespace hf::store {
namespace {

// Reads the single-value answer of a PRAGMA as text.
Result<std::string> PragmaValue(Db& db, const std::string& pragma) {
  Result<Stmt> stmt = db.Prepare("PRAGMA " + pragma);
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::string();
  return stmt->Text(0);
}

// Ends a failed transaction. ROLLBACK can itself fail when SQLite already
// rolled back on its own (e.g. after SQLITE_FULL); either way no transaction
// is left open, which is all that matters here.
void RollbackQuietly(Db& db) {
  if (sqlite3_get_autocommit(db.raw()) == 0) (void)db.Exec("ROLLBACK");
}

}  // namespace

Store::Store(Db db, std::string path, const Clock* clock, int64_t schema_version)
    : db_(std::move(db)), path_(std::move(path)), clock_(clock), schema_version_(schema_version) {}

int64_t Store::NowMs() const {
  static const SystemClock kSystemClock;
  return (clock_ != nullptr ? clock_ : &kSystemClock)->NowMs();
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, StoreOptions options) {
  // The file holds tokens' hashes and tasks' environments: readable by its
  // owner only. Created so before SQLite opens it (SQLite gives the WAL and
  // shared-memory files the database file's mode); an older file is
  // tightened, its companions too.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  const bool private_file = ::fchmod(fd, 0600) == 0;
  ::close(fd);
  if (!private_file) return Unavailable("cannot make " + path + " private (chmod 600)");
  for (const char* suffix : {"-wal", "-shm"}) {
    const std::string companion = path + suffix;
    if (::chmod(companion.c_str(), 0600) != 0 && errno != ENOENT) {
      return Unavailable("cannot make " + companion + " private (chmod 600)");
    }
  }
  Result<Db> db = Db::Open(path);
  if (!db.ok()) return db.status();
  HF_RETURN_IF_ERROR(db->Exec("PRAGMA busy_timeout = " + std::to_string(options.busy_timeout_ms)));

  // WAL lets readers in other processes (backups, an operator's sqlite3
  // shell) proceed while we write; FULL makes each commit fsync the WAL, which
  // is what "acknowledged means durable" requires.
  Result<std::string> mode = PragmaValue(*db, "journal_mode = WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return Unavailable("cannot put " + path + " in WAL mode (journal_mode is '" + *mode +
                       "'); use a file on a local file system");
  }
  HF_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous = FULL"));
  // Off by default in SQLite, per connection: the cascades and references in
  // the schema mean nothing without it.
  HF_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys = ON"));

  std::unique_ptr<Store> store(new Store(std::move(*db), path, options.clock, 0));
  HF_RETURN_IF_ERROR(ApplyMigrations(store->db_, AllMigrations(), store->NowMs()));
  Result<int64_t> version = CurrentSchemaVersion(store->db_);
  if (!version.ok()) return version.status();
  store->schema_version_ = *version;
  return store;
}

Status Store::Write(const std::function<Status(Tx&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  HF_RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
  Tx tx(&db_, NowMs());
  Status s;
  try {
    s = fn(tx);
  } catch (const std::exception& e) {
    s = Internal(std::string("store transaction threw: ") + e.what());
  } catch (...) {
    s = Internal("store transaction threw a non-standard exception");
  }
  if (s.ok()) s = db_.Exec("COMMIT");
  if (!s.ok()) RollbackQuietly(db_);
  return s;
}

Status Store::Read(const std::function<Status(const ReadTx&)>& fn) const {
  std::lock_guard<std::mutex> lock(mu_);
  HF_RETURN_IF_ERROR(db_.Exec("BEGIN"));
  ReadTx tx(&db_, NowMs());
  Status s;
  try {
    s = fn(tx);
  } catch (const std::exception& e) {
    s = Internal(std::string("store read threw: ") + e.what());
  } catch (...) {
    s = Internal("store read threw a non-standard exception");
  }
  // Nothing was written, so COMMIT and ROLLBACK are equivalent; ROLLBACK
  // cannot fail for a reason worth reporting over fn's own status.
  RollbackQuietly(db_);
  return s;
}

}  // namespace hf::store
