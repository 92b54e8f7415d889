// Fit: the always-on resource filter (SPEC §3).
//
// Rejects nodes that are not Ready, and nodes whose free resources cannot hold
// the task: GPU count, GPU model and vendor (requests.gpu_models and
// gpu_vendors, and no share of an exclusive vendor's GPU: ClusterState::
// AllowedModels), per-GPU share
// (whole or shared GPUs) and per-GPU memory, then CPU and memory. GPU reasons
// are checked first because they are the ones an operator of a GPU cluster
// acts on. A model mismatch names the node's vendors and models ("GPU model
// mismatch (nvidia A100-80G)"), one reason per distinct set.
//
// Speed: nodes that cannot fit are mostly never visited. ClusterState keeps
// bitmaps of Ready nodes, of nodes per GPU model, of nodes with >= k free
// whole GPUs and of nodes with a GPU share >= b x 100 milli free; ANDing them
// (64 nodes per instruction) leaves a superset of the nodes that fit, and only
// those are checked exactly — from per-node summaries (free whole GPUs,
// largest free share) or, for mixed-model nodes and GPU memory requests, GPU
// by GPU. Input lists are in ascending NodeId order (the framework's
// invariant), so the output is too.
#ifndef HF_PLUGINS_FIT_FIT_H_
#define HF_PLUGINS_FIT_FIT_H_

#include <unordered_map>

#include "framework/plugin.h"

namespace hf::plugins {

class Fit final : public framework::FilterPlugin {
 public:
  static constexpr const char* kName = "fit";
  explicit Fit(const framework::PluginDeps& deps);

  std::string_view Name() const override { return kName; }
  uint32_t Points() const override { return framework::kFilterPoint; }
  void Filter(const Task& task, const ClusterState& cluster, std::vector<NodeId>& nodes,
              framework::Rejections& rejections) override;
  // The node is Ready and what would be free without the tasks taken out
  // holds the task.
  bool PassesWithout(const Task& task, const ClusterState& cluster,
                     const NodeWithout& without) override;

 private:
  static constexpr framework::ReasonId kPass = UINT16_MAX;
  // The first reason node n cannot take the task, in the order documented
  // above, or kPass. Looks at each GPU: the slow path.
  framework::ReasonId Why(const Task& task, const ClusterState& cluster, NodeId n,
                          ClusterState::ModelMask allowed);
  // "GPU model mismatch (nvidia A100-80G, nvidia T4)" for a node with the
  // models of `node_models`, interned once per set and node layout.
  framework::ReasonId ModelMismatch(const ClusterState& cluster, ClusterState::ModelMask node_models);
  // ModelMismatch, or not_shared_ when the node has a model the task takes
  // whole but not as the share it asks for.
  framework::ReasonId Mismatch(const Task& task, const ClusterState& cluster,
                               ClusterState::ModelMask node_models);

  // Per-call scratch: candidate and given-node bitmaps, allowed-model bitmap,
  // the input list.
  std::vector<uint64_t> cand_, given_, models_;
  std::vector<NodeId> rejected_;
  framework::ReasonTable* reasons_;
  framework::ReasonId not_ready_, draining_, cpu_, memory_, gpu_, too_few_gpus_, gpu_memory_,
      not_shared_;
  // ModelMismatch's reasons by the node's model mask, for the cluster
  // layout of model_reasons_version_ (ClusterState::nodes_version).
  std::unordered_map<ClusterState::ModelMask, framework::ReasonId> model_reasons_;
  uint64_t model_reasons_version_ = 0;
};

}  // namespace hf::plugins

#endif  // HF_PLUGINS_FIT_FIT_H_
