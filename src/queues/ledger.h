// Ledger: what every queue of a tree holds now, and the three rules that
// read it (docs/QUEUES.md):
//
//   - admission: a demand leaves its queue only within the max of its queue
//     and of every ancestor; it is within its guarantee when its leaf queue's
//     usage plus the demand stays within that queue's guarantee (children's
//     guarantees nest in their parent's, so a leaf's guarantee is capacity
//     reserved all the way up). Beyond the guarantee it borrows: from what
//     other queues' guarantees leave unused, or what nobody is guaranteed.
//     GPU demands are judged per GPU model (the models it may use); a GPU
//     task's guarantee is its GPUs', a CPU-only task's its CPU and memory;
//   - fair share: among siblings with work waiting, the next comes from the
//     one with the lowest dominant share of what it holds beyond its
//     guarantee, over its weight (then of all it holds, then by name);
//   - reclaim: a demand within its guarantee may take back what other
//     queues borrowed; a queue is borrowing a resource while its usage is
//     above its guarantee, and never loses more than that.
//
// A Ledger is a snapshot: Compute it again after placements change.
//
// Threading: values; no shared state.
#ifndef HF_QUEUES_LEDGER_H_
#define HF_QUEUES_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster_state.h"
#include "queues/queue_tree.h"

namespace hf::queues {

// What one decision asks of its queue: a task's requests, or a gang's sum.
// GPUs are all of one model (the one being judged).
struct Demand {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t gpu_milli = 0;
  void Add(const Requests& r) {
    cpu_milli += r.cpu_milli;
    memory_mib += r.memory_mib;
    gpu_milli += int64_t{r.gpu} * r.gpu_milli;
  }
};

// Admission's answer for one demand.
struct Admission {
  // GPU models (ClusterState model bits) the demand may be placed on; for
  // a demand without GPUs, kAnyModel or 0.
  ClusterState::ModelMask admitted = 0;
  // Of those, where it stays within its queue's guarantee: it may reclaim.
  ClusterState::ModelMask guaranteed = 0;
  // When nothing is admitted: why, naming the queue and the resource.
  std::string reason;
};

class Ledger {
 public:
  // Sums every queue's usage (its leaves' and its own) from `cluster`, and
  // the cluster's capacity per resource.
  void Compute(const QueueTree& tree, const ClusterState& cluster);

  // The queue's usage (with its descendants').
  const QueueUsage& used(size_t queue) const { return used_[queue]; }

  // May `demand` leave leaf `queue`, on which models, and may it reclaim?
  // `models`: the models it accepts (ClusterState::MaskOf its gpu_models).
  Admission Admit(size_t queue, const Demand& demand, ClusterState::ModelMask models) const;

  // Of the queues in `candidates` (indexes into the tree), the one whose
  // turn it is by weighted fair share, descending from root: at each level
  // the child, among those with a candidate below or at it, with the lowest
  // dominant share beyond its guarantee over its weight. kNone when empty.
  size_t PickFair(const std::vector<size_t>& candidates) const;

  // How far `queue` is above its guarantee, per resource (0 where not).
  QueueUsage Borrowed(size_t queue) const;

  // The dominant share of what `queue` holds beyond its guarantee, and of
  // all it holds: the largest fraction of any one resource of the cluster.
  double BeyondShare(size_t queue) const;
  double Share(size_t queue) const;

  // The cluster's capacity, as Compute found it.
  const QueueUsage& capacity() const { return capacity_; }

 private:
  const QueueTree* tree_ = nullptr;
  const ClusterState* cluster_ = nullptr;
  size_t models_ = 0;  // model bits in use
  std::vector<QueueUsage> used_;
  QueueUsage capacity_;
  uint64_t capacity_version_ = 0;
  bool has_capacity_ = false;
  // Each queue's GPU quotas per model bit, from its specs' names and "*"
  // (kNoLimit: the max names none), for the tree generation and model
  // count they were worked out for.
  static constexpr int64_t kNoLimit = -1;
  int64_t GuaranteedGpu(size_t q, size_t m) const { return guaranteed_gpu_[q * models_ + m]; }
  int64_t MaxGpu(size_t q, size_t m) const { return max_gpu_[q * models_ + m]; }
  std::vector<int64_t> guaranteed_gpu_, max_gpu_;
  uint64_t quotas_generation_ = 0;
  size_t quotas_models_ = 0;
};

}  // namespace hf::queues

#endif  // HF_QUEUES_LEDGER_H_
