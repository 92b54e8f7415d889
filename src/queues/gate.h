// One decision's passage through its queue (docs/QUEUES.md): admission
// (may it leave the queue now, on which GPU models, may it reclaim), the
// task narrowed to the models admitted, and who the decision may evict.
// The scheduler and the simulator both decide through this.
//
// Threading: values over a Ledger snapshot; no shared state.
#ifndef HF_QUEUES_GATE_H_
#define HF_QUEUES_GATE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster_state.h"
#include "core/model.h"
#include "framework/plugin.h"
#include "queues/ledger.h"
#include "queues/queue_tree.h"

namespace hf::queues {

struct Gate {
  size_t queue = QueueTree::kNone;
  // GPU models it may be placed on (kAnyModel: no restriction); 0 refuses.
  ClusterState::ModelMask admitted = 0;
  // Of those, where it stays within its queue's guarantee: it may reclaim.
  ClusterState::ModelMask guaranteed = 0;
  bool gpu = false;
  bool narrowed = false;  // admitted on fewer GPU models than the tasks accept
  std::string reason;     // when nothing is admitted
};

// Admission of `demand` (the sum of `tasks`' requests: one task, or a
// gang's waiting members) from queue `queue`. A queue that does not exist
// or has children refuses with a reason; a demand for GPU models no node
// has is admitted (the framework gives that reason, not the queue).
Gate Admit(const QueueTree& tree, const Ledger& ledger, const ClusterState& cluster,
           const std::string& queue, const Demand& demand, const std::vector<const Task*>& tasks);

// `task` with its GPU models narrowed to those `gate` admitted.
Task Narrowed(const ClusterState& cluster, const Task& task, const Gate& gate);

// Who a decision admitted by `gate` may evict: its own queue's work by
// priority; other queues' borrowed capacity when it is within its
// guarantee (GPUs of the models it is guaranteed, or CPU and memory for a
// task without GPUs), never more than a queue borrowed. The scope reads
// `tree`, `ledger` and `cluster`, which must outlive it.
std::unique_ptr<framework::EvictionScope> Scope(const QueueTree& tree, const Ledger& ledger,
                                                const ClusterState& cluster, const Gate& gate);

}  // namespace hf::queues

#endif  // HF_QUEUES_GATE_H_
