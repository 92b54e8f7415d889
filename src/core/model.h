// The domain model shared by every part of HeteroFlow (SPEC §2).
//
// All resource quantities are integers: CPU in millicores, memory in MiB, a
// GPU share in milli-GPUs (1000 = one whole GPU), GPU memory in MiB. These are
// plain value types; ClusterState (cluster_state.h) owns the live accounting.
#ifndef HF_CORE_MODEL_H_
#define HF_CORE_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hf {

inline constexpr int32_t kWholeGpuMilli = 1000;

// The accelerator vendors the agent discovers and binds (docs/ACCELERATORS.md),
// named as their Kubernetes device plugins' resource domains are
// (nvidia.com/gpu, amd.com/gpu, huawei.com/Ascend910, habana.ai/gaudi).
inline constexpr char kVendorNvidia[] = "nvidia";
inline constexpr char kVendorAmd[] = "amd";
inline constexpr char kVendorHuawei[] = "huawei";  // Ascend NPUs
inline constexpr char kVendorHabana[] = "habana";  // Intel Gaudi HPUs
// The vendors whose devices are not shared by default (docs/ACCELERATORS.md,
// "Sharing and isolation"): the scheduler's exclusive_gpu_vendors.
inline const std::vector<std::string>& DefaultExclusiveVendors() {
  static const std::vector<std::string> v = {kVendorHuawei, kVendorHabana};
  return v;
}

// A vendor name: 1 to 32 of [a-z0-9-], starting with a letter or digit. A
// declared device may name a vendor the agent does not know (it then gets no
// binding variable, docs/ACCELERATORS.md).
bool IsVendorName(std::string_view s);

// One accelerator on a node (a GPU, an NPU, an HPU: "GPU" throughout).
// Locality ids are small integers as reported by the node (NUMA node, PCIe
// switch, fabric domain); -1 means unknown.
struct GpuDevice {
  int32_t index = 0;
  std::string uuid;
  std::string model;  // e.g. "A100-80G", "H100", "T4", "MI300X", "Ascend910B", "HL-225"
  // Whose device it is, which says how a task is bound to it and whether it
  // may be shared (docs/ACCELERATORS.md): kVendorNvidia, kVendorAmd,
  // kVendorHuawei, kVendorHabana, another name (IsVendorName), or empty
  // (unknown: the openb trace's devices).
  std::string vendor = kVendorNvidia;
  int64_t memory_mib = 0;
  int32_t numa = -1;
  int32_t pcie_switch = -1;
  // The devices joined by the vendor's device-to-device fabric: NVLink and
  // NVSwitch (NVIDIA), xGMI (AMD), HCCS (Huawei Ascend). Devices of one
  // domain and one vendor talk without crossing PCIe.
  int32_t fabric_domain = -1;
};

// One RDMA NIC on a node and where it sits.
struct RdmaDevice {
  std::string name;  // e.g. "mlx5_0"
  int32_t numa = -1;
  int32_t pcie_switch = -1;
};

// Where a node sits in the network. Empty strings mean unknown.
struct TopologyPosition {
  std::string zone;
  std::string switch_name;
  std::string rack;
};

enum class NodeCondition : uint8_t {
  kReady,
  kNotReady,  // heartbeats stopped; takes nothing
  kDraining,  // cordoned: keeps its tasks, takes no new ones
};
const char* NodeConditionName(NodeCondition c);

// Measured usage as reported by a node's agent (not allocations).
struct GpuUsage {
  int32_t index = 0;
  double utilization = 0;  // 0..1
  int64_t memory_used_mib = 0;
};
struct NodeUsage {
  double cpu_load = 0;     // 0..1
  double memory_used = 0;  // 0..1
  std::vector<GpuUsage> gpus;
  int64_t reported_at_ms = 0;
  // The tasks whose processes ran on the node when this was measured, when
  // the reporter says (agents do); they leave the in-flight estimate.
  std::optional<std::vector<uint64_t>> running_tasks;
};

// A node as declared or discovered: its identity and capacity.
struct NodeSpec {
  std::string name;
  std::map<std::string, std::string> labels;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<GpuDevice> gpus;
  std::vector<RdmaDevice> rdma;
  TopologyPosition topology;

  // Checks names, non-negative capacities and unique GPU indices.
  Status Validate() const;
};

// What a task asks for. gpu_milli applies to each of the `gpu` GPUs: 1000 means
// exclusive GPUs, less means the task may share each GPU with others.
struct Requests {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t gpu = 0;
  int32_t gpu_milli = kWholeGpuMilli;
  int64_t gpu_memory_mib = 0;           // per GPU; 0 = no memory requirement
  std::vector<std::string> gpu_models;   // allowed models; empty = any
  std::vector<std::string> gpu_vendors;  // allowed vendors (GpuDevice::vendor); empty = any

  // Checks ranges: non-negative quantities, gpu_milli in 1..1000 when gpu > 0,
  // vendor names (IsVendorName).
  Status Validate() const;
};

enum class TaskState : uint8_t { kPending, kScheduled, kRunning, kSucceeded, kFailed, kCancelled };
const char* TaskStateName(TaskState s);
std::optional<TaskState> ParseTaskState(const std::string& s);

enum class TaskKind : uint8_t { kBatch, kInference };

// How a task sits among the other tasks of its group (the topology plugin's
// group term): packed close, as the ranks of a training job that talk over
// NCCL want; or spread apart, as the replicas of a service want, so that
// losing one node (or rack) does not take them all.
enum class GroupPlacement : uint8_t { kPack, kSpread };
const char* GroupPlacementName(GroupPlacement p);
std::optional<GroupPlacement> ParseGroupPlacement(const std::string& s);

using TaskKey = uint64_t;

// The queue tasks and jobs go to when they name none (docs/QUEUES.md).
inline constexpr char kDefaultQueue[] = "default";

// A task's place in a job (docs/JOBS.md), set by the server for the members
// of a job; id 0 for a task submitted on its own.
struct JobMember {
  uint64_t id = 0;  // the job's id
  std::string name;  // the job's name
  std::string role;
  int32_t rank = 0;           // 0 .. world_size - 1, in the order of the roles
  int32_t world_size = 0;     // the job's members
  int32_t min_available = 0;  // members placed together, all or none (the gang)
  bool operator==(const JobMember&) const = default;
};

// A unit of work to place. `key` is a dense, unique id chosen by the owner
// (the store's row id, or the simulator's pod index); `name` is for humans and
// for other tasks' depends_on.
struct Task {
  TaskKey key = 0;
  std::string name;
  std::string group;  // the instances of one distributed job share a group
  GroupPlacement group_placement = GroupPlacement::kPack;
  int32_t priority = 0;
  TaskKind kind = TaskKind::kBatch;
  Requests requests;
  bool rdma_required = false;
  std::vector<std::string> depends_on;
  bool preemptible = true;
  // When its node is lost (the agent stops sending heartbeats), the task is
  // queued again; false fails it instead (e.g. a job that must not run twice).
  bool requeue_on_node_loss = true;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  // Environment values that are secrets (credentials): the task's process
  // gets them like `env`, but the API shows only their names, and only the
  // agent of the task's node receives the values.
  std::map<std::string, std::string> secret_env;
  // Stopped at this many seconds of running (SIGTERM, the grace period,
  // SIGKILL); 0: no limit.
  int64_t time_limit_s = 0;
  // The queue it is admitted from (docs/QUEUES.md): a leaf of the queue
  // tree; its usage counts against that queue and every ancestor.
  std::string queue = kDefaultQueue;
  JobMember job;
};

// One GPU (or part of one) granted to a task.
struct GpuGrant {
  int32_t index = 0;  // the GPU's index on its node
  int32_t milli = 0;
  int64_t memory_mib = 0;
  bool operator==(const GpuGrant&) const = default;
};

using NodeId = uint32_t;
inline constexpr NodeId kNoNode = UINT32_MAX;

// Where a task runs, down to the devices.
struct Allocation {
  NodeId node = kNoNode;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<GpuGrant> gpus;
  std::string rdma_device;  // empty when none was allocated
};

}  // namespace hf

#endif  // HF_CORE_MODEL_H_
