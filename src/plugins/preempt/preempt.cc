#include "plugins/preempt/preempt.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

namespace hf::plugins {
namespace {

// How many nodes ahead the sweep prefetches a node's priority bands.
constexpr NodeId kBandPrefetch = 16;

// The order in which victims are given a reprieve, most important first:
// higher priority; then the larger gang; then the later start (a task that
// started recently is the one the min-runtime rule protects from thrashing,
// so among equals the longest-running task goes first); scheduled tasks have not started
// (started_at_ms 0) and therefore come last, which is also where evicting
// costs no work; finally the lower key (earlier submitted, as the queue
// orders them), so that the choice is deterministic.
//
// Reclaimable victims (another queue's borrowed capacity) go before the own
// queue's, and among them the most recently started goes first.
// T: PlacedTask or ClusterState::PlacedBrief (the same fields).
template <typename T>
bool MoreImportant(const T* a, size_t a_gang, bool a_reclaim, const T* b, size_t b_gang,
                   bool b_reclaim) {
  if (a_reclaim != b_reclaim) return b_reclaim;
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a_reclaim) {
    if (a_gang != b_gang) return a_gang > b_gang;
    // Not started yet counts as started last.
    const int64_t a_start = a->state == TaskState::kRunning ? a->started_at_ms : INT64_MAX;
    const int64_t b_start = b->state == TaskState::kRunning ? b->started_at_ms : INT64_MAX;
    if (a_start != b_start) return a_start < b_start;
    return a->key < b->key;
  }
  // Evicting a gang's member evicts the whole gang: the larger one is spared first.
  if (a_gang != b_gang) return a_gang > b_gang;
  const int64_t a_start = a->state == TaskState::kRunning ? a->started_at_ms : 0;
  const int64_t b_start = b->state == TaskState::kRunning ? b->started_at_ms : 0;
  if (a_start != b_start) return a_start > b_start;
  return a->key < b->key;
}

// The rules on a task's own fields, for one that the scope's answer `kind`
// allows (T as above).
template <typename T>
framework::EvictionScope::Kind OwnRules(const Task& task, const T& p,
                                        framework::EvictionScope::Kind kind, bool allow_running,
                                        int64_t now_ms, int64_t min_runtime_ms) {
  using Kind = framework::EvictionScope::Kind;
  if (!p.preemptible || kind == Kind::kNone) return Kind::kNone;
  if (kind == Kind::kPriority && p.priority >= task.priority) return Kind::kNone;
  if (p.state == TaskState::kRunning) {
    // Reclaim takes back running work too, in every mode but disabled.
    if ((!allow_running && kind != Kind::kReclaim) || now_ms - p.started_at_ms < min_runtime_ms) {
      return Kind::kNone;
    }
  } else if (p.state != TaskState::kScheduled) {
    return Kind::kNone;
  }
  return kind;
}

}  // namespace

Preempt::Preempt(const framework::PluginDeps& deps) : reasons_(deps.reasons), clock_(deps.clock) {}

Status Preempt::Configure(const framework::PluginArgs& args) {
  const auto modes = Modes();
  // The framework fills an empty mode with the first one; a direct caller
  // gets the same rule.
  const std::string mode = args.mode.empty() ? modes.front() : args.mode;
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    return InvalidArgument(
        "plugins.preempt.mode must be one of scheduled | running | disabled, got \"" + args.mode +
        "\"");
  }
  int64_t min_runtime_ms = kDefaultMinRuntimeMs;
  if (args.config.is_object() && args.config.contains("min_runtime_seconds")) {
    const auto& v = args.config["min_runtime_seconds"];
    if (!v.is_number() || !(v.get<double>() >= 0)) {
      return InvalidArgument(
          "plugins.preempt.min_runtime_seconds must be a number >= 0 (seconds a running task "
          "runs before it may be preempted), got " +
          v.dump());
    }
    // JSON numbers are finite; a value too large for int64 milliseconds means
    // "never preempt running tasks", which the largest value expresses.
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    const double ms = std::round(v.get<double>() * 1000.0);
    min_runtime_ms = ms >= static_cast<double>(kMax) ? kMax : static_cast<int64_t>(ms);
  }
  mode_ = mode;
  min_runtime_ms_ = min_runtime_ms;
  return Status::Ok();
}

framework::PreemptionPlan Preempt::PostFilter(const Task& task, const ClusterState& cluster,
                                              const framework::Rejections& rejections,
                                              const framework::FilterProbe& filters,
                                              const framework::EvictionScope* scope) {
  if (mode_ == "disabled") return {};
  scope_ = scope;
  // Without a clock no running task has provably run long enough, unless the
  // minimum runtime is 0.
  const int64_t now_ms = clock_ ? clock_->NowMs() : 0;
  best_ = Choice{};
  best_victims_.clear();
  Sweep(task, cluster, rejections, filters, /*allow_running=*/false, now_ms);
  if (best_.node == kNoNode && mode_ == "running") {
    Sweep(task, cluster, rejections, filters, /*allow_running=*/true, now_ms);
  }
  scope_ = nullptr;
  if (best_.node == kNoNode) return {};
  return {best_.node, best_victims_};
}

framework::EvictionScope::Kind Preempt::Evictable(const Task& task, const PlacedTask& p,
                                                  bool allow_running, int64_t now_ms) const {
  using Kind = framework::EvictionScope::Kind;
  if (!p.preemptible) return Kind::kNone;
  return OwnRules(task, p, scope_ ? scope_->Evictable(p) : Kind::kPriority, allow_running, now_ms,
                  min_runtime_ms_);
}

// The fewest victims any set on node n can have: 2 when evicting the one
// task that holds the most of a resource there (`big`) would still leave
// too little of it (for GPUs: too few GPUs with the share, or too little
// GPU share in all); 1 otherwise.
size_t Preempt::FewestVictims(const Task& task, const ClusterState& cluster, NodeId n,
                              const ClusterState::Largest& big) {
  const Requests& r = task.requests;
  if (cluster.free_cpu(n) + big.cpu_milli < r.cpu_milli ||
      cluster.free_memory(n) + big.memory_mib < r.memory_mib) {
    return 2;
  }
  if (r.gpu == 0) return 1;
  if (cluster.total_gpu_milli(n) - cluster.used_gpu_milli(n) + big.gpu_milli <
      int64_t{r.gpu} * r.gpu_milli) {
    return 2;
  }
  int32_t with_share = 0;
  for (int32_t free : cluster.gpu_free_milli(n)) with_share += free >= r.gpu_milli;
  return with_share + big.gpus < r.gpu ? 2 : 1;
}

// Whether evicting one task of lower priority, with no placed gang mates,
// could leave node n enough CPU, memory and GPUs with the share (the
// resources only: a necessary condition for passing every filter).
bool Preempt::OneVictimMayDo(const Task& task, const ClusterState& cluster, NodeId n) {
  const Requests& r = task.requests;
  const auto free = cluster.gpu_free_milli(n);
  int32_t with_share = 0;
  for (int32_t f : free) with_share += f >= r.gpu_milli;
  for (const ClusterState::PlacedBrief& b : cluster.BriefsOn(n)) {
    if (!b.preemptible || b.priority >= task.priority) continue;
    if (b.job != 0 && cluster.PlacedMemberCount(b.job) > 1) continue;
    if (cluster.free_cpu(n) + b.cpu_milli < r.cpu_milli ||
        cluster.free_memory(n) + b.memory_mib < r.memory_mib) {
      continue;
    }
    if (r.gpu == 0) return true;
    // GPUs that reach the share once its grants are back.
    int32_t reach = with_share;
    if (b.gpus_in_mask) {
      for (uint64_t bits = b.gpu_mask; bits; bits &= bits - 1) {
        const int32_t f = free[size_t(std::countr_zero(bits))];
        reach += f < r.gpu_milli && f + b.grant_milli >= r.gpu_milli;
      }
      if (reach >= r.gpu) return true;
      continue;
    }
    const std::vector<GpuDevice>& gpus = cluster.spec(n).gpus;
    for (const GpuGrant& g : cluster.FindPlaced(b.key)->alloc.gpus) {
      for (size_t i = 0; i < gpus.size(); ++i) {
        if (gpus[i].index != g.index) continue;
        reach += free[i] < r.gpu_milli && free[i] + g.milli >= r.gpu_milli;
        break;
      }
    }
    if (reach >= r.gpu) return true;
  }
  return false;
}

void Preempt::Sweep(const Task& task, const ClusterState& cluster,
                    const framework::Rejections& rejections, const framework::FilterProbe& filters,
                    bool allow_running, int64_t now_ms) {
  gangs_.clear();  // whether a gang may go depends on allow_running
  const bool reclaims = scope_ && scope_->reclaims();
  const bool bounded = !reclaims && !exhaustive_;
  // Nothing in the cluster could be a victim: no node needs a look.
  const int32_t floor = cluster.lowest_preemptible_priority();
  if (bounded && floor >= task.priority) return;
  if (bounded && !allow_running && cluster.scheduled_preemptible() == 0) return;
  const size_t node_count = cluster.node_count();
  // Nodes in ascending id, so that the first node with the best possible
  // set ends the search (see below); each is first bounded from below by
  // its summaries and skipped when even that bound cannot beat the best
  // node so far. The bounds never skip a node that could win, so the
  // choice is the one an exhaustive search makes.
  for (NodeId n = 0; n < node_count; ++n) {
    // A node's bands live apart from every other node's: fetch those a few
    // nodes ahead while this one is judged.
    if (n + kBandPrefetch < node_count) {
      __builtin_prefetch(cluster.preemptible_bands(n + kBandPrefetch).data());
    }
    if (!rejections.is_rejected(n)) continue;
    if (!reasons_->resolvable(rejections.reason(n)) || !cluster.schedulable(n)) continue;
    // Too few GPUs in total, or no task that could be a victim: no eviction
    // can help. (Cheap per-node summaries, so most nodes cost no lookups.)
    // A reclaim may evict any priority, running or not.
    if (cluster.gpu_count(n) < task.requests.gpu) continue;
    const int32_t lowest = cluster.lowest_preemptible_priority(n);
    if (!reclaims && lowest >= task.priority) continue;
    if (!reclaims && !allow_running && cluster.scheduled_preemptible(n) == 0) continue;
    // Even evicting every task that could go would not free enough: those
    // of lower priority, or any priority for a reclaim.
    ClusterState::Held held;
    ClusterState::Largest big;
    for (const ClusterState::PreemptibleBand& b : cluster.preemptible_bands(n)) {
      if (!reclaims && b.priority >= task.priority) break;
      held.cpu_milli += b.held.cpu_milli;
      held.memory_mib += b.held.memory_mib;
      held.gpu_milli += b.held.gpu_milli;
      big.cpu_milli = std::max(big.cpu_milli, b.largest.cpu_milli);
      big.memory_mib = std::max(big.memory_mib, b.largest.memory_mib);
      big.gpu_milli = std::max(big.gpu_milli, b.largest.gpu_milli);
      big.gpus = std::max(big.gpus, b.largest.gpus);
    }
    const Requests& r = task.requests;
    if (!exhaustive_ && (cluster.free_cpu(n) + held.cpu_milli < r.cpu_milli ||
        cluster.free_memory(n) + held.memory_mib < r.memory_mib ||
        cluster.total_gpu_milli(n) - cluster.used_gpu_milli(n) + held.gpu_milli <
            int64_t{r.gpu} * r.gpu_milli)) {
      continue;
    }
    if (bounded && best_.node != kNoNode) {
      // The best this node can do: its lowest priority as the highest
      // victim's; and, when no priority in the cluster is negative (gang
      // mates elsewhere count too), its fewest victims each of at least
      // that priority. A tie loses on the id: best_.node < n.
      if (lowest > best_.max_priority) continue;
      if (lowest == best_.max_priority && floor >= 0) {
        size_t fewest = FewestVictims(task, cluster, n, big);
        // Two would lose to the best: worth proving that one cannot do.
        if (fewest == 1 && std::make_pair(2 * int64_t(lowest), size_t{2}) >=
                               std::make_pair(best_.sum_priority, best_.count) &&
            !OneVictimMayDo(task, cluster, n)) {
          fewest = 2;
        }
        if (std::make_pair(int64_t(fewest) * lowest, fewest) >=
            std::make_pair(best_.sum_priority, best_.count)) {
          continue;
        }
      }
    }
    TryNode(task, cluster, n, filters, allow_running, now_ms);
    // One victim of the cluster's lowest priority is the best any set can
    // be, and every node after this one loses the tie on its id.
    if (bounded && best_.node != kNoNode && best_.count == 1 && floor >= 0 &&
        best_.max_priority == floor && best_.sum_priority == floor) {
      break;
    }
  }
}

void Preempt::TryNode(const Task& task, const ClusterState& cluster, NodeId n,
                      const framework::FilterProbe& filters, bool allow_running, int64_t now_ms) {
  eligible_.clear();
  using Kind = framework::EvictionScope::Kind;
  // Running tasks that only this sweep allows (the running sweep follows a
  // scheduled-only one; a reclaim takes running tasks in both).
  bool any_running = false;
  bool any_reclaim = false;
  int32_t lowest = std::numeric_limits<int32_t>::max();
  for (const ClusterState::PlacedBrief& b : cluster.BriefsOn(n)) {
    if (!b.preemptible) continue;
    // Without a scope the brief has every field the rules read.
    const Kind kind = scope_ ? Evictable(task, *cluster.FindPlaced(b.key), allow_running, now_ms)
                             : OwnRules(task, b, Kind::kPriority, allow_running, now_ms,
                                        min_runtime_ms_);
    if (kind == Kind::kNone) continue;
    size_t gang = 1;
    if (b.job != 0) {
      // A member goes only with its whole gang: one that cannot all go is
      // no victim at all.
      auto g = gangs_.find(b.job);
      if (g == gangs_.end()) {
        bool can_go = true;
        const std::vector<TaskKey> mates = cluster.PlacedMembers(b.job);
        for (TaskKey mate : mates) {
          can_go = can_go &&
                   Evictable(task, *cluster.FindPlaced(mate), allow_running, now_ms) != Kind::kNone;
        }
        g = gangs_.emplace(b.job, std::make_pair(mates.size(), can_go)).first;
      }
      if (!g->second.second) continue;
      gang = g->second.first;
    }
    if (b.state == TaskState::kRunning && kind == Kind::kPriority) any_running = true;
    any_reclaim |= kind == Kind::kReclaim;
    eligible_.push_back({&b, gang, kind == Kind::kReclaim});
    lowest = std::min(lowest, b.priority);
  }
  if (eligible_.empty()) return;
  // The running sweep only follows a scheduled-only sweep that found nothing:
  // a node without eligible running tasks gives the same answer as before.
  if (allow_running && !any_running) return;
  // Any victim set has a highest priority of at least `lowest`.
  if (!exhaustive_ && best_.node != kNoNode && lowest > best_.max_priority) return;

  // Every eligible victim out: if the node does not pass then, no set will.
  without_.node = n;
  without_.free.cpu_milli = cluster.free_cpu(n);
  without_.free.memory_mib = cluster.free_memory(n);
  const auto milli = cluster.gpu_free_milli(n);
  const auto memory = cluster.gpu_free_memory(n);
  const auto bits = cluster.gpu_model_bits(n);
  without_.free.gpu_milli.assign(milli.begin(), milli.end());
  without_.free.gpu_memory_mib.assign(memory.begin(), memory.end());
  without_.free.gpu_model_bit.assign(bits.begin(), bits.end());
  without_.load = NodeLoad::Of(cluster, n);
  for (const Eligible& e : eligible_) without_.Remove(cluster, *e.brief);
  if (!filters.Passes(task, cluster, without_)) return;

  // Reprieve: put back, most important first, every victim the node still
  // passes with. What is left is minimal: putting any one victim back would
  // not pass at the moment it was tried, and later reprieves only take more
  // (filters are monotone).
  std::sort(eligible_.begin(), eligible_.end(), [](const Eligible& a, const Eligible& b) {
    return MoreImportant(a.brief, a.gang, a.reclaim, b.brief, b.gang, b.reclaim);
  });
  victims_.clear();
  Choice c;
  c.node = n;
  c.max_priority = std::numeric_limits<int32_t>::min();
  bool in_jobs = false;  // a victim is a gang member
  for (const Eligible& e : eligible_) {
    const ClusterState::PlacedBrief* p = e.brief;
    without_.Add(cluster, *p);
    if (filters.Passes(task, cluster, without_)) continue;
    without_.Remove(cluster, *p);
    in_jobs |= p->job != 0;
    // Victims come in decreasing priority (within reclaimable ones, then
    // within the own queue's), so without reclaim the first one sets the
    // maximum; once it is worse than the best node so far this node cannot win.
    if (!exhaustive_ && !any_reclaim && best_.node != kNoNode && p->priority > best_.max_priority) {
      return;
    }
    victims_.push_back(p->key);
    c.max_priority = std::max(c.max_priority, p->priority);
    c.sum_priority += p->priority;
    if (e.reclaim) {
      const int64_t start = p->state == TaskState::kRunning ? p->started_at_ms : INT64_MAX;
      c.newest_start = std::min(c.newest_start, -start);
      c.newest_key = std::min(c.newest_key, -int64_t(p->key));
    }
  }
  // A node that passes without evicting anything was rejected for some
  // other reason that eviction cannot clear.
  if (victims_.empty()) return;
  c.count = victims_.size();
  // Gangs go whole: every placed mate of a victim counts (each may go: a
  // gang that may not was never eligible).
  jobs_.clear();
  for (size_t i = 0; in_jobs && i < victims_.size(); ++i) {
    const PlacedTask* p = cluster.FindPlaced(victims_[i]);
    if (p->job == 0 || std::find(jobs_.begin(), jobs_.end(), p->job) != jobs_.end()) continue;
    jobs_.push_back(p->job);
    for (TaskKey mate : cluster.PlacedMembers(p->job)) {
      if (std::find(victims_.begin(), victims_.end(), mate) != victims_.end()) continue;
      const PlacedTask* m = cluster.FindPlaced(mate);
      c.max_priority = std::max(c.max_priority, m->priority);
      c.sum_priority += m->priority;
      ++c.count;
    }
  }
  // A reclaim never takes a queue below its guarantee.
  if (scope_) {
    std::vector<TaskKey>& all = victims_with_mates_;
    all = victims_;
    for (TaskKey v : victims_) {
      const PlacedTask* p = cluster.FindPlaced(v);
      if (p->job == 0) continue;
      for (TaskKey mate : cluster.PlacedMembers(p->job)) {
        if (std::find(all.begin(), all.end(), mate) == all.end()) all.push_back(mate);
      }
    }
    if (!scope_->Affordable(all, cluster)) return;
  }
  if (best_.node == kNoNode ||
      std::tie(c.max_priority, c.sum_priority, c.count, c.newest_start, c.newest_key, c.node) <
          std::tie(best_.max_priority, best_.sum_priority, best_.count, best_.newest_start,
                   best_.newest_key, best_.node)) {
    best_ = c;
    best_victims_.swap(victims_);
  }
}

}  // namespace hf::plugins
