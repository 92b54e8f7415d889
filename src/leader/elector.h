// Leader election among `heteroflow server` replicas that share one
// PostgreSQL database (docs/HA.md): a lease row in the database
// (leader_lease, migration 11) with a monotonically increasing epoch.
//
// The protocol, one round every `retry` on the elector's own connection:
//   - the leader of epoch E renews with heteroflow_renew(E, name, lease),
//     which the database refuses (HF001) once E was deposed; it gives up
//     (on_deposed) when that happens, or when no renewal went through for
//     `renew_deadline` (less than `lease`, so it stops before another may
//     start);
//   - the leader of epoch E holds the session-level advisory lock
//     (kLockSpace, E) on that connection. PostgreSQL lets go of it the
//     moment the session ends (the process died, the connection closed),
//     so a follower that can take (kLockSpace, E) knows at once that the
//     leader is gone, without waiting for the lease to run out;
//   - a follower takes over when the lease ran out (by the database's
//     clock) or the leader's session is gone: it takes (kLockSpace, E+1)
//     first, then moves the row from epoch E to E+1 with a compare-and-set
//     (WHERE epoch = E), so two followers never both win, and the winner
//     holds its lock before anyone can see its epoch.
//
// A new leader NOTIFYs heteroflow_leader, on which every replica LISTENs,
// so followers learn of it at once rather than at their next round.
//
// Safety does not rest on the timings: every transaction a leader commits
// ends with heteroflow_fence(E) (Store::SetFence), which the database
// refuses once the lease moved on. A paused or partitioned ex-leader can
// therefore never commit a decision, whatever its clock says.
//
// Failover: a leader that dies is replaced within `retry` (the next
// follower round) plus its recovery; one that goes silent (machine loss,
// partition, SIGSTOP) within `lease` + `retry` plus recovery.
//
// Threading: Start runs the rounds on a thread of the elector's own; the
// callbacks run on it, one at a time. The accessors may be called from any
// thread.
#ifndef HF_LEADER_ELECTOR_H_
#define HF_LEADER_ELECTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/mutex.h"
#include "core/status.h"

namespace hf::store {
class PgDb;
}

namespace hf::leader {

struct ElectorOptions {
  std::string uri;      // the PostgreSQL database (a libpq URI)
  std::string replica;  // this replica's name, unique among them
  std::string url;      // where the others reach this replica: http://IP:PORT
  std::chrono::milliseconds lease{3000};
  std::chrono::milliseconds renew_deadline{2000};
  std::chrono::milliseconds retry{500};
  // This replica leads, at `epoch`. It should recover the cluster's state
  // from the store and start what runs once (its writes fenced at epoch).
  std::function<void(int64_t epoch)> on_elected;
  // This replica no longer leads (why: the database refused its epoch, or
  // no renewal went through in time). It must stop acting as the leader
  // at once; the elector makes no more rounds.
  std::function<void(const std::string& why)> on_deposed;
};

// The lease as last read.
struct LeaseView {
  int64_t epoch = 0;
  std::string holder;  // empty: nobody has led yet
  std::string url;
  int64_t renewed_at_ms = 0;  // the database's clock
  int64_t expires_at_ms = 0;
};

class Elector {
 public:
  // Connects (a connection of its own). Unavailable when the database
  // cannot be reached; InvalidArgument for bad options.
  static Result<std::unique_ptr<Elector>> Create(ElectorOptions options);
  ~Elector();
  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  void Start();
  // Ends the rounds; a leader's advisory lock goes with the connection.
  void Stop();

  // One round, as the thread makes them (for tests: call it instead of Start).
  void Round();

  bool leading() const { return epoch_.load() != 0 && !deposed_.load(); }
  // The epoch this replica leads at; 0 when it does not.
  int64_t epoch() const { return leading() ? epoch_.load() : 0; }
  // The lease as last read (a follower's view of the leader).
  LeaseView lease() const HF_EXCLUDES(mu_);
  // Steady-clock ms since the leader last renewed (the leader's own view),
  // or since a follower last saw the lease renewed; -1 before any.
  int64_t lease_age_ms() const HF_EXCLUDES(mu_);

  // The first int of the advisory locks' keys ("hfld").
  static constexpr int32_t kLockSpace = 0x6866'6c64;
  // Where a new leader NOTIFYs its epoch; every replica LISTENs.
  static constexpr char kChannel[] = "heteroflow_leader";

 private:
  explicit Elector(ElectorOptions options, std::unique_ptr<store::PgDb> db);
  Status Renew() HF_REQUIRES(round_mu_);
  Status TryTakeOver() HF_REQUIRES(round_mu_);
  Result<LeaseView> ReadLease() HF_REQUIRES(round_mu_);
  // pg_try_advisory_lock / pg_advisory_unlock on (kLockSpace, epoch).
  Result<bool> TryLock(int64_t epoch) HF_REQUIRES(round_mu_);
  void Unlock(int64_t epoch) HF_REQUIRES(round_mu_);
  void Depose(const std::string& why) HF_REQUIRES(round_mu_);
  // Up to `retry` for a NOTIFY on kChannel; an error when the connection
  // cannot wait (the caller sleeps instead).
  Status WaitForNotification() HF_EXCLUDES(round_mu_);

  const ElectorOptions options_;
  Mutex round_mu_;  // guards db_ and last_renewed_ (one round at a time)
  std::unique_ptr<store::PgDb> db_ HF_GUARDED_BY(round_mu_);
  std::chrono::steady_clock::time_point last_renewed_ HF_GUARDED_BY(round_mu_);
  std::atomic<int64_t> epoch_{0};
  std::atomic<bool> deposed_{false};
  mutable Mutex mu_;  // guards lease_ and seen_at_
  LeaseView lease_ HF_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point seen_at_ HF_GUARDED_BY(mu_);  // lease_ last changed
  std::jthread thread_;
};

}  // namespace hf::leader

#endif  // HF_LEADER_ELECTOR_H_
