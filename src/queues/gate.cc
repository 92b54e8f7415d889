#include "queues/gate.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace hf::queues {
namespace {

using Kind = framework::EvictionScope::Kind;

// Who one preemptor may evict (framework::EvictionScope): its own queue's
// work by priority; other queues' borrowed capacity when the preemptor is
// within its guarantee (GPUs of the models it is guaranteed, or CPU and
// memory for a task without GPUs), never more than a queue borrowed.
class QueueScope final : public framework::EvictionScope {
 public:
  QueueScope(const QueueTree& tree, const Ledger& ledger, const ClusterState& cluster, size_t queue,
             ClusterState::ModelMask guaranteed, bool gpu)
      : tree_(tree),
        ledger_(ledger),
        cluster_(cluster),
        queue_(queue),
        guaranteed_(guaranteed),
        gpu_(gpu) {}

  Kind Evictable(const PlacedTask& v) const override {
    const size_t q = QueueOf(v.queue);
    if (q == queue_) return Kind::kPriority;
    if (!guaranteed_ || q == QueueTree::kNone) return Kind::kNone;
    const QueueUsage& b = Borrowed(q);
    if (!gpu_) return b.cpu_milli > 0 || b.memory_mib > 0 ? Kind::kReclaim : Kind::kNone;
    if (v.alloc.gpus.empty()) return Kind::kNone;
    const QueueUsage held = cluster_.UsageOf(v);
    for (size_t m = 0; m < cluster_.model_count(); ++m) {
      if (held.gpu_milli[m] > 0 && (guaranteed_ & (ClusterState::ModelMask{1} << m)) &&
          b.gpu_milli[m] > 0) {
        return Kind::kReclaim;
      }
    }
    return Kind::kNone;
  }

  bool reclaims() const override { return guaranteed_ != 0; }

  bool Affordable(std::span<const TaskKey> victims, const ClusterState& cluster) const override {
    std::vector<std::pair<size_t, QueueUsage>> taken;
    for (TaskKey k : victims) {
      const PlacedTask* p = cluster.FindPlaced(k);
      if (!p) continue;
      const size_t q = QueueOf(p->queue);
      if (q == queue_) continue;  // the own queue's, by priority
      auto it =
          std::find_if(taken.begin(), taken.end(), [q](const auto& t) { return t.first == q; });
      if (it == taken.end()) it = taken.insert(taken.end(), {q, QueueUsage{}});
      const QueueUsage u = cluster.UsageOf(*p);
      it->second.cpu_milli += u.cpu_milli;
      it->second.memory_mib += u.memory_mib;
      for (size_t m = 0; m < cluster.model_count(); ++m) it->second.gpu_milli[m] += u.gpu_milli[m];
    }
    for (const auto& [q, t] : taken) {
      if (q == QueueTree::kNone) return false;
      const QueueUsage& b = Borrowed(q);
      if (!gpu_) {
        if (t.cpu_milli > b.cpu_milli || t.memory_mib > b.memory_mib) return false;
        continue;
      }
      for (size_t m = 0; m < cluster.model_count(); ++m) {
        if (t.gpu_milli[m] > b.gpu_milli[m]) return false;
      }
    }
    return true;
  }

 private:
  size_t QueueOf(uint32_t id) const {
    if (id >= ids_.size()) ids_.resize(cluster_.queue_count(), kUnknown);
    if (ids_[id] == kUnknown) ids_[id] = tree_.Find(cluster_.queue_name(id));
    return ids_[id];
  }
  const QueueUsage& Borrowed(size_t q) const {
    auto it = borrowed_.find(q);
    if (it == borrowed_.end()) it = borrowed_.emplace(q, ledger_.Borrowed(q)).first;
    return it->second;
  }

  static constexpr size_t kUnknown = SIZE_MAX - 1;
  const QueueTree& tree_;
  const Ledger& ledger_;
  const ClusterState& cluster_;
  const size_t queue_;
  const ClusterState::ModelMask guaranteed_;
  const bool gpu_;
  mutable std::vector<size_t> ids_;                          // cluster queue id -> tree index
  mutable std::unordered_map<size_t, QueueUsage> borrowed_;  // by tree index
};

}  // namespace

Gate Admit(const QueueTree& tree, const Ledger& ledger, const ClusterState& cluster,
           const std::string& queue, const Demand& demand, const std::vector<const Task*>& tasks) {
  Gate g;
  g.queue = tree.Find(queue);
  if (g.queue == QueueTree::kNone || !tree.leaf(g.queue)) {
    g.reason =
        "queue " + queue + (g.queue == QueueTree::kNone ? " does not exist" : " has child queues");
    return g;
  }
  g.gpu = demand.gpu_milli > 0;
  const ClusterState::ModelMask known =
      cluster.model_count() >= 64 ? ClusterState::kAnyModel
                                  : (ClusterState::ModelMask{1} << cluster.model_count()) - 1;
  ClusterState::ModelMask models = g.gpu ? known : ClusterState::kAnyModel;
  for (const Task* t : tasks) {
    if (t->requests.gpu > 0) models &= cluster.AllowedModels(t->requests);
  }
  if (models == 0) {
    // No node has a model it takes: the framework says so, not the queue.
    g.admitted = ClusterState::kAnyModel;
    return g;
  }
  const Admission a = ledger.Admit(g.queue, demand, models);
  g.reason = a.reason;
  g.admitted = a.admitted;
  g.guaranteed = a.guaranteed;
  g.narrowed = g.gpu && a.admitted != 0 && a.admitted != models;
  return g;
}

Task Narrowed(const ClusterState& cluster, const Task& task, const Gate& gate) {
  Task t = task;
  if (t.requests.gpu == 0) return t;
  // The admitted (vendor, model) bits, as names of models and of their
  // vendors (a model name two vendors share stays with the admitted one's).
  t.requests.gpu_models.clear();
  std::vector<std::string> vendors;
  for (size_t m = 0; m < cluster.model_count(); ++m) {
    if (gate.admitted & (ClusterState::ModelMask{1} << m)) {
      t.requests.gpu_models.push_back(cluster.model_name(m));
      const std::string& v = cluster.model_vendor(m);
      if (!v.empty() && std::find(vendors.begin(), vendors.end(), v) == vendors.end()) vendors.push_back(v);
    }
  }
  if (t.requests.gpu_vendors.empty()) t.requests.gpu_vendors = std::move(vendors);
  return t;
}

std::unique_ptr<framework::EvictionScope> Scope(const QueueTree& tree, const Ledger& ledger,
                                                const ClusterState& cluster, const Gate& gate) {
  return std::make_unique<QueueScope>(tree, ledger, cluster, gate.queue, gate.guaranteed, gate.gpu);
}

}  // namespace hf::queues
