#include "plugins/rdma/rdma.h"

#include <algorithm>

namespace hf::plugins {

Rdma::Rdma(const framework::PluginDeps& deps) {
  no_rdma_ = deps.reasons->Intern("no RDMA device", /*resolvable=*/false);
}

void Rdma::Filter(const Task& task, const ClusterState& cluster, std::vector<NodeId>& nodes,
                  framework::Rejections& rejections) {
  if (!task.rdma_required) return;
  size_t out = 0;
  for (NodeId n : nodes) {
    if (cluster.has_rdma(n)) {
      nodes[out++] = n;
    } else {
      rejections.Reject(n, no_rdma_);
    }
  }
  nodes.resize(out);
}

bool Rdma::PreScore(const Task& task, const ClusterState& cluster,
                    std::span<const NodeId> feasible, framework::CycleState& state) const {
  Cycle& c = state.Get<Cycle>(kCycleKey);
  c.group_nodes = {};
  if (!task.rdma_required || task.group.empty()) return false;
  const auto placed = cluster.GroupNodes(task.group);
  if (std::none_of(placed.begin(), placed.end(),
                   [](const NodeCount& c) { return c.rdma_count > 0; })) {
    return false;
  }
  c.group_nodes = placed;
  return true;
}

void Rdma::Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
                 std::span<double> scores, framework::CycleState& state) const {
  Cycle& cy = state.Get<Cycle>(kCycleKey);
  // A large group can span many nodes, so its counts are spread into a dense
  // per-node array (stamped with the cycle, so it is never cleared) instead of
  // being searched once per node.
  if (cy.count_stamp.size() != cluster.node_count()) {
    cy.count_stamp.assign(cluster.node_count(), 0);
    cy.count_by_node.assign(cluster.node_count(), 0);
  }
  ++cy.epoch;
  for (const NodeCount& c : cy.group_nodes) {
    if (c.node >= cy.count_stamp.size()) continue;
    cy.count_stamp[c.node] = cy.epoch;
    cy.count_by_node[c.node] = c.rdma_count;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeId n = nodes[i];
    scores[i] = cy.count_stamp[n] == cy.epoch ? double(cy.count_by_node[n]) : 0.0;
  }
}

void Rdma::NormalizeScores(std::span<double> scores) const {
  double max = 0;
  for (double s : scores) max = std::max(max, s);
  if (max <= 0) return;
  const double scale = 100.0 / max;
  for (double& s : scores) s *= scale;
}

Status Rdma::Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
                  framework::CycleState&) const {
  if (!task.rdma_required) return Status::Ok();
  const NodeSpec& spec = cluster.spec(alloc.node);
  if (spec.rdma.empty()) {
    return FailedPrecondition("node " + spec.name + " has no RDMA device");
  }
  // Locality of the GPUs the task was given; -1 where unknown.
  std::vector<std::pair<int32_t, int32_t>> gpu_places;  // (pcie_switch, numa)
  gpu_places.reserve(alloc.gpus.size());
  for (const GpuGrant& g : alloc.gpus) {
    const auto it = std::find_if(spec.gpus.begin(), spec.gpus.end(),
                                 [&](const GpuDevice& d) { return d.index == g.index; });
    if (it != spec.gpus.end()) gpu_places.emplace_back(it->pcie_switch, it->numa);
  }
  // The NIC sharing a PCIe switch with the most GPUs wins (traffic stays off
  // the CPU interconnect); then the one sharing a NUMA node with the most;
  // ties, and the case with no shared locality at all, go to the first listed.
  size_t best = 0;
  std::pair<int, int> best_hits{-1, -1};
  for (size_t i = 0; i < spec.rdma.size(); ++i) {
    const RdmaDevice& nic = spec.rdma[i];
    std::pair<int, int> hits{0, 0};
    for (const auto& [pcie_switch, numa] : gpu_places) {
      if (nic.pcie_switch >= 0 && pcie_switch == nic.pcie_switch) ++hits.first;
      if (nic.numa >= 0 && numa == nic.numa) ++hits.second;
    }
    if (hits > best_hits) {
      best = i;
      best_hits = hits;
    }
  }
  alloc.rdma_device = spec.rdma[best].name;
  return Status::Ok();
}

}  // namespace hf::plugins
