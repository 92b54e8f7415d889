// Preempt (PostFilter): when Filter leaves no node, evict lower-priority tasks
// to make room (SPEC §4).
//
// Modes: "scheduled" (default: evict only tasks that are scheduled but not yet
// running), "running" (first try scheduled-only victims on every node; only if
// that frees no node, running tasks too), "disabled".
//
// Victims have strictly lower priority than the preemptor and are
// preemptible; a running task is not a victim before it has run
// `min_runtime_seconds` (config, default 60; anti-thrashing).
// Only nodes that Filter rejected for a resolvable reason (insufficient
// resources, load above a threshold) are considered. On each such node:
// take every eligible victim out, check that the node passes every filter
// then (the framework's FilterProbe: resources fit, and the load estimate
// without the victims is under the thresholds), then put victims back, most
// important first (higher priority, then the larger gang, then later
// start), while it still passes: what remains is the minimal victim set.
// A victim that is a job's member takes its whole gang with it (the
// framework evicts its placed mates on every node), so it counts whole: its
// mates add to the sum of priorities and the count, and a mate that may not
// go (not preemptible, or running when only scheduled tasks may go, or
// younger than min_runtime_seconds) makes none of its gang a victim. Among nodes,
// choose the lowest highest-victim priority, then the lowest sum of victim
// priorities, then the fewest victims, then the lowest NodeId. The framework evicts the victims and binds the preemptor in
// the same step, so the freed resources are reserved for it.
//
// Queues (docs/QUEUES.md): with an EvictionScope, only the preemptor's own
// queue's work is evicted by priority; another queue's is evicted only when
// the scope says it is reclaimable (borrowed capacity the preemptor's queue
// is guaranteed), whatever its priority, and then also running (past
// min_runtime_seconds) in mode "scheduled". Reclaimable victims go before
// the own queue's: among them the lower priority, the smaller gang, then
// the most recently started (a scheduled one first); between nodes that tie
// on the choice below, the one whose victims were admitted last. A node's
// victim set must also be Affordable: no queue loses more than it borrowed.
//
// Config: {"min_runtime_seconds": number >= 0}.
#ifndef HF_PLUGINS_PREEMPT_PREEMPT_H_
#define HF_PLUGINS_PREEMPT_PREEMPT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cluster_state.h"
#include "core/what_if.h"
#include "core/model.h"
#include "framework/plugin.h"

namespace hf::plugins {

class Preempt final : public framework::PostFilterPlugin {
 public:
  static constexpr const char* kName = "preempt";
  explicit Preempt(const framework::PluginDeps& deps);

  std::string_view Name() const override { return kName; }
  uint32_t Points() const override { return framework::kPostFilterPoint; }
  std::vector<std::string> Modes() const override { return {"scheduled", "running", "disabled"}; }
  Status Configure(const framework::PluginArgs& args) override;
  std::vector<std::string> ConfigKeys() const override { return {"min_runtime_seconds"}; }
  // Turns the search's bounds off: every candidate node is examined in
  // full. The choice must not change; a test compares the two.
  void SetExhaustiveForTesting(bool on) { exhaustive_ = on; }
  framework::PreemptionPlan PostFilter(const Task& task, const ClusterState& cluster,
                                       const framework::Rejections& rejections,
                                       const framework::FilterProbe& filters,
                                       const framework::EvictionScope* scope) override;

 private:
  static constexpr int64_t kDefaultMinRuntimeMs = 60'000;

  // How good a node's minimal victim set is; smaller is better, field by
  // field, in the order the node choice uses.
  struct Choice {
    int32_t max_priority = 0;
    int64_t sum_priority = 0;
    size_t count = 0;
    // With reclaim victims: the most recently admitted victim's start
    // (running) or key, negated, so that the node whose victims are the
    // newest wins a tie; 0 otherwise.
    int64_t newest_start = 0;
    int64_t newest_key = 0;
    NodeId node = kNoNode;
  };

  // One sweep over the resolvable rejected nodes; running tasks are victims
  // only when `allow_running`. Leaves the best plan in best_/best_victims_.
  void Sweep(const Task& task, const ClusterState& cluster, const framework::Rejections& rejections,
             const framework::FilterProbe& filters, bool allow_running, int64_t now_ms);
  // A lower bound on the victims any set on node n has (1 or 2).
  static size_t FewestVictims(const Task& task, const ClusterState& cluster, NodeId n,
                              const ClusterState::Largest& big);
  // Whether one victim alone might make room on node n (see the .cc).
  static bool OneVictimMayDo(const Task& task, const ClusterState& cluster, NodeId n);
  // Finds the minimal victim set on node n and keeps it if it beats best_.
  void TryNode(const Task& task, const ClusterState& cluster, NodeId n,
               const framework::FilterProbe& filters, bool allow_running, int64_t now_ms);
  // Whether placed task p may be evicted for `task` in this sweep, and as what.
  framework::EvictionScope::Kind Evictable(const Task& task, const PlacedTask& p, bool allow_running,
                                           int64_t now_ms) const;

  const framework::ReasonTable* reasons_;
  const Clock* clock_;
  std::string mode_ = "scheduled";
  int64_t min_runtime_ms_ = kDefaultMinRuntimeMs;
  bool exhaustive_ = false;

  // Per-call scratch, kept as members so that a PostFilter over many nodes
  // does not allocate per node or per victim once warmed up.
  struct Eligible {
    const ClusterState::PlacedBrief* brief;  // in cluster.BriefsOn(node)
    size_t gang;  // its job's placed members (1 for a task outside any job)
    bool reclaim;  // borrowed capacity taken back (EvictionScope::kReclaim)
  };
  const framework::EvictionScope* scope_ = nullptr;  // this call's
  std::vector<Eligible> eligible_;
  std::vector<uint64_t> jobs_;  // the victims' jobs, each counted once
  // Per job met in this sweep: its placed members, and whether all may go.
  std::unordered_map<uint64_t, std::pair<size_t, bool>> gangs_;
  std::vector<TaskKey> victims_;
  std::vector<TaskKey> victims_with_mates_;  // Affordable's argument
  NodeWithout without_;
  Choice best_;
  std::vector<TaskKey> best_victims_;
};

}  // namespace hf::plugins

#endif  // HF_PLUGINS_PREEMPT_PREEMPT_H_
