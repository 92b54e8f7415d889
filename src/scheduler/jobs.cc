// Jobs: submission, gang placement, the reconcile of a job's state with its
// members', failure policy and cancellation (docs/JOBS.md).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "scheduler/scheduler.h"

namespace hf::scheduler {

using nlohmann::json;

Result<store::JobRecord> Scheduler::SubmitJob(const JobSpec& spec, const std::string& actor) {
  store::JobRecord job;
  std::vector<store::TaskRecord> members;
  {
    MutexLock lock(mu_);
    HF_RETURN_IF_ERROR(CheckQueueLocked(spec.queue, "queue"));
  }
  HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
    members.clear();
    HF_ASSIGN_OR_RETURN(const uint64_t id, tx.InsertJob(spec));
    HF_RETURN_IF_ERROR(tx.AppendJobEvent(id, "submitted",
                                         "by " + actor + ": " + std::to_string(spec.replicas()) +
                                             " members, gang of " +
                                             std::to_string(spec.gang_size())));
    for (const Task& t : spec.Members(id)) {
      HF_ASSIGN_OR_RETURN(store::TaskRecord r,
                          tx.SubmitTask(t, "by " + actor + " (job " + spec.name + ", rank " +
                                               std::to_string(t.job.rank) + ")"));
      members.push_back(std::move(r));
    }
    HF_ASSIGN_OR_RETURN(job, tx.GetJob(id));
    return Status::Ok();
  }));
  {
    MutexLock lock(mu_);
    // A rebuild in between (node change, failed commit) may have loaded the
    // job or some members; a CancelJob in between cancelled them all.
    bool cancelled = false;
    for (const store::TaskRecord& r : members) cancelled |= cancelled_early_.erase(r.task.key) > 0;
    if (!cancelled) {
      if (!jobs_.count(job.id)) {
        JobRuntime rt{job.spec, {}, JobState::kPending, 0, 0};
        for (const store::TaskRecord& r : members) rt.members.push_back(r.task.key);
        jobs_.emplace(job.id, std::move(rt));
      }
      for (const store::TaskRecord& r : members) {
        if (tasks_.count(r.task.key)) continue;
        tasks_[r.task.key] = r.task;
        EnqueueLocked(r.task, "");
      }
    }
  }
  WakeLoop();
  Publish("job", {{"action", "submitted"}, {"id", job.id}, {"name", job.spec.name}});
  return job;
}

Status Scheduler::SetNodeAddress(const std::string& node, const std::string& address) {
  MutexLock lock(mu_);
  auto it = node_address_.find(node);
  if (it != node_address_.end() && it->second == address) return Status::Ok();
  HF_RETURN_IF_ERROR(
      store_->Write([&](store::Tx& tx) { return tx.SetNodeAddress(node, address); }));
  node_address_[node] = address;
  return Status::Ok();
}

void Scheduler::TouchJobLocked(TaskKey key) {
  auto it = tasks_.find(key);
  if (it != tasks_.end() && it->second.job.id != 0) touched_jobs_.insert(it->second.job.id);
}

Status Scheduler::LoadJobsLocked(const store::ReadTx& tx) {
  // An in-process rebuild keeps what agents said about the start barrier.
  std::unordered_map<uint64_t, JobRuntime> old;
  old.swap(jobs_);
  HF_ASSIGN_OR_RETURN(std::vector<store::JobRecord> all, tx.ListJobs());
  for (store::JobRecord& j : all) {
    if (IsFinal(j.state)) continue;
    JobRuntime rt{std::move(j.spec), {}, j.state, j.restarts, 0};
    if (auto o = old.find(j.id); o != old.end()) {
      rt.ready = std::move(o->second.ready);
      rt.released = o->second.released;
    }
    store::TaskFilter f;
    f.job = j.id;
    f.limit = 0;
    HF_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> members, tx.ListTasks(f));
    for (const store::TaskRecord& m : members) rt.members.push_back(m.task.key);
    AssignMasterPortLocked(jobs_.emplace(j.id, std::move(rt)).first->second);
    // A crash between a member's change and its job's: looked at again.
    touched_jobs_.insert(j.id);
  }
  return Status::Ok();
}

void Scheduler::ScheduleGangLocked(const Task& first, const framework::ScheduleOptions& opt,
                                   std::vector<std::pair<TaskKey, framework::Decision>>& out) {
  auto it = jobs_.find(first.job.id);
  if (it == jobs_.end()) {
    out.emplace_back(first.key, ScheduleOneLocked(first, opt));
    return;
  }
  std::vector<const Task*> waiting;
  size_t placed = 0;
  for (TaskKey m : it->second.members) {
    if (m == first.key || queue_.Claim(m)) {
      waiting.push_back(&tasks_.at(m));
    } else if (CountsTowardsGangLocked(m)) {
      ++placed;
    }
  }
  const size_t gang = static_cast<size_t>(first.job.min_available);
  const size_t need = placed >= gang ? 0 : gang - placed;
  framework::GangOptions how = framework::GangOptions::For(it->second.spec);
  // Members placed already hold the gang's GPU model: the others follow.
  for (TaskKey m : it->second.members) {
    const PlacedTask* p = cluster_.FindPlaced(m);
    if (!p || p->alloc.gpus.empty()) continue;
    how.gpu_model = cluster_.GpuModelOf(p->alloc);
    break;
  }
  // The gang is admitted whole (docs/QUEUES.md), on the GPU models its
  // queue may use for all of it.
  framework::ScheduleOptions o = opt;
  std::unique_ptr<framework::EvictionScope> scope;
  std::vector<Task> narrowed;
  if (!queue_tree_.trivial()) {
    queues::Demand demand;
    for (const Task* m : waiting) demand.Add(m->requests);
    const QueueGate gate = AdmitLocked(first.queue, demand, waiting);
    refused_by_queue_ = !gate.admitted;
    if (!gate.admitted) {
      for (const Task* m : waiting) {
        framework::Decision d;
        d.reason = gate.reason;
        out.emplace_back(m->key, std::move(d));
      }
      return;
    }
    scope = ScopeLocked(gate);
    o.eviction = scope.get();
    if (gate.narrowed) {
      narrowed.reserve(waiting.size());
      for (const Task*& m : waiting) m = &narrowed.emplace_back(NarrowedLocked(*m, gate));
    }
  }
  framework::GangDecision g = fw_->ScheduleGang(waiting, need, cluster_, cycle_, o, how);
  // Chosen once per placement of the gang (a late member gets the same).
  if (g.scheduled && it->second.master_port == 0) AssignMasterPortLocked(it->second);
  JobRuntime& job = it->second;
  if (g.scheduled && need > 0) job.released = false;  // a new placement starts together
  // What agents said holds only for members still placed where they said it.
  for (size_t i = 0; i < waiting.size(); ++i) job.ready.erase(waiting[i]->key);
  for (auto r = job.ready.begin(); r != job.ready.end();) {
    r = cluster_.FindPlaced(*r) ? std::next(r) : job.ready.erase(r);
  }
  for (size_t i = 0; i < waiting.size(); ++i)
    out.emplace_back(waiting[i]->key, std::move(g.members[i]));
}

void Scheduler::AssignMasterPortLocked(JobRuntime& job) {
  const auto master_node = [&](const JobRuntime& j) HF_REQUIRES(mu_) -> NodeId {
    for (TaskKey m : j.members) {
      if (const PlacedTask* p = cluster_.FindPlaced(m)) return p->alloc.node;
    }
    return kNoNode;
  };
  const NodeId node = master_node(job);
  if (node == kNoNode) return;
  std::set<uint16_t> taken;
  for (const auto& [id, other] : jobs_) {
    if (&other != &job && other.master_port != 0 && master_node(other) == node) {
      taken.insert(other.master_port);
    }
  }
  uint16_t port = kMasterPortBase;
  while (taken.count(port)) ++port;
  job.master_port = port;
}

bool Scheduler::CountsTowardsGangLocked(TaskKey member) const {
  // A member that ended while its job lives succeeded (a failure ends or
  // restarts the job, which puts its members back in tasks_).
  return cluster_.FindPlaced(member) != nullptr || tasks_.count(member) == 0;
}

Status Scheduler::MemberReadyLocked(const Task& task) {
  auto it = jobs_.find(task.job.id);
  if (it == jobs_.end()) return Status::Ok();
  it->second.ready.insert(task.key);
  return CheckReleaseLocked(task.job.id);
}

Status Scheduler::CheckReleaseLocked(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.released) return Status::Ok();
  JobRuntime& job = it->second;
  size_t placed = 0, held = 0;
  std::vector<std::string> nodes;
  for (TaskKey m : job.members) {
    placed += CountsTowardsGangLocked(m);
    const PlacedTask* p = cluster_.FindPlaced(m);
    if (!p) continue;
    if (p->state != TaskState::kRunning) {
      if (!job.ready.count(m)) return Status::Ok();
      ++held;
    }
    nodes.push_back(cluster_.spec(p->alloc.node).name);
  }
  if (placed < static_cast<size_t>(job.spec.gang_size())) return Status::Ok();
  if (held > 0) {
    HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
      return tx.AppendJobEvent(id, "released",
                               "every placed member's agent is ready: " + std::to_string(placed) +
                                   " members start together");
    }));
  }
  job.released = true;
  for (const std::string& n : nodes) BumpNodeLocked(n);
  return Status::Ok();
}

Scheduler::JobHosts Scheduler::JobHostsLocked(const JobRuntime& job) const {
  JobHosts out;
  std::map<std::string, int> node_rank;  // by node, in order of first rank
  for (TaskKey m : job.members) {
    const PlacedTask* p = cluster_.FindPlaced(m);
    std::string host;
    if (p) {
      const std::string& node = cluster_.spec(p->alloc.node).name;
      auto a = node_address_.find(node);
      host = a != node_address_.end() ? a->second : node;
      out.node_rank[m] = node_rank.emplace(node, static_cast<int>(node_rank.size())).first->second;
    }
    const bool rank0 = m == job.members.front();
    if (rank0) out.master = host;
    out.hosts += (rank0 ? "" : ",") + host;
  }
  return out;
}

std::map<std::string, std::string> Scheduler::LaunchEnvLocked(const Task& task,
                                                              const JobHosts& hosts) const {
  std::map<std::string, std::string> env;
  auto it = jobs_.find(task.job.id);
  if (it == jobs_.end()) return env;
  const JobRuntime& job = it->second;
  const auto rank = hosts.node_rank.find(task.key);
  env["HETEROFLOW_JOB"] = task.job.name;
  env["HETEROFLOW_JOB_ID"] = std::to_string(task.job.id);
  env["HETEROFLOW_ROLE"] = task.job.role;
  env["HETEROFLOW_HOSTS"] = hosts.hosts;
  env["WORLD_SIZE"] = std::to_string(task.job.world_size);
  env["RANK"] = std::to_string(task.job.rank);
  env["NODE_RANK"] = std::to_string(rank != hosts.node_rank.end() ? rank->second : 0);
  env["MASTER_ADDR"] = hosts.master;
  env["MASTER_PORT"] = std::to_string(job.master_port ? job.master_port : kMasterPortBase);
  return env;
}

Result<store::JobRecord> Scheduler::CancelJob(uint64_t id, const std::string& actor) {
  store::JobRecord job;
  std::vector<TaskKey> stopped;
  {
    MutexLock lock(mu_);
    HF_RETURN_IF_ERROR(store_->Read([&](const store::ReadTx& tx) -> Status {
      HF_ASSIGN_OR_RETURN(job, tx.GetJob(id));
      return Status::Ok();
    }));
    if (job.state == JobState::kCancelled) return job;
    if (IsFinal(job.state)) {
      return FailedPrecondition("job " + std::to_string(id) + " already " +
                                JobStateName(job.state));
    }
    const std::string why = "job cancelled by " + actor;
    HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
      stopped.clear();
      store::TaskFilter f;
      f.job = id;
      f.limit = 0;
      HF_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> members, tx.ListTasks(f));
      for (const store::TaskRecord& m : members) {
        if (m.state == TaskState::kSucceeded || m.state == TaskState::kFailed ||
            m.state == TaskState::kCancelled) {
          continue;
        }
        HF_RETURN_IF_ERROR(tx.DeleteAllocation(m.task.key));
        HF_RETURN_IF_ERROR(tx.UpdateTaskState(m.task.key, TaskState::kCancelled, ""));
        HF_RETURN_IF_ERROR(tx.AppendTaskEvent(m.task.key, "cancelled", why));
        stopped.push_back(m.task.key);
      }
      HF_RETURN_IF_ERROR(tx.UpdateJob(id, JobState::kCancelled, why, job.restarts));
      HF_RETURN_IF_ERROR(tx.AppendJobEvent(id, "cancelled", "by " + actor));
      HF_ASSIGN_OR_RETURN(job, tx.GetJob(id));
      return Status::Ok();
    }));
    for (TaskKey key : stopped) {
      if (const PlacedTask* p = cluster_.FindPlaced(key)) {
        BumpNodeLocked(cluster_.spec(p->alloc.node).name);
        HF_CHECK(cluster_.Release(key).ok());
        retry_all_ = true;
      }
      if (!tasks_.count(key)) cancelled_early_.insert(key);
      queue_.Remove(key);
      tasks_.erase(key);
    }
    jobs_.erase(id);
  }
  WakeLoop();
  for (TaskKey key : stopped)
    Publish("task", {{"action", "cancelled"}, {"id", key}, {"by", actor}});
  Publish("job", {{"action", "cancelled"}, {"id", id}, {"name", job.spec.name}, {"by", actor}});
  return job;
}

void Scheduler::ReconcileJobsLocked() {
  std::set<uint64_t> touched;
  touched.swap(touched_jobs_);
  for (uint64_t id : touched) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    JobRuntime& job = it->second;
    const int32_t world = job.spec.replicas();
    const int32_t gang = job.spec.gang_size();
    // What to do, worked out inside the write from the members as stored.
    enum class Act { kNone, kState, kRestart, kFail };
    Act act = Act::kNone;
    bool timed_out = false;
    JobState next = job.state;
    std::string why, event_kind;
    std::vector<store::TaskRecord> members;
    Status s = store_->Write([&](store::Tx& tx) -> Status {
      act = Act::kNone;
      store::TaskFilter f;
      f.job = id;
      f.limit = 0;
      HF_ASSIGN_OR_RETURN(members, tx.ListTasks(f));
      int32_t pending = 0, scheduled = 0, running = 0, succeeded = 0;
      const store::TaskRecord* failed = nullptr;
      for (const store::TaskRecord& m : members) {
        switch (m.state) {
          case TaskState::kPending:
            ++pending;
            break;
          case TaskState::kScheduled:
            ++scheduled;
            break;
          case TaskState::kRunning:
            ++running;
            break;
          case TaskState::kSucceeded:
            ++succeeded;
            break;
          case TaskState::kFailed:
          case TaskState::kCancelled:
            if (!failed) failed = &m;
            break;
        }
      }
      const bool started = job.state == JobState::kStarting || job.state == JobState::kRunning;
      const int32_t placed = scheduled + running;
      if (failed) {
        why = "member " + failed->task.name + " " + TaskStateName(failed->state);
      } else if (started && pending > 0 && placed > 0 && placed + succeeded < gang) {
        // Part of the gang lost its placement (its node was lost): the rest
        // cannot go on alone.
        for (const store::TaskRecord& m : members) {
          if (m.state == TaskState::kPending) {
            why = "member " + m.task.name + " lost its placement (" + m.pending_reason + ")";
            break;
          }
        }
      }
      // A member stopped at the time limit: the job's time is up.
      timed_out = failed != nullptr && failed->pending_reason.rfind(kTimedOutReason, 0) == 0;
      if (timed_out) why = "member " + failed->task.name + " " + failed->pending_reason;
      if (!why.empty()) {
        act = !timed_out && job.spec.on_member_failure == OnMemberFailure::kRestartJob &&
                      job.restarts < job.spec.max_restarts
                  ? Act::kRestart
                  : Act::kFail;
      } else if (succeeded == world) {
        act = Act::kState, next = JobState::kSucceeded, event_kind = "succeeded";
        why = "every member exited 0";
      } else if (started && pending > 0 && placed == 0) {
        // Evicted whole (preempted, drained): placed again as a gang.
        act = Act::kState, next = JobState::kPending, event_kind = "evicted";
        why = members.empty() ? "" : members.front().pending_reason;
      } else if (running > 0 && running + succeeded >= gang && scheduled == 0 &&
                 job.state != JobState::kRunning) {
        act = Act::kState, next = JobState::kRunning, event_kind = "running";
        why = "";
      } else if (scheduled + running > 0 && scheduled + running + succeeded >= gang &&
                 (job.state == JobState::kPending || job.state == JobState::kRestarting)) {
        act = Act::kState, next = JobState::kStarting, event_kind = "placed";
        why = "";
      } else if (pending > 0 && scheduled + running == 0 &&
                 (job.state == JobState::kPending || job.state == JobState::kRestarting)) {
        // The gang waits: its reason, as its members have it.
        const std::string& reason = members.front().pending_reason;
        HF_ASSIGN_OR_RETURN(store::JobRecord stored, tx.GetJob(id));
        if (stored.reason != reason) {
          HF_RETURN_IF_ERROR(tx.UpdateJob(id, job.state, reason, job.restarts));
        }
        return Status::Ok();
      }
      if (act == Act::kNone) return Status::Ok();
      if (act == Act::kState) {
        HF_RETURN_IF_ERROR(tx.UpdateJob(id, next, why, job.restarts));
        std::string detail = why;
        if (next == JobState::kStarting) {
          std::set<std::string> nodes;
          for (const store::TaskRecord& m : members) {
            if (!m.node.empty()) nodes.insert(m.node);
          }
          detail = std::to_string(scheduled + running) + " members placed on " +
                   std::to_string(nodes.size()) + " node(s)";
        } else if (next == JobState::kRunning) {
          detail = "every member of the gang runs";
        }
        return tx.AppendJobEvent(id, event_kind, detail);
      }
      // A member failed or was lost: the failure policy, over every member.
      const bool restart = act == Act::kRestart;
      const int32_t restarts = job.restarts + (restart ? 1 : 0);
      const std::string note = restart ? "restarting job (" + std::to_string(restarts) + " of " +
                                             std::to_string(job.spec.max_restarts) + "): " + why
                                       : std::string(timed_out ? "job timed out: " : "job failed: ") + why;
      for (const store::TaskRecord& m : members) {
        const bool live = m.state == TaskState::kPending || m.state == TaskState::kScheduled ||
                          m.state == TaskState::kRunning;
        if (!restart && !live) continue;
        HF_RETURN_IF_ERROR(tx.DeleteAllocation(m.task.key));
        HF_RETURN_IF_ERROR(tx.UpdateTaskState(
            m.task.key, restart ? TaskState::kPending : TaskState::kCancelled, note));
        HF_RETURN_IF_ERROR(
            tx.AppendTaskEvent(m.task.key, restart ? "restarting" : "stopped", note));
      }
      next = restart ? JobState::kRestarting : timed_out ? JobState::kTimedOut : JobState::kFailed;
      HF_RETURN_IF_ERROR(tx.UpdateJob(id, next, why, restarts));
      return tx.AppendJobEvent(id, JobStateName(next), note);
    });
    if (!s.ok()) {
      spdlog::error("scheduler: job {}: {}", id, s.ToString());
      jobs_to_retry_.insert(id);  // tried again a second later (Loop)
      continue;
    }
    if (act == Act::kNone) continue;
    if (act == Act::kRestart || act == Act::kFail) {
      job.stopping.clear();
      for (const store::TaskRecord& m : members) {
        const TaskKey key = m.task.key;
        if (const PlacedTask* p = cluster_.FindPlaced(key)) {
          const std::string& node = cluster_.spec(p->alloc.node).name;
          // Its agent reports what it runs: the old copy is waited for.
          if (last_heartbeat_.count(node)) job.stopping[key] = node;
          BumpNodeLocked(node);
          HF_CHECK(cluster_.Release(key).ok());
        }
        queue_.Remove(key);
        if (act == Act::kRestart) {
          tasks_[key] = m.task;
        } else {
          tasks_.erase(key);
        }
      }
      if (act == Act::kRestart && job.stopping.empty()) {
        for (const store::TaskRecord& m : members) EnqueueLocked(m.task, "restarting job: " + why);
      }
      if (act == Act::kFail) job.stopping.clear();
      retry_all_ = true;
      if (act == Act::kRestart) ++job.restarts;
      job.master_port = 0;
    }
    if (next == JobState::kPending) job.master_port = 0;
    job.state = next;
    Publish("job",
            {{"action", JobStateName(next)}, {"id", id}, {"name", job.spec.name}, {"detail", why}});
    if (IsFinal(next)) jobs_.erase(it);
  }
  // A member that left (lost, drained, preempted) may have been the last
  // one the held rest waited for.
  for (uint64_t id : touched) {
    if (Status r = CheckReleaseLocked(id); !r.ok()) {
      spdlog::error("scheduler: job {}: {}", id, r.ToString());
      jobs_to_retry_.insert(id);
    }
  }
}

void Scheduler::MembersStoppedLocked(const std::string& node,
                                     const std::vector<uint64_t>* running) {
  for (auto& [id, job] : jobs_) {
    if (job.stopping.empty()) continue;
    for (auto it = job.stopping.begin(); it != job.stopping.end();) {
      const bool gone =
          it->second == node &&
          (!running || std::find(running->begin(), running->end(), it->first) == running->end());
      it = gone ? job.stopping.erase(it) : std::next(it);
    }
    if (!job.stopping.empty()) continue;
    // Every old copy stopped: the gang is placed again.
    for (TaskKey m : job.members) {
      auto t = tasks_.find(m);
      if (t != tasks_.end() && !cluster_.FindPlaced(m)) EnqueueLocked(t->second, "restarting job");
    }
    retry_all_ = true;
  }
}

}  // namespace hf::scheduler
