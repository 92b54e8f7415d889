// CycleState: what one scheduling cycle computes and its plugins pass from
// PreScore to Score to Bind (Kubernetes' framework.CycleState).
//
// Plugins keep their configuration as members and everything a cycle
// computes here, under a key of their own, so one plugin instance serves any
// number of cycles: the scheduler's, a preview's, a second scheduling thread
// later, each with its own CycleState. The framework keeps its per-cycle
// buffers (the feasible nodes, rejections, totals) here too.
//
// A CycleState is reused from cycle to cycle by its owner, so the buffers in
// it (a plugin's per-node arrays) are allocated once, not per task. Data a
// plugin reads in Score must have been written by its PreScore of the same
// cycle: the framework calls PreScore first whenever the plugin has one.
//
// Threading: one cycle at a time uses a CycleState (not thread-safe);
// different CycleStates may be used at once.
#ifndef HF_FRAMEWORK_CYCLE_STATE_H_
#define HF_FRAMEWORK_CYCLE_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/model.h"
#include "framework/plugin.h"

namespace hf::framework {

class Framework;

class CycleState {
 public:
  // What a plugin keeps for one cycle derives from this.
  struct Data {
    virtual ~Data() = default;
  };
  // A plugin's key: take one per plugin class with NewKey(), e.g. in an
  // inline static member.
  using Key = uint32_t;
  static Key NewKey() {
    static std::atomic<Key> next{0};
    return next++;
  }

  CycleState() = default;
  CycleState(const CycleState&) = delete;
  CycleState& operator=(const CycleState&) = delete;

  // The data under `key`, made (default-constructed) on first use and kept,
  // with its buffers, for the next cycles. Every use of one key names the
  // same T.
  template <typename T>
  T& Get(Key key) {
    if (key >= data_.size()) data_.resize(key + 1);
    if (!data_[key]) data_[key] = std::make_unique<T>();
    return static_cast<T&>(*data_[key]);
  }

 private:
  friend class Framework;
  std::vector<std::unique_ptr<Data>> data_;
  // The framework's own buffers.
  std::vector<NodeId> nodes_;  // feasible nodes
  std::vector<NodeId> sample_;  // feasible nodes found so far, when sampling
  size_t next_start_ = 0;       // where the next sampled filter pass starts
  Rejections rejections_;
  std::vector<double> total_, scores_;
};

}  // namespace hf::framework

#endif  // HF_FRAMEWORK_CYCLE_STATE_H_
