// Spread (Score, Bind). Prefers the emptiest node (load balance, smaller blast radius).
//
// score = (1 - used/total) x 100, averaged over the same resources
// where "used" includes the task being placed, is clamped at capacity, and a
// resource the node does not have (total 0, e.g. GPU on a CPU-only node) is
// left out of the mean (SPEC §4). Already 0..100: no normalisation.
//
// Config: `resource_weights: {cpu: 1, memory: 1, gpu: 1}` weighs the three
// terms (as Kubernetes' MostAllocated/LeastAllocated resource weights do); the
// default, equal weights, is exactly the formula above. On a GPU cluster,
// weighing the GPU term higher packs GPUs tighter (docs/BENCHMARKS.md).
//
// Bind: for a shared-GPU request (gpu_milli < 1000) picks the GPU with the most free share.
// Whole-GPU requests are left to the topology plugin or the default choice.
//
// Mutually exclusive with binpack.
#ifndef HF_PLUGINS_SPREAD_SPREAD_H_
#define HF_PLUGINS_SPREAD_SPREAD_H_

#include "core/fit.h"
#include "framework/cycle_state.h"
#include "framework/plugin.h"

namespace hf::plugins {

class Spread final : public framework::ScorePlugin, public framework::BindPlugin {
 public:
  static constexpr const char* kName = "spread";
  explicit Spread(const framework::PluginDeps&) {}

  std::string_view Name() const override { return kName; }
  uint32_t Points() const override { return framework::kScorePoint | framework::kBindPoint; }
  Status Configure(const framework::PluginArgs& args) override;
  std::vector<std::string> ConfigKeys() const override { return {"resource_weights"}; }
  std::vector<std::string> ConflictsWith() const override { return {"binpack"}; }
  void Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
             std::span<double> scores, framework::CycleState& state) const override;
  Status Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
              framework::CycleState& state) const override;

 private:
  UtilizationScorer utilization_{ResourceWeights{}};
};

}  // namespace hf::plugins

#endif  // HF_PLUGINS_SPREAD_SPREAD_H_
