// Fit: the always-on resource filter (SPEC §3).
//
// Rejects nodes that are not Ready, and nodes whose free resources cannot hold
// the task: GPU count, GPU model (requests.gpu_models), per-GPU share
// (whole or shared GPUs) and per-GPU memory, then CPU and memory. GPU reasons
// are checked first because they are the ones an operator of a GPU cluster
// acts on. Most nodes are decided from per-node summaries kept by
// ClusterState (free whole GPUs, largest free share, model bitmask); only
// nodes with mixed GPU models or requests with GPU memory look at each GPU.
#ifndef HF_PLUGINS_FIT_FIT_H_
#define HF_PLUGINS_FIT_FIT_H_

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

 private:
  static constexpr framework::ReasonId kPass = UINT16_MAX;
  // The first reason node n cannot take the task, in the order documented
  // above, or kPass. Looks at each GPU: the slow path.
  framework::ReasonId Why(const Task& task, const ClusterState& cluster, NodeId n,
                          ClusterState::ModelMask allowed) const;

  std::vector<NodeId> rejected_;  // per-call scratch
  framework::ReasonId not_ready_, draining_, cpu_, memory_, gpu_, too_few_gpus_, model_, gpu_memory_;
};

}  // namespace hf::plugins

#endif  // HF_PLUGINS_FIT_FIT_H_
