#include "queues/ledger.h"

#include <algorithm>
#include <bit>
#include <tuple>

namespace hf::queues {
namespace {

std::string Gpus(int64_t milli) {
  if (milli % kWholeGpuMilli == 0) return std::to_string(milli / kWholeGpuMilli);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", double(milli) / kWholeGpuMilli);
  return buf;
}

// "holds H of M, asks D" for a resource over a max.
std::string Over(const std::string& what, int64_t holds, int64_t max, int64_t asks, bool gpu) {
  const auto f = [gpu](int64_t v) { return gpu ? Gpus(v) : std::to_string(v); };
  return what + " (holds " + f(holds) + " of " + f(max) + ", asks " + f(asks) + ")";
}

}  // namespace

void Ledger::Compute(const QueueTree& tree, const ClusterState& cluster) {
  tree_ = &tree;
  cluster_ = &cluster;
  models_ = cluster.model_count();
  if (quotas_generation_ != tree.generation() || quotas_models_ != models_) {
    guaranteed_gpu_.assign(tree.size() * models_, 0);
    max_gpu_.assign(tree.size() * models_, kNoLimit);
    for (size_t q = 0; q < tree.size(); ++q) {
      const QueueSpec& s = tree.spec(q);
      for (size_t m = 0; m < models_; ++m) {
        const std::string& model = cluster.model_name(m);
        guaranteed_gpu_[q * models_ + m] = s.guaranteed.Gpu(model).value_or(0);
        max_gpu_[q * models_ + m] = s.max.Gpu(model).value_or(kNoLimit);
      }
    }
    quotas_generation_ = tree.generation();
    quotas_models_ = models_;
  }
  // Only the models in use are cleared: a QueueUsage holds 64.
  used_.resize(tree.size());
  for (QueueUsage& u : used_) {
    u.cpu_milli = u.memory_mib = 0;
    std::fill_n(u.gpu_milli.begin(), models_, 0);
  }
  for (size_t id = 0; id < cluster.queue_count(); ++id) {
    size_t q = tree.Find(cluster.queue_name(id));
    const QueueUsage& u = cluster.queue_usage(id);
    // A queue the tree no longer has (it cannot hold work, so this is
    // usage left over at zero) counts nowhere.
    for (; q != QueueTree::kNone; q = tree.parent(q)) {
      QueueUsage& t = used_[q];
      t.cpu_milli += u.cpu_milli;
      t.memory_mib += u.memory_mib;
      for (size_t m = 0; m < models_; ++m) t.gpu_milli[m] += u.gpu_milli[m];
    }
  }
  if (!has_capacity_ || capacity_version_ != cluster.nodes_version()) {
    capacity_ = QueueUsage{};
    for (NodeId n = 0; n < cluster.node_count(); ++n) {
      capacity_.cpu_milli += cluster.total_cpu(n);
      capacity_.memory_mib += cluster.total_memory(n);
      for (const ClusterState::ModelMask bit : cluster.gpu_model_bits(n)) {
        capacity_.gpu_milli[size_t(std::countr_zero(bit))] += kWholeGpuMilli;
      }
    }
    capacity_version_ = cluster.nodes_version();
    has_capacity_ = true;
  }
}

Admission Ledger::Admit(size_t queue, const Demand& d, ClusterState::ModelMask models) const {
  Admission a;
  const std::vector<size_t> path = tree_->PathUp(queue);
  // CPU and memory: the same whatever the GPU model.
  for (size_t q : path) {
    const QueueSpec& s = tree_->spec(q);
    const QueueUsage& u = used_[q];
    if (s.max.cpu_milli && d.cpu_milli > 0 && u.cpu_milli + d.cpu_milli > *s.max.cpu_milli) {
      a.reason = "queue " + s.name + ": over its max " +
                 Over("cpu_milli", u.cpu_milli, *s.max.cpu_milli, d.cpu_milli, false);
      return a;
    }
    if (s.max.memory_mib && d.memory_mib > 0 && u.memory_mib + d.memory_mib > *s.max.memory_mib) {
      a.reason = "queue " + s.name + ": over its max " +
                 Over("memory_mib", u.memory_mib, *s.max.memory_mib, d.memory_mib, false);
      return a;
    }
  }
  const QueueSpec& leaf = tree_->spec(queue);
  const QueueUsage& lu = used_[queue];
  if (d.gpu_milli == 0) {
    a.admitted = ClusterState::kAnyModel;
    const bool cpu_ok =
        d.cpu_milli == 0 || lu.cpu_milli + d.cpu_milli <= leaf.guaranteed.cpu_milli.value_or(0);
    const bool mem_ok =
        d.memory_mib == 0 || lu.memory_mib + d.memory_mib <= leaf.guaranteed.memory_mib.value_or(0);
    if (cpu_ok && mem_ok && d.cpu_milli + d.memory_mib > 0) a.guaranteed = ClusterState::kAnyModel;
    return a;
  }
  std::string first;  // the first model's refusal
  size_t tried = 0;
  for (size_t m = 0; m < models_; ++m) {
    const ClusterState::ModelMask bit = ClusterState::ModelMask{1} << m;
    if (!(models & bit)) continue;
    ++tried;
    const std::string& model = cluster_->model_name(m);
    bool fits = true;
    for (size_t q : path) {
      const QueueSpec& s = tree_->spec(q);
      const int64_t max = MaxGpu(q, m);
      const int64_t holds = used_[q].gpu_milli[m];
      if (max != kNoLimit && holds + d.gpu_milli > max) {
        if (first.empty()) {
          first = "queue " + s.name + ": over its max " +
                  Over("gpu " + model, holds, max, d.gpu_milli, true);
        }
        fits = false;
        break;
      }
    }
    if (!fits) continue;
    a.admitted |= bit;
    if (lu.gpu_milli[m] + d.gpu_milli <= GuaranteedGpu(queue, m)) a.guaranteed |= bit;
  }
  if (!a.admitted) {
    a.reason = first.empty() ? "queue " + leaf.name + ": no GPU model it may use" : first;
    if (tried > 1 && !first.empty()) a.reason += ", and on every other GPU model it may use";
  }
  return a;
}

QueueUsage Ledger::Borrowed(size_t queue) const {
  const QueueSpec& s = tree_->spec(queue);
  const QueueUsage& u = used_[queue];
  QueueUsage b;
  b.cpu_milli = std::max<int64_t>(0, u.cpu_milli - s.guaranteed.cpu_milli.value_or(0));
  b.memory_mib = std::max<int64_t>(0, u.memory_mib - s.guaranteed.memory_mib.value_or(0));
  for (size_t m = 0; m < models_; ++m) {
    b.gpu_milli[m] = std::max<int64_t>(0, u.gpu_milli[m] - GuaranteedGpu(queue, m));
  }
  return b;
}

namespace {

double Dominant(const QueueUsage& u, const QueueUsage& cap, size_t models) {
  double share = 0;
  if (cap.cpu_milli > 0) share = std::max(share, double(u.cpu_milli) / double(cap.cpu_milli));
  if (cap.memory_mib > 0) share = std::max(share, double(u.memory_mib) / double(cap.memory_mib));
  for (size_t m = 0; m < models; ++m) {
    if (cap.gpu_milli[m] > 0) {
      share = std::max(share, double(u.gpu_milli[m]) / double(cap.gpu_milli[m]));
    }
  }
  return share;
}

}  // namespace

double Ledger::BeyondShare(size_t queue) const {
  // Dominant(Borrowed(queue)), without building the QueueUsage.
  const QueueSpec& s = tree_->spec(queue);
  const QueueUsage& u = used_[queue];
  double share = 0;
  const auto take = [&](int64_t beyond, int64_t cap) {
    if (cap > 0 && beyond > 0) share = std::max(share, double(beyond) / double(cap));
  };
  take(u.cpu_milli - s.guaranteed.cpu_milli.value_or(0), capacity_.cpu_milli);
  take(u.memory_mib - s.guaranteed.memory_mib.value_or(0), capacity_.memory_mib);
  for (size_t m = 0; m < models_; ++m) {
    take(u.gpu_milli[m] - GuaranteedGpu(queue, m), capacity_.gpu_milli[m]);
  }
  return share;
}

double Ledger::Share(size_t queue) const { return Dominant(used_[queue], capacity_, models_); }

size_t Ledger::PickFair(const std::vector<size_t>& candidates) const {
  if (candidates.empty()) return QueueTree::kNone;
  if (candidates.size() == 1) return candidates[0];
  // Mark every queue on a candidate's way to root.
  std::vector<uint8_t> marked(tree_->size(), 0);
  for (size_t c : candidates) {
    for (size_t q = c; q != QueueTree::kNone && !marked[q]; q = tree_->parent(q)) marked[q] = 1;
  }
  std::vector<uint8_t> is_candidate(tree_->size(), 0);
  for (size_t c : candidates) is_candidate[c] = 1;
  size_t at = 0;                                  // root
  std::vector<std::pair<double, size_t>> beyond;  // (beyond share / weight, child)
  while (!is_candidate[at]) {
    beyond.clear();
    double lowest = 0;
    for (size_t c : tree_->children(at)) {
      if (!marked[c]) continue;
      const double b = BeyondShare(c) / tree_->spec(c).weight;
      if (beyond.empty() || b < lowest) lowest = b;
      beyond.emplace_back(b, c);
    }
    if (beyond.empty()) return candidates[0];  // not reachable: a candidate is a leaf
    // Ties on the share beyond the guarantee: the share of all it holds,
    // then the name (worked out only for the tied).
    size_t best = QueueTree::kNone;
    double best_share = 0;
    bool best_share_known = false;
    for (const auto& [b, c] : beyond) {
      if (b != lowest) continue;
      if (best == QueueTree::kNone) {
        best = c;
        continue;
      }
      if (!best_share_known) {
        best_share = Share(best) / tree_->spec(best).weight;
        best_share_known = true;
      }
      const double share = Share(c) / tree_->spec(c).weight;
      if (share < best_share ||
          (share == best_share && tree_->spec(c).name < tree_->spec(best).name)) {
        best = c;
        best_share = share;
      }
    }
    at = best;
  }
  return at;
}

}  // namespace hf::queues
