// The persistent store: one SQLite file, or one PostgreSQL database
// (docs/STORE.md), holding nodes, tasks and their events, allocations with
// their GPU grants, jobs, queues, plugin and scheduler config, API tokens,
// the config audit log and inference objects. Both backends run the same
// code here and in tx.cc, over store/db.h.
//
// Durability: a SQLite file runs in WAL mode with synchronous=FULL, so a
// Write that returned OK has been fsync'ed and survives a crash of the
// process or the machine; on PostgreSQL it returned after the server's
// COMMIT did. Callers answer 2xx only after Write returns.
//
// Group commit (LevelDB's write batching, PostgreSQL's group commit):
// writers that arrive while a commit is in flight queue up, and the first of
// them, once that commit is done, commits them all in one transaction: one
// BEGIN IMMEDIATE, each function inside a SAVEPOINT of its own, one COMMIT,
// so one fsync for the whole group (at most kMaxGroupWriters). A function
// that fails (or throws) is rolled back to its savepoint and its writer gets
// its own error; the others still commit. Every writer of a group is answered
// only after the COMMIT that holds its change returned OK; when the COMMIT
// fails, each of them gets that error and none of the group's changes is
// kept. A lone writer waits for nobody: there is no commit delay, batches
// form only from writers that arrive while a commit runs.
//
// GPU capacity is guarded by the database itself (triggers on gpu_grants):
// the sum of milli granted on one (node, GPU) never exceeds 1000 and the sum
// of GPU memory never exceeds that GPU's memory_mib, whatever code or tool
// writes the file. A grant that would break it fails with ResourceExhausted.
//
// Usage:
//   auto store = Store::Open(dir + "/heteroflow.db");
//   TaskKey id;
//   Status s = (*store)->Write([&](Tx& tx) -> Status {
//     Result<TaskKey> k = tx.InsertTask(task);
//     if (!k.ok()) return k.status();
//     id = *k;
//     return tx.AppendTaskEvent(id, "submitted", "by alice");
//   });
//
// Threading: a Store may be shared by any number of threads. Writes go
// through one connection: writers queue (writers_, guarded by queue_mu_) and
// the group's leader, the writer at the head of the queue, holds mu_ (which
// guards the write connection) while it runs the group's transaction; the
// health probe of CanCommit takes mu_ too. The function passed to Write may
// therefore run on another writer's thread, while its own caller waits: it
// must use only the Tx and what it captured, must not call back into the
// Store, must not take a lock that a thread calling Write may hold (it would
// wait for a writer queued behind it), and should not block on anything slow.
// Functions of one group run one after another, in the order their writers
// queued, and each sees the changes of those before it. Reads take a
// connection of their own from a small pool (WAL readers see the last commit
// and never wait for a writer, not even one that waits for another process's
// lock). The function passed to Read runs on the caller's thread, holding
// its connection, with the same rules. Tx/ReadTx objects are valid only
// inside that function.
#ifndef HF_STORE_STORE_H_
#define HF_STORE_STORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/job.h"
#include "core/model.h"
#include "core/mutex.h"
#include "core/status.h"
#include "store/db.h"

namespace hf::store {

// A node as stored: its declared spec plus what the control plane set.
struct NodeRecord {
  NodeSpec spec;
  NodeCondition condition = NodeCondition::kReady;
  // Where its agent is reached (SetNodeAddress); empty until it registers.
  std::string address;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
};

// A task as stored. task.key is the row id. node is where its allocation is
// (empty while it has none).
struct TaskRecord {
  Task task;
  TaskState state = TaskState::kPending;
  std::string pending_reason;
  std::string node;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
};

// Which tasks ListTasks returns: those matching every set field, in id order,
// with id > after (a cursor: pass the last id of the previous page), at most
// `limit` of them (0 = no limit).
struct TaskFilter {
  std::optional<TaskState> state;
  std::optional<std::string> node;
  std::optional<std::string> group;
  std::optional<int32_t> priority;
  std::optional<uint64_t> job;  // the members of this job
  TaskKey after = 0;
  int limit = 100;
};

struct TaskEvent {
  int64_t id = 0;  // increases with every append, across tasks
  TaskKey task = 0;
  int64_t time_ms = 0;
  std::string kind;  // e.g. "submitted", "scheduled", "preempted"
  std::string message;
};

// A job as stored (docs/JOBS.md).
struct JobRecord {
  uint64_t id = 0;
  JobSpec spec;
  JobState state = JobState::kPending;
  std::string reason;  // why it waits, or how it ended
  int32_t restarts = 0;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
};

struct JobEvent {
  int64_t time_ms = 0;
  std::string kind;  // e.g. "submitted", "placed", "restarting", "failed"
  std::string message;
};

// An allocation as stored: Allocation's node id is process-local, so the
// store keys allocations by node name.
struct StoredAllocation {
  TaskKey task = 0;
  std::string node;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<GpuGrant> gpus;  // ordered by GPU index
  std::string rdma_device;
};

// A task's state and the node of its allocation, without its spec: what an
// agent's report about it is checked against.
struct TaskPlacementRecord {
  TaskState state = TaskState::kPending;
  std::string node;  // "" when the task holds no allocation
};

// An API token. Only the SHA-256 of the secret is stored (64 lowercase hex
// characters); the secret itself never reaches the store.
struct TokenRecord {
  int64_t id = 0;
  std::string name;
  std::string role;  // admin | operator | viewer | agent
  std::string hash;
  int64_t created_at_ms = 0;
  std::optional<int64_t> expires_at_ms;
  std::optional<int64_t> revoked_at_ms;
  // The one node an agent token acts for; empty for other roles (and for
  // agent tokens made before tokens were bound, which agent routes refuse).
  std::string node;

  // Not revoked and not expired at now_ms.
  bool ActiveAt(int64_t now_ms) const {
    return !revoked_at_ms && (!expires_at_ms || now_ms < *expires_at_ms);
  }
};

// One config change: who changed which key, from what to what. A null JSON
// value means "absent" (the key was created, or deleted).
struct AuditEntry {
  int64_t id = 0;
  int64_t time_ms = 0;
  std::string actor;
  std::string key;  // e.g. "plugins.binpack", "scheduler.load_threshold"
  nlohmann::json old_value;
  nlohmann::json new_value;
};

// Reads, valid inside Store::Read or Store::Write. All reads in one
// transaction see one consistent snapshot. Errors: NotFound for a missing
// key; Internal for a row that no longer parses (a corrupt file).
class ReadTx {
 public:
  ReadTx(const ReadTx&) = delete;
  ReadTx& operator=(const ReadTx&) = delete;

  Result<NodeRecord> GetNode(const std::string& name) const;
  // Ordered by name.
  Result<std::vector<NodeRecord>> ListNodes() const;

  Result<TaskRecord> GetTask(TaskKey id) const;
  // One row, the spec left unread. NotFound when the task does not exist.
  Result<TaskPlacementRecord> GetTaskPlacement(TaskKey id) const;
  Result<std::vector<TaskRecord>> ListTasks(const TaskFilter& filter) const;
  // Oldest first. NotFound when the task does not exist.
  Result<std::vector<TaskEvent>> ListTaskEvents(TaskKey id) const;

  Result<JobRecord> GetJob(uint64_t id) const;
  // By id, ids above `after`, at most `limit` (0 = all).
  Result<std::vector<JobRecord>> ListJobs(uint64_t after = 0, int limit = 0) const;
  // Oldest first. NotFound when the job does not exist.
  Result<std::vector<JobEvent>> ListJobEvents(uint64_t id) const;

  Result<StoredAllocation> GetAllocation(TaskKey id) const;
  // Every allocation (or only those on `node` when it is not empty), by task.
  Result<std::vector<StoredAllocation>> ListAllocations(const std::string& node = "") const;

  Result<nlohmann::json> GetPluginConfig(const std::string& name) const;
  Result<std::map<std::string, nlohmann::json>> ListPluginConfigs() const;
  // NotFound while no scheduler config has been stored (e.g. a fresh file,
  // which the caller seeds from its config file).
  Result<nlohmann::json> GetSchedulerConfig() const;

  // Returns the token whatever its state; use TokenRecord::ActiveAt.
  Result<TokenRecord> FindTokenByHash(const std::string& sha256_hex) const;
  // Ordered by id.
  Result<std::vector<TokenRecord>> ListTokens() const;

  // Newest first, at most `limit` (0 = all).
  Result<std::vector<AuditEntry>> ListAudit(int limit = 100) const;

  // Inference objects (kind "model", "endpoint" or "replica"), by name.
  Result<std::map<std::string, nlohmann::json>> ListInferenceObjects(const std::string& kind) const;
  // The stored queue specs (docs/QUEUES.md), in the order they were created;
  // empty before any was stored.
  Result<std::vector<nlohmann::json>> ListQueues() const;

 protected:
  friend class Store;
  ReadTx(Db* db, int64_t now_ms) : db_(db), now_ms_(now_ms) {}

  Db* db_;
  // Taken once when the transaction begins, so every row a transaction
  // writes carries the same time.
  int64_t now_ms_;
};

// Reads and writes, valid inside Store::Write. A failing operation leaves
// the transaction open; Write rolls all of it back when the function returns
// the error.
class Tx : public ReadTx {
 public:
  // Creates or replaces a node's spec (keeping its condition and created_at)
  // and its gpus capacity rows. InvalidArgument when the spec is invalid;
  // FailedPrecondition when a GPU that still has grants would disappear;
  // ResourceExhausted when a GPU's memory would shrink below its grants.
  Status PutNode(const NodeSpec& spec);
  // NotFound when missing; FailedPrecondition while tasks are allocated on it.
  Status DeleteNode(const std::string& name);
  Status SetNodeCondition(const std::string& name, NodeCondition condition);
  // The address its agent registered from or advertises. NotFound when missing.
  Status SetNodeAddress(const std::string& name, const std::string& address);
  // Sets one GPU's memory capacity (the node must exist: FailedPrecondition).
  Status PutGpuCapacity(const std::string& node, int32_t gpu_index, int64_t memory_mib);

  // Stores a new job in state pending and returns its id (its members are
  // InsertTask's, with task.job.id set to it).
  Result<uint64_t> InsertJob(const JobSpec& spec);
  // NotFound when missing.
  Status UpdateJob(uint64_t id, JobState state, const std::string& reason, int32_t restarts);
  Status AppendJobEvent(uint64_t id, const std::string& kind, const std::string& message);

  // Stores a new task in state pending and returns its key (task.key is
  // ignored); a job's member is linked to task.job.id. InvalidArgument for
  // an empty name or invalid requests.
  Result<TaskKey> InsertTask(const Task& task);
  // InsertTask with its "submitted" event (AppendTaskEvent), giving the new
  // task as GetTask would read it; one statement on PostgreSQL.
  Result<TaskRecord> SubmitTask(const Task& task, const std::string& message);
  // SubmitTask for each, in order; one statement for all of them on
  // PostgreSQL.
  Result<std::vector<TaskRecord>> SubmitTasks(const std::vector<Task>& tasks, const std::string& message);
  // NotFound when missing. `reason` replaces pending_reason (pass "" to clear).
  Status UpdateTaskState(TaskKey id, TaskState state, const std::string& reason);
  // Deletes the task with its events, allocation and GPU grants.
  Status DeleteTask(TaskKey id);
  Status AppendTaskEvent(TaskKey id, const std::string& kind, const std::string& message);

  // Creates or replaces the task's allocation on `node` (by name) with its
  // GPU grants. NotFound for an unknown task; FailedPrecondition for an
  // unknown node; ResourceExhausted when a grant exceeds a GPU's remaining
  // milli or memory, or names a GPU the node does not have.
  Status PutAllocation(TaskKey id, const std::string& node, const Allocation& allocation);
  // What placing tasks writes, for each in order (each task once):
  // PutAllocation, then the task's state to scheduled and its "scheduled"
  // event with `message`. Two statements for all of them on PostgreSQL.
  struct Placement {
    TaskKey task = 0;
    std::string node;
    Allocation allocation;
    std::string message;
  };
  Status PlaceTasks(const std::vector<Placement>& placements);
  // Removes the allocation and its grants; OK when there was none.
  Status DeleteAllocation(TaskKey id);

  Status PutPluginConfig(const std::string& name, const nlohmann::json& config);
  Status PutSchedulerConfig(const nlohmann::json& config);

  // Returns the new token's id. InvalidArgument for an unknown role or a hash
  // that is not 64 lowercase hex digits; AlreadyExists for a taken name or hash.
  // `node`: the node an agent token acts for ("" for none).
  Result<int64_t> InsertToken(const std::string& name, const std::string& role,
                              const std::string& sha256_hex, std::optional<int64_t> expires_at_ms,
                              const std::string& node = "");
  // Marks it revoked (idempotent: the first revocation time stays).
  // NotFound when no token has that id.
  Status RevokeToken(int64_t id);

  Status AppendAudit(const std::string& actor, const std::string& key,
                     const nlohmann::json& old_value, const nlohmann::json& new_value);

  // Creates or replaces one inference object; InvalidArgument for an unknown
  // kind or an empty name.
  Status PutInferenceObject(const std::string& kind, const std::string& name,
                            const nlohmann::json& body);
  // OK when there was none.
  Status DeleteInferenceObject(const std::string& kind, const std::string& name);
  // Creates or replaces queue `name`'s spec (a replaced one keeps its place).
  Status PutQueue(const std::string& name, const nlohmann::json& spec);
  // NotFound when there is no such queue.
  Status DeleteQueue(const std::string& name);

 private:
  friend class Store;
  using ReadTx::ReadTx;
  // InsertTask, giving the row as GetTask reads it.
  Result<TaskRecord> InsertTaskRecord(const Task& task);
};

struct StoreOptions {
  // Stamps created/updated times. Null means the system clock. Must outlive
  // the Store.
  const Clock* clock = nullptr;
  // How long a statement waits for another process's lock before failing
  // with Unavailable.
  int busy_timeout_ms = 5000;
  // ClaimExclusive before anything is written (before migrations).
  bool exclusive = false;
};

class Store {
 public:
  // Opens or creates the database file at `target` (its directory must
  // exist), or connects to the PostgreSQL database a postgresql:// URI names
  // (the database must exist; docs/STORE.md), and brings its schema up to
  // date. A file and its WAL and shared-memory companions are made 0600
  // (owner only). Errors: Unavailable when the file cannot be opened or put
  // in WAL mode, or no PostgreSQL server answers; FailedPrecondition when its
  // schema is newer than this binary; a migration's error otherwise.
  static Result<std::unique_ptr<Store>> Open(const std::string& target, StoreOptions options = {});

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Runs fn inside a transaction, with the writers queued at the same time
  // (group commit, above). Returns OK only after the commit that holds fn's
  // change is durable. When fn returns an error or throws, everything it did
  // is rolled back and its Status (Internal with the exception's text for a
  // throw) is returned; other writers of its group are not affected. When
  // the group's COMMIT fails, its error is returned and nothing of fn's is
  // kept. Unavailable when another process holds the write lock past the
  // busy timeout.
  Status Write(const std::function<Status(Tx&)>& fn) HF_EXCLUDES(mu_, queue_mu_);
  // The most writers one transaction takes, so that a writer waits at most
  // for the group in flight and its own.
  static constexpr size_t kMaxGroupWriters = 256;
  // On PostgreSQL, each writer's savepoint is a subtransaction, and past 64
  // in one transaction the server's per-backend cache of them overflows.
  static constexpr size_t kMaxGroupWritersPostgres = 60;
  // Runs fn inside a read transaction: one consistent snapshot, on a read
  // connection (at most kReadConnections at once; more wait for one).
  Status Read(const std::function<Status(const ReadTx&)>& fn) const HF_EXCLUDES(readers_mu_);
  static constexpr size_t kReadConnections = 4;

  // Makes this Store the only one that writes to its database, for as long
  // as it lives: a no-op for a SQLite file (the server's data directory lock
  // does it); on PostgreSQL a session-level advisory lock on the write
  // connection, taken again if that connection is made again.
  // FailedPrecondition when another holds it. Servers do not use it on
  // PostgreSQL: they share the database and elect a leader (docs/HA.md).
  Status ClaimExclusive() HF_EXCLUDES(mu_);
  static constexpr int64_t kServerLock = 0x6866'7365'7276'6572;  // "hfserver"

  // Fencing (docs/HA.md): from now on every transaction this Store commits
  // ends with heteroflow_fence(epoch), so that the database itself refuses
  // it once a newer leader holds the lease, however long this process was
  // paused. The writers of a refused transaction get Unavailable (naming
  // the deposed epoch), nothing of theirs is kept, and on_fenced is called
  // with the database's refusal; it runs with mu_ held, so it must only
  // take note and return. PostgreSQL only; epoch > 0.
  void SetFence(int64_t epoch, std::function<void(const Status&)> on_fenced) HF_EXCLUDES(mu_);

  // Whether a commit goes through now. No when a group has waited
  // kStuckWriteMs for the lock (another process holds it) or for its COMMIT
  // (a disk that does not answer), when the
  // database's file system has less than kDiskReserveBytes free, or when a
  // one-row probe write fails (done at most once a second; while another
  // write runs, the last answer stands).
  Status CanCommit() HF_EXCLUDES(mu_, probe_mu_);
  static constexpr int64_t kStuckWriteMs = 2000;
  static constexpr uint64_t kDiskReserveBytes = 16ull << 20;

  // Transactions Write committed (one fsync each), and Write calls answered
  // OK: writes() / commits() is the mean group size. For metrics and tests.
  uint64_t commits() const { return commits_.load(std::memory_order_relaxed); }
  uint64_t writes() const { return writes_.load(std::memory_order_relaxed); }

  // The schema version the file is at (LatestSchemaVersion() after Open).
  int64_t schema_version() const { return schema_version_; }
  // The file, or the PostgreSQL URI without its password.
  const std::string& path() const { return display_; }
  Dialect dialect() const { return dialect_; }

 private:
  Store(std::unique_ptr<Db> db, std::string target, const Clock* clock, int64_t schema_version);
  // Applies the migrations on `db` and makes the Store around it.
  static Result<std::unique_ptr<Store>> Finish(std::unique_ptr<Db> db, const std::string& target,
                                               const StoreOptions& options);
  // A new connection to the same database (a reader's).
  Result<std::unique_ptr<Db>> Connect() const;
  int64_t NowMs() const;

  // A read connection borrowed from the pool; returned when destroyed.
  class ReadLease;
  Result<ReadLease> BorrowReader() const HF_EXCLUDES(readers_mu_);

  // One caller of Write, queued (defined in store.cc).
  struct Writer;
  // Runs `group` (its leader first) in as few transactions as it takes (one,
  // unless a function's failure ends the whole transaction, as a full disk
  // does) and sets each writer's status.
  void CommitGroup(const std::vector<Writer*>& group) HF_REQUIRES(mu_);
  // Before a COMMIT: OK, or why this transaction must not commit (the
  // database refused the fence epoch, or could not be asked).
  Status CheckFence() HF_REQUIRES(mu_);
  // BEGIN IMMEDIATE, then group[from..] each in a savepoint, then COMMIT;
  // returns where the next transaction starts (group.size() when done).
  size_t CommitSome(const std::vector<Writer*>& group, size_t from) HF_REQUIRES(mu_);

  // Taken by a group's leader (after queue_mu_ is let go) and by the probe.
  mutable Mutex mu_;  // guards db_ (the write connection)
  std::unique_ptr<Db> db_ HF_GUARDED_BY(mu_);
  int64_t fence_epoch_ HF_GUARDED_BY(mu_) = 0;  // 0: not fenced (SetFence)
  std::function<void(const Status&)> on_fenced_ HF_GUARDED_BY(mu_);
  Mutex queue_mu_;  // guards writers_ and each queued Writer's status and done
  // Writers waiting, in arrival order; the head is the leader of the group in
  // flight, or the next one. A Writer lives on its caller's stack.
  std::deque<Writer*> writers_ HF_GUARDED_BY(queue_mu_);
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> writes_{0};
  std::string target_;   // the file, or the PostgreSQL URI
  std::string display_;  // the same, without a password
  Dialect dialect_;
  const Clock* clock_;
  int64_t schema_version_;
  int busy_timeout_ms_ = 5000;

  mutable Mutex readers_mu_;  // guards readers_ and idle_
  mutable std::condition_variable reader_free_;
  // Every read connection opened.
  mutable std::vector<std::unique_ptr<Db>> readers_ HF_GUARDED_BY(readers_mu_);
  mutable std::vector<Db*> idle_ HF_GUARDED_BY(readers_mu_);  // those not in use
  // Steady ms since when the group in flight waits for the lock (BEGIN
  // IMMEDIATE) or for its COMMIT; 0: none waits.
  std::atomic<int64_t> write_since_ms_{0};
  Mutex probe_mu_;  // guards the last probe's time and answer
  int64_t probed_at_ms_ HF_GUARDED_BY(probe_mu_) = 0;
  Status probed_ HF_GUARDED_BY(probe_mu_);
};

}  // namespace hf::store

#endif  // HF_STORE_STORE_H_
