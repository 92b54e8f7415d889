// A node as it would be without some of its tasks: what preemption imagines
// before it evicts anyone (Kubernetes removes the victims from a copy of the
// node and runs its filters on that copy).
//
// NodeWithout holds a detached copy of one node's free resources (NodeFree)
// and of its load estimate (NodeLoad), and keeps both current as tasks are
// taken out (Remove) and put back (Add), so that trying one victim set after
// another costs a few additions each. Filters judge it through
// FilterPlugin::PassesWithout.
//
// Threading: plain values; not shared.
#ifndef HF_CORE_WHAT_IF_H_
#define HF_CORE_WHAT_IF_H_

#include <algorithm>

#include "core/cluster_state.h"
#include "core/fit.h"

namespace hf {

// A node's load estimate (ClusterState::Estimate) with tasks taken out. A
// task's share leaves the part it is in: the in-flight estimate while it is
// in it, the measurement otherwise, where what all removed tasks take out is
// capped by what was measured (a task cannot have used more than the node).
// Decision: a task's share of a measurement is its request over the node's
// capacity (for GPUs, its milli over the node's), the same share the
// in-flight estimate counts for it.
class NodeLoad {
 public:
  static NodeLoad Of(const ClusterState& cluster, NodeId n);
  void Remove(const ClusterState& cluster, const PlacedTask& p) { Change(cluster, p, 1); }
  void Add(const ClusterState& cluster, const PlacedTask& p) { Change(cluster, p, -1); }
  // False for a node not measured yet (thresholds pass it).
  bool measured() const { return measured_; }
  LoadEstimate estimate() const;

 private:
  void Change(const ClusterState& cluster, const PlacedTask& p, int sign);

  bool measured_ = false;
  LoadEstimate measured_part_, inflight_part_;
  LoadEstimate removed_measured_, removed_inflight_;
};

struct NodeWithout {
  NodeId node = kNoNode;
  NodeFree free;
  NodeLoad load;

  static NodeWithout Of(const ClusterState& cluster, NodeId n) {
    return {n, NodeFree::Of(cluster, n), NodeLoad::Of(cluster, n)};
  }
  // Takes placed task p (on this node) out, or puts it back.
  void Remove(const ClusterState& cluster, const PlacedTask& p) {
    free.Return(cluster, p.alloc);
    load.Remove(cluster, p);
  }
  void Add(const ClusterState& cluster, const PlacedTask& p) {
    free.Take(cluster, p.alloc);
    load.Add(cluster, p);
  }
  // The same by the task's brief: without a lookup when its grants are in
  // its mask and the node has no measured load to change.
  void Remove(const ClusterState& cluster, const ClusterState::PlacedBrief& b) {
    if (b.gpus_in_mask && !load.measured()) {
      free.Return(b);
    } else {
      Remove(cluster, *cluster.FindPlaced(b.key));
    }
  }
  void Add(const ClusterState& cluster, const ClusterState::PlacedBrief& b) {
    if (b.gpus_in_mask && !load.measured()) {
      free.Take(b);
    } else {
      Add(cluster, *cluster.FindPlaced(b.key));
    }
  }
};

}  // namespace hf

#endif  // HF_CORE_WHAT_IF_H_
