// Topology (PreScore, Score, Bind) (SPEC §4).
//
// Positions: from the file named by config `topology_config` (YAML: zones ->
// switches -> racks -> nodes; see topology_file.h) when set, otherwise from
// each node's own `topology` fields. A missing or invalid file puts the plugin
// in status `error` with the reason; the scheduler goes on without it. The
// file is re-read when it changes (ReloadDue compares its modification time,
// size and inode, at most once a second; the server's watcher asks) or on
// request; the reading runs without the framework's lock (StartReload).
//
// Score: proximity levels: same node 100, same rack 75, same switch 50, same
// zone 25, elsewhere 0. Two parts, each the best level from the node to:
//   - the nodes running the task's depends_on (tasks or groups of that name);
//   - the nodes running other instances of the task's group: for a group
//     that packs (group_placement "pack", training jobs) the same levels, so a
//     group packs into one rack; for one that spreads ("spread", inference
//     replicas) the opposite, 100 minus the level (elsewhere 100, another
//     rack of the same switch 50, the same node 0), so that its members land
//     on different nodes, racks and switches.
// The score is the mean of the parts that apply; the plugin is skipped for a
// task to which neither applies.
//
// Bind: a task asking for several whole GPUs gets GPUs inside one fabric
// domain (NVLink/NVSwitch, AMD xGMI, Ascend HCCS: GpuDevice::fabric_domain)
// if one can hold it, else inside one PCIe switch, else one NUMA node, else
// one vendor's devices anywhere on the node, else the lowest free ones; a
// domain is one vendor's (a node with two vendors numbers each one's from
// 0). Among domains that can hold it, the one with the fewest free GPUs (so
// larger free domains stay whole for larger tasks).
#ifndef HF_PLUGINS_TOPOLOGY_TOPOLOGY_H_
#define HF_PLUGINS_TOPOLOGY_TOPOLOGY_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "framework/cycle_state.h"
#include "framework/plugin.h"
#include "plugins/topology/topology_file.h"

namespace hf::plugins {

class Topology final : public framework::PreScorePlugin,
                       public framework::ScorePlugin,
                       public framework::BindPlugin,
                       public framework::DomainSource {
 public:
  static constexpr const char* kName = "topology";
  explicit Topology(const framework::PluginDeps& deps);

  std::string_view Name() const override { return kName; }
  uint32_t Points() const override {
    return framework::kPreScorePoint | framework::kScorePoint | framework::kBindPoint;
  }
  Status Configure(const framework::PluginArgs& args) override;
  std::vector<std::string> ConfigKeys() const override { return {"topology_config"}; }
  std::vector<std::string> PathConfigKeys() const override { return {"topology_config"}; }
  framework::ReloadJob StartReload() override;
  bool ReloadDue() override;
  // StartReload's job, both steps at once.
  Status Reload();
  bool PreScore(const Task& task, const ClusterState& cluster, std::span<const NodeId> feasible,
                framework::CycleState& state) const override;
  void Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
             std::span<double> scores, framework::CycleState& state) const override;
  Status Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
              framework::CycleState& state) const override;
  // Racks and switches from the topology file, or the nodes' own positions.
  bool Domains(const ClusterState& cluster, framework::CycleState& state,
               framework::NodeDomains& out) const override;

 private:
  // Both defined by topology.cc: the configuration (the file and its
  // positions by node name), and a cycle's data (positions per NodeId,
  // interned ids, marks) in its CycleState.
  struct State;
  struct Cycle;
  inline static const framework::CycleState::Key kCycleKey = framework::CycleState::NewKey();
  std::shared_ptr<State> state_;
  const Clock* clock_;
};

}  // namespace hf::plugins

#endif  // HF_PLUGINS_TOPOLOGY_TOPOLOGY_H_
