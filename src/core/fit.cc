#include "core/fit.h"

#include <algorithm>

namespace hf {

FitFailure CheckGpuFit(const GpuFreeView& free, const Requests& req,
                       ClusterState::ModelMask allowed) {
  if (req.gpu <= 0) return FitFailure::kNone;
  const size_t n = free.milli.size();
  if (n < size_t(req.gpu)) return FitFailure::kInsufficientGpu;
  int32_t model_ok = 0, share_ok = 0, all_ok = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!(free.model_bit[i] & allowed)) continue;
    ++model_ok;
    if (free.milli[i] < req.gpu_milli) continue;
    ++share_ok;
    if (free.memory_mib[i] >= req.gpu_memory_mib) ++all_ok;
  }
  if (model_ok < req.gpu) return FitFailure::kGpuModelMismatch;
  if (share_ok < req.gpu) return FitFailure::kInsufficientGpu;
  if (all_ok < req.gpu) return FitFailure::kInsufficientGpuMemory;
  return FitFailure::kNone;
}

NodeFree NodeFree::Of(const ClusterState& cluster, NodeId n) {
  NodeFree f;
  f.cpu_milli = cluster.free_cpu(n);
  f.memory_mib = cluster.free_memory(n);
  auto m = cluster.gpu_free_milli(n);
  auto mem = cluster.gpu_free_memory(n);
  auto bits = cluster.gpu_model_bits(n);
  f.gpu_milli.assign(m.begin(), m.end());
  f.gpu_memory_mib.assign(mem.begin(), mem.end());
  f.gpu_model_bit.assign(bits.begin(), bits.end());
  return f;
}

void NodeFree::Return(const ClusterState& cluster, const Allocation& alloc) {
  cpu_milli += alloc.cpu_milli;
  memory_mib += alloc.memory_mib;
  for (const GpuGrant& g : alloc.gpus) {
    const int32_t slot = cluster.GpuSlot(alloc.node, g.index);
    gpu_milli[slot] += g.milli;
    gpu_memory_mib[slot] += g.memory_mib;
  }
}

void NodeFree::Take(const ClusterState& cluster, const Allocation& alloc) {
  cpu_milli -= alloc.cpu_milli;
  memory_mib -= alloc.memory_mib;
  for (const GpuGrant& g : alloc.gpus) {
    const int32_t slot = cluster.GpuSlot(alloc.node, g.index);
    gpu_milli[slot] -= g.milli;
    gpu_memory_mib[slot] -= g.memory_mib;
  }
}

FitFailure NodeFree::Check(const Requests& req, ClusterState::ModelMask allowed) const {
  if (cpu_milli < req.cpu_milli) return FitFailure::kInsufficientCpu;
  if (memory_mib < req.memory_mib) return FitFailure::kInsufficientMemory;
  return CheckGpuFit(gpus(), req, allowed);
}

}  // namespace hf

namespace hf {

double UtilizationWithTask(const ClusterState& cluster, NodeId n, const Requests& req,
                           const ResourceWeights& weights) {
  return UtilizationScorer(weights)(cluster.arrays(), n, UtilizationScorer::ForTask(req));
}

UtilizationScorer::UtilizationScorer(const ResourceWeights& w) : w_(w) {
  for (int has = 0; has < 8; ++has) {
    const double sum = (has & 1 ? w.cpu : 0) + (has & 2 ? w.memory : 0) + (has & 4 ? w.gpu : 0);
    inv_weight_sum_[has] = sum > 0 ? 1.0 / sum : 0.0;
  }
}

std::vector<GpuGrant> PickSharedGpus(const ClusterState& cluster, NodeId n, const Requests& req,
                                     bool best_fit) {
  const GpuFreeView free{cluster.gpu_free_milli(n), cluster.gpu_free_memory(n),
                         cluster.gpu_model_bits(n)};
  const auto allowed = cluster.AllowedModels(req);
  std::vector<size_t> slots;
  for (size_t s = 0; s < free.milli.size(); ++s) {
    if (GpuSlotFits(free, s, req, allowed)) slots.push_back(s);
  }
  std::stable_sort(slots.begin(), slots.end(), [&](size_t a, size_t b) {
    return best_fit ? free.milli[a] < free.milli[b] : free.milli[a] > free.milli[b];
  });
  std::vector<GpuGrant> grants;
  const auto& gpus = cluster.spec(n).gpus;
  for (size_t i = 0; i < slots.size() && grants.size() < size_t(req.gpu); ++i) {
    grants.push_back({gpus[slots[i]].index, req.gpu_milli, req.gpu_memory_mib});
  }
  return grants;
}

}  // namespace hf
