// ClusterState: the nodes, their free resources and the tasks placed on them.
//
// This is the one owner of resource accounting. Bind() is the only way to take
// resources and it checks every grant against what is free before changing
// anything, so no GPU's milli or memory (and no node's CPU or memory) can be
// allocated beyond capacity, whatever the caller does.
//
// Layout: nodes get dense ids (NodeId, in insertion order; that order is also
// the scheduler's deterministic tie-break order). The quantities the scheduling
// hot loop reads are kept as parallel arrays indexed by NodeId (struct of
// arrays), together with per-node summaries that are updated incrementally on
// every Bind/Release: free whole GPUs, the largest free share on one GPU, a
// bitmask of GPU models. A filter can thus reject most nodes from one or two
// array reads without looking at individual GPUs.
//
// Node operations change one node in place (AddNode, UpdateNode, RemoveNode):
// every other node keeps its allocations, measured usage, in-flight estimate
// and outside GPU memory. Removing a node renumbers the nodes after it.
//
// Threading: not thread-safe. One scheduler thread owns an instance; a what-if
// evaluation (policy preview) works on a copy, which is a plain value copy.
#ifndef HF_CORE_CLUSTER_STATE_H_
#define HF_CORE_CLUSTER_STATE_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model.h"
#include "core/node_index.h"
#include "core/status.h"

namespace hf {

// A task that holds resources on a node.
struct PlacedTask {
  TaskKey key = 0;
  std::string name;
  std::string group;
  uint64_t job = 0;  // the job it is a member of (JobMember::id), 0 for none
  uint32_t queue = 0;  // its queue's id (ClusterState::QueueId)
  int32_t priority = 0;
  bool preemptible = true;
  bool rdma = false;
  TaskState state = TaskState::kScheduled;  // kScheduled or kRunning
  int64_t started_at_ms = 0;                // when it started running; 0 if not yet
  Allocation alloc;
  // Part of its node's in-flight estimate: placed, and not yet held by a
  // measurement (ReportUsage says when it is).
  bool inflight = true;
};

// A node's load as the load thresholds read it (SPEC §5): measured usage
// plus the in-flight estimate, each a ratio of the node's capacity.
struct LoadEstimate {
  double cpu = 0, memory = 0, gpu = 0;
};

// How many tasks of one group (or with one name) sit on one node.
struct NodeCount {
  NodeId node;
  int32_t count;
  int32_t rdma_count;
};

// What the placed tasks of one queue hold (docs/QUEUES.md): their
// allocations, the GPU share by the model of each GPU.
struct QueueUsage {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::array<int64_t, 64> gpu_milli{};  // by model bit (ClusterState::model_name)
};

class ClusterState {
 public:
  // Bits of GPU models known to this cluster; 64 distinct models at most.
  using ModelMask = uint64_t;
  static constexpr ModelMask kAnyModel = ~ModelMask{0};
  static constexpr size_t kMaxModels = 64;

  // Adds a node (validated; the name must be new). Returns its id.
  Result<NodeId> AddNode(const NodeSpec& spec);
  // Replaces node n's spec in place (same name), keeping its condition, its
  // placed tasks (with their state and in-flight part), its measured usage
  // (of the GPUs it still has) and its outside GPU memory. Checked before
  // anything changes: InvalidArgument for a bad spec or another name;
  // FailedPrecondition when its tasks would not fit the new spec (CPU,
  // memory, a granted GPU or RDMA device gone, a GPU's grants above its new
  // memory); ResourceExhausted for a 65th GPU model.
  Status UpdateNode(NodeId n, const NodeSpec& spec);
  // UpdateNode's checks alone, changing nothing.
  Status CheckUpdate(NodeId n, const NodeSpec& spec) const;
  // Removes node n; the nodes after it move down one id (their state is
  // kept). FailedPrecondition while tasks are placed on it.
  Status RemoveNode(NodeId n);
  // Carries over from `old` what only agents' reports tell: for every node
  // here that `old` has by name, its measured usage and outside GPU memory
  // (per GPU index), and for every task placed on the same node in both,
  // whether it is still in the in-flight estimate. For a state rebuilt from
  // the store, which holds none of that.
  void AdoptMeasurements(const ClusterState& old);

  size_t node_count() const { return specs_.size(); }
  const NodeSpec& spec(NodeId n) const { return specs_[n]; }
  // kNoNode when no node has that name.
  NodeId FindNode(std::string_view name) const;

  void SetCondition(NodeId n, NodeCondition c);
  NodeCondition condition(NodeId n) const { return condition_[n]; }

  // Records a measurement. CPU load and memory use replace the last ones;
  // each GPU reported replaces that GPU's last value, and a GPU not reported
  // keeps it (a GPU never reported counts as idle). The node's GPU load is
  // the mean over all its GPUs. A placed task leaves the in-flight estimate
  // once the measurement holds it: when usage.running_tasks lists it, or,
  // for a report without that list, when it was marked running before the
  // report. InvalidArgument, changing nothing, when a GPU index is not one of
  // the node's or is reported twice (the message names usage.gpus[i].index).
  Status ReportUsage(NodeId n, const NodeUsage& usage);
  bool measured(NodeId n) const { return measured_[n]; }
  // The last measurement; `gpus` holds every GPU ever reported, at its last
  // value, in the node's GPU order.
  const NodeUsage& usage(NodeId n) const { return usage_[n]; }
  // The load the thresholds compare: measured usage plus the in-flight
  // estimate; zero for a node not measured yet.
  LoadEstimate Estimate(NodeId n) const;
  // What placed task `p` adds to its node's estimate, as a ratio of the
  // node's capacity: its CPU and memory requests, and its GPU milli over the
  // node's. `inflight` says which part it is in (LoadWithout).
  LoadEstimate Share(const PlacedTask& p) const;

  // Commits a placement. Checks, before changing anything: the task is not
  // placed already; alloc.node exists; CPU and memory fit; every GPU grant
  // names a distinct GPU of that node, a model the task allows, a share in
  // 1..1000 and memory that fit what is free; the RDMA device exists.
  // `state` is kScheduled or kRunning.
  Status Bind(const Task& task, const Allocation& alloc, TaskState state = TaskState::kScheduled,
              int64_t now_ms = 0);
  // Frees everything a placed task holds. NotFound if it holds nothing.
  Status Release(TaskKey key);
  // Puts back a task exactly as a copy taken before its Release described it
  // (same devices, state, start time and in-flight part): undoing an
  // eviction. Same checks as Bind.
  Status Restore(const PlacedTask& placed);
  // Marks a placed task running (it started on its node at now_ms).
  Status MarkRunning(TaskKey key, int64_t now_ms);

  const PlacedTask* FindPlaced(TaskKey key) const;
  // Per node, for preemption to skip nodes without possible victims: the
  // lowest priority among preemptible placed tasks (INT32_MAX if none), and
  // how many preemptible tasks are scheduled but not yet running.
  int32_t lowest_preemptible_priority(NodeId n) const { return lowest_preemptible_[n]; }
  int32_t scheduled_preemptible(NodeId n) const { return scheduled_preemptible_[n]; }
  // What preemptible tasks on node n hold, by priority band: together (an
  // upper bound on what evicting them can free) and the most any one of
  // them holds of each resource (the maxima may come from different tasks:
  // if evicting one cannot free enough, every victim set has two or more).
  struct Held {
    int64_t cpu_milli = 0, memory_mib = 0, gpu_milli = 0;
  };
  struct Largest {
    int64_t cpu_milli = 0, memory_mib = 0, gpu_milli = 0;
    int32_t gpus = 0;  // GPUs it has a grant on
  };
  struct PreemptibleBand {
    int32_t priority = 0;
    int32_t tasks = 0;
    Held held;
    Largest largest;
  };
  // In ascending priority; one entry per priority held by a preemptible task.
  const std::vector<PreemptibleBand>& preemptible_bands(NodeId n) const { return bands_[n]; }
  // Over the whole cluster: the lowest priority of any preemptible placed
  // task (INT32_MAX if none), and how many preemptible tasks are scheduled
  // but not yet running. O(1): preemption answers "nothing to evict" from
  // them without looking at a node.
  int32_t lowest_preemptible_priority() const {
    return preemptible_by_priority_.empty() ? INT32_MAX : preemptible_by_priority_.front().first;
  }
  int64_t scheduled_preemptible() const { return scheduled_preemptible_total_; }
  const std::vector<TaskKey>& TasksOn(NodeId n) const { return tasks_on_[n]; }
  // What preemption reads first of each task on node n, in the order of
  // TasksOn(n): one array to scan instead of a lookup per task.
  struct PlacedBrief {  // 64 bytes: one cache line
    TaskKey key = 0;
    uint64_t job = 0;
    int64_t cpu_milli = 0, memory_mib = 0;
    int64_t started_at_ms = 0;
    int32_t priority = 0;
    // Its GPU grants, when each is of `grant_milli` and `grant_memory_mib`
    // on one of the node's first 64 GPUs: bit i of gpu_mask set for a grant
    // on the node's i-th GPU (its position in the node's spec). Otherwise
    // gpus_in_mask is false and the grants are FindPlaced(key)->alloc.gpus.
    int32_t grant_milli = 0;
    int32_t grant_memory_mib = 0;
    TaskState state = TaskState::kScheduled;
    bool preemptible = true;
    bool gpus_in_mask = true;
    uint64_t gpu_mask = 0;
  };
  static_assert(sizeof(PlacedBrief) == 64);
  const std::vector<PlacedBrief>& BriefsOn(NodeId n) const { return briefs_on_[n]; }
  size_t placed_count() const { return placed_.size(); }

  // The placed members of job `job`, by key (none for job 0); and how many.
  std::vector<TaskKey> PlacedMembers(uint64_t job) const;
  size_t PlacedMemberCount(uint64_t job) const;

  // Queues, by the names tasks carry (Task::queue), get dense ids in the
  // order first met; an id stays for the life of this state. Every Bind,
  // Release and Restore keeps each queue's usage current.
  static constexpr uint32_t kNoQueue = UINT32_MAX;
  uint32_t QueueId(std::string_view name) const;  // kNoQueue: never met
  size_t queue_count() const { return queue_names_.size(); }
  const std::string& queue_name(uint32_t id) const { return queue_names_[id]; }
  const QueueUsage& queue_usage(uint32_t id) const { return queue_usage_[id]; }
  // The id of `name`, taken now when it is new.
  uint32_t InternQueue(std::string_view name);
  // What placed task `p` holds, as its queue counts it.
  QueueUsage UsageOf(const PlacedTask& p) const;

  // Where tasks of a group run (empty if nowhere); likewise tasks named `name`.
  std::span<const NodeCount> GroupNodes(std::string_view group) const;
  std::span<const NodeCount> NameNodes(std::string_view name) const;

  // A model bit stands for one (vendor, model) pair of GpuDevice.
  // Bits for the given model names, of any vendor; kAnyModel for an empty
  // list. Models no node has map to no bit (so they match nothing).
  ModelMask MaskOf(const std::vector<std::string>& models) const;
  // Bits of the models of the given vendors; kAnyModel for an empty list.
  ModelMask VendorMask(const std::vector<std::string>& vendors) const;
  // The GPUs a task's requests accept: its models, its vendors, and, for a
  // share of a GPU (gpu_milli < 1000), only the models whose vendor may be
  // shared (SetExclusiveVendors). Every fit check takes its mask from here.
  ModelMask AllowedModels(const Requests& r) const {
    const ModelMask m = AcceptedModels(r);
    return r.gpu_milli < kWholeGpuMilli ? m & ~exclusive_models_ : m;
  }
  // The task's own constraints only (models and vendors): what Bind checks,
  // so that a placement made before the exclusive vendors changed is taken
  // back as it was (a restart rebuilding memory from the store).
  ModelMask AcceptedModels(const Requests& r) const {
    ModelMask m = r.gpu_models.empty() ? kAnyModel : MaskOf(r.gpu_models);
    if (!r.gpu_vendors.empty()) m &= VendorMask(r.gpu_vendors);
    return m;
  }
  // The vendors whose devices are never shared between tasks (the
  // scheduler's exclusive_gpu_vendors): a request for part of a GPU does not
  // fit their models. Placements made before a change keep their GPUs.
  void SetExclusiveVendors(std::vector<std::string> vendors);
  const std::vector<std::string>& exclusive_vendors() const { return exclusive_vendors_; }

  // Totals and free amounts, per node.
  int64_t total_cpu(NodeId n) const { return total_cpu_[n]; }
  int64_t total_memory(NodeId n) const { return total_mem_[n]; }
  int64_t total_gpu_milli(NodeId n) const { return int64_t{gpu_count_[n]} * kWholeGpuMilli; }
  int64_t free_cpu(NodeId n) const { return free_cpu_[n]; }
  int64_t free_memory(NodeId n) const { return free_mem_[n]; }
  int64_t used_gpu_milli(NodeId n) const { return used_gpu_milli_[n]; }
  int32_t gpu_count(NodeId n) const { return gpu_count_[n]; }
  int32_t free_whole_gpus(NodeId n) const { return free_whole_[n]; }
  int32_t max_free_milli(NodeId n) const { return max_free_milli_[n]; }
  ModelMask model_mask(NodeId n) const { return model_mask_[n]; }
  bool has_rdma(NodeId n) const { return !specs_[n].rdma.empty(); }
  bool schedulable(NodeId n) const { return condition_[n] == NodeCondition::kReady; }

  // Per-GPU free amounts of node n, in the order of spec(n).gpus.
  std::span<const int32_t> gpu_free_milli(NodeId n) const {
    return {gpu_free_milli_.data() + gpu_begin_[n], size_t(gpu_count_[n])};
  }
  // Free memory is what is neither granted nor measured in use by processes
  // outside HeteroFlow (ReportUsage).
  std::span<const int64_t> gpu_free_memory(NodeId n) const {
    return {gpu_free_mem_.data() + gpu_begin_[n], size_t(gpu_count_[n])};
  }
  std::span<const int64_t> gpu_outside_memory(NodeId n) const {
    return {gpu_outside_mem_.data() + gpu_begin_[n], size_t(gpu_count_[n])};
  }
  std::span<const ModelMask> gpu_model_bits(NodeId n) const {
    return {gpu_model_bit_.data() + gpu_begin_[n], size_t(gpu_count_[n])};
  }
  // Position of the GPU with the given index in spec(n).gpus, or -1.
  int32_t GpuSlot(NodeId n, int32_t gpu_index) const;
  // The model of an allocation's first GPU (it must have one, on its node).
  const std::string& GpuModelOf(const Allocation& a) const {
    return specs_[a.node].gpus[size_t(GpuSlot(a.node, a.gpus.at(0).index))].model;
  }

  // The in-flight estimate: what was placed on n since its last measurement.
  int64_t inflight_cpu(NodeId n) const { return inflight_cpu_[n]; }
  int64_t inflight_memory(NodeId n) const { return inflight_mem_[n]; }
  int64_t inflight_gpu_milli(NodeId n) const { return inflight_gpu_milli_[n]; }
  // Mean measured utilization over all the node's GPUs (see ReportUsage).
  double measured_gpu_utilization(NodeId n) const { return gpu_util_[n]; }

  // Raw pointers to the per-node arrays, for scheduling hot loops: reading
  // through locals lets the compiler keep them in registers (writes to a
  // uint32 node list could otherwise alias the int32 arrays). Valid until the
  // next AddNode.
  struct Arrays {
    const NodeCondition* condition;
    const int64_t* total_cpu;
    const int64_t* total_memory;
    const int64_t* free_cpu;
    const int64_t* free_memory;
    const int64_t* used_gpu_milli;
    const int32_t* gpu_count;
    const int32_t* free_whole_gpus;
    const int32_t* max_free_milli;
    const ModelMask* model_mask;
    // 1 / total (0 where the node has none of that resource).
    const double* inv_cpu;
    const double* inv_memory;
    const double* inv_gpu_milli;
    // used / total per resource, kept current by Bind/Release (0 where the
    // node has none), and a mask of the resources the node has (bit 0 CPU,
    // 1 memory, 2 GPU).
    const double* util_cpu;
    const double* util_memory;
    const double* util_gpu;
    const uint8_t* has;
  };
  Arrays arrays() const {
    return {condition_.data(),     total_cpu_.data(),     total_mem_.data(),
            free_cpu_.data(),      free_mem_.data(),      used_gpu_milli_.data(),
            gpu_count_.data(),     free_whole_.data(),    max_free_milli_.data(),
            model_mask_.data(),    inv_cpu_.data(),       inv_mem_.data(),
            inv_gpu_milli_.data(), util_cpu_.data(),      util_mem_.data(),
            util_gpu_.data(),      has_.data()};
  }

  // Indexes kept current by every change, for filters that skip nodes:
  //   ready_nodes: condition Ready;
  //   model_nodes(m): nodes with at least one GPU of model bit m;
  //   mixed_model_nodes: nodes with GPUs of more than one model;
  //   whole_gpu_nodes(k), k in 1..kIndexedWholeGpus: >= k free whole GPUs;
  //   share_nodes(b), b in 1..10: some GPU with >= b x 100 free milli.
  // Load estimates (measured usage plus the in-flight estimate, for measured
  // nodes; GPU only for nodes with GPUs) as max-trees, so "which nodes are
  // above a threshold" costs nothing when none is.
  static constexpr int kIndexedWholeGpus = 8;
  const NodeBitmap& ready_nodes() const { return ready_; }
  const NodeBitmap& model_nodes(size_t model_bit) const { return model_nodes_[model_bit]; }
  size_t model_count() const { return model_names_.size(); }
  const std::string& model_name(size_t model_bit) const { return model_names_[model_bit]; }
  const std::string& model_vendor(size_t model_bit) const { return model_vendors_[model_bit]; }
  // "nvidia A100-80G"; the model alone for a device of no known vendor.
  std::string model_label(size_t model_bit) const {
    return model_vendors_[model_bit].empty() ? model_names_[model_bit]
                                             : model_vendors_[model_bit] + " " + model_names_[model_bit];
  }
  // The free milli of every GPU of model bit m, over all nodes whatever
  // their condition: kept current by every change.
  int64_t model_free_milli(size_t model_bit) const { return model_free_milli_[model_bit]; }
  const NodeBitmap& mixed_model_nodes() const { return mixed_; }
  const NodeBitmap& whole_gpu_nodes(int k) const { return whole_ge_[k - 1]; }
  const NodeBitmap& share_nodes(int b) const { return share_ge_[b - 1]; }
  const MaxTree& cpu_estimate() const { return cpu_est_; }
  const MaxTree& memory_estimate() const { return mem_est_; }
  const MaxTree& gpu_estimate() const { return gpu_est_; }

  // Changes whenever nodes are added, replaced or removed, and is unique
  // across every ClusterState in the process (copies share it until either
  // changes), so plugins can cache per-node derived data keyed on it.
  uint64_t nodes_version() const { return nodes_version_; }

 private:
  // Calls f on every per-node array (one entry per NodeId), so that adding
  // and removing a node cannot miss one.
  template <typename F>
  void ForEachNodeArray(F&& f);
  // The (vendor, model) pairs of `spec` the cluster does not know yet;
  // ResourceExhausted when they would take it past kMaxModels.
  Result<std::vector<std::pair<std::string, std::string>>> NewModels(const NodeSpec& spec) const;
  // The bit of (vendor, model), or -1.
  int ModelBit(const std::string& vendor, const std::string& model) const;
  // Interns the models of `spec` that are new (NewModels' errors, changing
  // nothing).
  Status InternModels(const NodeSpec& spec);
  // Writes everything derived from node n's spec (capacity, GPUs, model
  // bits, indexes), with nothing placed on it: free = capacity. The node's
  // flat GPU range is resized to the spec's GPUs.
  void ApplySpec(NodeId n, const NodeSpec& spec);
  // Bind's checks and changes, for a task described by `p` (Bind and Restore).
  Status Place(PlacedTask p, ModelMask allowed);
  void RecomputeMeasuredGpu(NodeId n);
  void RecomputeInflight(NodeId n);
  void RebuildIndexes();
  void NewNodesVersion();
  void RecomputeGpuSummary(NodeId n);
  // The total in model_free_milli_ that flat GPU `flat` counts in.
  int64_t& ModelFreeOf(size_t flat);
  void RecomputeUtilization(NodeId n);
  void UpdateEstimates(NodeId n);
  // The maps keyed by placed task (placed_, and the name and group indexes)
  // keep room for kReservedTasksPerNode tasks a node, reserved as nodes are
  // added (doubling): growing them one task at a time would rehash every
  // entry in the middle of a scheduling decision (measured: 2.5, 5 and
  // 11 ms pauses at 10,274, 20,754 and 42,044 placed tasks).
  static constexpr size_t kReservedTasksPerNode = 16;
  void ReserveTaskMaps();
  size_t reserved_tasks_ = 0;
  // The largest of band `priority` on node n, from its tasks.
  void RecomputeLargest(NodeId n, PreemptibleBand& band);
  // Counts a preemptible task in (sign +1) or out of (-1) the cluster-wide
  // summaries.
  void CountPreemptible(const PlacedTask& p, int sign);
  // Adds (sign +1) or takes away (-1) what `p` holds to its queue's usage.
  void CountQueueUsage(const PlacedTask& p, int sign);
  void AddToIndex(std::unordered_map<std::string, std::vector<NodeCount>>& index,
                  const std::string& key, NodeId n, int32_t delta, bool rdma);

  std::vector<NodeSpec> specs_;
  std::unordered_map<std::string, NodeId> by_name_;
  std::vector<std::string> model_names_;    // bit i = (model_vendors_[i], model_names_[i])
  std::vector<std::string> model_vendors_;
  // The framework sets its policy's before each decision; the default is the
  // policy's default, so that what runs first (a queue's admission) agrees.
  std::vector<std::string> exclusive_vendors_ = DefaultExclusiveVendors();
  ModelMask exclusive_models_ = 0;  // the bits of exclusive_vendors_' models

  // Parallel per-node arrays.
  std::vector<NodeCondition> condition_;
  std::vector<int64_t> total_cpu_, total_mem_, free_cpu_, free_mem_, used_gpu_milli_;
  std::vector<int32_t> gpu_count_, free_whole_, max_free_milli_;
  std::vector<uint32_t> gpu_begin_;
  std::vector<ModelMask> model_mask_;
  std::vector<uint8_t> measured_;
  std::vector<NodeUsage> usage_;
  std::vector<double> gpu_util_;
  std::vector<double> inv_cpu_, inv_mem_, inv_gpu_milli_;
  std::vector<double> util_cpu_, util_mem_, util_gpu_;
  std::vector<uint8_t> has_;
  NodeBitmap ready_, mixed_;
  std::vector<NodeBitmap> model_nodes_, whole_ge_, share_ge_;
  MaxTree cpu_est_, mem_est_, gpu_est_;
  std::vector<int64_t> inflight_cpu_, inflight_mem_, inflight_gpu_milli_;
  std::vector<int32_t> lowest_preemptible_, scheduled_preemptible_;
  std::vector<std::vector<PreemptibleBand>> bands_;
  // (priority, preemptible placed tasks with it), by priority; few entries.
  std::vector<std::pair<int32_t, int64_t>> preemptible_by_priority_;
  int64_t scheduled_preemptible_total_ = 0;
  std::vector<std::vector<TaskKey>> tasks_on_;
  std::vector<std::vector<PlacedBrief>> briefs_on_;  // beside tasks_on_, index for index

  // Flat per-GPU arrays; node n owns [gpu_begin_[n], gpu_begin_[n] + gpu_count_[n]).
  std::vector<int32_t> gpu_free_milli_;
  std::vector<int64_t> gpu_free_mem_;  // less what is used outside HeteroFlow
  std::vector<int64_t> gpu_outside_mem_;  // measured use beyond the grants
  std::vector<ModelMask> gpu_model_bit_;
  std::vector<int64_t> model_free_milli_;  // by model bit

  std::unordered_map<TaskKey, PlacedTask> placed_;
  // Placed tasks by job (PlacedTask::job), for jobs with any placed.
  std::unordered_map<uint64_t, std::vector<TaskKey>> job_placed_;
  std::unordered_map<std::string, std::vector<NodeCount>> group_index_;
  std::unordered_map<std::string, std::vector<NodeCount>> name_index_;
  std::vector<std::string> queue_names_;  // by queue id
  std::unordered_map<std::string, uint32_t> queue_ids_;
  std::vector<QueueUsage> queue_usage_;  // by queue id
  uint64_t nodes_version_ = 0;
};

}  // namespace hf

#endif  // HF_CORE_CLUSTER_STATE_H_
