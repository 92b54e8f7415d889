// Backfill with reservations (docs/QUEUES.md, "Backfill"; Slurm's backfill
// scheduler).
//
// When the first waiting task (or gang) in rank order cannot start, the
// time its members could all start is worked out from the placed tasks'
// time limits: each node frees what its tasks hold as they reach their
// limits, and the reservation starts at the first moment enough nodes could
// each host enough members. Those nodes' room is then held for it. A task
// ranked lower may still be placed on a held node when it will have ended
// (its time limit) before the reservation starts, or when what it takes
// leaves the reservation its room at the start; a task without a time limit
// therefore never takes held room. Tasks without a time limit never end, so
// a task waiting only for them gets no reservation (it waits as before).
// Nor does a single task (need 1) no bigger than some placed task that
// will end: that task's end makes room for it whatever takes the room free
// now, the room goes to the first in line at that moment, so no one can pass
// it over for long, and holding room for it would only hand the next release
// out of turn (under fair share, to a queue whose turn it no longer is).
//
// The plan counts resources only (CPU, memory, GPU shares of the models the
// task takes, on Ready nodes); the filters that look at more (RDMA,
// topology, load) still decide the placement when its time comes.
//
// Threading: values; no shared state.
#ifndef HF_QUEUES_BACKFILL_H_
#define HF_QUEUES_BACKFILL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/cluster_state.h"
#include "core/model.h"

namespace hf::queues {

// When a placed task will have ended at the latest (ms); INT64_MAX for never.
using EndOf = std::function<int64_t(const PlacedTask&)>;

struct Reservation {
  TaskKey task = 0;  // the waiting task it holds room for (a gang's first member)
  uint64_t job = 0;
  int32_t priority = 0;
  int64_t start_ms = 0;  // when its members could all start, as planned
  Requests member;       // one member's requests (the largest, for a gang)
  // What each held node will have free at the start (less what was placed
  // there since, ending later), and the members it is to host.
  struct Hold {
    NodeId node = kNoNode;
    int32_t members = 0;
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    int64_t gpu_slots = 0;  // GPU shares of member.gpu_milli, on its models
  };
  std::vector<Hold> holds;

  // Whether it holds room for task `key` (of job `job`, 0: none): that
  // task, or any member of its gang.
  bool Holds(TaskKey key, uint64_t job_id) const {
    return task == key || (job_id != 0 && job == job_id);
  }
  // Whether a task of `other_priority` that cannot start takes it over.
  // There is one reservation; it stays with its task until that starts,
  // unless higher priority waits: among equals it went to the first task
  // that could not start in the order tasks are tried (fair share among
  // queues, then priority and age), and a later one taking it would undo
  // that order.
  bool TakenOverBy(int32_t other_priority) const { return other_priority > priority; }
};

// What a reservation for waiting task(s) plans for: one member's shape,
// each resource the largest any waiting member asks (GPU models: `first`'s),
// and how many must start: `min_available` less those `placed`, at least
// one and at most those waiting. A task outside a job: itself, one.
struct GangNeed {
  Requests member;
  int32_t need = 1;
};
GangNeed NeedOf(const Requests& first, const std::vector<const Requests*>& waiting,
                int32_t min_available, int32_t placed);

// The reservation for `need` members shaped like `member` (the task `task`
// of job `job`, priority `priority`), or nullopt when they never fit.
std::optional<Reservation> PlanReservation(const ClusterState& cluster, const Task& task,
                                           const Requests& member, int32_t need, int64_t now_ms,
                                           const EndOf& end_of);

// The held nodes that a task asking `req` and ending at `end_ms` must not be
// placed on (appended to `out`).
void HeldAgainst(const Reservation& r, const Requests& req, int64_t end_ms,
                 std::vector<NodeId>& out);

// A task ending at `end_ms` was placed with `alloc`: its room is taken from
// the hold on its node, if any, when it ends after the start.
void Charge(Reservation& r, const Allocation& alloc, int64_t end_ms);

}  // namespace hf::queues

#endif  // HF_QUEUES_BACKFILL_H_
