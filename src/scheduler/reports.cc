// Agents' task status reports (docs/AGENT.md, "Task status"): a task waits,
// is held ready, started or ended.
//
// The common ones, a plain task (not a job's member) that started or ended,
// commit without the scheduler's mutex, so that they join the store's group
// commits and never wait for, nor hold up, a scheduling cycle:
//   1. under the mutex, the report is checked against memory (the task is
//      placed on the reporting node, else Conflict) and recorded in flight
//      (reporting_);
//   2. without it, one transaction checks the same against the store, which
//      decides (a preemption, a cancel or a lost node may have moved or
//      ended the task since: Conflict, nothing written), and writes it;
//   3. under the mutex again, memory takes the change (ApplyReportLocked).
// Memory thus never shows what the store has not committed. Between 2 and 3
// it may still show the task as it was; whoever would release or move a
// placed task meanwhile (a cycle's preemption, Cancel, Drain, a lost node,
// another report of the same task) first waits for its report's commit and
// applies it (SettleReportLocked), so nothing acts on a placement the store
// has ended, and a task is never placed anew while an old report of it could
// still land. The rest (waiting, ready, a job's member, a fenced task queued
// again) commit under the mutex, as every other change does.
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <utility>

#include "scheduler/scheduler.h"

namespace hf::scheduler {

using nlohmann::json;

namespace {

Status NotAssigned(TaskKey id, const std::string& node) {
  return Conflict("task " + std::to_string(id) + " is not assigned to node " + node);
}

// How an ended task's event words its end: "exit code 1", "killed by signal
// 9: SIGKILL", "ended".
std::string HowItEnded(const TaskExit& exit) {
  std::string how = exit.signal      ? "killed by signal " + std::to_string(*exit.signal)
                    : exit.exit_code ? "exit code " + std::to_string(*exit.exit_code)
                                     : "";
  if (!exit.message.empty()) how += (how.empty() ? "" : ": ") + exit.message;
  return how.empty() ? "ended" : how;
}

bool Ends(const TaskExit& exit) {
  return exit.state == TaskState::kSucceeded || exit.state == TaskState::kFailed;
}

// Whether the report commits without the mutex: a plain task that starts
// (placed, not running yet) or ends (other than a fenced one queued again).
bool CommitsWithoutMutex(const Task& task, TaskState placed, const TaskExit& exit) {
  if (task.job.id != 0) return false;  // its gang and job state need the mutex
  if (exit.state == TaskState::kRunning) return placed == TaskState::kScheduled;
  return Ends(exit) && !(exit.fenced && exit.state == TaskState::kFailed &&
                         task.requeue_on_node_loss);
}

}  // namespace

Result<TaskState> Scheduler::ReportTask(const std::string& node, TaskKey id, const TaskExit& exit) {
  std::shared_ptr<InFlightReport> report;
  std::string name;
  {
    MutexLock lock(mu_);
    // One report of a task at a time: an agent's retry may overlap its try.
    SettleReportLocked(id);
    const PlacedTask* p = cluster_.FindPlaced(id);
    if (p == nullptr || cluster_.spec(p->alloc.node).name != node) return NotAssigned(id, node);
    if (CommitsWithoutMutex(tasks_.at(id), p->state, exit)) {
      name = tasks_.at(id).name;
      report = std::make_shared<InFlightReport>();
      report->node = node;
      report->state = exit.state;
      reporting_[id] = report;
    }
  }
  if (report) return ReportWithoutMutex(node, id, exit, name, std::move(report));
  return ReportWithMutex(node, id, exit);
}

Result<TaskState> Scheduler::ReportWithoutMutex(const std::string& node, TaskKey id,
                                                const TaskExit& exit, const std::string& name,
                                                std::shared_ptr<InFlightReport> report) {
  const bool ends = Ends(exit);
  const std::string how = ends ? HowItEnded(exit) : "";
  const std::string reason = exit.timed_out ? kTimedOutReason + exit.message : "";
  Status s = store_->Write([&](store::Tx& tx) -> Status {
    // The fencing check, where it is decided: the store holds the task's
    // placement as of this transaction, whatever memory showed before. One
    // row (state and allocation's node); the spec is not read.
    Result<store::TaskPlacementRecord> stored = tx.GetTaskPlacement(id);
    if (!stored.ok() && stored.status().code() != StatusCode::kNotFound) return stored.status();
    if (!stored.ok() || stored->node != node) return NotAssigned(id, node);
    const bool placed =
        stored->state == TaskState::kScheduled || (ends && stored->state == TaskState::kRunning);
    if (!placed) return NotAssigned(id, node);
    if (!ends) {
      HF_RETURN_IF_ERROR(tx.UpdateTaskState(id, TaskState::kRunning, ""));
      HF_RETURN_IF_ERROR(tx.AppendTaskEvent(id, "running", "started on node " + node));
    } else {
      HF_RETURN_IF_ERROR(tx.DeleteAllocation(id));
      HF_RETURN_IF_ERROR(tx.UpdateTaskState(id, exit.state, reason));
      HF_RETURN_IF_ERROR(tx.AppendTaskEvent(id, exit.timed_out ? "timed_out" : TaskStateName(exit.state),
                                            how + " on node " + node));
    }
    return Status::Ok();
  });
  {
    MutexLock lock(report->mu);
    report->status = s;
    report->committed = true;
  }
  report->cv.notify_all();
  {
    MutexLock lock(mu_);
    ApplyReportLocked(id, *report);
  }
  // An end frees the task's room for the waiting tasks; a start changes
  // nothing a cycle looks at, and wakes nobody.
  if (ends) WakeLoop();
  if (!s.ok()) return s;
  json event = ends ? json{{"action", TaskStateName(exit.state)},
                           {"id", id},
                           {"node", node},
                           {"detail", how}}
                    : json{{"action", "running"}, {"id", id}, {"node", node}};
  event["name"] = name;
  Publish("task", std::move(event));
  return exit.state;
}

void Scheduler::ApplyReportLocked(TaskKey id, InFlightReport& report) {
  auto it = reporting_.find(id);
  if (it != reporting_.end() && it->second.get() == &report) reporting_.erase(it);
  if (report.applied) return;
  report.applied = true;
  Status committed;
  {
    MutexLock lock(report.mu);
    HF_CHECK(report.committed);
    committed = report.status;
  }
  if (!committed.ok()) return;  // refused: nothing changed
  // Gone or moved since only through a rebuild that read the store after
  // this commit: memory shows the change already.
  const PlacedTask* p = cluster_.FindPlaced(id);
  if (p == nullptr || cluster_.spec(p->alloc.node).name != report.node) return;
  if (report.state == TaskState::kRunning) {
    if (p->state == TaskState::kScheduled) HF_CHECK(cluster_.MarkRunning(id, clock_->NowMs()).ok());
    return;
  }
  HF_CHECK(cluster_.Release(id).ok());
  tasks_.erase(id);
  retry_all_ = true;
  BumpNodeLocked(report.node);
}

void Scheduler::SettleReportLocked(TaskKey id) {
  auto it = reporting_.find(id);
  if (it == reporting_.end()) return;
  const std::shared_ptr<InFlightReport> report = it->second;
  {
    // Its commit does not need mu_: waiting for it here cannot deadlock.
    MutexLock lock(report->mu);
    while (!report->committed) lock.Wait(report->cv);
  }
  ApplyReportLocked(id, *report);
}

void Scheduler::SettleReportsLocked() {
  while (!reporting_.empty()) SettleReportLocked(reporting_.begin()->first);
}

void Scheduler::ApplyCommittedReportsLocked() {
  for (auto it = reporting_.begin(); it != reporting_.end();) {
    const TaskKey id = it->first;
    const std::shared_ptr<InFlightReport> report = it->second;
    ++it;  // applying erases this entry, and only this one
    bool committed = false;
    {
      MutexLock lock(report->mu);
      committed = report->committed;
    }
    if (committed) ApplyReportLocked(id, *report);
  }
}

Result<TaskState> Scheduler::ReportWithMutex(const std::string& node, TaskKey id,
                                             const TaskExit& exit) {
  TaskState state = TaskState::kPending;
  std::string name;
  json event;
  {
    MutexLock lock(mu_);
    SettleReportLocked(id);
    const PlacedTask* p = cluster_.FindPlaced(id);
    if (p == nullptr || cluster_.spec(p->alloc.node).name != node) return NotAssigned(id, node);
    name = tasks_.at(id).name;
    TouchJobLocked(id);
    if (exit.state == TaskState::kScheduled) {
      // Only a task not started yet waits; the reason is stored when new.
      // A job's member held ready by its agent ("ready") is part of its
      // gang's start barrier.
      std::string reason;
      if (p->state == TaskState::kScheduled) {
        HF_RETURN_IF_ERROR(store_->Read([&](const store::ReadTx& tx) -> Status {
          HF_ASSIGN_OR_RETURN(store::TaskRecord r, tx.GetTask(id));
          reason = r.pending_reason;
          return Status::Ok();
        }));
      }
      if (p->state == TaskState::kScheduled && reason != exit.message) {
        HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
          HF_RETURN_IF_ERROR(tx.UpdateTaskState(id, TaskState::kScheduled, exit.message));
          return tx.AppendTaskEvent(id, exit.ready ? "ready" : "waiting", exit.message);
        }));
        event = {{"action", exit.ready ? "ready" : "waiting"},
                 {"id", id},
                 {"node", node},
                 {"detail", exit.message}};
      }
      if (p->state == TaskState::kScheduled && exit.ready) {
        HF_RETURN_IF_ERROR(MemberReadyLocked(tasks_.at(id)));
      }
    } else if (exit.state == TaskState::kRunning) {
      if (p->state != TaskState::kRunning) {
        HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
          HF_RETURN_IF_ERROR(tx.UpdateTaskState(id, TaskState::kRunning, ""));
          return tx.AppendTaskEvent(id, "running", "started on node " + node);
        }));
        HF_CHECK(cluster_.MarkRunning(id, clock_->NowMs()).ok());
        event = {{"action", "running"}, {"id", id}, {"node", node}};
        // A member started by an agent that ignores holds counts as ready.
        if (const uint64_t job = tasks_.at(id).job.id; job != 0) {
          if (Status r = CheckReleaseLocked(job); !r.ok()) {
            spdlog::error("scheduler: job {}: {}", job, r.ToString());
            touched_jobs_.insert(job);  // checked again after its reconcile
          }
        }
      }
    } else if (exit.fenced && exit.state == TaskState::kFailed &&
               tasks_.at(id).requeue_on_node_loss) {
      // A task's reports come in order, and a copy is fenced only once it
      // started, which was reported first. A placement not reported running
      // has no copy that could have been fenced: the report is about an
      // earlier placement on this node (the task was queued again, as a lost
      // node's, and placed here anew). Its stop was counted when the task was
      // queued again: nothing changes, and the answer (with the node's
      // version) lets the agent start the new placement (docs/AGENT.md).
      if (p->state != TaskState::kRunning) {
        spdlog::info("scheduler: task {}: the fenced stop on {} is of an earlier placement", id,
                     node);
      } else {
        // Stopped for the node's sake, not its own: as a lost node's task
        // (which it is, once a storm that held it passed).
        const std::string why =
            "stopped on node " + node + " by its supervisor (fenced): the node lost the server";
        HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
          HF_RETURN_IF_ERROR(tx.DeleteAllocation(id));
          HF_RETURN_IF_ERROR(tx.UpdateTaskState(id, TaskState::kPending, why));
          return tx.AppendTaskEvent(id, "lost", why + "; queued again");
        }));
        HF_CHECK(cluster_.Release(id).ok());
        EnqueueLocked(tasks_.at(id), why);
        retry_all_ = true;
        BumpNodeLocked(node);
        event = {{"action", "lost"}, {"id", id}, {"node", node}, {"requeued", true}};
      }
    } else {
      const std::string how = HowItEnded(exit);
      const std::string reason = exit.timed_out ? kTimedOutReason + exit.message : "";
      HF_RETURN_IF_ERROR(store_->Write([&](store::Tx& tx) -> Status {
        HF_RETURN_IF_ERROR(tx.DeleteAllocation(id));
        HF_RETURN_IF_ERROR(tx.UpdateTaskState(id, exit.state, reason));
        return tx.AppendTaskEvent(id, exit.timed_out ? "timed_out" : TaskStateName(exit.state),
                                  how + " on node " + node);
      }));
      HF_CHECK(cluster_.Release(id).ok());
      tasks_.erase(id);
      retry_all_ = true;
      BumpNodeLocked(node);
      event = {{"action", TaskStateName(exit.state)}, {"id", id}, {"node", node}, {"detail", how}};
    }
    HF_RETURN_IF_ERROR(store_->Read([&](const store::ReadTx& tx) -> Status {
      HF_ASSIGN_OR_RETURN(store::TaskPlacementRecord r, tx.GetTaskPlacement(id));
      state = r.state;
      return Status::Ok();
    }));
  }
  WakeLoop();
  if (!event.is_null()) {
    event["name"] = name;
    Publish("task", std::move(event));
  }
  return state;
}

}  // namespace hf::scheduler
