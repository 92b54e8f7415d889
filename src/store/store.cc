#include "store/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <utility>

#include <spdlog/spdlog.h>

#include "store/migrations.h"
#include "store/postgres.h"
#include "store/sqlite.h"

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
  if (db.InTransaction()) (void)db.Exec("ROLLBACK");
}

// Durations here are the machine's own, whatever clock stamps the rows.
int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Store::Store(std::unique_ptr<Db> db, std::string target, const Clock* clock, int64_t schema_version)
    : db_(std::move(db)),
      target_(std::move(target)),
      display_(IsPostgresUri(target_) ? RedactedUri(target_) : target_),
      dialect_(db_->dialect()),
      clock_(clock),
      schema_version_(schema_version) {}

int64_t Store::NowMs() const {
  static const SystemClock kSystemClock;
  return (clock_ != nullptr ? clock_ : &kSystemClock)->NowMs();
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& target, StoreOptions options) {
  if (IsPostgresUri(target)) {
    Result<std::unique_ptr<PgDb>> db = PgDb::Connect(target);
    if (!db.ok()) return db.status();
    HF_RETURN_IF_ERROR((*db)->SetLockTimeout(options.busy_timeout_ms));
    return Finish(std::move(*db), target, options);
  }
  const std::string& path = target;
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
  Result<std::unique_ptr<SqliteDb>> opened = SqliteDb::Open(path);
  if (!opened.ok()) return opened.status();
  Db* db = opened->get();
  HF_RETURN_IF_ERROR(db->SetLockTimeout(options.busy_timeout_ms));

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

  return Finish(std::move(*opened), path, options);
}

Result<std::unique_ptr<Store>> Store::Finish(std::unique_ptr<Db> db, const std::string& target,
                                             const StoreOptions& options) {
  std::unique_ptr<Store> store(new Store(std::move(db), target, options.clock, 0));
  store->busy_timeout_ms_ = options.busy_timeout_ms;
  // Before migrating: a server refused must not change the schema under the
  // one that runs.
  if (options.exclusive) HF_RETURN_IF_ERROR(store->ClaimExclusive());
  {
    // Not shared yet: held only because db_ is guarded by it.
    MutexLock lock(store->mu_);
    Db& conn = *store->db_;
    HF_RETURN_IF_ERROR(ApplyMigrations(conn, AllMigrations(conn.dialect()), store->NowMs()));
    Result<int64_t> version = CurrentSchemaVersion(conn);
    if (!version.ok()) return version.status();
    store->schema_version_ = *version;
  }
  return store;
}

Result<std::unique_ptr<Db>> Store::Connect() const {
  if (dialect_ == Dialect::kPostgres) {
    Result<std::unique_ptr<PgDb>> db = PgDb::Connect(target_);
    if (!db.ok()) return db.status();
    HF_RETURN_IF_ERROR((*db)->Exec("SET default_transaction_read_only = on"));
    HF_RETURN_IF_ERROR((*db)->SetLockTimeout(busy_timeout_ms_));
    return std::unique_ptr<Db>(std::move(*db));
  }
  Result<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(target_);
  if (!db.ok()) return db.status();
  HF_RETURN_IF_ERROR((*db)->Exec("PRAGMA query_only = ON"));
  HF_RETURN_IF_ERROR((*db)->SetLockTimeout(busy_timeout_ms_));
  return std::unique_ptr<Db>(std::move(*db));
}

struct Store::Writer {
  explicit Writer(const std::function<Status(Tx&)>* f) : fn(f) {}
  const std::function<Status(Tx&)>* fn;
  // Written by the leader (its own thread) before `done` is set under
  // queue_mu_; read by the writer only once it saw `done`.
  Status status;
  bool done = false;  // under queue_mu_
  std::condition_variable cv;  // wakes this writer: answered, or now the head
};

namespace {

// Runs one writer's function, turning a throw into its Status.
Status RunWriteFn(const std::function<Status(Tx&)>& fn, Tx& tx) {
  try {
    return fn(tx);
  } catch (const std::exception& e) {
    return Internal(std::string("store transaction threw: ") + e.what());
  } catch (...) {
    return Internal("store transaction threw a non-standard exception");
  }
}

}  // namespace

Status Store::Write(const std::function<Status(Tx&)>& fn) {
  Writer w(&fn);
  MutexLock queue(queue_mu_);
  writers_.push_back(&w);
  while (!w.done && writers_.front() != &w) queue.Wait(w.cv);
  if (w.done) return w.status;
  // The head of the queue leads a group: itself and the writers queued
  // behind it, who came while the previous group committed.
  const size_t n =
      std::min(writers_.size(), dialect_ == Dialect::kPostgres ? kMaxGroupWritersPostgres : kMaxGroupWriters);
  std::vector<Writer*> group(writers_.begin(), writers_.begin() + static_cast<ptrdiff_t>(n));
  queue.Unlock();
  {
    MutexLock lock(mu_);
    CommitGroup(group);
  }
  queue.Lock();
  for (Writer* g : group) {
    HF_CHECK(writers_.front() == g);
    writers_.pop_front();
    g->done = true;
    // Under queue_mu_: once it sees done, the writer returns and its cv is gone.
    if (g != &w) g->cv.notify_one();
  }
  if (!writers_.empty()) writers_.front()->cv.notify_one();  // the next leader
  return w.status;
}

void Store::CommitGroup(const std::vector<Writer*>& group) {
  for (size_t from = 0; from < group.size();) from = CommitSome(group, from);
}

size_t Store::CommitSome(const std::vector<Writer*>& group, size_t from) {
  // Only the waits on the lock and on the disk count as stuck (CanCommit):
  // the functions themselves run on this process's CPU.
  write_since_ms_.store(SteadyMs());
  Status begin = db_->BeginWrite();
  write_since_ms_.store(0);
  if (!begin.ok()) {
    RollbackQuietly(*db_);
    for (size_t i = from; i < group.size(); ++i) group[i]->status = begin;
    return group.size();
  }
  size_t kept = 0;  // writers whose change the transaction holds
  size_t end = from;
  Status lost;  // set when a function's failure ended the whole transaction
  for (; end < group.size() && lost.ok(); ++end) {
    Writer& w = *group[end];
    // A savepoint per function, so that one writer's failure undoes only
    // its own statements.
    w.status = db_->Exec("SAVEPOINT w");
    if (w.status.ok()) {
      Tx tx(db_.get(), NowMs());
      w.status = RunWriteFn(*w.fn, tx);
      Status over;  // set when the transaction cannot go on
      if (!db_->InTransaction()) {
        // Some errors (a full disk, an I/O error) make SQLite roll back the
        // whole transaction on its own; the savepoint went with it.
        over = w.status.ok() ? Internal("the transaction ended inside a write that returned OK")
                             : w.status;
      } else {
        Status undo = w.status.ok() ? db_->Exec("RELEASE w") : db_->Exec("ROLLBACK TO w");
        if (undo.ok() && !w.status.ok()) undo = db_->Exec("RELEASE w");
        over = undo;
      }
      if (!over.ok()) {
        lost = over;
        if (w.status.ok()) w.status = over;
      }
    } else {
      lost = w.status;
    }
    if (w.status.ok()) ++kept;
  }
  if (!lost.ok()) {
    RollbackQuietly(*db_);
    // The writers before the one that ended the transaction lost their
    // changes through no fault of theirs; those after it run in the next one.
    for (size_t i = from; i < end; ++i) {
      if (group[i]->status.ok()) {
        group[i]->status = Status(lost.code(), "not committed: another write of its group ended the "
                                                   "transaction (" + lost.message() + ")");
      }
    }
    return end;
  }
  if (kept == 0) {
    RollbackQuietly(*db_);  // nothing to keep: no COMMIT, no fsync
    return end;
  }
  write_since_ms_.store(SteadyMs());
  Status commit = CheckFence();
  if (commit.ok()) commit = db_->Exec("COMMIT");
  write_since_ms_.store(0);
  if (!commit.ok()) {
    RollbackQuietly(*db_);
    for (size_t i = from; i < end; ++i) {
      if (group[i]->status.ok()) group[i]->status = commit;
    }
    return end;
  }
  commits_.fetch_add(1, std::memory_order_relaxed);
  writes_.fetch_add(kept, std::memory_order_relaxed);
  return end;
}

class Store::ReadLease {
 public:
  ReadLease(const Store* store, Db* db) : store_(store), db_(db) {}
  ReadLease(ReadLease&& o) noexcept : store_(o.store_), db_(std::exchange(o.db_, nullptr)) {}
  ReadLease(const ReadLease&) = delete;
  ReadLease& operator=(const ReadLease&) = delete;
  ~ReadLease() {
    if (db_ == nullptr) return;
    MutexLock lock(store_->readers_mu_);
    store_->idle_.push_back(db_);
    store_->reader_free_.notify_one();
  }
  Db& db() const { return *db_; }

 private:
  const Store* store_;
  Db* db_;
};

Result<Store::ReadLease> Store::BorrowReader() const {
  MutexLock lock(readers_mu_);
  while (idle_.empty() && readers_.size() >= kReadConnections) lock.Wait(reader_free_);
  if (!idle_.empty()) {
    Db* db = idle_.back();
    idle_.pop_back();
    return ReadLease(this, db);
  }
  // A new one; opening takes a moment, but readers_ must count it first.
  Result<std::unique_ptr<Db>> db = Connect();
  if (!db.ok()) return db.status();
  readers_.push_back(std::move(*db));
  return ReadLease(this, readers_.back().get());
}

Status Store::ClaimExclusive() {
  if (dialect_ != Dialect::kPostgres) return Status::Ok();
  MutexLock lock(mu_);
  Status s = static_cast<PgDb&>(*db_).HoldLock(kServerLock);
  if (s.code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition("another heteroflow server is using the database " + display_ +
                              " exclusively");
  }
  return s;
}

void Store::SetFence(int64_t epoch, std::function<void(const Status&)> on_fenced) {
  HF_CHECK(dialect_ == Dialect::kPostgres && epoch > 0);
  MutexLock lock(mu_);
  fence_epoch_ = epoch;
  on_fenced_ = std::move(on_fenced);
}

Status Store::CheckFence() {
  if (fence_epoch_ == 0) return Status::Ok();
  Status s = db_->Exec("SELECT heteroflow_fence(" + std::to_string(fence_epoch_) + ")");
  if (s.code() != StatusCode::kFailedPrecondition) return s;
  spdlog::error("store: the database refused a commit of epoch {}: {}", fence_epoch_, s.message());
  if (on_fenced_) on_fenced_(s);
  return Unavailable("not committed: this server is no longer the leader (epoch " +
                     std::to_string(fence_epoch_) + " was deposed); retry on the leader");
}

Status Store::CanCommit() {
  const int64_t now = SteadyMs();
  // A write that has waited this long is waiting for a lock held elsewhere
  // (an operator's sqlite3 shell, a stuck backup): nothing commits meanwhile.
  if (int64_t since = write_since_ms_.load(); since != 0 && now - since >= kStuckWriteMs) {
    return Unavailable("a commit has waited " + std::to_string(now - since) +
                       " ms for the database lock");
  }
  // SQLite reuses WAL and database pages it already has, so a small probe can
  // still commit on a full disk while every real write fails: free space is
  // checked as well.
  // (A PostgreSQL server watches its own disk: a full one fails the probe.)
  struct statvfs fs {};
  const std::string dir = std::filesystem::path(target_).parent_path().string();
  if (dialect_ == Dialect::kSqlite && statvfs(dir.empty() ? "." : dir.c_str(), &fs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < kDiskReserveBytes) {
      return Unavailable("only " + std::to_string(free_bytes >> 10) +
                         " KiB free on the database's file system (at least " +
                         std::to_string(kDiskReserveBytes >> 20) + " MiB are kept in reserve)");
    }
  }
  {
    MutexLock lock(probe_mu_);
    if (probed_at_ms_ != 0 && now - probed_at_ms_ < 1000) return probed_;
  }
  if (!mu_.try_lock()) {  // a write is going on, not for long (see above)
    MutexLock lock(probe_mu_);
    return probed_;
  }
  MutexLock write(mu_, std::adopt_lock);
  // A health check must answer soon: a lock held elsewhere is waited for
  // briefly, not for the writers' busy timeout.
  (void)db_->SetLockTimeout(200);
  Status s = db_->BeginWrite();
  if (s.ok()) {
    s = db_->Exec("INSERT INTO health (id, checked_at) VALUES (1, " + std::to_string(NowMs()) +
                  ") ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at");
    if (s.ok()) s = CheckFence();
    if (s.ok()) s = db_->Exec("COMMIT");
    if (!s.ok()) RollbackQuietly(*db_);
  }
  (void)db_->SetLockTimeout(busy_timeout_ms_);
  MutexLock lock(probe_mu_);
  probed_at_ms_ = now;
  probed_ = s;
  return s;
}

Status Store::Read(const std::function<Status(const ReadTx&)>& fn) const {
  HF_ASSIGN_OR_RETURN(ReadLease reader, BorrowReader());
  Db& db = reader.db();
  HF_RETURN_IF_ERROR(db.BeginRead());
  ReadTx tx(&db, NowMs());
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
  RollbackQuietly(db);
  return s;
}

}  // namespace hf::store
