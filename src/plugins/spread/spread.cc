#include "plugins/spread/spread.h"

#include "core/fit.h"
#include "framework/args.h"

namespace hf::plugins {

Status Spread::Configure(const framework::PluginArgs& args) {
  auto weights = framework::ParseResourceWeights(args.config, kName);
  if (!weights.ok()) return weights.status();
  utilization_ = UtilizationScorer(*weights);
  return Status::Ok();
}

void Spread::Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
                std::span<double> scores, framework::CycleState&) const {
  const UtilizationScorer& u = utilization_;
  const ClusterState::Arrays a = cluster.arrays();
  const UtilizationScorer::TaskTerms r = UtilizationScorer::ForTask(task.requests);
  for (size_t i = 0; i < nodes.size(); ++i) scores[i] = 100.0 * (1.0 - u(a, nodes[i], r));
}

Status Spread::Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
                      framework::CycleState&) const {
  const Requests& r = task.requests;
  if (r.gpu == 0 || r.gpu_milli >= kWholeGpuMilli || !alloc.gpus.empty()) return Status::Ok();
  alloc.gpus = PickSharedGpus(cluster, alloc.node, r, /*best_fit=*/false);
  return Status::Ok();
}

}  // namespace hf::plugins
