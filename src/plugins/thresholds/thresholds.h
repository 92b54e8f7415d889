// LoadThreshold: the always-on filter on *measured* usage (SPEC §5).
//
// A node whose agent reports CPU load above load_threshold, or memory use
// above memory_threshold, takes no new task; one whose mean GPU utilization is
// above gpu_load_threshold takes no new GPU task. What was placed on the node
// since its last report is added to the measurement (the in-flight estimate,
// as Koordinator's LoadAware does) so a burst of placements between two
// reports cannot overshoot. A node with no measurement yet passes.
//
// Preemption: a node is judged on its estimate without the candidate
// victims (NodeLoad: each victim's share of the node leaves the part it is
// in), so a busy node whose load comes from preemptible tasks can take a
// preemptor, and one loaded by others cannot. The reasons are resolvable
// for that reason.
//
// Speed: ClusterState keeps these estimates in max-trees; the filter asks
// them for the nodes above each threshold and leaves the candidate list
// untouched when there are none (the usual case).
//
// Config (set by the framework from the scheduler config):
//   {load_threshold, gpu_load_threshold, memory_threshold}, each in (0, 1].
#ifndef HF_PLUGINS_THRESHOLDS_THRESHOLDS_H_
#define HF_PLUGINS_THRESHOLDS_THRESHOLDS_H_

#include "framework/plugin.h"

namespace hf::plugins {

class LoadThreshold final : public framework::FilterPlugin {
 public:
  static constexpr const char* kName = "load_threshold";
  explicit LoadThreshold(const framework::PluginDeps& deps);

  std::string_view Name() const override { return kName; }
  uint32_t Points() const override { return framework::kFilterPoint; }
  Status Configure(const framework::PluginArgs& args) override;
  std::vector<std::string> ConfigKeys() const override { return {"load_threshold", "gpu_load_threshold", "memory_threshold"}; }
  void Filter(const Task& task, const ClusterState& cluster, std::vector<NodeId>& nodes,
              framework::Rejections& rejections) override;
  bool PassesWithout(const Task& task, const ClusterState& cluster,
                     const NodeWithout& without) override;

 private:
  double cpu_ = 0.8, gpu_ = 0.9, memory_ = 0.85;
  std::vector<NodeId> above_;  // per-call scratch
  framework::ReasonId cpu_reason_, gpu_reason_, memory_reason_;
};

}  // namespace hf::plugins

#endif  // HF_PLUGINS_THRESHOLDS_THRESHOLDS_H_
