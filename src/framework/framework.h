// The Framework runs one scheduling cycle per task over a ClusterState, with
// the plugins of the current policy (SPEC §3).
//
// Cycle: Filter (every enabled filter, in registry order) -> if no node is
// left, PostFilter (preemption) -> PreScore -> Score -> PostScore (each
// plugin's scores normalised to 0..100, then total = sum of weight x score)
// -> highest total wins, ties to the lowest NodeId -> Bind plugins choose
// devices -> the allocation is committed to the ClusterState.
//
// Policy changes (UpdatePlugin, SetSchedulerConfig) take effect at the next
// cycle. Binpack and Spread (or any two plugins that declare a conflict)
// cannot both be enabled.
//
// A cycle's data lives in a CycleState (framework/cycle_state.h), not in the
// framework or its plugins: each caller that schedules passes its own.
//
// Threading: not thread-safe; one thread changes the policy, and schedules
// with it. A preview runs on a second Framework built from a candidate
// policy.
#ifndef HF_FRAMEWORK_FRAMEWORK_H_
#define HF_FRAMEWORK_FRAMEWORK_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/cluster_state.h"
#include "core/job.h"
#include "core/model.h"
#include "core/status.h"
#include "framework/cycle_state.h"
#include "framework/plugin.h"
#include "framework/policy.h"
#include "framework/reasons.h"
#include "framework/registry.h"

namespace hf::framework {

enum class PluginStatus { kActive, kInactive, kError, kConfiguring };

// Whether a plugin with these extension points has a weight. A plugin that
// only filters nodes has none: weights multiply scores. (Preempt keeps the
// weight the product vision's `plugins:` block gives it, though it orders
// nothing.)
bool HasWeight(uint32_t points);

// How many feasible nodes a cycle looks for before it stops filtering, of
// `nodes`, at percentage_of_nodes_to_score `percentage` (0: adaptive):
// `nodes` (every one) when sampling is off.
inline constexpr size_t kMinFeasibleNodesToFind = 100;
inline constexpr size_t kAdaptiveFullScanNodes = 5000;
inline constexpr int kAdaptivePercent = 5;
size_t FeasibleNodesToFind(size_t nodes, int percentage);
const char* PluginStatusName(PluginStatus s);

struct PluginInfo {
  std::string name;
  uint32_t points = 0;
  bool required = false;
  PluginSettings settings;
  std::vector<std::string> modes;
  PluginStatus status = PluginStatus::kInactive;
  std::string message;  // why the plugin is in `error`
};

// A partial update: absent fields stay as they are.
struct PluginPatch {
  std::optional<bool> enabled;
  std::optional<double> weight;
  std::optional<std::string> mode;
  std::optional<nlohmann::json> config;  // merged key by key into the config
};

// How long one plugin took at one extension point, in one Schedule call.
struct PluginTiming {
  std::string_view plugin;  // valid while the Framework lives
  const char* point;        // "Filter", "PostFilter", "PreScore", "Score", "Bind"
  double seconds;
};

struct ScheduleOptions {
  // Record every node's filter verdict and every plugin's scores.
  bool explain = false;
  // State the task gets when bound (the simulator starts tasks at once).
  TaskState bind_state = TaskState::kScheduled;
  // When set, every plugin call is timed and appended here (for metrics;
  // callers sample, as the clock reads cost more than a cheap filter).
  std::vector<PluginTiming>* timings = nullptr;
  // PostFilter (preemption) runs when no node is feasible; false: never.
  bool preempt = true;
  // Only these nodes are considered (gang placement's trials within one rack
  // or switch); empty: every node. Not with preempt.
  std::span<const NodeId> candidates;
  // Who may be evicted, when queues divide the work (PostFilterPlugin).
  const EvictionScope* eviction = nullptr;
  // Nodes not considered at all (room held for a reservation, docs/
  // QUEUES.md "Backfill"), sorted; empty: none.
  std::span<const NodeId> excluded;
};

// How a gang is placed (docs/JOBS.md, "Gang placement"), from its job's
// `placement`.
struct GangOptions {
  // Every member's GPUs are of one model (placement.gpu_model: same).
  bool one_gpu_model = true;
  // With one_gpu_model: the model members placed earlier already use (a
  // late or re-placed member joins them on it); empty when none is placed.
  std::string gpu_model;
  // The smallest network domain tried first: kRack (pack node or rack),
  // kSwitch (pack switch), or kNone (pack none: no domain trials).
  enum class Domain : uint8_t { kNone, kRack, kSwitch };
  Domain domain = Domain::kRack;
  // Domains tried per level, best fit first.
  static constexpr size_t kMaxDomainTrials = 4;
  // From a job's spec: placement.gpu_model and placement.pack.
  static GangOptions For(const JobSpec& spec);
};

// One node's part in a decision, when explained.
struct NodeVerdict {
  NodeId node = kNoNode;
  bool feasible = false;
  std::string reason;           // why Filter rejected it
  std::vector<double> raw;      // per scoring plugin, after normalisation
  std::vector<double> weighted; // raw x weight
  double total = 0;
};

struct Explanation {
  std::vector<std::string> score_plugins;  // names, in the order of raw/weighted
  std::vector<NodeVerdict> nodes;
};

struct Decision {
  bool scheduled = false;
  Allocation alloc;
  // Tasks evicted to make room (already released from the ClusterState);
  // the owner returns them to pending.
  // A victim that is a member of a job takes every placed member of its
  // job with it: a gang is evicted whole or not at all.
  std::vector<TaskKey> victims;
  // The victims as they were placed (ClusterState::Restore puts one back).
  std::vector<PlacedTask> evicted;
  // Unschedulable: "0/12 nodes available: 7 insufficient GPU, ...".
  std::string reason;
  double score = 0;  // the winner's total (0 when it was the only feasible node)
  size_t feasible_nodes = 0;  // nodes that passed Filter
  std::optional<Explanation> explanation;
};

// A gang's placement (ScheduleGang): every member's decision, in the
// order given.
struct GangDecision {
  bool scheduled = false;
  std::vector<Decision> members;
  // Unschedulable: "gang 3/4 placeable: train-worker-3: 0/16 nodes available: ...".
  std::string reason;
};

class Framework {
 public:
  // Builds every registered plugin and applies `policy` over the defaults.
  // Fails on unknown plugin names, bad values, a conflicting pair, or a
  // malformed setting; a plugin whose source is unusable (missing file)
  // starts in status `error` instead.
  static Result<std::unique_ptr<Framework>> Create(const Registry& registry, const Policy& policy,
                                                   const Clock* clock);
  ~Framework();

  // Runs one cycle for `task` with `state` (reused from cycle to cycle by
  // its caller) and, if it is placed, commits it (and evicts any victims) in
  // `cluster`.
  Decision Schedule(const Task& task, ClusterState& cluster, CycleState& state,
                    const ScheduleOptions& options = {});
  // Places the members of one job as a gang, all or nothing: at least
  // `need` of them (in the order given, rank order), in this one call, or
  // none. A failed attempt leaves `cluster` exactly as it was: members it
  // placed are released and victims restored. Trials, first success wins:
  //   1. without preemption, within one rack, then one switch (when a
  //      DomainSource knows them and the gang asks whole GPUs): up to
  //      kMaxDomainTrials domains per level, first those with the fewest
  //      free whole GPUs that still hold the gang's whole-GPU demand;
  //   2. without preemption, on every node;
  //   3. with preemption (options.preempt), on every node.
  // A domain trial succeeds only when it places every member given; the
  // trials on every node when they place `need`. With one_gpu_model, a
  // trial places the first member that asks GPUs as the policy likes and
  // restricts the others to its GPU model; on every node, a failed trial is
  // then retried with every member restricted to each other model in turn.
  // gang.gpu_model, when set, is the only model tried.
  GangDecision ScheduleGang(std::span<const Task* const> members, size_t need,
                            ClusterState& cluster, CycleState& state,
                            const ScheduleOptions& options = {},
                            const GangOptions& gang = {});
  // The same with a CycleState of the framework's own, for callers that
  // schedule on one thread (tests, tools).
  Decision Schedule(const Task& task, ClusterState& cluster, const ScheduleOptions& options = {});

  std::vector<PluginInfo> Plugins() const;
  // Plugin::PathConfigKeys of plugin `name` (empty for an unknown one).
  std::vector<std::string> PathConfigKeys(std::string_view name) const;
  Result<PluginInfo> GetPlugin(std::string_view name) const;
  // Errors: NotFound (unknown plugin), FailedPrecondition (disabling a
  // required plugin), Conflict (naming the other plugin), InvalidArgument
  // (a bad value; a weight for a plugin without one; config for
  // load_threshold, whose thresholds are SetSchedulerConfig's).
  Status UpdatePlugin(std::string_view name, const PluginPatch& patch);
  // Puts back settings exactly as GetPlugin gave them (undoing an update:
  // keys the update added to the config go too). NotFound for an unknown
  // plugin.
  Status RestorePlugin(std::string_view name, const PluginSettings& settings);
  // Reloading a plugin's outside sources (e.g. the topology file) without
  // reading them under the caller's lock: StartReload (lock held) puts the
  // plugin in `configuring` and returns the job; the caller runs job.load
  // without the lock, then FinishReload (lock held) installs what it read:
  // `active`, or `error` with the reason, which it returns. A plugin keeps
  // its part in scheduling while it reloads if it had one. When its settings
  // changed in between (UpdatePlugin loads them itself) the reload is
  // dropped. NotFound for an unknown plugin.
  struct PendingReload {
    std::string plugin;
    ReloadJob job;
    uint64_t generation = 0;  // the settings it was started under
  };
  Result<PendingReload> StartReload(std::string_view name);
  // StartReload for every enabled plugin whose sources changed (ReloadDue).
  std::vector<PendingReload> StartDueReloads();
  Status FinishReload(const PendingReload& reload);
  // Ends a reload whose sources could not be read (it ran out of time):
  // the plugin is in `error` with `why`, which it returns.
  Status FailReload(const PendingReload& reload, Status why);
  // All three steps at once, under the caller's lock (tests, tools).
  Status ReloadPlugin(std::string_view name);

  const SchedulerConfig& scheduler_config() const { return scheduler_; }
  Status SetSchedulerConfig(const SchedulerConfig& config);
  // scheduler.score_weights: the weights of scoring plugins by name (the
  // same value as each plugin's weight). All or nothing: InvalidArgument
  // naming "score_weights.NAME" for an unknown plugin, one that does not
  // score, or a bad weight.
  Status SetScoreWeights(const std::map<std::string, double>& weights);

  // The current settings as a Policy (for persistence and for previews).
  Policy CurrentPolicy() const;
  // Every plugin's settings and the scheduler config, as they are now, to be
  // put back by RestoreSettings when a change cannot be stored.
  struct Settings {
    std::vector<std::pair<std::string, PluginSettings>> plugins;  // registry order
    SchedulerConfig scheduler;
  };
  Settings SaveSettings() const;
  // Puts back what SaveSettings gave (keys a change added to a config go
  // too); plugins whose settings are unchanged are left alone, so they do
  // not reload their sources.
  void RestoreSettings(const Settings& saved);
  const ReasonTable& reasons() const { return reasons_; }

 private:
  struct Slot;
  Framework(const Registry& registry, const Clock* clock);
  Status ApplySettings(Slot& slot, const PluginSettings& settings);
  Status CheckConflicts(const Slot& slot, bool enabling) const;
  void RebuildPointLists();
  // ScheduleGang's domain trials: `trial` on the nodes of up to
  // kMaxDomainTrials racks (then switches) with at least `whole_gpus` free
  // whole GPUs, fewest first; true at the first success. False at once when
  // no DomainSource knows the network.
  bool TryDomains(int64_t whole_gpus, const ClusterState& cluster, CycleState& state,
                  const GangOptions& gang,
                  const std::function<bool(std::span<const NodeId>)>& trial);
  Slot* FindSlot(std::string_view name);
  const Slot* FindSlot(std::string_view name) const;
  // The policy's exclusive_gpu_vendors on `cluster` (ClusterState::
  // AllowedModels), set before each decision; a compare when unchanged.
  void ApplyExclusiveVendors(ClusterState& cluster) const;
  // "0/N nodes available[ for GPU vendor V, model M]: <count> <reason>, ..."
  std::string Summarize(const Rejections& rejections, size_t node_count, const Requests& req) const;
  bool CommitPreemption(const Task& task, ClusterState& cluster, const PreemptionPlan& plan,
                        CycleState& state, const ScheduleOptions& options, Decision& d);
  void PickDefaultGpus(const Task& task, const ClusterState& cluster, Allocation& alloc) const;
  bool BindAndCommit(const Task& task, ClusterState& cluster, NodeId node, CycleState& state,
                     const ScheduleOptions& options, Decision& d);

  ReasonTable reasons_;
  ReasonId held_reason_ = 0;  // a node excluded by ScheduleOptions::excluded
  PluginDeps deps_;
  std::vector<std::unique_ptr<Slot>> slots_;  // registry order
  SchedulerConfig scheduler_;

  // Active plugins per point, rebuilt on every policy change.
  std::vector<FilterPlugin*> filters_;
  std::vector<PostFilterPlugin*> post_filters_;
  struct Scorer {
    ScorePlugin* score;
    PreScorePlugin* pre;  // may be null
    double weight;
    std::string name;
  };
  std::vector<Scorer> scorers_;
  std::vector<BindPlugin*> device_binders_, attachment_binders_;
  std::vector<DomainSource*> domain_sources_;
  std::vector<ArrivalObserver*> observers_;

  CycleState own_state_;  // the second Schedule's
};

}  // namespace hf::framework

#endif  // HF_FRAMEWORK_FRAMEWORK_H_
