#include "scheduler/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <utility>

#include "core/model_json.h"
#include "core/time.h"

namespace hf::scheduler {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

Allocation FromStored(const store::StoredAllocation& a, NodeId node) {
  Allocation out;
  out.node = node;
  out.cpu_milli = a.cpu_milli;
  out.memory_mib = a.memory_mib;
  out.gpus = a.gpus;
  out.rdma_device = a.rdma_device;
  return out;
}

std::string DescribeAllocation(const Allocation& a, const std::string& node) {
  std::string s = "node " + node;
  if (!a.gpus.empty()) {
    s += ", GPU";
    for (size_t i = 0; i < a.gpus.size(); ++i) {
      s += i == 0 ? ' ' : ',';
      s += std::to_string(a.gpus[i].index);
      if (a.gpus[i].milli < kWholeGpuMilli) {
        s += '(';
        s += std::to_string(a.gpus[i].milli);
        s += "m)";
      }
    }
  }
  if (!a.rdma_device.empty()) s += ", RDMA " + a.rdma_device;
  return s;
}

// The pending reason of a victim: kept the same in memory and in the store.
std::string PreemptedBy(const Task& t) {
  return "preempted by task " + std::to_string(t.key) + " (" + t.name + ", priority " +
         std::to_string(t.priority) + ")";
}

// ... of a victim whose queue borrowed what the preemptor's queue is
// guaranteed (docs/QUEUES.md, reclaim).
std::string ReclaimedBy(const Task& t, const Task& victim) {
  return "reclaimed by queue " + t.queue + " for task " + std::to_string(t.key) + " (" + t.name +
         "): queue " + victim.queue + " borrowed it";
}

}  // namespace

Scheduler::Scheduler(store::Store* store, std::unique_ptr<framework::Framework> fw,
                     const hf::Clock* clock, EventSink* events, SchedulerOptions options)
    : store_(store),
      clock_(clock),
      events_(events),
      options_(std::move(options)),
      fw_(std::move(fw)) {
  MutexLock lock(mu_);
  PublishQueueTreeLocked();  // the tree with only the root and default queues
}

Scheduler::~Scheduler() { Stop(); }

Status Scheduler::Recover() {
  MutexLock lock(mu_);
  return RebuildLocked();
}

Status Scheduler::RebuildLocked() {
  std::vector<store::NodeRecord> nodes;
  std::vector<store::StoredAllocation> allocs;
  std::vector<store::TaskRecord> live;
  HF_RETURN_IF_ERROR(store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(nodes, tx.ListNodes());
    HF_ASSIGN_OR_RETURN(allocs, tx.ListAllocations());
    for (TaskState st : {TaskState::kPending, TaskState::kScheduled, TaskState::kRunning}) {
      store::TaskFilter f;
      f.state = st;
      f.limit = 0;
      HF_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> part, tx.ListTasks(f));
      for (auto& r : part) live.push_back(std::move(r));
    }
    return Status::Ok();
  }));
  const framework::SchedulingQueue old_queue = std::move(queue_);
  // What agents measured is not in the store: it carries over.
  const ClusterState old_cluster = std::move(cluster_);
  cluster_ = ClusterState();
  tasks_.clear();
  queue_.Clear();
  node_address_.clear();
  for (const store::NodeRecord& n : nodes) {
    Result<NodeId> id = cluster_.AddNode(n.spec);
    if (!id.ok()) return Internal("stored node " + n.spec.name + ": " + id.status().message());
    cluster_.SetCondition(*id, n.condition);
    if (!n.address.empty()) node_address_[n.spec.name] = n.address;
  }
  std::unordered_map<TaskKey, const store::StoredAllocation*> by_task;
  for (const auto& a : allocs) by_task[a.task] = &a;
  for (const store::TaskRecord& r : live) {
    tasks_[r.task.key] = r.task;
    if (r.state == TaskState::kPending) {
      const std::string* reason = old_queue.Reason(r.task.key);
      EnqueueLocked(r.task, reason ? *reason : r.pending_reason);
      continue;
    }
    auto a = by_task.find(r.task.key);
    NodeId node = a == by_task.end() ? kNoNode : cluster_.FindNode(a->second->node);
    if (node == kNoNode) {
      return Internal("task " + std::to_string(r.task.key) + " is " + TaskStateName(r.state) +
                      " without an allocation on a known node");
    }
    Status s = cluster_.Bind(r.task, FromStored(*a->second, node), r.state, r.updated_at_ms);
    if (!s.ok()) {
      return Internal("stored allocation of task " + std::to_string(r.task.key) + ": " +
                      s.message());
    }
  }
  cluster_.AdoptMeasurements(old_cluster);
  for (NodeId n = 0; n < cluster_.node_count(); ++n) BumpNodeLocked(cluster_.spec(n).name);
  return store_->Read([&](const store::ReadTx& tx) HF_REQUIRES(mu_) {
    HF_RETURN_IF_ERROR(LoadQueuesLocked(tx));
    return LoadJobsLocked(tx);
  });
}

void Scheduler::EnqueueLocked(const Task& task, std::string reason) {
  queue_.Add(task.key, task.priority, std::move(reason), task.queue);
}

void Scheduler::DrainArrivalsLocked() const {
  if (QueueArrivalsLocked()) WakeLoop();
}

bool Scheduler::QueueArrivalsLocked() const {
  std::vector<Task> arrived;
  {
    MutexLock lock(arrivals_mu_);
    if (arrivals_.empty()) return false;
    arrived.swap(arrivals_);
  }
  bool queued = false;
  for (Task& t : arrived) {
    if (cancelled_early_.erase(t.key)) continue;
    // A rebuild since its commit (node change, failed commit) may have
    // loaded it from the store already, and even placed it.
    if (tasks_.count(t.key)) continue;
    queue_.Add(t.key, t.priority, "", t.queue);
    tasks_.emplace(t.key, std::move(t));
    queued = true;
  }
  return queued;
}

bool Scheduler::ArrivalsWaiting() const {
  MutexLock lock(arrivals_mu_);
  return !arrivals_.empty();
}

void Scheduler::WakeLoop() const {
  {
    MutexLock lock(wake_mu_);
    wake_ = true;
  }
  wake_cv_.notify_one();
}

void Scheduler::RetryAllLocked() {
  queue_.MoveAllToActive();
  retry_all_ = false;
  last_retry_ = Clock::now();
}

void Scheduler::Start() {
  {
    MutexLock lock(mu_);
    last_retry_ = Clock::now();
  }
  thread_ = std::thread([this] { Loop(); });
  watch_thread_ = std::thread([this] { WatchLoop(); });
  source_thread_ = std::thread([this] { SourceWatchLoop(); });
}

void Scheduler::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  WakeLoop();
  cv_.notify_all();
  watch_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (watch_thread_.joinable()) watch_thread_.join();
  if (source_thread_.joinable()) source_thread_.join();
}

void Scheduler::Loop() {
  MutexLock lock(mu_);
  while (!stop_) {
    {
      MutexLock doorbell(wake_mu_);
      wake_ = false;  // what rang so far is looked at below
    }
    QueueArrivalsLocked();
    const auto since_retry = Clock::now() - last_retry_;
    if (retry_all_ || (queue_.unschedulable_size() > 0 && since_retry >= options_.retry_interval) ||
        (usage_changed_ && since_retry >= std::chrono::seconds(1))) {
      usage_changed_ = false;
      RetryAllLocked();
    }
    if (!last_heartbeat_.empty()) CheckHeartbeatsLocked();
    if (!jobs_to_retry_.empty() && Clock::now() >= jobs_retry_at_) {
      touched_jobs_.insert(jobs_to_retry_.begin(), jobs_to_retry_.end());
      jobs_to_retry_.clear();
    }
    if (!touched_jobs_.empty()) {
      ReconcileJobsLocked();
      if (!jobs_to_retry_.empty()) jobs_retry_at_ = Clock::now() + std::chrono::seconds(1);
    }
    if (queue_.active_empty()) {
      idle_cv_.notify_all();
      // Watching agents' heartbeats wants a tick of its own.
      const auto wait = last_heartbeat_.empty()
                            ? options_.retry_interval
                            : std::min<std::chrono::milliseconds>(options_.retry_interval,
                                                                  std::chrono::seconds(1));
      const auto until = Clock::now() + wait;
      if (stop_ || retry_all_ || !touched_jobs_.empty() || ArrivalsWaiting()) continue;
      lock.Unlock();
      {
        MutexLock doorbell(wake_mu_);
        while (!wake_ && doorbell.WaitUntil(wake_cv_, until) == std::cv_status::no_timeout) {
        }
      }
      lock.Lock();
      continue;
    }
    busy_ = true;
    // What ended meanwhile is free for this cycle.
    ApplyCommittedReportsLocked();
    CycleLocked();
    busy_ = false;
    // Let API calls waiting on the mutex in between cycles.
    lock.Unlock();
    std::this_thread::yield();
    lock.Lock();
  }
  idle_cv_.notify_all();
}

void Scheduler::CycleLocked() {
  struct Outcome {
    TaskKey key;
    framework::Decision decision;
    std::string node;
  };
  std::vector<Outcome> outcomes;
  std::vector<std::pair<TaskKey, framework::Decision>> gang;
  // Backfill (docs/QUEUES.md): the reservation holds while its task waits.
  const int64_t now_ms = clock_->NowMs();
  if (reservation_ && !queue_.Reason(reservation_->task)) reservation_.reset();
  std::vector<NodeId> held;
  std::vector<TaskKey> reserved;  // tasks whose reservation is new or moved
  bool first_failure = true;      // no task has failed to start in this cycle yet
  while (outcomes.size() < options_.batch) {
    const std::optional<TaskKey> popped = PopNextLocked();
    if (!popped) break;
    const TaskKey key = *popped;
    const Task& task = tasks_.at(key);
    framework::ScheduleOptions opt;
    HeldAgainstLocked(task, now_ms, held);
    opt.excluded = held;
    refused_by_queue_ = false;
    const bool sample = options_.on_plugin_timings && options_.plugin_timing_sample > 0 &&
                        attempts_++ % options_.plugin_timing_sample == 0;
    if (sample) {
      timings_.clear();
      opt.timings = &timings_;
    }
    const auto t0 = Clock::now();
    if (task.job.id != 0) {
      // A job's member: its gang is placed in this one decision, or none of it.
      gang.clear();
      ScheduleGangLocked(task, opt, gang);
    } else {
      gang.assign(1, {key, ScheduleOneLocked(task, opt)});
    }
    const double secs =
        std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(gang.size());
    if (sample) options_.on_plugin_timings(timings_);
    if (!gang.empty() && !gang.front().second.scheduled && !refused_by_queue_) {
      // Only the cycle's first task that cannot start may take a free
      // reservation (the one ranked highest in the order tasks were tried);
      // the holder's is planned again whenever it is tried.
      const bool holder = reservation_ && reservation_->Holds(key, task.job.id);
      if ((first_failure || holder) && ReserveLocked(task, now_ms)) reserved.push_back(key);
      first_failure = false;
    } else if (reservation_ && reservation_->Holds(key, task.job.id)) {
      reservation_.reset();  // its task is placed
    } else if (reservation_) {
      for (const auto& [k, d] : gang) {
        if (!d.scheduled) continue;
        const int64_t limit = tasks_.at(k).time_limit_s;
        queues::Charge(*reservation_, d.alloc, limit > 0 ? now_ms + limit * 1000 : INT64_MAX);
      }
    }
    for (auto& [k, d] : gang) {
      if (options_.on_attempt)
        options_.on_attempt(d.scheduled ? "scheduled" : "unschedulable", secs);
      std::string node = d.scheduled ? cluster_.spec(d.alloc.node).name : "";
      outcomes.push_back({k, std::move(d), std::move(node)});
    }
  }

  // Which waiting tasks get a new reason stored, and the victims' records.
  std::vector<json> published;
  std::vector<std::string> victim_nodes;
  // The function reads what mu_ guards: it may run on another writer's
  // thread (the store's group commit), but this one holds mu_ and waits for
  // it meanwhile.
  // A victim whose agent's report is committing: that report lands first
  // (a victim that ended meanwhile fails the commit below: rebuilt, retried).
  if (!reporting_.empty()) {
    for (const Outcome& o : outcomes) {
      for (TaskKey v : o.decision.victims) SettleReportLocked(v);
    }
  }
  Status s = store_->Write([&](store::Tx& tx) HF_REQUIRES(mu_) -> Status {
    victim_nodes.clear();
    // Placements are written together (Tx::PlaceTasks), in order: those
    // gathered so far go before any victim is freed.
    std::vector<store::Tx::Placement> placed;
    const auto flush = [&]() -> Status {
      Status st = tx.PlaceTasks(placed);
      placed.clear();
      return st;
    };
    for (const Outcome& o : outcomes) {
      const Task& task = tasks_.at(o.key);
      const framework::Decision& d = o.decision;
      if (!d.scheduled) {
        if (d.reason == *queue_.Reason(o.key)) continue;
        HF_RETURN_IF_ERROR(tx.UpdateTaskState(o.key, TaskState::kPending, d.reason));
        HF_RETURN_IF_ERROR(tx.AppendTaskEvent(o.key, "unschedulable", d.reason));
        continue;
      }
      if (!d.victims.empty()) HF_RETURN_IF_ERROR(flush());
      for (TaskKey v : d.victims) {
        HF_ASSIGN_OR_RETURN(store::StoredAllocation va, tx.GetAllocation(v));
        victim_nodes.push_back(va.node);
        const bool reclaim = IsReclaimLocked(task, v);
        const std::string by = reclaim ? ReclaimedBy(task, tasks_.at(v)) : PreemptedBy(task);
        HF_RETURN_IF_ERROR(tx.DeleteAllocation(v));
        HF_RETURN_IF_ERROR(tx.UpdateTaskState(v, TaskState::kPending, by));
        HF_RETURN_IF_ERROR(tx.AppendTaskEvent(v, reclaim ? "reclaimed" : "preempted", by));
      }
      char score[64];
      if (!d.victims.empty()) {
        score[0] = '\0';  // placed by preemption: no node passed Filter as it was
      } else if (d.feasible_nodes > 1) {
        std::snprintf(score, sizeof score, " (score %.2f, best of %zu feasible nodes)", d.score,
                      d.feasible_nodes);
      } else {
        std::snprintf(score, sizeof score, " (the only feasible node)");
      }
      std::string msg = "scheduled to " + DescribeAllocation(d.alloc, o.node) + score;
      if (!d.victims.empty())
        msg += ", preempting " + std::to_string(d.victims.size()) + " task(s)";
      placed.push_back({o.key, o.node, d.alloc, std::move(msg)});
    }
    return flush();
  });
  if (!s.ok()) {
    spdlog::error("scheduler: committing {} decisions failed ({}); reloading from the store",
                  outcomes.size(), s.ToString());
    if (options_.on_commit_failure) options_.on_commit_failure(outcomes.size());
    Status r = RebuildLocked();
    if (!r.ok()) spdlog::error("scheduler: reload failed: {}", r.ToString());
    return;
  }

  for (Outcome& o : outcomes) {
    const Task& task = tasks_.at(o.key);
    framework::Decision& d = o.decision;
    if (!d.scheduled) {
      if (queue_.SetUnschedulable(o.key, d.reason)) {
        TouchJobLocked(o.key);
        published.push_back({{"action", "unschedulable"},
                             {"id", o.key},
                             {"name", task.name},
                             {"reason", d.reason}});
      }
      continue;
    }
    queue_.Remove(o.key);
    BumpNodeLocked(o.node);
    TouchJobLocked(o.key);
    for (TaskKey v : d.victims) {
      const Task& victim = tasks_.at(v);
      TouchJobLocked(v);
      const bool reclaim = IsReclaimLocked(task, v);
      EnqueueLocked(victim, reclaim ? ReclaimedBy(task, victim) : PreemptedBy(task));
      published.push_back({{"action", reclaim ? "reclaimed" : "preempted"},
                           {"id", v},
                           {"name", victim.name},
                           {"by", o.key}});
      if (reclaim) {
        QueueEventLocked({{"action", "reclaimed"},
                          {"queue", victim.queue},
                          {"by_queue", task.queue},
                          {"task", v},
                          {"task_name", victim.name},
                          {"for_task", o.key},
                          {"for_task_name", task.name}});
      }
    }
    if (!d.victims.empty() && options_.on_preemption) options_.on_preemption(d.victims.size());
    published.push_back({{"action", "scheduled"},
                         {"id", o.key},
                         {"name", task.name},
                         {"node", o.node},
                         {"allocation", AllocationToJson(d.alloc, o.node)}});
  }
  for (const std::string& n : victim_nodes) BumpNodeLocked(n);
  for (json& e : published) Publish("task", std::move(e));
  if (!reserved.empty() && reservation_ && reservation_->task == reserved.back()) {
    ReservedEventLocked();
  }
}

void Scheduler::ReservedEventLocked() {
  const queues::Reservation& r = *reservation_;
  std::string on;
  for (const auto& h : r.holds) {
    on += (on.empty() ? "" : ", ") + cluster_.spec(h.node).name + " (" + std::to_string(h.members) +
          (h.members == 1 ? " member)" : " members)");
  }
  const std::string msg = "room held on " + on + " from " + FormatTimeMs(r.start_ms) +
                          ", when the tasks there reach their time limits (backfill)";
  Status s = store_->Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.AppendTaskEvent(r.task, "reserved", msg));
    if (r.job != 0) HF_RETURN_IF_ERROR(tx.AppendJobEvent(r.job, "reserved", msg));
    return Status::Ok();
  });
  if (!s.ok()) spdlog::warn("scheduler: storing a reservation event failed: {}", s.ToString());
  Publish("task", {{"action", "reserved"},
                   {"id", r.task},
                   {"start", FormatTimeMs(r.start_ms)},
                   {"message", msg}});
}

Result<std::vector<store::TaskRecord>> Scheduler::Submit(const std::vector<Task>& tasks,
                                                         const std::string& actor) {
  std::vector<store::TaskRecord> out;
  HF_RETURN_IF_ERROR(CheckQueues(tasks));
  // The commit runs without the mutex, so scheduling and reads of the
  // framework go on while it waits for its fsync, and it joins the writes
  // of other submissions in one commit. A Cancel that lands between the
  // commit and the queueing leaves the id in cancelled_early_, and the task
  // is not queued.
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(out, tx.SubmitTasks(tasks, "by " + actor));
    return Status::Ok();
  }));
  {
    MutexLock lock(arrivals_mu_);
    for (const store::TaskRecord& r : out) arrivals_.push_back(r.task);
  }
  WakeLoop();
  for (const store::TaskRecord& r : out) {
    Publish("task", {{"action", "submitted"}, {"id", r.task.key}, {"name", r.task.name}});
  }
  return out;
}

Result<store::TaskRecord> Scheduler::Cancel(TaskKey id, const std::string& actor) {
  store::TaskRecord rec;
  {
    MutexLock lock(mu_);
    DrainArrivalsLocked();
    SettleReportLocked(id);  // a task that just ended is not cancelled
    HF_RETURN_IF_ERROR(store_->Read([&](const store::ReadTx& tx) -> Status {
      HF_ASSIGN_OR_RETURN(rec, tx.GetTask(id));
      return Status::Ok();
    }));
    if (rec.state == TaskState::kCancelled) return rec;
    if (rec.state == TaskState::kSucceeded || rec.state == TaskState::kFailed) {
      return FailedPrecondition("task " + std::to_string(id) + " already " +
                                TaskStateName(rec.state));
    }
    if (rec.task.job.id != 0) {
      return FailedPrecondition("task " + std::to_string(id) + " is a member of job " +
                                std::to_string(rec.task.job.id) + " (" + rec.task.job.name +
                                "): cancel the job, POST /api/v1/jobs/" +
                                std::to_string(rec.task.job.id) + "/cancel");
    }
    HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
      HF_RETURN_IF_ERROR(tx.DeleteAllocation(id));
      HF_RETURN_IF_ERROR(tx.UpdateTaskState(id, TaskState::kCancelled, ""));
      HF_RETURN_IF_ERROR(tx.AppendTaskEvent(id, "cancelled", "by " + actor));
      HF_ASSIGN_OR_RETURN(rec, tx.GetTask(id));
      return Status::Ok();
    }));
    if (const PlacedTask* p = cluster_.FindPlaced(id)) {
      BumpNodeLocked(cluster_.spec(p->alloc.node).name);
      HF_CHECK(cluster_.Release(id).ok());
      retry_all_ = true;
    }
    if (!tasks_.count(id)) cancelled_early_.insert(id);  // its Submit has not queued it yet
    queue_.Remove(id);
    tasks_.erase(id);
  }
  WakeLoop();
  Publish("task", {{"action", "cancelled"}, {"id", id}, {"name", rec.task.name}, {"by", actor}});
  return rec;
}

Result<bool> Scheduler::PutNode(const NodeSpec& spec, const std::string& actor) {
  bool created = false;
  {
    MutexLock lock(mu_);
    const NodeId existing = cluster_.FindNode(spec.name);
    created = existing == kNoNode;
    HF_RETURN_IF_ERROR(spec.Validate());
    if (!created) {
      // Checked on a copy of the node first, so that the store is written
      // only when memory will take it too (the store checks GPUs against
      // their grants; CPU and memory are checked by ClusterState).
      HF_RETURN_IF_ERROR(cluster_.CheckUpdate(existing, spec));
    }
    // Every change of a node's inventory is audited: a GPU may fail, and an
    // agent may only report its own node (docs/SECURITY.md).
    const json old_spec = created ? json(nullptr) : NodeSpecToJson(cluster_.spec(existing));
    const json new_spec = NodeSpecToJson(spec);
    HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
      HF_RETURN_IF_ERROR(tx.PutNode(spec));
      if (old_spec == new_spec) return Status::Ok();
      return tx.AppendAudit(actor, "nodes." + spec.name, old_spec, new_spec);
    }));
    if (created) {
      HF_CHECK(cluster_.AddNode(spec).ok());
    } else {
      // In place: the node keeps its tasks and what its agent measured, and
      // no other node is touched.
      HF_CHECK(cluster_.UpdateNode(existing, spec).ok());
      BumpNodeLocked(spec.name);
    }
    retry_all_ = true;
  }
  WakeLoop();
  Publish("node",
          {{"action", created ? "registered" : "updated"}, {"name", spec.name}, {"by", actor}});
  return created;
}

Status Scheduler::DeleteNode(const std::string& name, const std::string& actor) {
  {
    MutexLock lock(mu_);
    HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) { return tx.DeleteNode(name); }));
    // The store refuses a node with allocations, so memory has none there.
    const NodeId n = cluster_.FindNode(name);
    if (n != kNoNode) HF_CHECK(cluster_.RemoveNode(n).ok());
    node_address_.erase(name);  // a node registered again under the name is new
    BumpNodeLocked(name);
    MembersStoppedLocked(name, nullptr);
  }
  Publish("node", {{"action", "deleted"}, {"name", name}, {"by", actor}});
  return Status::Ok();
}

Status Scheduler::SetNodeCondition(const std::string& name, NodeCondition condition,
                                   const std::string& actor) {
  {
    MutexLock lock(mu_);
    const NodeId n = cluster_.FindNode(name);
    if (n == kNoNode) return NotFound("node " + name + " not found");
    if (cluster_.condition(n) == condition) return Status::Ok();
    HF_RETURN_IF_ERROR(
        store_->Write([&](store::Tx& tx) { return tx.SetNodeCondition(name, condition); }));
    cluster_.SetCondition(n, condition);
    // Ready may let waiting tasks fit; any change alters their reasons.
    retry_all_ = true;
  }
  WakeLoop();
  Publish("node", {{"action", "condition"},
                   {"name", name},
                   {"condition", NodeConditionName(condition)},
                   {"by", actor}});
  return Status::Ok();
}

Result<Scheduler::DrainOutcome> Scheduler::Drain(const std::string& name,
                                                 const std::string& actor) {
  DrainOutcome out;
  bool condition_changed = false;
  const std::string why = "evicted: node " + name + " drained by " + actor;
  {
    MutexLock lock(mu_);
    SettleReportsLocked();  // what ended meanwhile is not evicted
    const NodeId n = cluster_.FindNode(name);
    if (n == kNoNode) return NotFound("node " + name + " not found");
    // Its agent could not stop what was evicted: the tasks would run twice.
    // A silent node's tasks are queued again once fenced (CheckHeartbeats).
    if (cluster_.condition(n) == NodeCondition::kNotReady) {
      return FailedPrecondition("node " + name +
                                " is NotReady: its agent cannot stop tasks now; they are queued "
                                "again once their supervisors have stopped them (fenced)");
    }
    condition_changed = cluster_.condition(n) != NodeCondition::kDraining;
    for (TaskKey key : cluster_.TasksOn(n)) {
      (tasks_.at(key).preemptible ? out.evicted : out.waiting).push_back(key);
    }
    // A job's member leaves with its whole gang, wherever the others run.
    for (size_t i = 0, n0 = out.evicted.size(); i < n0; ++i) {
      const PlacedTask* p = cluster_.FindPlaced(out.evicted[i]);
      for (TaskKey mate : cluster_.PlacedMembers(p->job)) {
        if (std::find(out.evicted.begin(), out.evicted.end(), mate) == out.evicted.end()) {
          out.evicted.push_back(mate);
        }
      }
    }
    std::sort(out.evicted.begin(), out.evicted.end());
    std::sort(out.waiting.begin(), out.waiting.end());
    HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
      if (condition_changed)
        HF_RETURN_IF_ERROR(tx.SetNodeCondition(name, NodeCondition::kDraining));
      for (TaskKey key : out.evicted) {
        HF_RETURN_IF_ERROR(tx.DeleteAllocation(key));
        HF_RETURN_IF_ERROR(tx.UpdateTaskState(key, TaskState::kPending, why));
        HF_RETURN_IF_ERROR(tx.AppendTaskEvent(key, "evicted", why));
      }
      return Status::Ok();
    }));
    cluster_.SetCondition(n, NodeCondition::kDraining);
    for (TaskKey key : out.evicted) {
      if (const PlacedTask* p = cluster_.FindPlaced(key))
        BumpNodeLocked(cluster_.spec(p->alloc.node).name);
      HF_CHECK(cluster_.Release(key).ok());
      EnqueueLocked(tasks_.at(key), why);
      TouchJobLocked(key);
    }
    if (!out.evicted.empty()) BumpNodeLocked(name);
    retry_all_ = true;
  }
  WakeLoop();
  if (condition_changed) {
    Publish("node",
            {{"action", "condition"}, {"name", name}, {"condition", "Draining"}, {"by", actor}});
  }
  for (TaskKey key : out.evicted) {
    Publish("task", {{"action", "evicted"}, {"id", key}, {"node", name}, {"by", actor}});
  }
  return out;
}

ClusterSnapshot Scheduler::Snapshot(bool with_placed) const {
  MutexLock lock(mu_);
  DrainArrivalsLocked();
  ClusterSnapshot snap{cluster_, fw_->CurrentPolicy(), {}, {}};
  // Every waiting task, active or unschedulable, in queue order.
  for (TaskKey key : queue_.Ordered()) snap.pending.push_back(tasks_.at(key));
  if (!with_placed) return snap;
  std::vector<std::pair<int64_t, TaskKey>> order;
  for (const auto& [key, task] : tasks_) {
    if (cluster_.FindPlaced(key)) order.emplace_back(-int64_t{task.priority}, key);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [np, key] : order) snap.placed.push_back(tasks_.at(key));
  return snap;
}

size_t Scheduler::active_count() const {
  MutexLock lock(mu_);
  DrainArrivalsLocked();
  return queue_.active_size();
}

size_t Scheduler::unschedulable_count() const {
  MutexLock lock(mu_);
  DrainArrivalsLocked();
  return queue_.unschedulable_size();
}

std::vector<std::tuple<std::string, int64_t, int64_t>> Scheduler::GpuAllocation() const {
  MutexLock lock(mu_);
  std::vector<std::tuple<std::string, int64_t, int64_t>> out;
  out.reserve(cluster_.node_count());
  for (NodeId n = 0; n < cluster_.node_count(); ++n) {
    out.emplace_back(cluster_.spec(n).name, cluster_.used_gpu_milli(n),
                     cluster_.total_gpu_milli(n));
  }
  return out;
}

std::map<std::string, NodeUsage> Scheduler::MeasuredUsage() const {
  MutexLock lock(mu_);
  std::map<std::string, NodeUsage> out;
  for (NodeId n = 0; n < cluster_.node_count(); ++n) {
    if (cluster_.usage(n).reported_at_ms > 0) out.emplace(cluster_.spec(n).name, cluster_.usage(n));
  }
  return out;
}

bool Scheduler::WaitIdle(std::chrono::milliseconds timeout) const {
  MutexLock lock(mu_);
  const auto until = Clock::now() + timeout;
  DrainArrivalsLocked();
  while (!(stop_ || (queue_.active_empty() && !busy_ && !retry_all_))) {
    const std::cv_status waited = lock.WaitUntil(idle_cv_, until);
    DrainArrivalsLocked();
    if (waited == std::cv_status::timeout) {
      return stop_ || (queue_.active_empty() && !busy_ && !retry_all_);
    }
  }
  return true;
}

void Scheduler::BumpNodeLocked(const std::string& node) {
  // Wall-clock microseconds at least, so that versions keep growing across
  // a restart of the server: an agent orders them (Agent::taken_).
  const auto wall = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  assign_version_ =
      std::max(assign_version_ + 1, static_cast<uint64_t>(std::max<int64_t>(wall, 0)));
  node_version_[node] = assign_version_;
  if (!watches_.empty()) {
    watches_dirty_ = true;
    watch_cv_.notify_one();
  }
}

Status Scheduler::Heartbeat(const std::string& node, const std::optional<NodeUsage>& usage) {
  bool back = false;
  {
    MutexLock lock(mu_);
    const NodeId n = cluster_.FindNode(node);
    if (n == kNoNode) return NotFound("node " + node + " is not registered");
    if (usage) {
      NodeUsage u = *usage;
      u.reported_at_ms = clock_->NowMs();
      HF_RETURN_IF_ERROR(cluster_.ReportUsage(n, u));
      if (usage->running_tasks) MembersStoppedLocked(node, &*usage->running_tasks);
      // Measured load changed: waiting tasks may now pass the thresholds. At
      // most one retry a second for this, however many agents report.
      usage_changed_ = true;
    }
    last_heartbeat_[node] = Clock::now();
    if (cluster_.condition(n) == NodeCondition::kNotReady) {
      HF_RETURN_IF_ERROR(store_->Write(
          [&](store::Tx& tx) { return tx.SetNodeCondition(node, NodeCondition::kReady); }));
      cluster_.SetCondition(n, NodeCondition::kReady);
      back = true;
    }
  }
  WakeLoop();
  if (back) Publish("node", {{"action", "condition"}, {"name", node}, {"condition", "Ready"}});
  return Status::Ok();
}

uint64_t Scheduler::NodeVersion(const std::string& node) const {
  MutexLock lock(mu_);
  return NodeVersionLocked(node);
}

uint64_t Scheduler::NodeVersionLocked(const std::string& node) const {
  auto it = node_version_.find(node);
  return it == node_version_.end() ? 0 : it->second;
}

Result<Scheduler::AssignmentList> Scheduler::AssignmentsLocked(const std::string& node) const {
  const NodeId n = cluster_.FindNode(node);
  if (n == kNoNode) return NotFound("node " + node + " is not registered");
  std::vector<NodeAssignment> out;
  std::unordered_map<uint64_t, JobHosts> hosts;  // per job on this node
  for (TaskKey key : cluster_.TasksOn(n)) {
    const PlacedTask* p = cluster_.FindPlaced(key);
    const Task& task = tasks_.at(key);
    NodeAssignment a{task, p->state, p->alloc, {}, false};
    if (auto job = jobs_.find(task.job.id); task.job.id != 0 && job != jobs_.end()) {
      auto h = hosts.find(task.job.id);
      if (h == hosts.end()) h = hosts.emplace(task.job.id, JobHostsLocked(job->second)).first;
      a.launch_env = LaunchEnvLocked(task, h->second);
      a.hold = p->state == TaskState::kScheduled && !job->second.released;
    }
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](const NodeAssignment& a, const NodeAssignment& b) {
    return a.task.key < b.task.key;
  });
  return AssignmentList(NodeVersionLocked(node), std::move(out));
}

void Scheduler::WatchAssignments(const std::string& node, uint64_t since,
                                 std::chrono::milliseconds wait, AssignmentWatch done) {
  Result<AssignmentList> now = NotFound("");
  {
    MutexLock lock(mu_);
    const bool answer_now =
        stop_ || NodeVersionLocked(node) != since || cluster_.FindNode(node) == kNoNode;
    if (!answer_now) {
      watches_.push_back({node, since, Clock::now() + wait, std::move(done)});
      watches_dirty_ = true;
      watch_cv_.notify_one();
      return;
    }
    now = AssignmentsLocked(node);
  }
  done(std::move(now));
}

Result<Scheduler::AssignmentList> Scheduler::WaitAssignments(const std::string& node,
                                                             uint64_t since,
                                                             std::chrono::milliseconds wait) {
  auto promise = std::make_shared<std::promise<Result<AssignmentList>>>();
  std::future<Result<AssignmentList>> answer = promise->get_future();
  WatchAssignments(node, since, wait,
                   [promise](Result<AssignmentList> r) { promise->set_value(std::move(r)); });
  return answer.get();
}

size_t Scheduler::watch_count() const {
  MutexLock lock(mu_);
  return watches_.size();
}

void Scheduler::WatchLoop() {
  MutexLock lock(mu_);
  while (true) {
    const auto now = Clock::now();
    std::vector<std::pair<AssignmentWatch, Result<AssignmentList>>> due;
    auto next = now + std::chrono::hours(1);
    // Swap-and-pop keeps the scan linear; watches have no order to keep.
    for (size_t i = 0; i < watches_.size();) {
      Watch& w = watches_[i];
      if (stop_ || NodeVersionLocked(w.node) != w.since || w.deadline <= now) {
        due.emplace_back(std::move(w.done), AssignmentsLocked(w.node));
        if (i + 1 != watches_.size()) w = std::move(watches_.back());
        watches_.pop_back();
      } else {
        next = std::min(next, w.deadline);
        ++i;
      }
    }
    watches_dirty_ = false;
    if (!due.empty()) {
      lock.Unlock();
      for (auto& [done, list] : due) done(std::move(list));
      due.clear();
      lock.Lock();
      continue;  // watches may have changed meanwhile
    }
    if (stop_) return;
    while (!stop_ && !watches_dirty_ &&
           lock.WaitUntil(watch_cv_, next) == std::cv_status::no_timeout) {
    }
  }
}

bool Scheduler::requeue_held() const {
  MutexLock lock(mu_);
  return requeue_held_;
}

void Scheduler::CheckHeartbeatsLocked() {
  const auto now = Clock::now();
  size_t watched = 0;
  size_t silent_nodes = 0;
  for (const auto& [node, seen] : last_heartbeat_) {
    if (cluster_.FindNode(node) == kNoNode) continue;  // deleted
    ++watched;
    if (now - seen >= heartbeat_grace_) ++silent_nodes;
  }
  const bool storm =
      silent_nodes >= kStormMinNodes &&
      static_cast<double>(silent_nodes) > storm_fraction_ * static_cast<double>(watched);
  if (storm != requeue_held_) {
    requeue_held_ = storm;
    const std::string detail =
        std::to_string(silent_nodes) + " of " + std::to_string(watched) + " nodes silent" +
        (storm ? ": the fault is likely the server's or the network's; their tasks stay where "
                 "they are until enough of the nodes are back"
               : "; tasks of nodes still silent are queued again once fenced");
    spdlog::warn("scheduler: requeues {}: {}", storm ? "held" : "resumed", detail);
    Publish("node", {{"action", storm ? "requeue_held" : "requeue_resumed"},
                     {"silent", silent_nodes},
                     {"nodes", watched},
                     {"detail", detail}});
  }
  for (auto& [node, seen] : last_heartbeat_) {
    const auto silent = now - seen;
    if (silent < heartbeat_grace_) continue;
    const NodeId n = cluster_.FindNode(node);
    if (n == kNoNode) continue;
    const bool marking = cluster_.condition(n) != NodeCondition::kNotReady;
    if (requeue_held_ && !marking) continue;
    // A copy that may still run there is stopped by its supervisor by now.
    const bool fenced = silent >= fence_deadline_;
    if (fenced) MembersStoppedLocked(node, nullptr);  // its copies are stopped by now
    std::vector<TaskKey> failing, requeuing;
    const auto collect = [&]() HF_REQUIRES(mu_) {
      failing.clear();
      requeuing.clear();
      for (TaskKey key : requeue_held_ ? std::vector<TaskKey>() : cluster_.TasksOn(n)) {
        if (!tasks_.at(key).requeue_on_node_loss) {
          failing.push_back(key);  // at once (or once a storm that held it passed)
        } else if (fenced) {
          requeuing.push_back(key);
        }
      }
    };
    collect();
    if (!failing.empty() || !requeuing.empty()) {
      // What ended meanwhile is neither failed nor queued again.
      if (!reporting_.empty()) {
        SettleReportsLocked();
        collect();
      }
    }
    if (!marking && failing.empty() && requeuing.empty()) continue;
    const std::string why = "node " + node + " stopped sending heartbeats";
    const std::string not_requeued = why + "; not queued again (requeue_on_node_loss is false)";
    const std::string requeued = why + "; queued again once its copy there was stopped (fenced)";
    Status s = store_->Write([&, &node = node](store::Tx& tx) -> Status {
      if (marking) HF_RETURN_IF_ERROR(tx.SetNodeCondition(node, NodeCondition::kNotReady));
      for (TaskKey key : failing) {
        HF_RETURN_IF_ERROR(tx.DeleteAllocation(key));
        HF_RETURN_IF_ERROR(tx.UpdateTaskState(key, TaskState::kFailed, ""));
        HF_RETURN_IF_ERROR(tx.AppendTaskEvent(key, "lost", not_requeued));
      }
      for (TaskKey key : requeuing) {
        HF_RETURN_IF_ERROR(tx.DeleteAllocation(key));
        HF_RETURN_IF_ERROR(tx.UpdateTaskState(key, TaskState::kPending, why));
        HF_RETURN_IF_ERROR(tx.AppendTaskEvent(key, "lost", requeued));
      }
      return Status::Ok();
    });
    if (!s.ok()) {
      spdlog::error("scheduler: handling silent node {} failed: {}", node, s.ToString());
      continue;
    }
    if (marking) cluster_.SetCondition(n, NodeCondition::kNotReady);
    for (TaskKey key : failing) {
      HF_CHECK(cluster_.Release(key).ok());
      TouchJobLocked(key);
      tasks_.erase(key);
      Publish("task", {{"action", "lost"}, {"id", key}, {"node", node}, {"requeued", false}});
      Publish("task",
              {{"action", "failed"}, {"id", key}, {"node", node}, {"detail", not_requeued}});
    }
    for (TaskKey key : requeuing) {
      HF_CHECK(cluster_.Release(key).ok());
      Publish("task", {{"action", "lost"}, {"id", key}, {"node", node}, {"requeued", true}});
      EnqueueLocked(tasks_.at(key), why);
      TouchJobLocked(key);
    }
    if (!failing.empty() || !requeuing.empty()) BumpNodeLocked(node);
    if (!requeuing.empty()) retry_all_ = true;
    if (marking)
      Publish("node", {{"action", "condition"}, {"name", node}, {"condition", "NotReady"}});
  }
}

void Scheduler::Publish(const std::string& type, json data) {
  if (events_) events_->Publish(type, std::move(data), clock_->NowMs());
}

}  // namespace hf::scheduler
