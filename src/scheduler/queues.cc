// The scheduler's part in queues (docs/QUEUES.md): the tree, fair share
// among queues, admission before placement, and reclaim.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <tuple>

#include "scheduler/scheduler.h"

namespace hf::scheduler {
namespace {

using nlohmann::json;

}  // namespace

std::optional<TaskKey> Scheduler::PopNextLocked() {
  if (queue_tree_.trivial()) return queue_.Pop();
  ledger_.Compute(queue_tree_, cluster_);
  // The candidates (tree indexes of the queues with active tasks) change only
  // when a queue gains its first active task or loses its last.
  if (fair_.version != queue_.active_queues_version() || fair_.tree != queue_tree_.generation()) {
    fair_.candidates.clear();
    for (const std::string_view name : queue_.ActiveQueues()) {
      const size_t q = queue_tree_.Find(name);
      // A task of a queue deleted under it: tried at once, and told why.
      if (q == queues::QueueTree::kNone) return queue_.Pop(std::string(name));
      fair_.candidates.push_back(q);
    }
    fair_.version = queue_.active_queues_version();
    fair_.tree = queue_tree_.generation();
  }
  if (fair_.candidates.size() <= 1) return queue_.Pop();
  return queue_.Pop(queue_tree_.spec(ledger_.PickFair(fair_.candidates)).name);
}

Scheduler::QueueGate Scheduler::AdmitLocked(const std::string& queue, const queues::Demand& demand,
                                            const std::vector<const Task*>& tasks) {
  return queues::Admit(queue_tree_, ledger_, cluster_, queue, demand, tasks);
}

std::unique_ptr<framework::EvictionScope> Scheduler::ScopeLocked(const QueueGate& gate) const {
  return queues::Scope(queue_tree_, ledger_, cluster_, gate);
}

Task Scheduler::NarrowedLocked(const Task& task, const QueueGate& gate) const {
  return queues::Narrowed(cluster_, task, gate);
}

framework::Decision Scheduler::ScheduleOneLocked(const Task& task,
                                                 const framework::ScheduleOptions& opt) {
  if (queue_tree_.trivial()) return fw_->Schedule(task, cluster_, cycle_, opt);
  queues::Demand demand;
  demand.Add(task.requests);
  const QueueGate gate = AdmitLocked(task.queue, demand, {&task});
  refused_by_queue_ = !gate.admitted;
  if (!gate.admitted) {
    framework::Decision d;
    d.reason = gate.reason;
    return d;
  }
  const std::unique_ptr<framework::EvictionScope> scope = ScopeLocked(gate);
  framework::ScheduleOptions o = opt;
  o.eviction = scope.get();
  if (gate.narrowed) return fw_->Schedule(NarrowedLocked(task, gate), cluster_, cycle_, o);
  return fw_->Schedule(task, cluster_, cycle_, o);
}

int64_t Scheduler::EndOfLocked(const PlacedTask& p, int64_t now_ms) const {
  auto it = tasks_.find(p.key);
  if (it == tasks_.end() || it->second.time_limit_s <= 0) return INT64_MAX;
  const int64_t start = p.state == TaskState::kRunning ? p.started_at_ms : now_ms;
  return start + it->second.time_limit_s * 1000;
}

void Scheduler::HeldAgainstLocked(const Task& task, int64_t now_ms,
                                  std::vector<NodeId>& out) const {
  out.clear();
  if (!reservation_ || reservation_->Holds(task.key, task.job.id)) return;
  const int64_t end = task.time_limit_s > 0 ? now_ms + task.time_limit_s * 1000 : INT64_MAX;
  queues::HeldAgainst(*reservation_, task.requests, end, out);
  std::sort(out.begin(), out.end());
}

bool Scheduler::ReserveLocked(const Task& task, int64_t now_ms) {
  if (reservation_ && reservation_->task != task.key && !reservation_->TakenOverBy(task.priority)) {
    return false;
  }
  // One member's shape (the largest of those waiting) and how many must go.
  queues::GangNeed g{task.requests, 1};
  if (auto j = jobs_.find(task.job.id); task.job.id != 0 && j != jobs_.end()) {
    int32_t placed = 0;
    std::vector<const Requests*> waiting;
    for (TaskKey m : j->second.members) {
      if (CountsTowardsGangLocked(m)) {
        ++placed;
      } else {
        waiting.push_back(&tasks_.at(m).requests);
      }
    }
    g = queues::NeedOf(task.requests, waiting, task.job.min_available, placed);
  }
  std::optional<queues::Reservation> plan = queues::PlanReservation(
      cluster_, task, g.member, g.need, now_ms,
      [&](const PlacedTask& p) HF_REQUIRES(mu_) { return EndOfLocked(p, now_ms); });
  if (!plan) {
    if (reservation_ && reservation_->task == task.key) reservation_.reset();
    return false;
  }
  const auto nodes = [](const queues::Reservation& r) {
    std::vector<NodeId> n;
    for (const auto& h : r.holds) n.push_back(h.node);
    return n;
  };
  const bool changed = !reservation_ || reservation_->task != plan->task ||
                       nodes(*reservation_) != nodes(*plan) ||
                       std::llabs(reservation_->start_ms - plan->start_ms) > 1000;
  reservation_ = std::move(plan);
  return changed;
}

std::optional<Scheduler::ReservationView> Scheduler::CurrentReservation() const {
  MutexLock lock(mu_);
  if (!reservation_) return std::nullopt;
  ReservationView v{reservation_->task, reservation_->job, reservation_->start_ms, {}};
  for (const auto& h : reservation_->holds) {
    v.nodes.emplace_back(cluster_.spec(h.node).name, h.members);
  }
  return v;
}

bool Scheduler::IsReclaimLocked(const Task& preemptor, TaskKey victim) const {
  auto it = tasks_.find(victim);
  return !queue_tree_.trivial() && it != tasks_.end() && it->second.queue != preemptor.queue;
}

void Scheduler::QueueEventLocked(json event) {
  event["time_ms"] = clock_->NowMs();
  if (queue_events_.size() >= kMaxQueueEvents) queue_events_.erase(queue_events_.begin());
  queue_events_.push_back(event);
  Publish("queue", std::move(event));
}

Status Scheduler::LoadQueuesLocked(const store::ReadTx& tx) {
  HF_ASSIGN_OR_RETURN(std::vector<json> stored, tx.ListQueues());
  std::vector<queues::QueueSpec> specs;
  for (const json& j : stored) {
    Result<queues::QueueSpec> s = queues::QueueSpecFromJson(j);
    if (!s.ok()) return Internal("stored queue: " + s.status().message());
    specs.push_back(std::move(*s));
  }
  Result<queues::QueueTree> tree = queues::QueueTree::Build(std::move(specs));
  if (!tree.ok()) return Internal("stored queues: " + tree.status().message());
  queue_tree_ = std::move(*tree);
  PublishQueueTreeLocked();
  return Status::Ok();
}

bool Scheduler::QueueHoldsWorkLocked(const std::string& name) const {
  for (const auto& [key, t] : tasks_) {
    if (t.queue == name) return true;
  }
  for (const auto& [id, job] : jobs_) {
    if (job.spec.queue == name) return true;
  }
  return false;
}

namespace {

// InvalidArgument, naming `field`, unless `queue` is a leaf of `tree`.
Status CheckLeafQueue(const queues::QueueTree& tree, const std::string& queue,
                      const std::string& field) {
  const size_t q = tree.Find(queue);
  if (q == queues::QueueTree::kNone) {
    return InvalidArgument(field + ": no queue named \"" + queue + "\" (GET /api/v1/queues)");
  }
  if (!tree.leaf(q)) {
    return InvalidArgument(field + ": queue \"" + queue +
                           "\" has child queues; submit to one of its leaves");
  }
  return Status::Ok();
}

}  // namespace

Status Scheduler::CheckQueueLocked(const std::string& queue, const std::string& field) const {
  return CheckLeafQueue(queue_tree_, queue, field);
}

void Scheduler::PublishQueueTreeLocked() {
  auto view = std::make_shared<const queues::QueueTree>(queue_tree_);
  MutexLock lock(tree_view_mu_);
  tree_view_ = std::move(view);
}

std::shared_ptr<const queues::QueueTree> Scheduler::QueueTreeView() const {
  MutexLock lock(tree_view_mu_);
  return tree_view_;
}

Status Scheduler::CheckQueues(const std::vector<Task>& tasks) const {
  const std::shared_ptr<const queues::QueueTree> tree = QueueTreeView();
  for (size_t i = 0; i < tasks.size(); ++i) {
    HF_RETURN_IF_ERROR(CheckLeafQueue(
        *tree, tasks[i].queue, tasks.size() == 1 ? "queue" : "tasks[" + std::to_string(i) + "].queue"));
  }
  return Status::Ok();
}

Status Scheduler::CheckSubmit(const std::string& queue, const std::string& token,
                              const std::string& role) const {
  const std::shared_ptr<const queues::QueueTree> tree = QueueTreeView();
  HF_RETURN_IF_ERROR(CheckLeafQueue(*tree, queue, "queue"));
  const queues::QueueSpec& s = tree->spec(tree->Find(queue));
  if (s.roles.empty() && s.tokens.empty()) return Status::Ok();
  if (role == "admin" || std::count(s.roles.begin(), s.roles.end(), role) ||
      std::count(s.tokens.begin(), s.tokens.end(), token)) {
    return Status::Ok();
  }
  return PermissionDenied("queue: token \"" + token + "\" (role " + role +
                          ") may not submit to queue \"" + queue + "\"; its submitters are set");
}

Scheduler::QueuesView Scheduler::Queues() const {
  MutexLock lock(mu_);
  DrainArrivalsLocked();
  QueuesView v;
  for (size_t m = 0; m < cluster_.model_count(); ++m) v.models.push_back(cluster_.model_name(m));
  queues::Ledger ledger;
  ledger.Compute(queue_tree_, cluster_);
  const size_t n = queue_tree_.size();
  std::vector<size_t> pending(n), admitted(n), running(n);
  for (const auto& [key, t] : tasks_) {
    size_t q = queue_tree_.Find(t.queue);
    const PlacedTask* p = cluster_.FindPlaced(key);
    std::vector<size_t>& count = !p                                ? pending
                                 : p->state == TaskState::kRunning ? running
                                                                   : admitted;
    for (; q != queues::QueueTree::kNone; q = queue_tree_.parent(q)) ++count[q];
  }
  for (size_t i = 0; i < n; ++i) {
    QueueStatus s;
    s.spec = queue_tree_.spec(i);
    s.leaf = queue_tree_.leaf(i);
    s.used = ledger.used(i);
    if (i > 0) {
      s.borrowed = ledger.Borrowed(i);
      s.beyond_share = ledger.BeyondShare(i);
    }
    s.share = ledger.Share(i);
    s.pending = pending[i];
    s.admitted = admitted[i];
    s.running = running[i];
    v.queues.push_back(std::move(s));
  }
  v.capacity = ledger.capacity();
  v.events = queue_events_;
  return v;
}

std::vector<Scheduler::WaitingTask> Scheduler::QueueWaiting(const std::string& queue,
                                                            size_t limit) const {
  MutexLock lock(mu_);
  DrainArrivalsLocked();
  std::vector<WaitingTask> out;
  for (TaskKey key : queue_.Ordered()) {
    const Task& t = tasks_.at(key);
    if (t.queue != queue) continue;
    const std::string* reason = queue_.Reason(key);
    out.push_back({key, t.name, t.job.id, t.priority, out.size() + 1, reason ? *reason : ""});
    if (out.size() >= limit) break;
  }
  return out;
}

Result<queues::QueueSpec> Scheduler::PutQueue(const queues::QueueSpec& spec, bool create,
                                              const std::string& actor) {
  {
    MutexLock lock(mu_);
    DrainArrivalsLocked();
    std::vector<queues::QueueSpec> specs = queue_tree_.specs();
    auto it = std::find_if(specs.begin(), specs.end(),
                           [&](const queues::QueueSpec& q) { return q.name == spec.name; });
    if (create && it != specs.end()) return AlreadyExists("queue " + spec.name + " exists");
    if (!create && it == specs.end()) return NotFound("no queue named " + spec.name);
    const json old = it == specs.end() ? json(nullptr) : queues::QueueSpecToJson(*it);
    if (it == specs.end()) {
      specs.push_back(spec);
    } else {
      *it = spec;
    }
    HF_ASSIGN_OR_RETURN(queues::QueueTree tree, queues::QueueTree::Build(std::move(specs)));
    for (const queues::Quota* quota : {&spec.guaranteed, &spec.max}) {
      for (const auto& [model, milli] : quota->gpu_milli) {
        if (model == queues::kEveryOtherModel || cluster_.MaskOf({model}) != 0) continue;
        std::string known;
        for (size_t m = 0; m < cluster_.model_count(); ++m) {
          known += (known.empty() ? "" : ", ") + cluster_.model_name(m);
        }
        return InvalidArgument("queues." + spec.name +
                               (quota == &spec.guaranteed ? ".guaranteed" : ".max") + ".gpu." +
                               model + ": no node has GPU model \"" + model +
                               "\" (the cluster has " + (known.empty() ? "no GPUs" : known) + ")");
      }
    }
    if (!spec.parent.empty()) {
      const size_t p = queue_tree_.Find(spec.parent);
      if (p != queues::QueueTree::kNone && queue_tree_.leaf(p) &&
          QueueHoldsWorkLocked(spec.parent)) {
        return Conflict("queues." + spec.name + ".parent: queue " + spec.parent +
                        " holds work, and only leaves hold work; give " + spec.name +
                        " another parent, or wait for that work to end");
      }
    }
    const json now = queues::QueueSpecToJson(spec);
    HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
      HF_RETURN_IF_ERROR(tx.PutQueue(spec.name, now));
      return tx.AppendAudit(actor, "queues." + spec.name, old, now);
    }));
    queue_tree_ = std::move(tree);
    PublishQueueTreeLocked();
    QueueEventLocked(
        {{"action", create ? "created" : "changed"}, {"queue", spec.name}, {"by", actor}});
    RetryAllLocked();
  }
  WakeLoop();
  return spec;
}

Status Scheduler::DeleteQueue(const std::string& name, const std::string& actor) {
  MutexLock lock(mu_);
  DrainArrivalsLocked();
  const size_t q = queue_tree_.Find(name);
  if (q == queues::QueueTree::kNone) return NotFound("no queue named " + name);
  if (name == queues::kRoot || name == kDefaultQueue) {
    return Conflict("queue " + name + " is always there; it cannot be deleted");
  }
  if (!queue_tree_.leaf(q)) {
    return Conflict("queue " + name + " has child queues; delete them first");
  }
  if (QueueHoldsWorkLocked(name)) {
    return Conflict("queue " + name +
                    " holds work (pending, placed or running tasks, or live jobs); "
                    "cancel it or wait for it to end");
  }
  std::vector<queues::QueueSpec> specs = queue_tree_.specs();
  const json old = queues::QueueSpecToJson(specs[q]);
  specs.erase(specs.begin() + std::ptrdiff_t(q));
  HF_ASSIGN_OR_RETURN(queues::QueueTree tree, queues::QueueTree::Build(std::move(specs)));
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    HF_RETURN_IF_ERROR(tx.DeleteQueue(name));
    return tx.AppendAudit(actor, "queues." + name, old, nullptr);
  }));
  queue_tree_ = std::move(tree);
  PublishQueueTreeLocked();
  QueueEventLocked({{"action", "deleted"}, {"queue", name}, {"by", actor}});
  return Status::Ok();
}

Status Scheduler::SeedQueues(const std::vector<queues::QueueSpec>& specs,
                             const std::string& actor) {
  MutexLock lock(mu_);
  bool stored = false;
  HF_RETURN_IF_ERROR(store_->Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<json> have, tx.ListQueues());
    stored = !have.empty();
    return Status::Ok();
  }));
  if (stored || specs.empty()) return Status::Ok();
  HF_ASSIGN_OR_RETURN(queues::QueueTree tree, queues::QueueTree::Build(specs));
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    for (const queues::QueueSpec& s : specs) {
      const json j = queues::QueueSpecToJson(s);
      HF_RETURN_IF_ERROR(tx.PutQueue(s.name, j));
      HF_RETURN_IF_ERROR(tx.AppendAudit(actor, "queues." + s.name, nullptr, j));
    }
    return Status::Ok();
  }));
  queue_tree_ = std::move(tree);
  PublishQueueTreeLocked();
  RetryAllLocked();
  return Status::Ok();
}

}  // namespace hf::scheduler
