// Fragment (Score, Bind): fragmentation-aware packing (docs/PLUGINS.md,
// "fragment"), after Fragmentation Gradient Descent (Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
// Gradient Descent", USENIX ATC '23, §4).
//
// The workload: the task shapes that usually arrive (GPUs, milli per GPU,
// CPU, memory, accepted models and vendors), each with its share of the
// arrivals. Given in the config (`workload`), or learned online: every task
// the scheduler decides about counts once, and older arrivals fade with a
// half-life of `half_life` arrivals; the 128 most frequent shapes are used,
// and past 512 the rarest are forgotten.
//
// A node's fragmentation for one shape m is the free GPU capacity (milli)
// that m could not use there: all of it when m does not fit the node at all
// (too little CPU or memory, too few GPUs with room for m's share, or none of
// m's models); otherwise the free milli of the GPUs m cannot use (another
// model, or less free than m's share per GPU). A node's expected
// fragmentation F is the mean over the workload, weighted by each shape's
// share, a shape of k GPUs counting 1/k of its share. A task with GPUs
// scores each feasible node by how little placing it
// there increases F (the best GPU choice on that node), normalised to
// 0..100. Bind gives a one-GPU task that best GPU, and a task of several
// shares the GPUs F took (by model bit, then free milli); several whole
// GPUs are left to Topology or the default choice, which on a node of one
// model leave the same state.
//
// Beyond FGD (each measured on the openb trace, docs/PLUGINS.md):
//   - increases of F are compared in steps of `resolution` milli (default
//     50): within a step, the node with fuller GPUs wins, as binpack-gpu
//     would place it (exact increases with the same tie rule: -0.4 points);
//   - a task without GPUs: by the increase of F in steps, then on the node
//     with the least free GPU capacity, where its CPU and memory strand the
//     least (+1.4 points on cpu250 over FGD's exact increase);
//   - model scarcity: a node whose GPU model the workload's model-limited
//     shapes need more than its share of the free capacity scores less, by
//     `scarcity` steps per unit of that pressure (ModelPressure), so that
//     work that can run anywhere leaves the scarce models to the work that
//     cannot (+6.1 points on gpuspec33, +0.2 and +0.8 on gpuspec20/25).
//
// Speed: F depends on a node's state only through its GPUs' (model, free
// milli), sorted, and which shape thresholds its free CPU and memory pass;
// F of a state is memoised (the states of a cluster's nodes repeat heavily),
// and the memo is rebuilt when the learned workload has moved (looked at as
// the arrivals double up to kRefresh, then every kRefresh; taken when its
// total variation from the one in use is kDrift or more) or the nodes
// change.
//
// Threading: the framework's (one thread). The learned workload and the memo
// are mutable state of the plugin, changed only by the framework's thread.
#ifndef HF_PLUGINS_FRAGMENT_FRAGMENT_H_
#define HF_PLUGINS_FRAGMENT_FRAGMENT_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/fit.h"
#include "framework/cycle_state.h"
#include "framework/plugin.h"

namespace hf::plugins {

class Fragment final : public framework::ScorePlugin,
                       public framework::BindPlugin,
                       public framework::ArrivalObserver {
 public:
  static constexpr const char* kName = "fragment";
  // Learned shapes kept (the most frequent), and arrivals between refreshes.
  static constexpr size_t kMaxShapes = 128;
  static constexpr uint64_t kRefresh = 256;
  // The raw score of a node the task does not fit after all.
  static constexpr double kNoScore = -1e300;
  static constexpr double kDrift = 0.02;
  // A task without GPUs, within a step of F: per milli of free GPU capacity
  // (a node's GPUs, up to kMaxGpusPerNode, stay under a step), and for
  // fullness (0..1), which stays under one milli's term.
  static constexpr double kFreeTerm = 1e-7, kFullTerm = 1e-9;

  explicit Fragment(const framework::PluginDeps&) {}

  std::string_view Name() const override { return kName; }
  uint32_t Points() const override { return framework::kScorePoint | framework::kBindPoint; }
  Status Configure(const framework::PluginArgs& args) override;
  std::vector<std::string> ConfigKeys() const override {
    return {"workload", "half_life", "resolution", "scarcity"};
  }

  void Observe(const Task& task) override;
  void Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
             std::span<double> scores, framework::CycleState& state) const override;
  void NormalizeScores(std::span<double> scores) const override;
  Status Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
              framework::CycleState& state) const override;

  // A task shape of the workload.
  struct Shape {
    int32_t gpus = 1;
    int32_t milli = kWholeGpuMilli;  // per GPU
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    std::vector<std::string> gpu_models, gpu_vendors;
    double weight = 0;
    using Key = std::tuple<int32_t, int32_t, int64_t, int64_t, std::vector<std::string>,
                           std::vector<std::string>>;
    Key key() const { return {gpus, milli, cpu_milli, memory_mib, gpu_models, gpu_vendors}; }
  };
  // The workload in use (configured, or learned as of the last refresh).
  std::vector<Shape> Workload() const;

  // A node as fragmentation sees it: per GPU its model bit and free milli,
  // and its free CPU and memory.
  struct NodeState {
    std::vector<std::pair<ClusterState::ModelMask, int32_t>> gpus;
    int64_t free_cpu = 0, free_memory = 0;
  };
  // What F depends on, packed: the shapes' CPU and memory thresholds the
  // node passes, and its GPUs as (model bit << 10 | free milli), sorted.
  // Nodes of up to kMaxSigGpus GPUs; larger ones are computed each time.
  static constexpr size_t kMaxSigGpus = 16;
  struct Sig {
    uint32_t cpu_rank = 0, memory_rank = 0, count = 0;
    std::array<uint16_t, kMaxSigGpus> gpus{};
    bool operator==(const Sig&) const = default;
  };
  struct SigHash {
    size_t operator()(const Sig& s) const;
  };
  // A placement's increase of F depends only on the node's state and the
  // task's shape: memoised by both.
  struct DeltaKey {
    Sig before;
    uint32_t cpu_rank_after = 0, memory_rank_after = 0;  // the task's CPU and memory taken
    int32_t gpus = 0, milli = 0;
    ClusterState::ModelMask allowed = 0;
    bool operator==(const DeltaKey&) const = default;
  };
  struct DeltaHash {
    size_t operator()(const DeltaKey& k) const;
  };
  // F of `s` for `cluster`'s models (exposed for tests): the weighted mean
  // over the workload of the free milli each shape cannot use.
  double Expected(const ClusterState& cluster, const NodeState& s) const;
  // Per model bit, how much the workload's model-limited shapes press on it:
  // the sum, over each set S of models that some shapes are limited to and
  // that holds the model, of S's share of the workload's GPU demand (shapes
  // weighted by GPUs x milli) over S's share of the cluster's free GPU
  // capacity (capped at kMaxPressure). A shape is limited when its models
  // leave out some model the cluster has. Empty when no shape is limited.
  static constexpr double kMaxPressure = 10;
  std::vector<double> ModelPressure(const ClusterState& cluster) const;

 private:
  // The best placement of `task` on node n: the increase of F, and for a
  // shared GPU the slot it takes (-1 otherwise). nullopt when it does not fit.
  struct Choice {
    double delta = 0;
    int slot = -1;
  };
  // `allowed`: ClusterState::AllowedModels of the task, worked out once.
  std::optional<Choice> Best(const Task& task, const ClusterState& cluster, NodeId n,
                             ClusterState::ModelMask allowed) const;
  // Best on a node of more than kMaxSigGpus GPUs (not packed, not memoised).
  std::optional<Choice> BestUnpacked(const Requests& r, const ClusterState& cluster, NodeId n,
                                     ClusterState::ModelMask allowed) const;
  // Best's work on a node's packed GPUs (its slots' order): the increase of
  // F and the packed GPU a share takes (kNoGpu, kNoFit).
  std::pair<double, uint16_t> Place(const Requests& r, const Sig& before, Sig after,
                                    std::array<uint16_t, kMaxSigGpus> gpus,
                                    const std::function<bool(size_t)>& fits) const;
  // The shapes resolved for `cluster` (model masks), rebuilt when the
  // workload, the cluster's nodes or its exclusive vendors change.
  void Prepare(const ClusterState& cluster) const;
  double ExpectedUncached(const NodeState& s) const;
  // A node of many GPUs: per shape, its GPUs with room for the shape and
  // the free milli the shape cannot use, counted once (CountsOf); F of the
  // node with `taken` slots giving `milli` each and `cpu`, `memory` free,
  // from those counts (FOf: ExpectedUncached's sum, in its order).
  struct Counts {
    std::vector<int32_t> room;
    std::vector<int64_t> unusable;
    int64_t free_total = 0;
  };
  Counts CountsOf(const GpuFreeView& view) const;
  double FOf(const Counts& c, const GpuFreeView& view, std::span<const size_t> taken, int32_t milli,
             int64_t cpu, int64_t memory) const;
  // F of a packed state (memoised).
  double ExpectedOf(const Sig& sig) const;
  double ExpectedUncached(const Sig& sig) const;
  Sig SigOf(int64_t free_cpu, int64_t free_memory) const;

  // Configuration.
  std::vector<Shape> configured_;  // empty: learn
  double half_life_ = 2000;        // arrivals
  static constexpr double kDefaultResolution = 50;  // milli-GPUs
  double resolution_ = kDefaultResolution;
  static constexpr double kDefaultScarcity = 20;  // steps per unit of pressure
  double scarcity_ = kDefaultScarcity;

  // The learned workload (when none is configured).
  std::map<Shape::Key, double> learned_;
  double gain_ = 1;                 // weight of the next arrival (grows; decays the past)
  uint64_t arrivals_ = 0;
  std::unordered_set<TaskKey> seen_;  // arrivals already counted (a pending task is retried)

  // Resolved shapes and the memo of F by node state.
  struct Resolved {
    int32_t gpus, milli;
    int64_t cpu_milli, memory_mib;
    ClusterState::ModelMask models;
    double weight;  // share of the workload (in F: over the shape's GPUs)
  };
  static bool Usable(const Resolved& shape, ClusterState::ModelMask bit, int32_t milli) {
    return (bit & shape.models) != 0 && milli >= shape.milli;
  }
  mutable std::vector<Resolved> shapes_;  // grouped by their GPU part (gpus, milli, models)
  // Where each GPU part's shapes start in shapes_ (and the end).
  mutable std::vector<size_t> groups_;
  mutable std::vector<int64_t> cpu_steps_, memory_steps_;  // shapes' thresholds, sorted
  // The sets of models some shapes are limited to, each with those shapes'
  // share of the GPU demand (ModelPressure).
  mutable std::vector<std::pair<ClusterState::ModelMask, double>> limited_;
  mutable uint64_t prepared_version_ = 0;
  mutable uint64_t prepared_refresh_ = ~uint64_t{0};
  mutable std::vector<std::string> prepared_exclusive_;
  mutable std::unordered_map<Sig, double, SigHash> memo_;
  // Per (state, shape): the increase of F and, for a share, the packed GPU
  // (model bit << 10 | free milli) it takes; kNoGpu when none or whole GPUs,
  // kNoFit when it does not fit.
  static constexpr uint16_t kNoGpu = 0xffff, kNoFit = 0xfffe;
  mutable std::unordered_map<DeltaKey, std::pair<double, uint16_t>, DeltaHash> deltas_;
  mutable std::vector<Shape> active_;  // the workload as of the last refresh
};

}  // namespace hf::plugins

#endif  // HF_PLUGINS_FRAGMENT_FRAGMENT_H_
