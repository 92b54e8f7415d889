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

void Fit::Filter(const Task& task, const ClusterState& cluster, std::vector<NodeId>& nodes,
                 framework::Rejections& rejections) {
  const Requests& r = task.requests;
  const ClusterState::ModelMask allowed = cluster.MaskOf(r.gpu_models);
  // Requests whose fit the per-node summaries decide exactly.
  const bool whole_fast = r.gpu > 0 && r.gpu_milli == kWholeGpuMilli && r.gpu_memory_mib == 0;
  const bool share_fast = r.gpu == 1 && r.gpu_memory_mib == 0;
  constexpr framework::ReasonId kPass = UINT16_MAX;

  size_t out = 0;
  for (NodeId n : nodes) {
    framework::ReasonId why = kPass;
    if (!cluster.schedulable(n)) {
      why = cluster.condition(n) == NodeCondition::kDraining ? draining_ : not_ready_;
    } else if (r.gpu > 0) {
      const ClusterState::ModelMask mask = cluster.model_mask(n);
      if (cluster.gpu_count(n) < r.gpu) {
        why = too_few_gpus_;
      } else if ((mask & (mask - 1)) == 0 && (whole_fast || share_fast)) {
        // One GPU model on this node: the summaries are exact.
        if (!(mask & allowed)) why = model_;
        else if (whole_fast ? cluster.free_whole_gpus(n) < r.gpu
                            : cluster.max_free_milli(n) < r.gpu_milli)
          why = gpu_;
      } else {
        const GpuFreeView free{cluster.gpu_free_milli(n), cluster.gpu_free_memory(n),
                               cluster.gpu_model_bits(n)};
        switch (CheckGpuFit(free, r, allowed)) {
          case FitFailure::kNone: break;
          case FitFailure::kGpuModelMismatch: why = model_; break;
          case FitFailure::kInsufficientGpuMemory: why = gpu_memory_; break;
          default: why = gpu_; break;
        }
      }
    }
    if (why == kPass) {
      if (cluster.free_cpu(n) < r.cpu_milli) why = cpu_;
      else if (cluster.free_memory(n) < r.memory_mib) why = memory_;
    }
    if (why == kPass) nodes[out++] = n;
    else rejections.Reject(n, why);
  }
  nodes.resize(out);
}

}  // namespace hf::plugins
