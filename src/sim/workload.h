// What the simulator replays: a cluster (node specs) and a list of tasks with
// optional arrival and departure times, as produced by the trace readers
// (openb_reader.h, yaml_workload.h).
#ifndef HF_SIM_WORKLOAD_H_
#define HF_SIM_WORKLOAD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "framework/framework.h"
#include "framework/policy.h"
#include "queues/queue_tree.h"

namespace hf::sim {

// One task of the workload. Times are milliseconds from the start of the
// trace; an absent create time means the source has none (the replay method
// refuses such workloads unless the format defines a default), an absent
// delete time means the task never leaves.
struct SimTask {
  Task task;
  std::optional<int64_t> create_ms;
  std::optional<int64_t> delete_ms;
  // "FILE:LINE" of the row or entry that declared the task, for messages.
  std::string origin;
  // A job's member (task.job set): how long its job runs once its whole
  // gang runs; the member then leaves with the others. Members have no
  // delete time of their own.
  std::optional<int64_t> job_run_ms;
  // A job's member: how its gang is placed (its job's placement).
  framework::GangOptions job_gang;
  // A task outside a job: how long it runs once placed, then it leaves
  // (placed again after an eviction, it runs this long again). Absent: it
  // runs until its delete time. A time limit (task.time_limit_s) shorter
  // than the run stops it at the limit, as the agent does.
  std::optional<int64_t> run_ms;
  // Who submitted it (reported per user within its queue).
  std::string user;
};

// A node and the usage measurement it starts with (YAML workloads only; the
// load-threshold filter reads it).
struct SimNode {
  NodeSpec spec;
  std::optional<NodeUsage> usage;
};

struct Workload {
  std::vector<SimNode> nodes;
  std::vector<SimTask> tasks;
  // The queue tree (docs/QUEUES.md); empty: root and default only.
  std::vector<queues::QueueSpec> queues;
  // A plugins:/scheduler: block given with the workload (YAML only).
  std::optional<framework::Policy> policy;
  // Names the sources in messages and summaries.
  std::string nodes_source;
  std::string tasks_source;
};

// Reads a whole file in one call. NotFound / Unavailable naming the path.
Result<std::string> ReadWholeFile(const std::string& path);

}  // namespace hf::sim

#endif  // HF_SIM_WORKLOAD_H_
