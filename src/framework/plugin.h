// The scheduling framework's extension points (SPEC §3).
//
// A plugin is one class in its own folder under src/plugins/, registered by
// name in src/plugins/registry.cc. It implements the interfaces of the points
// it takes part in; the framework calls them in cycle order:
//
//   Filter -> (PostFilter if no node is left) -> PreScore -> Score ->
//   PostScore (normalise + weigh: done by the framework) -> Bind
//
// Interfaces work on a whole list of nodes per call instead of one node per
// call: a scheduling decision on 10,000 nodes must take tens of microseconds,
// so each plugin runs its own tight loop over the cluster's arrays.
//
// On the name Bind: in Kubernetes, Reserve claims resources on the chosen
// node and Bind is the write to the API server. Here Bind picks the devices
// (GPUs, NICs) on the chosen node, which Kubernetes splits between Reserve and
// the device plugin's Allocate, and the write is the scheduler's batch commit
// (scheduler/scheduler.h), which no plugin sees. The name stays Bind because
// SPEC §3 and the API (`extension_points` of GET /api/v1/plugins, the UI)
// name the point so; renaming it would break every client that reads them
// for a difference no plugin author can act on.
//
// Plugins see the task, the cluster state (read-only) and their own config;
// never the server, the store or another plugin. Instances are used by one
// scheduling thread at a time and may keep per-cycle scratch as members.
#ifndef HF_FRAMEWORK_PLUGIN_H_
#define HF_FRAMEWORK_PLUGIN_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/cluster_state.h"
#include "core/model.h"
#include "core/status.h"
#include "core/what_if.h"
#include "framework/reasons.h"

namespace hf::framework {

enum ExtensionPoint : uint32_t {
  kFilterPoint = 1u << 0,
  kPostFilterPoint = 1u << 1,
  kPreScorePoint = 1u << 2,
  kScorePoint = 1u << 3,
  kBindPoint = 1u << 4,
};
// "Filter,Score,Bind": the points in a mask, in cycle order.
std::string ExtensionPointNames(uint32_t points);

// A plugin's settings: `mode` (only for plugins that have modes) and the
// free-form config object from the policy (e.g. topology_config).
struct PluginArgs {
  std::string mode;
  nlohmann::json config = nlohmann::json::object();
};

// A reload of a plugin's outside sources (files) in two steps, so that slow
// I/O never runs under the framework's lock: `load` reads the sources into
// state of its own (it must not touch the plugin: it runs without the lock,
// while the plugin schedules); `apply` installs what was read, with the
// lock, under Configure's error contract. Both are empty for a plugin with
// nothing to load.
struct ReloadJob {
  std::function<void()> load;
  std::function<Status()> apply;
};

// What plugins get from the framework when they are built.
struct PluginDeps {
  ReasonTable* reasons = nullptr;
  const Clock* clock = nullptr;
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual std::string_view Name() const = 0;
  // Bitmask of ExtensionPoint values this plugin implements.
  virtual uint32_t Points() const = 0;
  // Modes accepted by the `mode` setting; empty when the plugin has none.
  virtual std::vector<std::string> Modes() const { return {}; }
  // The keys its `config` may hold; any other key is refused by the
  // framework (InvalidArgument naming it), so a typo never passes silently.
  virtual std::vector<std::string> ConfigKeys() const { return {}; }
  // Names of plugins that may not be enabled together with this one.
  virtual std::vector<std::string> ConflictsWith() const { return {}; }
  // The config keys that name files on the server (topology_config): the
  // API confines them to the server's --file-root.
  virtual std::vector<std::string> PathConfigKeys() const { return {}; }

  // Applies settings. Returns InvalidArgument when the settings are malformed
  // (the change is refused and the old settings stay); Unavailable when they
  // are well-formed but name something unusable (e.g. a missing file): the
  // settings are kept and the plugin is in status `error` until a reload works.
  virtual Status Configure(const PluginArgs& args) {
    (void)args;
    return Status::Ok();
  }
  // Re-reads outside sources (files), as a job the framework runs in two
  // steps (see ReloadJob). Default: nothing to reload.
  virtual ReloadJob StartReload() { return {}; }
  // Cheap test, called by the server's watcher (every half second), whether
  // the outside sources changed and a reload is due.
  virtual bool ReloadDue() { return false; }
};

// Records why each rejected node was rejected, and how many per reason.
//
// The framework first filters with recording off: most tasks fit somewhere
// and nobody reads their rejections. Only when no node is left (for the
// "0/N nodes available" summary and for preemption) or when a decision is
// explained does it filter again with recording on. A filter whose reasons
// cost something to work out checks recording() first; Reject() is a no-op
// when recording is off.
class Rejections {
 public:
  // Recording is on after Reset unless set otherwise.
  void Reset(size_t node_count, size_t reason_count, bool recording = true);
  bool recording() const { return recording_; }
  void Reject(NodeId n, ReasonId r) {
    if (!recording_) return;
    // A reason interned while filtering (one naming what a node has).
    if (r >= count_by_reason_.size()) count_by_reason_.resize(size_t(r) + 1, 0);
    reason_by_node_[n] = r;
    stamp_[n] = epoch_;
    ++count_by_reason_[r];
    rejected_.push_back(n);
  }
  const std::vector<NodeId>& rejected() const { return rejected_; }
  // Whether node n was rejected since the last Reset (with recording on).
  bool is_rejected(NodeId n) const { return stamp_[n] == epoch_; }
  ReasonId reason(NodeId n) const { return reason_by_node_[n]; }
  uint32_t count(ReasonId r) const { return count_by_reason_[r]; }
  size_t reason_slots() const { return count_by_reason_.size(); }

 private:
  std::vector<ReasonId> reason_by_node_;
  std::vector<uint32_t> count_by_reason_;
  std::vector<NodeId> rejected_;
  // stamp_[n] == epoch_: node n is rejected (a Reset only moves epoch_ on).
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 1;
  bool recording_ = true;
};

class FilterPlugin : public virtual Plugin {
 public:
  // Removes from `nodes` every node that cannot take `task`, keeping the
  // others in ascending NodeId order (the list comes in that order), and records each removal with its reason
  // (when rejections.recording()).
  virtual void Filter(const Task& task, const ClusterState& cluster, std::vector<NodeId>& nodes,
                      Rejections& rejections) = 0;

  // Preemption's what-if: would node `without.node` pass this filter if the
  // tasks `without` took out were gone? Filters whose verdict depends on
  // the tasks placed on a node (resource fit, load thresholds) override it
  // and judge `without`; the default runs Filter on that one node as it is,
  // which is right for every filter that does not. A filter must be
  // monotone: taking tasks off a node never makes it fail.
  virtual bool PassesWithout(const Task& task, const ClusterState& cluster,
                             const NodeWithout& without);

 private:
  std::vector<NodeId> one_node_;  // PassesWithout's scratch
  Rejections not_recording_;
};

// Runs every active filter's PassesWithout: whether a node, with some of its
// tasks taken out, would pass Filter. The framework gives one to PostFilter.
class FilterProbe {
 public:
  virtual ~FilterProbe() = default;
  virtual bool Passes(const Task& task, const ClusterState& cluster,
                      const NodeWithout& without) const = 0;
};

// Which placed tasks one preemptor may evict, when work is divided into
// queues (docs/QUEUES.md); the scheduler gives one per decision. Without
// one, priority alone decides (SPEC §4).
class EvictionScope {
 public:
  virtual ~EvictionScope() = default;
  enum class Kind : uint8_t {
    kNone,      // never (another queue's work it may not reclaim)
    kPriority,  // when of lower priority (its own queue's work)
    kReclaim,   // whatever its priority: capacity its queue borrowed
  };
  virtual Kind Evictable(const PlacedTask& victim) const = 0;
  // Whether any task may be kReclaim (so nodes without lower-priority
  // tasks are worth a look).
  virtual bool reclaims() const = 0;
  // Whether evicting `victims` (whole gangs) takes no queue below its
  // guarantee: each queue loses at most what it borrowed.
  virtual bool Affordable(std::span<const TaskKey> victims, const ClusterState& cluster) const = 0;
};

// A preemption decision: evict `victims` from `node`, then place the task there.
struct PreemptionPlan {
  NodeId node = kNoNode;
  std::vector<TaskKey> victims;
};

class PostFilterPlugin : public virtual Plugin {
 public:
  // Called when Filter left no node. Returns a plan (node != kNoNode) or an
  // empty plan when nothing can be done. Only nodes whose rejection reason is
  // resolvable are worth considering; `filters` says whether such a node,
  // with a candidate victim set taken out, would pass every filter.
  // `scope` (may be null) says who may be evicted when queues divide the
  // work.
  virtual PreemptionPlan PostFilter(const Task& task, const ClusterState& cluster,
                                    const Rejections& rejections, const FilterProbe& filters,
                                    const EvictionScope* scope) = 0;
};

class CycleState;

// PreScore, Score and Bind keep what they compute for a cycle in its
// CycleState (framework/cycle_state.h), never in the plugin: a plugin's
// members are its configuration.
class PreScorePlugin : public virtual Plugin {
 public:
  // Prepares per-task data for Score over `feasible`, in `state`. Returns
  // false when the plugin has nothing to say about this task (its Score is
  // skipped and it contributes 0 to every node).
  virtual bool PreScore(const Task& task, const ClusterState& cluster,
                        std::span<const NodeId> feasible, CycleState& state) const = 0;
};

class ScorePlugin : public virtual Plugin {
 public:
  // Writes one score per node of `nodes` into `scores` (same length). Scores
  // are 0..100 unless the plugin normalises them (below).
  virtual void Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
                     std::span<double> scores, CycleState& state) const = 0;
  // Maps raw scores onto 0..100 in place (PostScore). Default: none needed.
  virtual void NormalizeScores(std::span<double> scores) const { (void)scores; }
};

class BindPlugin : public virtual Plugin {
 public:
  // Device pickers (GPUs) run first, in registry order; then the framework
  // picks the lowest free eligible GPUs if none chose; then attachment pickers
  // (RDMA NICs), which can see the chosen GPUs.
  enum class Stage { kDevices, kAttachments };
  virtual Stage BindStage() const { return Stage::kDevices; }
  // Refines `alloc` on the chosen node: picks GPUs (if alloc.gpus is still
  // empty and the task needs GPUs), an RDMA device, and so on. Bind plugins
  // run in registry order; the framework then commits the allocation.
  virtual Status Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
                      CycleState& state) const = 0;
};

// Where nodes sit in the network, for gang placement (Framework::ScheduleGang
// fits a gang within one rack, then one switch, before anywhere). Per NodeId,
// dense ids; kNoDomain where unknown. A rack's id is unique across switches.
struct NodeDomains {
  static constexpr uint32_t kNoDomain = 0xffffffffu;
  std::vector<uint32_t> rack, sw;
};

// A plugin that learns from the tasks that arrive (the fragment plugin's
// workload). Not an extension point of its own: any enabled, healthy plugin
// that implements it is told of each task once per decision, before its
// filters run, whether or not the task is then placed (a pending task is
// told again at each try; the plugin tells them apart by key).
class ArrivalObserver : public virtual Plugin {
 public:
  virtual void Observe(const Task& task) = 0;
};

// A plugin that knows the network (the topology plugin). Not an extension
// point of its own: any enabled, healthy plugin that implements it is asked.
class DomainSource : public virtual Plugin {
 public:
  // Fills `out` for `cluster` (cached in `state` as the plugin likes);
  // false when the plugin knows no node's position.
  virtual bool Domains(const ClusterState& cluster, CycleState& state, NodeDomains& out) const = 0;
};

}  // namespace hf::framework

#endif  // HF_FRAMEWORK_PLUGIN_H_
