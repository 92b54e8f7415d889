// Reader for the Alibaba openb GPU trace CSVs (../shared/traces/alibaba-openb,
// SPEC Appendix A).
//
// Columns are found by header name, so every published variant reads with
// the same code:
//   nodes: sn,cpu_milli,memory_mib,gpu,model
//   pods:  name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
//          creation_time,deletion_time,scheduled_time
// The multigpu* pod lists have only the first five pod columns and the
// *nomem* ones lack memory_mib. Required columns: sn, cpu_milli, gpu (nodes);
// name, cpu_milli, num_gpu, gpu_milli (pods). A missing optional column reads
// as 0 (quantities), empty (strings) or absent (times); so does an empty
// time or scheduled_time cell (Pending pods have no scheduled_time).
//
// Errors (InvalidArgument, message "FILE:LINE: what"): an unknown or repeated
// column, a missing required column, a row with the wrong number of fields, a
// field that is not a plain decimal integer, a negative quantity or time, a
// gpu_milli above 1000, an unknown qos, an empty or repeated name. Quoted
// fields are not supported (no published file has one).
//
// Mapping onto the domain model (SPEC §2):
//   - a node gets `gpu` GPUs with indices 0..gpu-1, all of the node's `model`,
//     memory 0 (the trace does not say), vendor and locality unknown;
//   - a pod asks for cpu_milli, memory_mib, num_gpu GPUs of gpu_milli each
//     (a GPU pod with gpu_milli 0 asks for whole GPUs; no published file has
//     one), of the models in gpu_spec split on '|' (empty = any);
//   - qos becomes the priority: LS 3, Guaranteed 2, Burstable 1, BE 0 (and an
//     empty qos 0): latency-sensitive services above guaranteed batch, best
//     effort last, as the names rank them in Kubernetes and Koordinator;
//   - every pod is preemptible; its key is its row index (0-based, in file
//     order) and its name the pod's name.
#ifndef HF_SIM_OPENB_READER_H_
#define HF_SIM_OPENB_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "sim/workload.h"

namespace hf::sim {

// One row of a node list, as written in the file.
struct OpenbNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t gpu = 0;
  std::string model;
  int line = 0;  // 1-based line in the file
};

// One row of a pod list, as written in the file. Times are seconds.
struct OpenbPod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t num_gpu = 0;
  int32_t gpu_milli = 0;
  std::string gpu_spec;
  std::string qos;
  std::string pod_phase;
  std::optional<int64_t> creation_time;
  std::optional<int64_t> deletion_time;
  std::optional<int64_t> scheduled_time;
  int line = 0;
};

// Parse the text of a node or pod list; `source` names the file in messages.
Result<std::vector<OpenbNode>> ParseOpenbNodes(std::string_view text, const std::string& source);
Result<std::vector<OpenbPod>> ParseOpenbPods(std::string_view text, const std::string& source);

// LS 3, Guaranteed 2, Burstable 1, BE 0, "" 0; nullopt for anything else.
std::optional<int32_t> QosPriority(std::string_view qos);

NodeSpec ToNodeSpec(const OpenbNode& node);
// `source` is the pod list's file name, for SimTask::origin.
SimTask ToSimTask(const OpenbPod& pod, TaskKey key, const std::string& source);

// Reads both files and maps them. Errors name the file (and line).
Result<Workload> LoadOpenbWorkload(const std::string& nodes_path, const std::string& pods_path);

}  // namespace hf::sim

#endif  // HF_SIM_OPENB_READER_H_
