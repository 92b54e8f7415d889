#include "plugins/thresholds/thresholds.h"

namespace hf::plugins {

LoadThreshold::LoadThreshold(const framework::PluginDeps& deps) {
  cpu_reason_ = deps.reasons->Intern("above load_threshold", false);
  gpu_reason_ = deps.reasons->Intern("above gpu_load_threshold", false);
  memory_reason_ = deps.reasons->Intern("above memory_threshold", false);
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
  // Nothing measured yet (e.g. a simulation without usage): every node passes.
  if (cluster.measured_count() == 0) return;
  const bool wants_gpu = task.requests.gpu > 0;
  const ClusterState::Arrays a = cluster.arrays();
  size_t out = 0;
  for (NodeId n : nodes) {
    if (!a.measured[n]) {
      nodes[out++] = n;
      continue;
    }
    if (a.cpu_load[n] + double(a.inflight_cpu[n]) * a.inv_cpu[n] > cpu_) {
      rejections.Reject(n, cpu_reason_);
    } else if (a.memory_used[n] + double(a.inflight_memory[n]) * a.inv_memory[n] > memory_) {
      rejections.Reject(n, memory_reason_);
    } else if (wants_gpu && a.gpu_count[n] > 0 &&
               a.gpu_utilization[n] + double(a.inflight_gpu_milli[n]) * a.inv_gpu_milli[n] > gpu_) {
      rejections.Reject(n, gpu_reason_);
    } else {
      nodes[out++] = n;
    }
  }
  nodes.resize(out);
}

}  // namespace hf::plugins
