#include "leader/elector.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>
#include <utility>

#include "store/postgres.h"

namespace hf::leader {

namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// The second int of an advisory lock's key: the epoch, folded into int4.
std::string LockKey(int64_t epoch) {
  return std::to_string(Elector::kLockSpace) + ", " + std::to_string(epoch % 2147483647);
}

}  // namespace

Result<std::unique_ptr<Elector>> Elector::Create(ElectorOptions options) {
  if (options.replica.empty()) return InvalidArgument("a replica needs a name");
  if (options.retry.count() <= 0 || options.renew_deadline <= options.retry ||
      options.lease <= options.renew_deadline) {
    return InvalidArgument("leader election wants retry < renew deadline < lease, got " +
                           std::to_string(options.retry.count()) + " ms, " +
                           std::to_string(options.renew_deadline.count()) + " ms, " +
                           std::to_string(options.lease.count()) + " ms");
  }
  Result<std::unique_ptr<store::PgDb>> db = store::PgDb::Connect(options.uri);
  if (!db.ok()) return db.status();
  // A renewal waits for the commits in flight (their fence holds the lease
  // row FOR SHARE), never long; a takeover that waits longer is tried again
  // next round.
  HF_RETURN_IF_ERROR((*db)->SetLockTimeout(static_cast<int>(options.retry.count())));
  // A new leader says so at once (NOTIFY): followers relay to it without
  // waiting for their next round.
  HF_RETURN_IF_ERROR((*db)->Listen(kChannel));
  return std::unique_ptr<Elector>(new Elector(std::move(options), std::move(*db)));
}

Elector::Elector(ElectorOptions options, std::unique_ptr<store::PgDb> db)
    : options_(std::move(options)), db_(std::move(db)) {}

Elector::~Elector() { Stop(); }

void Elector::Start() {
  thread_ = std::jthread([this](std::stop_token stop) {
    std::mutex m;  // guards nothing: the wait wants a lock
    std::condition_variable_any cv;
    std::unique_lock lock(m);
    while (!stop.stop_requested() && !deposed_.load()) {
      Round();
      // Until the next round is due, or a new leader's NOTIFY (then the
      // round reads the lease at once).
      Status waited = WaitForNotification();
      if (!waited.ok()) cv.wait_for(lock, stop, options_.retry, [] { return false; });
    }
  });
}

void Elector::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  MutexLock lock(round_mu_);
  db_.reset();  // the session ends: a follower sees the lock free at once
}

Status Elector::WaitForNotification() {
  MutexLock lock(round_mu_);
  if (db_ == nullptr) return Unavailable("stopped");
  Result<std::optional<std::string>> n = db_->WaitForNotification(options_.retry);
  return n.ok() ? Status::Ok() : n.status();
}

LeaseView Elector::lease() const {
  MutexLock lock(mu_);
  return lease_;
}

int64_t Elector::lease_age_ms() const {
  MutexLock lock(mu_);
  if (lease_.renewed_at_ms == 0) return -1;
  return MsSince(seen_at_);
}

void Elector::Round() {
  MutexLock lock(round_mu_);
  if (deposed_.load() || db_ == nullptr) return;
  if (epoch_.load() != 0) {
    Status s = Renew();
    if (s.ok()) return;
    if (s.code() == StatusCode::kFailedPrecondition) {
      Depose("the database refused to renew the lease: " + s.message());
    } else if (MsSince(last_renewed_) >= options_.renew_deadline.count()) {
      Depose("no renewal went through for " + std::to_string(MsSince(last_renewed_)) +
             " ms (renew deadline " + std::to_string(options_.renew_deadline.count()) +
             " ms): " + s.message());
    } else {
      spdlog::warn("leader: cannot renew the lease of epoch {} yet: {}", epoch_.load(), s.message());
    }
    return;
  }
  if (Status s = TryTakeOver(); !s.ok()) {
    spdlog::warn("leader: election round failed: {}", s.message());
  }
}

Status Elector::Renew() {
  HF_ASSIGN_OR_RETURN(store::Stmt st, db_->Prepare("SELECT heteroflow_renew(?1, ?2, ?3)"));
  st.Bind(1, epoch_.load()).Bind(2, options_.replica).Bind(3, int64_t{options_.lease.count()});
  HF_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Internal("heteroflow_renew returned no row");
  const int64_t expires = st.Int(0);
  last_renewed_ = Clock::now();
  MutexLock lock(mu_);
  lease_.expires_at_ms = expires;
  lease_.renewed_at_ms = expires - options_.lease.count();
  seen_at_ = last_renewed_;
  return Status::Ok();
}

Result<LeaseView> Elector::ReadLease() {
  HF_ASSIGN_OR_RETURN(store::Stmt st,
                      db_->Prepare("SELECT epoch, holder, url, renewed_at, expires_at, "
                                   "heteroflow_now_ms() FROM leader_lease WHERE id = 1"));
  HF_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Internal("the leader_lease row is missing");
  LeaseView l{st.Int(0), st.Text(1), st.Text(2), st.Int(3), st.Int(4)};
  const int64_t now_ms = st.Int(5);
  {
    MutexLock lock(mu_);
    if (l.epoch != lease_.epoch || l.renewed_at_ms != lease_.renewed_at_ms) seen_at_ = Clock::now();
    if (l.epoch != lease_.epoch && !l.holder.empty() && l.holder != options_.replica) {
      spdlog::info("leader: {} leads at epoch {} ({})", l.holder, l.epoch, l.url);
    }
    lease_ = l;
  }
  // Expired by the database's clock: the caller treats the lease as free.
  if (l.expires_at_ms <= now_ms) l.expires_at_ms = 0;
  return l;
}

Result<bool> Elector::TryLock(int64_t epoch) {
  HF_ASSIGN_OR_RETURN(store::Stmt st, db_->Prepare("SELECT pg_try_advisory_lock(" + LockKey(epoch) + ")"));
  HF_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Internal("pg_try_advisory_lock returned no row");
  const std::string v = st.Text(0);
  return v == "t" || v == "true" || v == "1";
}

void Elector::Unlock(int64_t epoch) {
  (void)db_->Exec("SELECT pg_advisory_unlock(" + LockKey(epoch) + ")");
}

Status Elector::TryTakeOver() {
  HF_ASSIGN_OR_RETURN(LeaseView l, ReadLease());
  std::string why = l.holder.empty() ? "nobody leads yet" : "the lease of epoch " + std::to_string(l.epoch) + " ran out";
  if (l.expires_at_ms != 0) {
    // The lease still runs: the leader is alive unless its session ended.
    HF_ASSIGN_OR_RETURN(bool free, TryLock(l.epoch));
    if (!free) return Status::Ok();
    Unlock(l.epoch);
    why = "the session of " + l.holder + " (epoch " + std::to_string(l.epoch) + ") ended";
  }
  const int64_t next = l.epoch + 1;
  HF_ASSIGN_OR_RETURN(bool mine, TryLock(next));
  if (!mine) return Status::Ok();  // another follower is taking over
  HF_ASSIGN_OR_RETURN(store::Stmt st,
                      db_->Prepare("UPDATE leader_lease SET epoch = ?1, holder = ?2, url = ?3, "
                                   "acquired_at = heteroflow_now_ms(), renewed_at = heteroflow_now_ms(), "
                                   "expires_at = heteroflow_now_ms() + ?4 WHERE id = 1 AND epoch = ?5 "
                                   "RETURNING renewed_at, expires_at"));
  st.Bind(1, next).Bind(2, options_.replica).Bind(3, options_.url).Bind(4, int64_t{options_.lease.count()}).Bind(5, l.epoch);
  Result<bool> row = st.Step();
  if (!row.ok() || !*row) {
    Unlock(next);
    return row.ok() ? Status::Ok() : row.status();
  }
  const LeaseView mine_now{next, options_.replica, options_.url, st.Int(0), st.Int(1)};
  last_renewed_ = Clock::now();
  {
    MutexLock lock(mu_);
    lease_ = mine_now;
    seen_at_ = last_renewed_;
  }
  epoch_.store(next);
  spdlog::info("leader: {} leads at epoch {} ({})", options_.replica, next, why);
  (void)db_->Exec(std::string("NOTIFY ") + kChannel + ", '" + std::to_string(next) + "'");
  if (options_.on_elected) options_.on_elected(next);
  return Status::Ok();
}

void Elector::Depose(const std::string& why) {
  deposed_.store(true);
  spdlog::error("leader: {} no longer leads (epoch {}): {}", options_.replica, epoch_.load(), why);
  if (options_.on_deposed) options_.on_deposed(why);
}

}  // namespace hf::leader
