#include "plugins/fit/fit.h"

#include <algorithm>

#include "core/fit.h"

namespace hf::plugins {

Fit::Fit(const framework::PluginDeps& deps) : reasons_(deps.reasons) {
  not_ready_ = deps.reasons->Intern("node not ready", false);
  draining_ = deps.reasons->Intern("node draining", false);
  cpu_ = deps.reasons->Intern("insufficient CPU", true);
  memory_ = deps.reasons->Intern("insufficient memory", true);
  gpu_ = deps.reasons->Intern("insufficient GPU", true);
  // Same words for the operator, but no eviction can add GPUs to a node.
  too_few_gpus_ = deps.reasons->Intern("insufficient GPU", false);
  gpu_memory_ = deps.reasons->Intern("insufficient GPU memory", true);
  not_shared_ = deps.reasons->Intern("GPU not shared (exclusive_gpu_vendors)", false);
}

framework::ReasonId Fit::ModelMismatch(const ClusterState& cluster,
                                       ClusterState::ModelMask node_models) {
  if (model_reasons_version_ != cluster.nodes_version()) {
    model_reasons_.clear();
    model_reasons_version_ = cluster.nodes_version();
  }
  auto [it, fresh] = model_reasons_.try_emplace(node_models, 0);
  if (fresh) {
    std::string text = "GPU model mismatch (";
    bool first = true;
    for (size_t m = 0; m < cluster.model_count(); ++m) {
      if (!(node_models & (ClusterState::ModelMask{1} << m))) continue;
      text += (first ? "" : ", ") + cluster.model_label(m);
      first = false;
    }
    it->second = reasons_->Intern(text + ")", false);
  }
  return it->second;
}

framework::ReasonId Fit::Mismatch(const Task& task, const ClusterState& cluster,
                                  ClusterState::ModelMask node_models) {
  // A model the task takes, but not as a share: its vendor's GPUs are whole.
  if (task.requests.gpu_milli < kWholeGpuMilli &&
      (node_models & cluster.AcceptedModels(task.requests)) != 0) {
    return not_shared_;
  }
  return ModelMismatch(cluster, node_models);
}

framework::ReasonId Fit::Why(const Task& task, const ClusterState& cluster, NodeId n,
                             ClusterState::ModelMask allowed) {
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
      if (!(mask & allowed)) return Mismatch(task, cluster, mask);
      if (whole_fast ? a.free_whole_gpus[n] < r.gpu : a.max_free_milli[n] < r.gpu_milli) return gpu_;
      return a.free_cpu[n] < r.cpu_milli ? cpu_ : a.free_memory[n] < r.memory_mib ? memory_ : kPass;
    }
    const GpuFreeView free{cluster.gpu_free_milli(n), cluster.gpu_free_memory(n),
                           cluster.gpu_model_bits(n)};
    switch (CheckGpuFit(free, r, allowed)) {
      case FitFailure::kNone: break;
      case FitFailure::kGpuModelMismatch: return Mismatch(task, cluster, a.model_mask[n]);
      case FitFailure::kInsufficientGpuMemory: return gpu_memory_;
      default: return gpu_;
    }
  }
  if (a.free_cpu[n] < r.cpu_milli) return cpu_;
  if (a.free_memory[n] < r.memory_mib) return memory_;
  return kPass;
}

void Fit::Filter(const Task& task, const ClusterState& cluster, std::vector<NodeId>& nodes,
                 framework::Rejections& rejections) {
  const Requests& r = task.requests;
  const ClusterState::ModelMask allowed = cluster.AllowedModels(r);
  const ClusterState::Arrays a = cluster.arrays();

  // 1. A superset of the nodes that fit, from the indexes, one word (64
  //    nodes) at a time: Ready, among the candidates given, with an allowed
  //    GPU model, with enough free whole GPUs or a large enough free share.
  //    Only the words that hold candidates are looked at: [lo, hi).
  if (nodes.empty()) return;
  const size_t lo = nodes.front() >> 6, hi = (size_t(nodes.back()) >> 6) + 1, span = hi - lo;
  const uint64_t* ready = cluster.ready_nodes().data() + lo;
  cand_.assign(ready, ready + span);
  if (nodes.size() != (size_t(nodes.back()) - nodes.front() + 1)) {
    // Not one run of consecutive ids: only the nodes given.
    given_.assign(span, 0);
    for (NodeId n : nodes) given_[(n >> 6) - lo] |= uint64_t{1} << (n & 63);
    for (size_t w = 0; w < span; ++w) cand_[w] &= given_[w];
  } else {
    // One run: the bits outside it in its first and last words go.
    cand_.front() &= ~uint64_t{0} << (nodes.front() & 63);
    const unsigned end_bit = (nodes.back() & 63) + 1;
    if (end_bit < 64) cand_.back() &= (uint64_t{1} << end_bit) - 1;
  }
  const bool wants_gpu = r.gpu > 0;
  if (wants_gpu) {
    // Any model: nothing to narrow (nodes without GPUs fail the exact check).
    if (allowed != ClusterState::kAnyModel) {
      models_.assign(span, 0);
      for (size_t m = 0; m < cluster.model_count(); ++m) {
        if (!(allowed & (ClusterState::ModelMask{1} << m))) continue;
        const uint64_t* bits = cluster.model_nodes(m).data() + lo;
        for (size_t w = 0; w < span; ++w) models_[w] |= bits[w];
      }
      for (size_t w = 0; w < span; ++w) cand_[w] &= models_[w];
    }
    const NodeBitmap* capacity = nullptr;
    if (r.gpu_milli == kWholeGpuMilli) {
      capacity = &cluster.whole_gpu_nodes(std::min(r.gpu, ClusterState::kIndexedWholeGpus));
    } else if (r.gpu_milli >= 100) {
      capacity = &cluster.share_nodes(r.gpu_milli / 100);
    }
    if (capacity) {
      const uint64_t* bits = capacity->data() + lo;
      for (size_t w = 0; w < span; ++w) cand_[w] &= bits[w];
    }
  }

  // 2. The exact check on that superset. Single-model nodes are decided by the
  //    per-node summaries when they are exact (whole GPUs up to the indexed
  //    count, or one shared GPU, without a GPU memory request); the rest take
  //    the per-GPU look in Why().
  const bool whole_fast = r.gpu_milli == kWholeGpuMilli && r.gpu <= ClusterState::kIndexedWholeGpus &&
                          r.gpu_memory_mib == 0;
  const bool share_fast = r.gpu == 1 && r.gpu_memory_mib == 0;
  const bool summaries_exact = whole_fast || share_fast;
  const int32_t need = r.gpu_milli == kWholeGpuMilli ? r.gpu : r.gpu_milli;
  const int32_t* have = r.gpu_milli == kWholeGpuMilli ? a.free_whole_gpus : a.max_free_milli;
  const uint64_t* mixed = cluster.mixed_model_nodes().data();
  const int64_t cpu = r.cpu_milli, mem = r.memory_mib;
  if (rejections.recording()) rejected_.assign(nodes.begin(), nodes.end());  // for reasons below
  size_t out = 0;
  NodeId* dst = nodes.data();
  ForEachSetBit(cand_.data(), span, [&](NodeId bit) {
    const NodeId n = NodeId(lo * 64) + bit;
    bool ok = (a.free_cpu[n] >= cpu) & (a.free_memory[n] >= mem);
    if (wants_gpu && ok) {
      const bool is_mixed = (mixed[n >> 6] >> (n & 63)) & 1;
      ok = summaries_exact && !is_mixed ? have[n] >= need : Why(task, cluster, n, allowed) == kPass;
    }
    dst[out] = n;
    out += ok;
  });
  nodes.resize(out);

  // 3. Reasons, only when someone reads them: every input node not kept.
  if (rejections.recording()) {
    size_t k = 0;
    for (NodeId n : rejected_) {
      if (k < out && nodes[k] == n) {
        ++k;
        continue;
      }
      const framework::ReasonId why = Why(task, cluster, n, allowed);
      HF_CHECK(why != kPass);  // the indexes and the exact check disagree
      rejections.Reject(n, why);
    }
  }
}

bool Fit::PassesWithout(const Task& task, const ClusterState& cluster,
                        const NodeWithout& without) {
  return cluster.schedulable(without.node) &&
         without.free.Check(task.requests, cluster.AllowedModels(task.requests)) ==
             FitFailure::kNone;
}

}  // namespace hf::plugins
