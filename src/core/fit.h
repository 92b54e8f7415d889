// Resource fit: can a node's free resources hold a task's requests?
//
// Shared by the always-on fit filter (on live state), by preemption (on a
// what-if copy of one node with victims removed) and by device pickers.
#ifndef HF_CORE_FIT_H_
#define HF_CORE_FIT_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "core/cluster_state.h"
#include "core/model.h"

namespace hf {

enum class FitFailure : uint8_t {
  kNone,
  kInsufficientCpu,
  kInsufficientMemory,
  kInsufficientGpu,        // too few GPUs, or too little free share on them
  kGpuModelMismatch,       // enough GPUs, but not of an allowed model
  kInsufficientGpuMemory,  // enough share, but not enough free memory per GPU
};

// One node's free GPUs, as parallel spans in the node's GPU order.
struct GpuFreeView {
  std::span<const int32_t> milli;
  std::span<const int64_t> memory_mib;
  std::span<const ClusterState::ModelMask> model_bit;
};

// Checks the GPU part of a request against free GPUs. `allowed` is the task's
// model mask (ClusterState::MaskOf).
FitFailure CheckGpuFit(const GpuFreeView& free, const Requests& req, ClusterState::ModelMask allowed);

// Whether GPU `slot` can take one share of the request.
inline bool GpuSlotFits(const GpuFreeView& free, size_t slot, const Requests& req,
                        ClusterState::ModelMask allowed) {
  return (free.model_bit[slot] & allowed) && free.milli[slot] >= req.gpu_milli &&
         free.memory_mib[slot] >= req.gpu_memory_mib;
}

// A detached copy of one node's free resources, for what-if evaluation.
struct NodeFree {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<int32_t> gpu_milli;
  std::vector<int64_t> gpu_memory_mib;
  std::vector<ClusterState::ModelMask> gpu_model_bit;

  static NodeFree Of(const ClusterState& cluster, NodeId n);
  // Gives back what `alloc` holds (as if the task were gone).
  void Return(const ClusterState& cluster, const Allocation& alloc);
  // Takes what `alloc` holds (the inverse of Return).
  void Take(const ClusterState& cluster, const Allocation& alloc);
  // The same by a task's brief, whose grants are in its mask
  // (PlacedBrief::gpus_in_mask): no lookup of the task or its GPUs' slots.
  void Return(const ClusterState::PlacedBrief& b) { Change(b, 1); }
  void Take(const ClusterState::PlacedBrief& b) { Change(b, -1); }
  GpuFreeView gpus() const { return {gpu_milli, gpu_memory_mib, gpu_model_bit}; }
  FitFailure Check(const Requests& req, ClusterState::ModelMask allowed) const;

 private:
  void Change(const ClusterState::PlacedBrief& b, int64_t sign) {
    cpu_milli += sign * b.cpu_milli;
    memory_mib += sign * b.memory_mib;
    for (uint64_t m = b.gpu_mask; m != 0; m &= m - 1) {
      const int slot = std::countr_zero(m);
      gpu_milli[size_t(slot)] += int32_t(sign) * b.grant_milli;
      gpu_memory_mib[size_t(slot)] += sign * b.grant_memory_mib;
    }
  }
};

}  // namespace hf



namespace hf {

// Relative weight of each resource in UtilizationWithTask, as Kubernetes'
// MostAllocated / LeastAllocated scoring strategies weigh resources. Equal
// weights give SPEC §4's formula exactly; a weight of 0 leaves a resource out.
struct ResourceWeights {
  double cpu = 1;
  double memory = 1;
  double gpu = 1;
};

// The weighted mean, over the resources node n has (CPU, memory, GPU share),
// of min(used + requested, total) / total: how full the node would be with
// the task on it. Resources the node lacks (total 0) are left out of the mean
// (weights included); 0 if none is left. Shared by Binpack (score = mean x
// 100) and Spread ((1 - mean) x 100).
double UtilizationWithTask(const ClusterState& cluster, NodeId n, const Requests& req,
                           const ResourceWeights& weights = {});

// UtilizationWithTask for hot loops: the weights are folded, per combination
// of resources a node has, into one reciprocal, and node data is read from
// ClusterState::Arrays. Gives the same values as UtilizationWithTask.
class UtilizationScorer {
 public:
  explicit UtilizationScorer(const ResourceWeights& w);
  // Precompute the task's part once per cycle with ForTask, then call per node.
  struct TaskTerms {
    double cpu, memory, gpu_milli;
  };
  static TaskTerms ForTask(const Requests& req) {
    return {double(req.cpu_milli), double(req.memory_mib), double(int64_t{req.gpu} * req.gpu_milli)};
  }
  // Reads only the node's running utilisation and reciprocals (kept current by
  // ClusterState), so a node costs a handful of multiply-adds.
  double operator()(const ClusterState::Arrays& a, NodeId n, const TaskTerms& t) const {
    const double cpu = std::min(a.util_cpu[n] + t.cpu * a.inv_cpu[n], 1.0);
    const double mem = std::min(a.util_memory[n] + t.memory * a.inv_memory[n], 1.0);
    const double gpu = std::min(a.util_gpu[n] + t.gpu_milli * a.inv_gpu_milli[n], 1.0);
    return (w_.cpu * cpu + w_.memory * mem + w_.gpu * gpu) * inv_weight_sum_[a.has[n]];
  }

 private:
  ResourceWeights w_;
  double inv_weight_sum_[8];
};

// Chooses `req.gpu` GPUs for a shared request (gpu_milli < 1000) on node n:
// with best_fit, those with the least free share that still fits (packing);
// otherwise those with the most (spreading). Ties go to the lower slot.
// Returns fewer grants than asked when the node cannot hold the request.
std::vector<GpuGrant> PickSharedGpus(const ClusterState& cluster, NodeId n, const Requests& req,
                                     bool best_fit);

}  // namespace hf
#endif  // HF_CORE_FIT_H_
