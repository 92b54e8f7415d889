// SchedulingQueue: the tasks waiting for a placement, and the order they are
// tried in (SPEC §3): higher priority first, then older (lower task key).
// Tasks wait by the queue they were submitted to (Task::queue, docs/
// QUEUES.md); which queue goes next is the caller's choice (fair share),
// and Pop() without one takes the first task of any.
//
// A waiting task is in one of three places, as in kube-scheduler's queue:
//   - active: to be tried, in order (Pop);
//   - in flight: popped, being tried now; it leaves the queue when placed
//     (Remove) or is set aside (SetUnschedulable);
//   - unschedulable: tried and found not to fit; it waits aside until
//     something could let it fit (MoveAllToActive).
// There is no backoff set: a retry costs microseconds and writes nothing
// when the answer is the same (docs/ARCHITECTURE.md).
//
// Each waiting task keeps the reason it waits for, as last stored (its
// `pending_reason`), so that an unchanged reason is not written again.
//
// Threading: none; its owner's lock guards it (the Scheduler's mutex).
#ifndef HF_FRAMEWORK_QUEUE_H_
#define HF_FRAMEWORK_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/model.h"

namespace hf::framework {

class SchedulingQueue {
 public:
  // Makes `key` active in `queue`, wherever it waited before; `reason`: the
  // reason stored for it.
  void Add(TaskKey key, int32_t priority, std::string reason,
           const std::string& queue = kDefaultQueue);
  // Takes it out of the queue, wherever it waits; false when it did not.
  bool Remove(TaskKey key);
  // Takes the first active task of any queue (it stays in flight); nullopt
  // when none.
  std::optional<TaskKey> Pop();
  // Takes the first active task of `queue`; nullopt when it has none.
  std::optional<TaskKey> Pop(const std::string& queue);
  // The queues with active tasks, by name (valid until the queue changes).
  std::vector<std::string_view> ActiveQueues() const;
  // Changes whenever the set of queues with active tasks changes (not on
  // every pop), so that a caller may keep what it worked out from it.
  uint64_t active_queues_version() const { return active_queues_version_; }
  // Takes `key` in flight from wherever it waits (the other members of a
  // gang, tried with the one popped); false when it does not wait.
  bool Claim(TaskKey key);
  // A task in flight did not fit: it waits aside for `reason`. True when
  // that reason differs from the one stored before.
  bool SetUnschedulable(TaskKey key, std::string reason);
  // Every unschedulable task becomes active again; returns how many.
  size_t MoveAllToActive();
  void Clear();

  // The reason `key` waits for, or nullptr when it does not wait.
  const std::string* Reason(TaskKey key) const;
  // Every waiting task, in the order they are tried.
  std::vector<TaskKey> Ordered() const;
  bool active_empty() const { return active_count_ == 0; }
  size_t active_size() const { return active_count_; }
  size_t unschedulable_size() const { return unschedulable_.size(); }

 private:
  struct Entry {
    int32_t priority = 0;
    std::string reason;
    std::string queue;
  };
  using Order = std::set<std::pair<int64_t, TaskKey>>;  // (-priority, key)
  static std::pair<int64_t, TaskKey> OrderKey(TaskKey key, int32_t priority) {
    return {-int64_t{priority}, key};
  }
  void Activate(TaskKey key, const Entry& e);
  // Takes `key` out of its queue's active set (if there).
  void Deactivate(TaskKey key, const Entry& e);
  TaskKey PopFrom(std::map<std::string, Order>::iterator q);

  std::unordered_map<TaskKey, Entry> waiting_;  // every task in the queue
  std::map<std::string, Order> active_;         // by queue; no empty sets
  size_t active_count_ = 0;
  uint64_t active_queues_version_ = 0;
  std::set<TaskKey> unschedulable_;
};

}  // namespace hf::framework

#endif  // HF_FRAMEWORK_QUEUE_H_
