// The offline simulator: runs a Workload through the real scheduling
// framework (framework::Framework over a ClusterState), as `heteroflow
// simulate` does.
//
// Two methods:
//
// fgd — the evaluation of the FGD paper (Weng et al., USENIX ATC '23, see
//   ../shared/traces/alibaba-openb/README.md). One std::mt19937_64 seeded with
//   `seed` drives, in this order: a shuffle of the node order (the paper gives
//   node names random prefixes, i.e. a fixed random tie order; ours breaks
//   ties by NodeId, which is insertion order), sampling tasks with
//   replacement until their GPU demand (sum of gpu x gpu_milli) reaches
//   tune x the cluster's GPU capacity (GPUs x 1000), and a shuffle of the
//   sampled tasks. Bounded integers come from our own rejection sampler and
//   the shuffles are Fisher-Yates, so a seed gives the same run with any C++
//   standard library. Sampled task i is named "<name>-<i>" with key i. Each is
//   scheduled once, bound as running, never deleted; failures are counted,
//   not retried.
//
// replay — event-driven over the tasks' create/delete times, on a
//   ManualClock set to each event's time (so preemption's minimum runtime
//   works on trace time). Events are ordered by time, deletions before
//   creations at equal times. The pending queue is ordered by priority
//   (higher first), then creation time, then key. After each batch of
//   events at one time: if a deletion freed resources, every pending task is
//   tried in queue order; otherwise only the tasks that arrived in the batch
//   (a failed task cannot fit until something is freed). Preemption victims
//   return to pending. A task whose delete time comes while it is pending is
//   dropped. Node order is the workload's order. Every task needs a create
//   time (openb multigpu* files have none: InvalidArgument).
//   A job's members (YAML jobs:) are tried as a gang once enough of them
//   have arrived (Framework::ScheduleGang), or one by one with gang off;
//   a job runs once all its members are placed, and its members leave
//   together its duration later. A member evicted stops its job's run.
//
// Both methods record the allocation curve: after each scheduling decision,
// "arrived" = GPU demand of the tasks seen so far (placed or not) / capacity,
// "allocated" = GPU milli held / capacity.
#ifndef HF_SIM_SIMULATOR_H_
#define HF_SIM_SIMULATOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "framework/framework.h"
#include "framework/policy.h"
#include "sim/workload.h"

namespace hf::sim {

enum class Method { kFgd, kReplay };
const char* MethodName(Method m);
std::optional<Method> ParseMethod(std::string_view name);

// replay: the order waiting work is tried in (docs/QUEUES.md).
//   fifo — one global order, priority then arrival, queues ignored: no
//     admission, no fair share, no reclaim (a scheduler without queues);
//   fair — as the server decides: the next task comes from the queue whose
//     turn it is by weighted fair share (queues::Ledger::PickFair), within
//     a queue priority then arrival; each leaves its queue only as
//     admission allows (queues::Admit), and may reclaim borrowed capacity.
enum class Queueing { kFifo, kFair };
const char* QueueingName(Queueing q);
std::optional<Queueing> ParseQueueing(std::string_view name);

struct SimOptions {
  Method method = Method::kFgd;
  // fgd: sample until GPU demand >= tune x GPU capacity. In (0, 100].
  double tune = 1.3;
  // fgd: seeds node order, sampling and task order.
  uint64_t seed = 42;
  // Applied over the framework's defaults (framework::Framework::Create).
  framework::Policy policy;
  // replay: a job's members are placed as a gang, min_available of them in
  // one decision or none (docs/JOBS.md); false places them one by one, as a
  // scheduler without gangs does (--no-gang), to show what that costs.
  bool gang = true;
  // replay: see Queueing.
  Queueing queueing = Queueing::kFair;
  // replay: backfill with reservations (queues/backfill.h), as the server
  // does: the first waiting task in rank order that cannot start holds room
  // from its earliest start, computed from placed tasks' time limits. Off:
  // whatever fits goes ahead of it (skip-ahead).
  bool backfill = true;
  // replay: stop at this time (ms from the trace's start); the report then
  // covers [0, horizon]. Absent: run until the last task leaves.
  std::optional<int64_t> horizon_ms;
};

// A task's final (fgd) or last (replay) placement. `node` is empty for a task
// that was never placed. Times are set by replay only: when the placement
// began and ended (deletion or eviction; absent while it still holds).
struct PodPlacement {
  std::string pod;
  std::string node;
  std::vector<GpuGrant> gpus;
  std::optional<int64_t> placed_ms;
  std::optional<int64_t> released_ms;
};

struct CurvePoint {
  double arrived = 0;    // arrived GPU demand / capacity
  double allocated = 0;  // allocated GPU milli / capacity
};

// replay: one leaf queue's share of the run (tasks outside jobs count as
// jobs of one). GPU-hours are GPU time held, over the report's span.
struct QueueStats {
  std::string name;
  double weight = 1;
  // Its weight-entitled share of GPU time: at each level of the tree, its
  // weight over the weights of the siblings that have work in the workload.
  double entitled = 0;
  double gpu_hours = 0;
  double share = 0;        // of all GPU-hours held by any queue
  double utilisation = 0;  // gpu_hours / (GPUs x span)
  size_t jobs = 0;         // arrived within the span
  size_t started = 0;      // of those, started
  // Waits (first start - arrival) of the jobs that started, in seconds.
  double wait_p50_s = 0;
  double wait_p95_s = 0;
  double wait_max_s = 0;
  // Its largest job (most GPUs; the first to arrive of those) and its wait;
  // absent when it never started.
  std::string largest_job;
  double largest_job_gpus = 0;
  std::optional<double> largest_job_wait_s;
  std::map<std::string, double> user_gpu_hours;  // by SimTask::user ("" when none)
};

// replay: the workload's largest job (most GPUs; the first to arrive).
struct JobTimes {
  std::string name;
  std::string queue;
  double gpus = 0;
  double arrival_s = 0;
  // When its first reservation was computed to start (backfill).
  std::optional<double> first_reservation_s;
  std::optional<double> start_s;  // absent: never started
};

struct SimReport {
  Method method = Method::kFgd;
  double tune = 0;
  uint64_t seed = 0;
  size_t nodes = 0;
  int64_t gpus_total = 0;
  int64_t gpu_capacity_milli = 0;
  size_t source_tasks = 0;  // tasks in the workload (fgd samples from them)

  size_t pods_total = 0;       // tasks simulated (fgd: the sampled tasks)
  size_t pods_scheduled = 0;   // placed at least once
  size_t pods_failed = 0;      // never placed
  size_t preemptions = 0;      // evictions (a task evicted twice counts twice)
  size_t dropped_pending = 0;  // replay: deleted while pending (included in the above)

  // Allocation after the decision that took arrived demand to >= 100% of
  // capacity; when demand never got there, the final allocation and
  // arrived_100_reached == false.
  double gpu_alloc_ratio_at_arrived_100 = 0;
  bool arrived_100_reached = false;
  double gpu_alloc_ratio_final = 0;
  double gpu_alloc_ratio_peak = 0;
  double arrived_ratio_final = 0;
  // replay: allocation averaged over trace time (first to last event).
  double gpu_alloc_ratio_time_avg = 0;
  int64_t trace_span_ms = 0;
  // The first decision at or past each 5% step of arrived demand (one point
  // when a decision crosses several steps).
  std::vector<CurvePoint> curve;

  // Framework::Schedule calls, the time spent in them, and their latency.
  size_t decisions = 0;
  double schedule_seconds = 0;
  double latency_p50_us = 0;
  double latency_p99_us = 0;
  double latency_max_us = 0;

  // replay, jobs (docs/JOBS.md): jobs in the workload; those whose every
  // member ran and left; those left holding part of their gang at the end
  // (a deadlock, without gangs); and GPU-seconds held by members of jobs
  // whose gang was not whole (placed members waiting for the rest): 0 with
  // gangs.
  size_t jobs_total = 0;
  size_t jobs_completed = 0;
  size_t jobs_partial_at_end = 0;
  double gpu_seconds_held_by_partial_gangs = 0;

  // replay, queues: how the run was ordered, per leaf queue with work, and
  // Jain's fairness index over the queues' share / entitled (1: each got
  // exactly its entitlement).
  Queueing queueing = Queueing::kFair;
  bool backfill = true;
  std::vector<QueueStats> queues;
  double jain_index = 1;
  size_t reservations = 0;  // reservations computed (new, or moved)
  JobTimes largest_job;

  std::vector<framework::PluginInfo> plugins;
  // fgd: one per sampled task in schedule order; replay: one per task in
  // workload order.
  std::vector<PodPlacement> placements;
};

// Runs the simulation. InvalidArgument for a policy the framework refuses, a
// node the cluster refuses, an fgd run without GPUs or GPU demand, or a replay
// of tasks without create times (the message names the source).
Result<SimReport> Simulate(const Workload& workload, const SimOptions& options);

}  // namespace hf::sim

#endif  // HF_SIM_SIMULATOR_H_
