// RDMA (Filter, PreScore, Score, Bind) (SPEC §4).
//
// Filter: a task with rdma_required only goes to nodes with an RDMA device
// (reason "no RDMA device", not resolvable by preemption).
// Score: prefers nodes that already host RDMA tasks of the task's group
// (fewer cross-node hops): raw score = number of such tasks on the node,
// normalised so the best node gets 100. Skipped for tasks without a group,
// without rdma_required, or whose group has no RDMA task placed yet.
// Bind (after GPUs are chosen): picks the RDMA device on the same PCIe switch
// as most of the task's GPUs, else on the same NUMA node, else the first one;
// the agent exports it (NCCL_IB_HCA).
#ifndef HF_PLUGINS_RDMA_RDMA_H_
#define HF_PLUGINS_RDMA_RDMA_H_

#include <cstdint>
#include <span>
#include <vector>

#include "framework/cycle_state.h"
#include "framework/plugin.h"

namespace hf::plugins {

class Rdma final : public framework::FilterPlugin,
                   public framework::PreScorePlugin,
                   public framework::ScorePlugin,
                   public framework::BindPlugin {
 public:
  static constexpr const char* kName = "rdma";
  explicit Rdma(const framework::PluginDeps& deps);

  std::string_view Name() const override { return kName; }
  uint32_t Points() const override {
    return framework::kFilterPoint | framework::kPreScorePoint | framework::kScorePoint |
           framework::kBindPoint;
  }
  void Filter(const Task& task, const ClusterState& cluster, std::vector<NodeId>& nodes,
              framework::Rejections& rejections) override;
  // Filter's verdict on one node (it does not depend on the node's tasks),
  // without the one-node list the default builds: preemption asks per
  // candidate victim set.
  bool PassesWithout(const Task& task, const ClusterState& cluster,
                     const NodeWithout& without) override {
    return !task.rdma_required || cluster.has_rdma(without.node);
  }
  bool PreScore(const Task& task, const ClusterState& cluster, std::span<const NodeId> feasible,
                framework::CycleState& state) const override;
  void Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
             std::span<double> scores, framework::CycleState& state) const override;
  void NormalizeScores(std::span<double> scores) const override;
  Stage BindStage() const override { return Stage::kAttachments; }
  Status Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
              framework::CycleState& state) const override;

 private:
  // A cycle's data, in its CycleState.
  struct Cycle final : framework::CycleState::Data {
    std::span<const NodeCount> group_nodes;  // PreScore's, read by Score
    // Score's per-node buffers: count_by_node[n] holds this cycle's count
    // when count_stamp[n] == epoch, so nothing is cleared between cycles.
    uint64_t epoch = 0;
    std::vector<uint64_t> count_stamp;
    std::vector<int32_t> count_by_node;
  };
  inline static const framework::CycleState::Key kCycleKey = framework::CycleState::NewKey();
  framework::ReasonId no_rdma_;
};

}  // namespace hf::plugins

#endif  // HF_PLUGINS_RDMA_RDMA_H_
