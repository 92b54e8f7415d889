// Reader for the simulator's YAML cluster + workload format.
//
// One document with up to four top-level blocks; every field of SPEC §2 can
// be expressed:
//
//   plugins:   {...}        # optional: the policy, as framework/policy.h parses it
//   scheduler: {...}        # optional: thresholds, score_weights
//   nodes:                  # SPEC Appendix A declared-inventory shape
//     - name: gpu-a1
//       labels: {pool: training}
//       cpu_milli: 96000
//       memory_mib: 786432
//       gpus:
//         - {index: 0, model: A100-80G, vendor: nvidia, memory_mib: 81920,
//            numa: 0, pcie_switch: 0, fabric_domain: 0, uuid: GPU-...}
//       rdma: [{name: mlx5_0, numa: 0, pcie_switch: 0}]
//       topology: {zone: z1, switch: s1, rack: r1}
//       usage: {cpu_load: 0.3, memory_used: 0.4,
//               gpus: [{index: 0, utilization: 0.95, memory_used_mib: 30000}]}
//       usage_file: usage/gpu-a1.yaml   # instead of usage:, relative to this file
//   tasks:                  # SPEC Appendix A task-submission shape
//     - name: llama-ft-0
//       group: llama-ft
//       priority: 100
//       kind: batch                     # or inference
//       requests: {cpu_milli: 8000, memory_mib: 65536, gpu: 4, gpu_milli: 1000,
//                  gpu_memory_mib: 0, gpu_models: [A100-80G, H100]}
//       rdma_required: true
//       depends_on: [feature-store]
//       preemptible: true
//       command: [python3, train.py]
//       env: {EPOCHS: "3"}
//       create_time: 0                  # seconds; default 0 (present from the start)
//       delete_time: 3600               # seconds; default: never leaves
//       duration: 600                   # or: seconds it runs once placed, then leaves
//       time_limit_s: 900               # stopped at this many seconds of running
//       queue: team-a                   # docs/QUEUES.md; default "default"
//       user: alice                     # reported per user within its queue
//       count: 100                      # this many copies, NAME-0 .. NAME-99,
//       every: 30                       #   arriving this many seconds apart
//   jobs:                   # docs/JOBS.md's job spec, plus times
//     - name: train-a
//       roles: [{name: worker, replicas: 2, requests: {gpu: 4}}]
//       min_available: 2                # default: every replica
//       priority: 0
//       create_time: 0                  # seconds: rank 0 arrives then
//       stagger: 1                      # seconds between members' arrivals (default 0)
//       duration: 600                   # seconds the job runs once its whole gang runs
//                                       # (required); then every member leaves
//       queue: team-a                   # as the job spec has it, with time_limit_s
//       user: alice
//       count: 10                       # copies NAME-0 .. NAME-9 ...
//       every: 3600                     #   arriving this many seconds apart
//   queues:                 # the queue tree, as the server's config file has it
//     - {name: team-a, weight: 2, guaranteed: {gpu: {A100-80G: 8}}}
//
// A job's members are tasks named NAME-ROLE-INDEX after the tasks: list,
// with the job's id (its position in jobs:, copies counted, from 1), role
// and rank.
// A GPU's index defaults to its position in the list; locality ids default to
// -1 (unknown). Task keys are positions in the tasks list. Unknown keys, wrong
// types, out-of-range values (SPEC §2 validation), duplicate node or task
// names and delete_time < create_time are errors "FILE:LINE: message".
#ifndef HF_SIM_YAML_WORKLOAD_H_
#define HF_SIM_YAML_WORKLOAD_H_

#include <string>

#include "core/status.h"
#include "sim/workload.h"

namespace hf::sim {

// `source` names the file in messages; relative usage_file paths are
// resolved against `base_dir` (empty: the current directory).
Result<Workload> ParseYamlWorkload(const std::string& text, const std::string& source,
                                   const std::string& base_dir = "");
Result<Workload> LoadYamlWorkload(const std::string& path);

}  // namespace hf::sim

#endif  // HF_SIM_YAML_WORKLOAD_H_
