#include "plugins/thresholds/thresholds.h"

#include <algorithm>

namespace hf::plugins {

LoadThreshold::LoadThreshold(const framework::PluginDeps& deps) {
  // Resolvable: evicting tasks takes their share of the load away
  // (PassesWithout says whether enough of it does).
  cpu_reason_ = deps.reasons->Intern("above load_threshold", true);
  gpu_reason_ = deps.reasons->Intern("above gpu_load_threshold", true);
  memory_reason_ = deps.reasons->Intern("above memory_threshold", true);
}

Status LoadThreshold::Configure(const framework::PluginArgs& args) {
  double values[3] = {cpu_, gpu_, memory_};
  const char* keys[3] = {"load_threshold", "gpu_load_threshold", "memory_threshold"};
  for (int i = 0; i < 3; ++i) {
    if (!args.config.contains(keys[i])) continue;
    const auto& v = args.config[keys[i]];
    if (!v.is_number()) return InvalidArgument(std::string(keys[i]) + " must be a number");
    values[i] = v.get<double>();
    if (!(values[i] > 0 && values[i] <= 1)) {
      return InvalidArgument(std::string(keys[i]) + " must be in (0, 1]");
    }
  }
  cpu_ = values[0];
  gpu_ = values[1];
  memory_ = values[2];
  return Status::Ok();
}

void LoadThreshold::Filter(const Task& task, const ClusterState& cluster,
                           std::vector<NodeId>& nodes, framework::Rejections& rejections) {
  // The max-trees answer "which nodes are above?" without visiting the
  // others; in a healthy cluster the answer is "none" at the root, and the
  // candidate list is not touched at all.
  // Only among the nodes given (from the first to the last).
  above_.clear();
  if (nodes.empty()) return;
  const NodeId first = nodes.front(), last = nodes.back();
  cluster.cpu_estimate().CollectAbove(cpu_, first, last, above_);
  cluster.memory_estimate().CollectAbove(memory_, first, last, above_);
  if (task.requests.gpu > 0) cluster.gpu_estimate().CollectAbove(gpu_, first, last, above_);
  if (above_.empty()) return;
  std::sort(above_.begin(), above_.end());
  above_.erase(std::unique(above_.begin(), above_.end()), above_.end());

  const bool wants_gpu = task.requests.gpu > 0;
  size_t out = 0, k = 0;
  for (NodeId n : nodes) {
    while (k < above_.size() && above_[k] < n) ++k;
    if (k == above_.size() || above_[k] != n) {
      nodes[out++] = n;
      continue;
    }
    // The same order as documented: CPU load, memory, then GPU utilization.
    // The estimates are the trees' own values: one formula, in ClusterState.
    if (cluster.cpu_estimate().value(n) > cpu_) {
      rejections.Reject(n, cpu_reason_);
    } else if (cluster.memory_estimate().value(n) > memory_) {
      rejections.Reject(n, memory_reason_);
    } else if (wants_gpu && cluster.gpu_estimate().value(n) > gpu_) {
      rejections.Reject(n, gpu_reason_);
    } else {
      nodes[out++] = n;
    }
  }
  nodes.resize(out);
}

bool LoadThreshold::PassesWithout(const Task& task, const ClusterState& cluster,
                                  const NodeWithout& without) {
  if (!without.load.measured()) return true;
  const LoadEstimate e = without.load.estimate();
  return e.cpu <= cpu_ && e.memory <= memory_ && (task.requests.gpu <= 0 || e.gpu <= gpu_);
}

}  // namespace hf::plugins
