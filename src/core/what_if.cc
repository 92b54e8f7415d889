#include "core/what_if.h"

namespace hf {

NodeLoad NodeLoad::Of(const ClusterState& cluster, NodeId n) {
  NodeLoad l;
  l.measured_ = cluster.measured(n);
  if (!l.measured_) return l;
  const NodeUsage& u = cluster.usage(n);
  l.measured_part_ = {u.cpu_load, u.memory_used, cluster.measured_gpu_utilization(n)};
  const LoadEstimate total = cluster.Estimate(n);
  l.inflight_part_ = {total.cpu - u.cpu_load, total.memory - u.memory_used,
                      total.gpu - l.measured_part_.gpu};
  return l;
}

void NodeLoad::Change(const ClusterState& cluster, const PlacedTask& p, int sign) {
  if (!measured_) return;  // no estimate to change (most nodes, most of the time)
  const LoadEstimate share = cluster.Share(p);
  LoadEstimate& part = p.inflight ? removed_inflight_ : removed_measured_;
  part.cpu += sign * share.cpu;
  part.memory += sign * share.memory;
  part.gpu += sign * share.gpu;
}

LoadEstimate NodeLoad::estimate() const {
  const auto part = [](double measured, double removed_measured, double inflight,
                       double removed_inflight) {
    return std::max(0.0, measured - removed_measured) + std::max(0.0, inflight - removed_inflight);
  };
  return {part(measured_part_.cpu, removed_measured_.cpu, inflight_part_.cpu, removed_inflight_.cpu),
          part(measured_part_.memory, removed_measured_.memory, inflight_part_.memory,
               removed_inflight_.memory),
          part(measured_part_.gpu, removed_measured_.gpu, inflight_part_.gpu, removed_inflight_.gpu)};
}

}  // namespace hf
