#include "plugins/fit/fit.h"

#include "core/fit.h"

namespace hf::plugins {

Fit::Fit(const framework::PluginDeps& deps) {
  not_ready_ = deps.reasons->Intern("node not ready", false);
  draining_ = deps.reasons->Intern("node draining", false);
  cpu_ = deps.reasons->Intern("insufficient CPU", true);
  memory_ = deps.reasons->Intern("insufficient memory", true);
  gpu_ = deps.reasons->Intern("insufficient GPU", true);
  // Same words for the operator, but no eviction can add GPUs to a node.
  too_few_gpus_ = deps.reasons->Intern("insufficient GPU", false);
  model_ = deps.reasons->Intern("GPU model mismatch", false);
  gpu_memory_ = deps.reasons->Intern("insufficient GPU memory", true);
}

framework::ReasonId Fit::Why(const Task& task, const ClusterState& cluster, NodeId n,
                             ClusterState::ModelMask allowed) const {
  const Requests& r = task.requests;
  const ClusterState::Arrays a = cluster.arrays();
  if (a.condition[n] != NodeCondition::kReady) {
    return a.condition[n] == NodeCondition::kDraining ? draining_ : not_ready_;
  }
  if (r.gpu > 0) {
    if (a.gpu_count[n] < r.gpu) return too_few_gpus_;
    const ClusterState::ModelMask mask = a.model_mask[n];
    const bool whole_fast = r.gpu_milli == kWholeGpuMilli && r.gpu_memory_mib == 0;
    const bool share_fast = r.gpu == 1 && r.gpu_memory_mib == 0;
    if ((whole_fast || share_fast) && (mask & (mask - 1)) == 0) {
      // One GPU model on this node: the summaries are exact.
      if (!(mask & allowed)) return model_;
      if (whole_fast ? a.free_whole_gpus[n] < r.gpu : a.max_free_milli[n] < r.gpu_milli) return gpu_;
      return a.free_cpu[n] < r.cpu_milli ? cpu_ : a.free_memory[n] < r.memory_mib ? memory_ : kPass;
    }
    const GpuFreeView free{cluster.gpu_free_milli(n), cluster.gpu_free_memory(n),
                           cluster.gpu_model_bits(n)};
    switch (CheckGpuFit(free, r, allowed)) {
      case FitFailure::kNone: break;
      case FitFailure::kGpuModelMismatch: return model_;
      case FitFailure::kInsufficientGpuMemory: return gpu_memory_;
      default: return gpu_;
    }
  }
  if (a.free_cpu[n] < r.cpu_milli) return cpu_;
  if (a.free_memory[n] < r.memory_mib) return memory_;
  return kPass;
}

namespace {

// The verdict of one node for the common cases, without branches, from the
// per-node summaries. kMode: 0 = no GPU, 1 = GPU decided by summaries on
// single-model nodes (others take `slow`).
template <int kMode, typename Slow>
size_t FastPass(const ClusterState::Arrays& a, NodeId* nodes, size_t count, int64_t cpu,
                int64_t mem, ClusterState::ModelMask allowed, const int32_t* have, int32_t need,
                Slow&& slow, std::vector<NodeId>& rejected) {
  size_t out = 0;
  for (size_t i = 0; i < count; ++i) {
    const NodeId n = nodes[i];
    bool ok = (a.condition[n] == NodeCondition::kReady) & (a.free_cpu[n] >= cpu) &
              (a.free_memory[n] >= mem);
    if constexpr (kMode == 1) {
      const ClusterState::ModelMask mask = a.model_mask[n];
      if ((mask & (mask - 1)) == 0) {
        ok &= ((mask & allowed) != 0) & (have[n] >= need);
      } else {
        ok = ok && slow(n);
      }
    }
    nodes[out] = n;
    out += ok;
    if (!ok) rejected.push_back(n);
  }
  return out;
}

}  // namespace

void Fit::Filter(const Task& task, const ClusterState& cluster, std::vector<NodeId>& nodes,
                 framework::Rejections& rejections) {
  const Requests& r = task.requests;
  const ClusterState::ModelMask allowed = cluster.MaskOf(r.gpu_models);
  const ClusterState::Arrays a = cluster.arrays();
  // The verdict is computed without branches from per-node summaries where
  // they are exact (one GPU model on the node, no per-GPU memory request):
  // share requests on one GPU are decided by the largest free share, whole-GPU
  // requests by the count of free whole GPUs. Nodes with mixed models, or
  // other requests, take the per-GPU look in Why(). Reasons for rejected
  // nodes are worked out afterwards, and only when they are recorded.
  const bool whole_fast = r.gpu > 0 && r.gpu_milli == kWholeGpuMilli && r.gpu_memory_mib == 0;
  const bool share_fast = r.gpu == 1 && r.gpu_memory_mib == 0;
  const auto slow = [&](NodeId n) { return Why(task, cluster, n, allowed) == kPass; };
  rejected_.clear();
  size_t out;
  if (r.gpu <= 0) {
    out = FastPass<0>(a, nodes.data(), nodes.size(), r.cpu_milli, r.memory_mib, allowed, nullptr, 0,
                      slow, rejected_);
  } else if (whole_fast || share_fast) {
    out = FastPass<1>(a, nodes.data(), nodes.size(), r.cpu_milli, r.memory_mib, allowed,
                      whole_fast ? a.free_whole_gpus : a.max_free_milli,
                      whole_fast ? r.gpu : r.gpu_milli, slow, rejected_);
  } else {
    out = 0;
    for (NodeId n : nodes) {
      if (slow(n)) nodes[out++] = n;
      else rejected_.push_back(n);
    }
  }
  nodes.resize(out);
  if (rejections.recording()) {
    for (NodeId n : rejected_) rejections.Reject(n, Why(task, cluster, n, allowed));
  }
}

}  // namespace hf::plugins
