// Scheduler: the server's scheduling loop and the owner of the live cluster
// state (SPEC §5, §9).
//
// Truth and order. The store is the truth; the in-memory ClusterState and the
// queue mirror it so that a decision takes microseconds. Every change goes
// store first, memory second, under the scheduler's mutex (which also guards
// the framework, the scheduler's own), so memory never shows what the store
// has not committed:
//   - Submit commits the task rows without the mutex (its write joins the
//     store's group commit), then hands them to the loop through a small
//     inbox of its own (arrivals_), so that it never waits for the mutex,
//     which a cycle holds through its commit; whoever holds the mutex and
//     reads the queue moves the inbox into it first (DrainArrivalsLocked),
//     so a task is seen queued as soon as its Submit returned. A Cancel in
//     between is remembered, so a cancelled task is never queued;
//   - a scheduling cycle takes up to `batch` tasks from the queue (priority
//     first, then age: lower task id), runs the framework on each, and then
//     commits every decision of the cycle in one transaction (allocations,
//     states, events; victims' allocations deleted before the preemptor's
//     grants are inserted, so the database's capacity triggers hold at every
//     row). If that commit fails the memory is rebuilt from the store and the
//     tasks are retried: an acknowledged task is never lost and a GPU is never
//     granted twice, whatever fails;
//   - Cancel, node registration, cordon and deletion commit, then change the
//     memory;
//   - an agent's report that a plain task started or ended is checked against
//     memory, commits without the mutex (joining the store's group commits;
//     its transaction checks the placement again, and the store decides),
//     then changes the memory (reports.cc). Whoever would release or move a
//     placed task in between (a preemption, Cancel, Drain, a lost node) first
//     waits for that commit and applies it, so nothing acts on a placement
//     the store has ended.
//
// Unschedulable tasks wait, keeping their "0/N nodes available: ..." reason
// (stored, with an event, each time it changes). They are retried when
// something could let them fit — a task released, a node added or made
// schedulable, a policy change — and every `retry_interval` otherwise, for
// changes the server cannot see (measured load).
//
// Policy. The framework and its plugins belong to the scheduler: the server
// reads the policy with ReadPolicy and changes it with ChangePolicy and
// ReloadPlugin, each under the mutex, and a change retries every waiting task.
//
// Threading: every public method may be called from any thread. The loop, the
// watch loop and the source watcher run on threads of their own between Start
// and Stop.
#ifndef HF_SCHEDULER_SCHEDULER_H_
#define HF_SCHEDULER_SCHEDULER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/cluster_state.h"
#include "core/event_sink.h"
#include "core/job.h"
#include "core/model.h"
#include "core/mutex.h"
#include "core/status.h"
#include "framework/framework.h"
#include "framework/queue.h"
#include "queues/backfill.h"
#include "queues/gate.h"
#include "queues/ledger.h"
#include "queues/queue_tree.h"
#include "store/store.h"

namespace hf::scheduler {

struct SchedulerOptions {
  // Decisions committed per transaction (one fsync).
  size_t batch = 256;
  // Unschedulable tasks are retried at least this often.
  std::chrono::milliseconds retry_interval = std::chrono::seconds(30);
  // Called after every attempt with its result ("scheduled", "unschedulable")
  // and duration; for metrics. May be empty.
  std::function<void(std::string_view result, double seconds)> on_attempt;
  // Called with the mutex held after every change of the framework (a policy
  // change, a reload starting or ending), with the framework as it is now:
  // for views of it that readers take without the mutex. May be empty.
  std::function<void(const framework::Framework&)> on_policy_change;
  // Called when a cycle's commit failed, with the number of decisions it
  // undid (they are retried). May be empty.
  std::function<void(size_t decisions)> on_commit_failure;
  // Called with the number of victims of each preemption. May be empty.
  std::function<void(size_t victims)> on_preemption;
  // One attempt in `plugin_timing_sample` has every plugin call timed and
  // passed here (0 or an empty function: never), as kube-scheduler samples
  // its plugin metrics: the clock reads would cost more than a cheap filter.
  std::function<void(const std::vector<framework::PluginTiming>&)> on_plugin_timings;
  uint32_t plugin_timing_sample = 10;
};

// One task a node's agent should run.
struct NodeAssignment {
  Task task;
  TaskState state = TaskState::kScheduled;
  Allocation alloc;
  // A job's member: the launch environment (docs/JOBS.md) — WORLD_SIZE,
  // RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT, HETEROFLOW_JOB,
  // HETEROFLOW_ROLE, HETEROFLOW_HOSTS. Empty for other tasks.
  std::map<std::string, std::string> launch_env;
  // A job's member that must not start yet: its gang starts together, once
  // every placed member's agent has reported it ready (TaskExit::ready) or
  // running (docs/JOBS.md). The agent holds it and reports "ready".
  bool hold = false;
};

// How a task's process ended, as its agent reports it.
struct TaskExit {
  // kScheduled: not started yet, waiting (for what: `message`), or, with
  // `ready`, held by its agent with nothing in its way (a job's member, see
  // NodeAssignment::hold); kRunning; kSucceeded or kFailed.
  TaskState state = TaskState::kSucceeded;
  bool ready = false;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string message;
  // Where a started service listens (a task whose command holds "{port}"):
  // the port its agent gave it, and the address the agent is reached at.
  std::optional<uint16_t> port;
  std::string host;
  // kFailed: its supervisor stopped it because the agent could not renew the
  // node's lease (fencing). A task with requeue_on_node_loss is queued again.
  bool fenced = false;
  // kFailed: its agent stopped it at its time limit. It ends failed with a
  // "timed_out" event and the reason kTimedOutReason + message; a job it
  // is a member of ends timed_out.
  bool timed_out = false;
};

// The start of a timed-out task's reason.
inline constexpr char kTimedOutReason[] = "timed out: ";

// What the preview needs, copied under the lock.
struct ClusterSnapshot {
  ClusterState cluster;
  framework::Policy policy;
  std::vector<Task> pending;  // by priority, then age
  std::vector<Task> placed;   // scheduled or running, by priority, then age; when asked for
};

class Scheduler {
 public:
  // The scheduler takes the framework; the other pointers must outlive it.
  // `events` may be null.
  Scheduler(store::Store* store, std::unique_ptr<framework::Framework> fw, const Clock* clock,
            EventSink* events, SchedulerOptions options = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Loads nodes, allocations and live tasks from the store. Call once before
  // Start. Internal when a stored allocation no longer fits its node.
  Status Recover();
  void Start();
  // Finishes the cycle in progress and joins the thread. Idempotent.
  void Stop();

  // Stores the tasks in one transaction (all or none), each with a
  // "submitted" event, then queues them. Returns them as stored.
  Result<std::vector<store::TaskRecord>> Submit(const std::vector<Task>& tasks,
                                                const std::string& actor);
  // Cancels a pending, scheduled or running task and frees what it holds.
  // Cancelling a cancelled task returns it unchanged; a succeeded or failed
  // one is FailedPrecondition, and so is a job's member (cancel the job);
  // NotFound when there is no such task.
  Result<store::TaskRecord> Cancel(TaskKey id, const std::string& actor);

  // ---- Jobs (docs/JOBS.md) ----
  // Stores the job and its members (one task per replica, in rank order) in
  // one transaction, with "submitted" events, then queues the members; they
  // are placed as a gang (min_available of them in one decision, or none).
  // Returns the job as stored.
  Result<store::JobRecord> SubmitJob(const JobSpec& spec, const std::string& actor);
  // Cancels the job and every member not ended yet, in one transaction.
  // Cancelling a cancelled job returns it unchanged; another ended one is
  // FailedPrecondition; NotFound when there is no such job.
  Result<store::JobRecord> CancelJob(uint64_t id, const std::string& actor);
  // Where every node's agent is reached (the address it registered from, or
  // the one it advertises): MASTER_ADDR and HETEROFLOW_HOSTS of jobs. Stored
  // with the node (when it changed), so a restarted server knows it before
  // the agent registers again. NotFound for an unknown node.
  Status SetNodeAddress(const std::string& node, const std::string& address);
  // The first port MASTER_PORT is taken from; a node's jobs get the lowest
  // port from here not held by another job's rank 0 on that node.
  static constexpr uint16_t kMasterPortBase = 29500;

  // Registers a node or replaces its spec (keeping its condition), with an
  // audit entry "nodes.<name>" by `actor` when the spec is new or changed.
  // Returns true when it was new. Errors as store::Tx::PutNode.
  Result<bool> PutNode(const NodeSpec& spec, const std::string& actor);
  // FailedPrecondition while tasks are allocated on it.
  Status DeleteNode(const std::string& name, const std::string& actor);
  Status SetNodeCondition(const std::string& name, NodeCondition condition,
                          const std::string& actor);
  // What Drain did with the node's tasks.
  struct DrainOutcome {
    std::vector<TaskKey> evicted;  // queued again; their agent stops them
    std::vector<TaskKey> waiting;  // not preemptible: left to run to their end
  };
  // `kubectl drain` for a node: it becomes Draining (no new tasks), its
  // preemptible tasks are evicted and queued again ("evicted" event, their
  // pending reason naming the drain; the agent stops each as a preemption
  // victim: SIGTERM, grace, SIGKILL), and the others are waited for. One
  // transaction. Draining a drained node evicts what it still holds.
  // FailedPrecondition on a NotReady node: its agent could not stop the
  // evicted copies (its tasks are queued again once fenced).
  Result<DrainOutcome> Drain(const std::string& name, const std::string& actor);

  // Agents (docs/AGENT.md). Heartbeat records measured usage (when given;
  // a registration has none); NotFound for an unknown node. A node that was
  // NotReady becomes Ready again.
  Status Heartbeat(const std::string& node, const std::optional<NodeUsage>& usage);
  // A node's task list and its version.
  using AssignmentList = std::pair<uint64_t, std::vector<NodeAssignment>>;
  using AssignmentWatch = std::function<void(Result<AssignmentList>)>;
  // Calls `done` exactly once with the node's task list: as soon as the
  // list's version differs from `since` (at once when it already does), after
  // `wait` with the list unchanged, or when the scheduler stops; NotFound for
  // an unknown node. Nothing blocks: a waiting watch is an entry in a table,
  // not a thread, so thousands of agents can wait at once. `done` runs on the
  // caller's thread when answered at once, else on the watch thread, never
  // with the mutex held.
  void WatchAssignments(const std::string& node, uint64_t since, std::chrono::milliseconds wait,
                        AssignmentWatch done);
  // WatchAssignments, blocking the caller until answered.
  Result<AssignmentList> WaitAssignments(const std::string& node, uint64_t since,
                                         std::chrono::milliseconds wait);
  // Watches waiting now (for tests and metrics).
  size_t watch_count() const;
  // A task's process waits to start (kScheduled: the message, e.g. "waiting
  // for task 12 to exit", becomes its pending_reason, with a "waiting"
  // event, each time it changes), started (kRunning) or ended (kSucceeded /
  // kFailed). Conflict when the task is not placed on `node` (a stale copy),
  // as memory shows it or as the store does when the report commits. A plain
  // task's start and end commit without the mutex (reports.cc): they join
  // the store's group commits and do not wait for a scheduling cycle.
  // Returns the task's state once the report is in.
  Result<TaskState> ReportTask(const std::string& node, TaskKey id, const TaskExit& exit)
      HF_EXCLUDES(mu_);
  // The version of the node's assignments (0 before any); it only grows,
  // across restarts too (wall-clock microseconds at least).
  uint64_t NodeVersion(const std::string& node) const;
  // Nodes whose agent has not sent a heartbeat for `grace` become NotReady;
  // their tasks go back to the queue once fenced (set_fencing). Only nodes
  // that sent a heartbeat since this server started are watched (declared
  // nodes without agents are not).
  void set_heartbeat_grace(std::chrono::milliseconds grace) { heartbeat_grace_ = grace; }
  // Fencing (docs/AGENT.md): a silent node's tasks are queued again only
  // once their supervisors have stopped them: `fence_after` without a lease
  // renewal, plus the kill `grace`, plus kFenceMargin for the supervisors'
  // checks, since the last heartbeat. Tasks that must not be requeued fail
  // when the node becomes NotReady, as before.
  void set_fencing(std::chrono::milliseconds fence_after, std::chrono::milliseconds grace) {
    fence_deadline_ = fence_after + grace + kFenceMargin;
  }
  static constexpr std::chrono::milliseconds kFenceMargin{2000};
  // Kubernetes' node lifecycle rule for many nodes lost at once: when at
  // least kStormMinNodes watched nodes are silent, and more than `fraction`
  // of them, the server assumes the fault is its own or the network's and
  // holds: silent nodes still become NotReady, but their tasks are neither
  // queued again nor failed until the storm passes (nodes come back, or are
  // deleted). A "node" event says when requeues are held and resumed.
  // 1 turns the rule off.
  void set_node_loss_storm(double fraction) { storm_fraction_ = fraction; }
  static constexpr size_t kStormMinNodes = 3;
  // Whether requeues are held now (for metrics).
  bool requeue_held() const;

  // ---- Queues (docs/QUEUES.md) ----
  // One queue as GET /api/v1/queues shows it.
  struct QueueStatus {
    queues::QueueSpec spec;
    bool leaf = true;
    QueueUsage used;                                // with its descendants'
    QueueUsage borrowed;                            // above its guarantee
    double share = 0;                               // dominant share of the cluster it holds
    double beyond_share = 0;                        // ... of what it holds beyond its guarantee
    size_t pending = 0, admitted = 0, running = 0;  // tasks (leaves: its own)
  };
  struct QueuesView {
    std::vector<QueueStatus> queues;  // root first, then as created
    std::vector<std::string> models;  // QueueUsage::gpu_milli's model bits
    QueueUsage capacity;
    // The latest queue events, oldest first: reclaims, changes.
    std::vector<nlohmann::json> events;
  };
  QueuesView Queues() const HF_EXCLUDES(mu_);
  // The first `limit` tasks waiting in leaf `queue`, in the order they are
  // tried (priority, then age; position 1 first), with their reasons.
  struct WaitingTask {
    TaskKey id = 0;
    std::string name;
    uint64_t job = 0;
    int32_t priority = 0;
    size_t position = 0;
    std::string reason;
  };
  std::vector<WaitingTask> QueueWaiting(const std::string& queue, size_t limit) const
      HF_EXCLUDES(mu_);
  // Creates (`create`: AlreadyExists when it exists) or replaces (NotFound
  // when it does not) a queue, stored with an audit entry "queues.NAME" by
  // `actor`; the whole tree is checked first (InvalidArgument naming the
  // queue and field, GPU models the cluster does not have included).
  // Conflict for a new child of a queue that holds work. Every
  // waiting task is tried again under the new quotas.
  Result<queues::QueueSpec> PutQueue(const queues::QueueSpec& spec, bool create,
                                     const std::string& actor) HF_EXCLUDES(mu_);
  // Conflict for root, default, a queue with children, or one that
  // still holds work (pending, placed or running tasks); NotFound when none.
  Status DeleteQueue(const std::string& name, const std::string& actor) HF_EXCLUDES(mu_);
  // A fresh store's tree from the config file's queues: block (first start);
  // nothing when queues are stored already. GPU models are not checked
  // against the cluster here (its agents have not registered yet).
  Status SeedQueues(const std::vector<queues::QueueSpec>& specs, const std::string& actor)
      HF_EXCLUDES(mu_);
  // May a token named `token` with role `role` submit to `queue`? NotFound
  // for no such queue, InvalidArgument for a queue with children,
  // PermissionDenied when its submitters name neither.
  // Checked against a copy of the queue tree, without the mutex: a
  // submission never waits for a scheduling cycle.
  Status CheckSubmit(const std::string& queue, const std::string& token,
                     const std::string& role) const HF_EXCLUDES(mu_, tree_view_mu_);

  // The reservation backfill holds now (docs/QUEUES.md, "Backfill"): for
  // which waiting task (and job), from when, and on which nodes.
  struct ReservationView {
    TaskKey task = 0;
    uint64_t job = 0;
    int64_t start_ms = 0;
    std::vector<std::pair<std::string, int32_t>> nodes;  // node, members it is to host
    // Whether it holds room for task `key` (of job `job_id`, 0: none).
    bool Holds(TaskKey key, uint64_t job_id) const {
      return task == key || (job_id != 0 && job == job_id);
    }
  };
  std::optional<ReservationView> CurrentReservation() const HF_EXCLUDES(mu_);

  // ---- Policy (docs/PLUGINS.md) ----
  // Calls `read` with the framework, the mutex held, and returns its result.
  template <typename F>
  auto ReadPolicy(F&& read) const HF_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return read(static_cast<const framework::Framework&>(*fw_));
  }
  // One change of the policy, all or nothing: `change` edits the framework,
  // then `persist` stores the result (with its audit entry), reading the
  // framework as changed. When either fails, every setting is put back as it
  // was and that error is returned. On success on_policy_change runs and
  // every waiting task is retried under the new policy. Both run with the
  // mutex held, so no cycle sees a change the store does not hold.
  using PolicyEdit = std::function<Status(framework::Framework&)>;
  using PolicyStore = std::function<Status(const framework::Framework&)>;
  Status ChangePolicy(const PolicyEdit& change, const PolicyStore& persist) HF_EXCLUDES(mu_);
  // Re-reads plugin `name`'s outside sources (the topology file). It shows
  // `configuring` while they are read without the mutex (at most
  // kReloadTimeout), then `active`, or `error` with the reason: Unavailable
  // "plugins.NAME: ...". NotFound for an unknown plugin. "plugin" events
  // (configuring, reloaded) name `by`.
  Result<framework::PluginInfo> ReloadPlugin(const std::string& name, const std::string& by)
      HF_EXCLUDES(mu_);
  // Reloads every enabled plugin whose sources changed (Plugin::ReloadDue),
  // whether or not anything is being scheduled: the source watcher calls it
  // every kSourceWatchInterval between Start and Stop.
  void ReloadChangedSources() HF_EXCLUDES(mu_);
  static constexpr std::chrono::seconds kReloadTimeout{10};
  static constexpr std::chrono::milliseconds kSourceWatchInterval{500};

  // `with_placed`: also copy the placed tasks (ClusterSnapshot::placed).
  ClusterSnapshot Snapshot(bool with_placed = false) const;

  // Tasks waiting to be tried, and tasks tried and found unschedulable.
  size_t active_count() const;
  size_t unschedulable_count() const;
  // Per node: name, GPU milli allocated, GPU milli total (for metrics).
  std::vector<std::tuple<std::string, int64_t, int64_t>> GpuAllocation() const;
  // The last measured usage per node, for nodes whose agent has reported one.
  std::map<std::string, NodeUsage> MeasuredUsage() const;
  // Blocks until no task waits to be tried or `timeout` passes; true when idle.
  bool WaitIdle(std::chrono::milliseconds timeout) const;

 private:
  // A job not ended yet, as the loop needs it.
  struct JobRuntime {
    JobSpec spec;
    std::vector<TaskKey> members;  // in rank order
    JobState state = JobState::kPending;
    int32_t restarts = 0;
    uint16_t master_port = 0;  // 0 until the gang is placed
    // After a restart: members whose old copy may still run, by node. The
    // gang is queued again only once every one has left its node's
    // heartbeat (running_tasks), so a fresh copy never meets an old one.
    std::map<TaskKey, std::string> stopping;
    // The start barrier (NodeAssignment::hold): placed members whose agent
    // reported them ready where they are placed now, and whether the gang was
    // released (every placed member ready or running). Kept across an
    // in-process rebuild; a fresh server relearns them from the agents,
    // which report held members again on every new list.
    std::set<TaskKey> ready;
    bool released = false;
  };

  struct Watch {
    std::string node;
    uint64_t since = 0;
    std::chrono::steady_clock::time_point deadline;
    AssignmentWatch done;
  };

  void Loop() HF_EXCLUDES(mu_);
  // Answers watches whose node's list changed or whose wait ran out.
  void WatchLoop() HF_EXCLUDES(mu_);
  // Calls ReloadChangedSources every kSourceWatchInterval until Stop.
  void SourceWatchLoop() HF_EXCLUDES(mu_);
  Result<AssignmentList> AssignmentsLocked(const std::string& node) const HF_REQUIRES(mu_);
  // The node's task-list version; 0 before its list first changed.
  uint64_t NodeVersionLocked(const std::string& node) const HF_REQUIRES(mu_);
  void CycleLocked() HF_REQUIRES(mu_);
  // Rebuilds cluster_, tasks_ and the queue from the store.
  Status RebuildLocked() HF_REQUIRES(mu_);
  void EnqueueLocked(const Task& task, std::string reason) HF_REQUIRES(mu_);
  // Queues the tasks Submit committed since the last call (arrivals_); wakes
  // the loop when it queued any. Const readers call it too: the tasks are
  // submitted already, moving them changes nothing they could tell apart.
  void DrainArrivalsLocked() const HF_REQUIRES(mu_) HF_EXCLUDES(arrivals_mu_);
  // The same without waking the loop (for the loop); true when it queued any.
  bool QueueArrivalsLocked() const HF_REQUIRES(mu_) HF_EXCLUDES(arrivals_mu_);
  // Whether Submit left tasks in arrivals_ that are not queued yet.
  bool ArrivalsWaiting() const HF_EXCLUDES(arrivals_mu_);
  // Wakes the loop (wake_). Called after a change the loop acts on, with or
  // without mu_ held; never takes mu_, so Submit does not wait for it.
  void WakeLoop() const HF_EXCLUDES(wake_mu_);
  // Places the gang of `first`'s job (its waiting members, in rank order),
  // all or none; appends each member's decision to `out`.
  void ScheduleGangLocked(const Task& first, const framework::ScheduleOptions& opt,
                          std::vector<std::pair<TaskKey, framework::Decision>>& out)
      HF_REQUIRES(mu_);
  // MASTER_PORT for a placed gang: the lowest port from kMasterPortBase
  // that no other job's master holds on its master's node.
  void AssignMasterPortLocked(JobRuntime& job) HF_REQUIRES(mu_);
  // A member of a job changed state: its job is looked at (ReconcileJobs).
  void TouchJobLocked(TaskKey key) HF_REQUIRES(mu_);
  // Brings every touched job's state in line with its members' (docs/JOBS.md):
  // starting, running, succeeded; back to pending when its gang was evicted
  // whole; and on a failed or lost member, the failure policy (restart the
  // job, or fail it and stop the others). Each job in one transaction.
  void ReconcileJobsLocked() HF_REQUIRES(mu_);
  // A node's agent reported the tasks it runs: restarted members no longer
  // among them have stopped; a job whose old copies all stopped is queued.
  // `running` null: the node is gone (fenced or deleted).
  void MembersStoppedLocked(const std::string& node, const std::vector<uint64_t>* running)
      HF_REQUIRES(mu_);
  // A status report that commits without mu_ (reports.cc).
  struct InFlightReport {
    std::string node;
    TaskState state = TaskState::kRunning;  // kRunning, kSucceeded or kFailed
    Mutex mu;
    std::condition_variable cv;  // its commit returned
    bool committed HF_GUARDED_BY(mu) = false;
    Status status HF_GUARDED_BY(mu);  // the commit's
    bool applied = false;  // memory took it (or it was refused); under the scheduler's mu_
  };
  // `name`: the task's, for its event.
  Result<TaskState> ReportWithoutMutex(const std::string& node, TaskKey id, const TaskExit& exit,
                                       const std::string& name,
                                       std::shared_ptr<InFlightReport> report) HF_EXCLUDES(mu_);
  Result<TaskState> ReportWithMutex(const std::string& node, TaskKey id, const TaskExit& exit)
      HF_EXCLUDES(mu_);
  // Memory takes a committed report (nothing when it was refused, or when a
  // rebuild shows it already). Removes it from reporting_.
  void ApplyReportLocked(TaskKey id, InFlightReport& report) HF_REQUIRES(mu_);
  // Waits for the commit of task `id`'s report in flight, if any, and
  // applies it: called before releasing or moving a placed task.
  void SettleReportLocked(TaskKey id) HF_REQUIRES(mu_);
  void SettleReportsLocked() HF_REQUIRES(mu_);  // every one in flight
  // Applies the reports in flight whose commit returned, without waiting.
  void ApplyCommittedReportsLocked() HF_REQUIRES(mu_);
  // Loads jobs not ended from the store into jobs_ (RebuildLocked).
  Status LoadJobsLocked(const store::ReadTx& tx) HF_REQUIRES(mu_);
  // Whether a member of a live job counts towards its gang: placed, or
  // ended well.
  bool CountsTowardsGangLocked(TaskKey member) const HF_REQUIRES(mu_);
  // A placed member's agent holds it ready (CheckReleaseLocked follows).
  Status MemberReadyLocked(const Task& task) HF_REQUIRES(mu_);
  // Once every placed member of job `id`'s gang (min_available of them,
  // finished ones counted) is ready or running, the gang is released (a
  // "released" job event when any was held) and every member's node list
  // changes so their agents start them. Called on every ready or running
  // report and after every reconcile of the job, so a member that leaves,
  // or a write that failed, never leaves the gang held for ever.
  Status CheckReleaseLocked(uint64_t id) HF_REQUIRES(mu_);
  // What every member of a job shares in its launch environment: every
  // member's host in rank order, rank 0's, and each placed member's node
  // rank. Worked out once per job per assignment list, not per member.
  struct JobHosts {
    std::string hosts;   // HETEROFLOW_HOSTS
    std::string master;  // MASTER_ADDR
    std::unordered_map<TaskKey, int> node_rank;
  };
  JobHosts JobHostsLocked(const JobRuntime& job) const HF_REQUIRES(mu_);
  // The launch environment of a placed member (NodeAssignment::launch_env),
  // with its job's JobHostsLocked.
  std::map<std::string, std::string> LaunchEnvLocked(const Task& task, const JobHosts& hosts) const
      HF_REQUIRES(mu_);
  // Moves every unschedulable task back to the active queue.
  void RetryAllLocked() HF_REQUIRES(mu_);
  // The next task to try: from the queue whose turn it is by fair share
  // (ledger_ computed for it), priority then age within it.
  std::optional<TaskKey> PopNextLocked() HF_REQUIRES(mu_);
  // Admission (docs/QUEUES.md) of `demand` from `queue` for `tasks` (the
  // GPU models they all accept), by ledger_ as PopNextLocked computed it.
  using QueueGate = queues::Gate;
  QueueGate AdmitLocked(const std::string& queue, const queues::Demand& demand,
                        const std::vector<const Task*>& tasks) HF_REQUIRES(mu_);
  // Who a decision admitted by `gate` may evict (framework::EvictionScope).
  std::unique_ptr<framework::EvictionScope> ScopeLocked(const QueueGate& gate) const
      HF_REQUIRES(mu_);
  // `task` with its GPU models narrowed to those `gate` admitted.
  Task NarrowedLocked(const Task& task, const QueueGate& gate) const HF_REQUIRES(mu_);
  // One task's decision: admission by its queue, then the framework.
  framework::Decision ScheduleOneLocked(const Task& task, const framework::ScheduleOptions& opt)
      HF_REQUIRES(mu_);
  // Loads the stored queue tree (RebuildLocked).
  Status LoadQueuesLocked(const store::ReadTx& tx) HF_REQUIRES(mu_);
  // Tasks of queue `name` (pending, scheduled, running), and jobs.
  bool QueueHoldsWorkLocked(const std::string& name) const HF_REQUIRES(mu_);
  // InvalidArgument when `task` names no leaf queue.
  // InvalidArgument unless every task names a leaf queue (QueueTreeView).
  Status CheckQueues(const std::vector<Task>& tasks) const HF_EXCLUDES(tree_view_mu_);
  // queue_tree_ changed: Submit and CheckSubmit see the new tree from now on.
  void PublishQueueTreeLocked() HF_REQUIRES(mu_) HF_EXCLUDES(tree_view_mu_);
  // The copy of queue_tree_ submissions are checked against.
  std::shared_ptr<const queues::QueueTree> QueueTreeView() const HF_EXCLUDES(tree_view_mu_);
  Status CheckQueueLocked(const std::string& queue, const std::string& field) const
      HF_REQUIRES(mu_);
  // Backfill (docs/QUEUES.md): when a placed task will have ended at the
  // latest (INT64_MAX: no time limit).
  int64_t EndOfLocked(const PlacedTask& p, int64_t now_ms) const HF_REQUIRES(mu_);
  // The held nodes `task` (ending at its time limit) may not use, sorted.
  void HeldAgainstLocked(const Task& task, int64_t now_ms, std::vector<NodeId>& out) const
      HF_REQUIRES(mu_);
  // `task` (a gang's first member) could not be placed: when it outranks
  // the reservation held now (or holds it), plan one for it. True when the
  // reservation was made or moved to other nodes (worth an event).
  bool ReserveLocked(const Task& task, int64_t now_ms) HF_REQUIRES(mu_);
  // Stores and publishes a "reserved" event for reservation_.
  void ReservedEventLocked() HF_REQUIRES(mu_);
  // Keeps a queue event (the last kMaxQueueEvents) and publishes it.
  void QueueEventLocked(nlohmann::json event) HF_REQUIRES(mu_);
  static constexpr size_t kMaxQueueEvents = 256;
  // The preemption victims of one decision from queues other than the
  // preemptor's: reclaims, told on both queues (events) and on the victims.
  bool IsReclaimLocked(const Task& preemptor, TaskKey victim) const HF_REQUIRES(mu_);
  void Publish(const std::string& type, nlohmann::json data);
  // The node's task list changed: wakes its agent's long poll.
  void BumpNodeLocked(const std::string& node) HF_REQUIRES(mu_);
  // Marks silent agent nodes NotReady and requeues their tasks.
  void CheckHeartbeatsLocked() HF_REQUIRES(mu_);
  // The framework changed: tells on_policy_change.
  void PolicyChangedLocked() HF_REQUIRES(mu_);
  // Reads the sources of reloads StartReload began (the mutex not held), each
  // given kReloadTimeout, and installs what was read; returns each outcome.
  std::vector<Status> FinishReloads(const std::vector<framework::Framework::PendingReload>& reloads,
                                    const std::string& by) HF_EXCLUDES(mu_);

  store::Store* const store_;
  const Clock* const clock_;
  EventSink* const events_;
  const SchedulerOptions options_;

  mutable Mutex mu_;  // guards everything below up to the threads
  std::unique_ptr<framework::Framework> fw_ HF_PT_GUARDED_BY(mu_);
  framework::CycleState cycle_ HF_GUARDED_BY(mu_);  // the loop's, from cycle to cycle
  ClusterState cluster_ HF_GUARDED_BY(mu_);
  // Every pending, scheduled or running task. (Mutable, with queue_ and
  // cancelled_early_, for DrainArrivalsLocked.)
  mutable std::unordered_map<TaskKey, Task> tasks_ HF_GUARDED_BY(mu_);
  mutable framework::SchedulingQueue queue_ HF_GUARDED_BY(mu_);  // the pending tasks
  std::unordered_map<uint64_t, JobRuntime> jobs_ HF_GUARDED_BY(mu_);  // jobs not ended
  std::set<uint64_t> touched_jobs_ HF_GUARDED_BY(mu_);                // for ReconcileJobsLocked
  // Jobs whose reconcile failed (the store refused): touched again a second
  // later, not at once, so that the loop does not spin holding the mutex.
  std::set<uint64_t> jobs_to_retry_ HF_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point jobs_retry_at_ HF_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::string> node_address_ HF_GUARDED_BY(mu_);
  queues::QueueTree queue_tree_ HF_GUARDED_BY(mu_);
  queues::Ledger ledger_ HF_GUARDED_BY(mu_);                           // for the decision in hand
  std::vector<nlohmann::json> queue_events_ HF_GUARDED_BY(mu_);        // a ring, oldest first
  std::optional<queues::Reservation> reservation_ HF_GUARDED_BY(mu_);  // backfill's
  // PopNextLocked's candidates: the tree indexes of the queues with active
  // tasks, as of the queue's active_queues_version and the tree generation.
  struct FairCandidates {
    std::vector<size_t> candidates;
    uint64_t version = UINT64_MAX;
    uint64_t tree = 0;
  };
  FairCandidates fair_ HF_GUARDED_BY(mu_);
  bool refused_by_queue_ HF_GUARDED_BY(mu_) = false;  // the last decision's admission
  // Status reports committing without mu_, by task (reports.cc).
  std::unordered_map<TaskKey, std::shared_ptr<InFlightReport>> reporting_ HF_GUARDED_BY(mu_);
  // Cancelled after Submit's commit, before it queued them.
  mutable std::set<TaskKey> cancelled_early_ HF_GUARDED_BY(mu_);
  bool retry_all_ HF_GUARDED_BY(mu_) = false;  // something changed that may let waiting tasks fit
  bool usage_changed_ HF_GUARDED_BY(mu_) = false;  // a heartbeat brought new measurements
  bool stop_ HF_GUARDED_BY(mu_) = false;
  bool busy_ HF_GUARDED_BY(mu_) = false;  // a cycle is running
  uint64_t attempts_ HF_GUARDED_BY(mu_) = 0;
  std::vector<framework::PluginTiming> timings_ HF_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_retry_ HF_GUARDED_BY(mu_);
  uint64_t assign_version_ HF_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, uint64_t> node_version_ HF_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> last_heartbeat_
      HF_GUARDED_BY(mu_);
  bool requeue_held_ HF_GUARDED_BY(mu_) = false;
  std::vector<Watch> watches_ HF_GUARDED_BY(mu_);
  // A list changed or a watch arrived since WatchLoop looked.
  bool watches_dirty_ HF_GUARDED_BY(mu_) = false;
  // Set before Start (the setters above), read by the loop.
  std::chrono::milliseconds heartbeat_grace_ = std::chrono::seconds(40);
  std::chrono::milliseconds fence_deadline_ = std::chrono::seconds(30 + 10) + kFenceMargin;
  double storm_fraction_ = 0.55;

  // queue_tree_ as of its last change, for checks made without mu_ (a
  // submission's queue). Taken after mu_ when both are held.
  mutable Mutex tree_view_mu_;
  std::shared_ptr<const queues::QueueTree> tree_view_ HF_GUARDED_BY(tree_view_mu_);
  // Tasks Submit committed and has not queued (DrainArrivalsLocked). Taken
  // after mu_ when both are held.
  mutable Mutex arrivals_mu_;
  mutable std::vector<Task> arrivals_ HF_GUARDED_BY(arrivals_mu_);
  // The loop's doorbell. Between cycles the loop waits on wake_cv_ without
  // mu_: it clears wake_, looks at what it acts on (under mu_), lets go of
  // mu_ and sleeps unless wake_ was set meanwhile. Whoever changes something
  // the loop acts on then calls WakeLoop, which sets wake_: a change made
  // before the loop looked is seen by the look, one made after it rings.
  mutable Mutex wake_mu_;  // guards wake_; taken after mu_ when both are held
  mutable bool wake_ HF_GUARDED_BY(wake_mu_) = false;
  mutable std::condition_variable wake_cv_;

  std::condition_variable watch_cv_;         // wakes WatchLoop
  mutable std::condition_variable cv_;       // wakes the source watcher (Stop)
  mutable std::condition_variable idle_cv_;  // wakes WaitIdle
  std::thread thread_;
  std::thread watch_thread_;
  std::thread source_thread_;
};

}  // namespace hf::scheduler

#endif  // HF_SCHEDULER_SCHEDULER_H_
