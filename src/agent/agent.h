// The node agent's loops (docs/AGENT.md): register, heartbeat, long-poll the
// assignments and make the node's processes match them, report task status.
//
// Threads, each with its own HTTP client:
//   - the caller's thread (Run): registers, then long-polls the assignments
//     and reconciles: a local task missing from the list is stopped first
//     (SIGTERM to its group, SIGKILL after the grace period) and not
//     reported, because the server already moved it on (cancelled,
//     preempted); then an assigned task not running here is launched —
//     unless a process being stopped still holds what it was given (its
//     GPUs, or CPU or memory only that exit frees; gate.h). Such a task waits,
//     reported as "waiting" with the tasks it waits for, and starts as soon
//     as they have exited;
//   - heartbeats: every heartbeat_interval_s, the usage (usage file or
//     measured); a 404 means the server forgot the node: register again;
//   - reaper: as soon as a task's process ends (the exit watcher wakes it)
//     and every 100 ms (every 10 ms while a task waits for another to exit),
//     reaps ended processes, starts the waiting tasks they blocked, ships
//     output and queues the final reports;
//   - exit watcher: sleeps in Supervisor::WaitForExit (the processes'
//     pidfds) and wakes the reaper when one ends;
//   - reporters (kReporters, each with a kept connection): send the status
//     reports, each task's in the order they were made ("waiting",
//     "running", then the end), different tasks' side by side, so that they
//     share the server's commits; they keep them while the server cannot be
//     reached. A 409 answer (the task is not assigned here) stops the task.
//   - heartbeats carry the ids of the tasks running when the usage was
//     measured (usage.running_tasks), so that the server keeps a task's
//     in-flight estimate until a measurement holds it.
//
// Shutdown (RequestStop, e.g. on SIGINT/SIGTERM): heartbeats and polling stop
// and Run returns; running tasks are left running, in their own process
// groups, and nothing is reported for them. A restarted agent adopts them
// (AdoptLeftovers, from WORK_DIR/tasks/<id>/pid, with the allocation in
// WORK_DIR/tasks/<id>/allocation) instead of launching them again.
//
// Service tasks: a task whose command contains "{port}" gets a free TCP port
// (docs/AGENT.md, "Services"): "{port}" is replaced by it, PORT and
// HETEROFLOW_PORT carry it, WORK_DIR/tasks/<id>/port keeps it for a
// restarted agent, and every "running" report carries "port" (and "host",
// when advertise_address is set).
//
// The reaper thread also ships each task's output.log to the server
// (POST /api/v1/agent/logs) every second and once more after the process
// ended, before the final report; see docs/AGENT.md, "Shipping the output".
//
// Errors: Run returns 1 when the server refuses the token (401/403) or the
// inventory (4xx on register), 0 after RequestStop.
#ifndef HF_AGENT_AGENT_H_
#define HF_AGENT_AGENT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "agent/assignment.h"
#include "agent/gate.h"
#include "agent/inventory.h"
#include "agent/supervisor.h"
#include "core/mutex.h"
#include "http/client.h"

namespace hf::agent {

struct AgentOptions {
  // The control plane: one server, or its replicas (docs/HA.md); requests
  // go to one, and to the next when it cannot be reached.
  std::vector<http::ServerUrl> servers;
  std::string token;
  Inventory inventory;   // spec.name is the node's name
  std::string work_dir;  // absolute; tasks run in WORK_DIR/tasks/<id>/
  std::chrono::milliseconds grace_period{10000};
  int wait_s = 30;  // long-poll wait
  // Per-request timeout for everything but the long poll (which waits
  // wait_s + this).
  std::chrono::milliseconds request_timeout{10000};
  // The IP literal the server should use to reach this node's services
  // (sent as "host" in the running reports of tasks with a port); empty: the
  // server uses the address the reports come from.
  std::string advertise_address;
};

class Agent {
 public:
  explicit Agent(AgentOptions options);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until RequestStop or a fatal refusal; see the file comment.
  int Run() HF_EXCLUDES(mu_);
  // Safe from any thread (not from a signal handler: see agent_command.cc).
  void RequestStop() HF_EXCLUDES(mu_);

 private:
  struct Report {
    uint64_t id;
    nlohmann::json body;
  };
  enum class RegisterOutcome { kOk, kFatal, kStopped };

  RegisterOutcome Register(const http::HttpClient& client) HF_EXCLUDES(mu_);
  void HeartbeatLoop() HF_EXCLUDES(mu_);
  void ReaperLoop() HF_EXCLUDES(mu_);
  void ExitWatchLoop() HF_EXCLUDES(mu_);
  void ReporterLoop() HF_EXCLUDES(mu_);
  // Sends one report taken off outbox_ (in sending_) and acts on the
  // answer; a report to retry goes back to the head of outbox_.
  void SendReport(const http::HttpClient& client, Report& report) HF_EXCLUDES(mu_);
  // Before the first poll: adopts the processes an earlier agent left
  // running (WORK_DIR/tasks/<id>/pid); a dead one goes into finished_ as
  // failed, reported if the task is still assigned.
  void AdoptLeftovers() HF_EXCLUDES(mu_);
  // Ships new bytes of the task's output.log (reaper thread only); `final`
  // after the process ended: everything, incomplete UTF-8 included.
  void ShipLogs(const http::HttpClient& client, uint64_t id, bool final);
  std::string TaskDir(uint64_t id) const;
  std::string LeasePath() const;
  // Takes heartbeat_interval_s, fence_after_s and fence_grace_s from a
  // registration's or heartbeat's answer.
  void TakeTimings(const std::string& answer);
  // The server answered a request sent at `sent_at` (MonotonicMs).
  void RenewLease(int64_t sent_at);
  void Reconcile(const AssignmentList& list) HF_EXCLUDES(mu_);
  // Starts `a` now, or keeps it in waiting_ and reports why (once per
  // change): "waiting" while stopping processes hold what it was given,
  // "ready" (kReadyMessage) when only its hold keeps it. Caller holds mu_.
  void StartOrWait(const Assignment& a) HF_REQUIRES(mu_);
  // StartOrWait for every waiting task but those in `later` (after
  // processes ended). Caller holds mu_.
  void StartWaiting(const std::set<uint64_t>& later = {}) HF_REQUIRES(mu_);
  // Caller holds mu_ (StartOrWait).
  void Launch(const Assignment& a) HF_REQUIRES(mu_);
  // Queues a report and wakes a reporter. Caller holds mu_.
  void Enqueue(uint64_t id, nlohmann::json body) HF_REQUIRES(mu_);
  // The "running" report of task `id`, with its port (and host) when it has
  // one. Caller holds mu_.
  nlohmann::json RunningReport(uint64_t id) const HF_REQUIRES(mu_);
  // The report of a task not started: "ready" when `why` is kReadyMessage,
  // else "waiting" with `why`.
  nlohmann::json WaitingReport(uint64_t id, const std::string& why) const;
  static constexpr char kReadyMessage[] = "ready: starts when every member of its gang is ready";
  // Reports in flight at once, at most (one connection each).
  static constexpr int kReporters = 4;
  // Sleeps up to `d`; false when a stop was requested meanwhile.
  bool SleepFor(std::chrono::milliseconds d) HF_EXCLUDES(mu_);
  bool stopping() const { return stop_.load(); }

  AgentOptions opt_;
  // How a task's supervisor is started (TaskSupervisorCommand), found once.
  const std::vector<std::string> supervisor_command_;
  // Starts the supervisor executable, when there is one, through its fork
  // server.
  Supervisor supervisor_;
  std::map<std::string, std::string> base_env_;
  // The node's devices and how tasks are bound to them (set once, here).
  const NodeDevices node_devices_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> fatal_{false};
  std::atomic<int> heartbeat_interval_s_{5};
  // Fencing, as the server says (task_supervisor.h, lease.h).
  std::atomic<int64_t> fence_after_ms_{30000};
  std::atomic<int64_t> fence_grace_ms_{10000};
  // Guards the members below up to ships_ (the reports to send and what
  // is known of each task here). stop_ is set under it too, so that a
  // waiter on cv_ cannot miss the wake-up.
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Report> outbox_ HF_GUARDED_BY(mu_);
  // Reports in flight, per task: at most one each (a task's reports go in
  // order). As good as queued, so Reconcile does not queue them twice.
  std::set<uint64_t> sending_ HF_GUARDED_BY(mu_);
  // After a report to retry: no report is sent before this.
  std::chrono::steady_clock::time_point reports_paused_until_ HF_GUARDED_BY(mu_);
  // Wakes the reporters: a report was queued, or one's task may go on.
  std::condition_variable reports_cv_;
  // Wakes the reaper: reports were queued, or a process ended.
  bool wake_reaper_ HF_GUARDED_BY(mu_) = false;
  // Tasks stopped by reconcile: their end is not reported.
  std::set<uint64_t> unreported_ HF_GUARDED_BY(mu_);
  // Assigned tasks that wait for stopping processes to exit (gate.h), with
  // the reason last reported for each; the reaper starts them.
  std::map<uint64_t, Assignment> waiting_ HF_GUARDED_BY(mu_);
  std::map<uint64_t, std::string> waiting_reported_ HF_GUARDED_BY(mu_);
  // What each live process was given (nullopt: adopted without a readable
  // allocation file).
  std::map<uint64_t, std::optional<Allocation>> held_ HF_GUARDED_BY(mu_);
  // Tasks that ended here (or failed to start), with their final report, so
  // that a list still naming them re-sends the report instead of running
  // them twice.
  std::map<uint64_t, nlohmann::json> finished_ HF_GUARDED_BY(mu_);
  // Of those, the ones whose final report the server took, with the node's
  // assignments version once it had: a list at that version or later that
  // names the task again places it here anew (a fenced task queued again),
  // an earlier list is stale.
  std::map<uint64_t, int64_t> taken_ HF_GUARDED_BY(mu_);
  // The last assignment list reconciled: a task it named while its final
  // report was being sent starts once the server's answer shows the list is
  // newer than the report.
  AssignmentList last_list_ HF_GUARDED_BY(mu_);
  // Ended tasks whose final report waits for their last output to be
  // shipped (Reconcile treats them as queued).
  std::set<uint64_t> final_pending_ HF_GUARDED_BY(mu_);
  // The ports given to the live service tasks here.
  std::map<uint64_t, uint16_t> ports_ HF_GUARDED_BY(mu_);
  // Tasks with a time limit: when it runs out (steady clock), and its
  // length; those stopped for it are reported failed with timed_out.
  std::map<uint64_t, std::pair<std::chrono::steady_clock::time_point, int64_t>> deadlines_
      HF_GUARDED_BY(mu_);
  std::map<uint64_t, int64_t> timed_out_ HF_GUARDED_BY(mu_);
  // Log shipping, per task: bytes of the local file consumed, bytes the
  // server holds. Reaper thread only.
  struct LogShip {
    uint64_t local = 0;
    uint64_t sent = 0;
    bool done = false;  // the server no longer takes it (422/404)
  };
  std::map<uint64_t, LogShip> ships_;
};

}  // namespace hf::agent

#endif  // HF_AGENT_AGENT_H_
