#include "framework/queue.h"

#include <algorithm>

namespace hf::framework {

void SchedulingQueue::Add(TaskKey key, int32_t priority, std::string reason) {
  Remove(key);
  waiting_[key] = Entry{priority, std::move(reason)};
  active_.insert(OrderKey(key, priority));
}

bool SchedulingQueue::Remove(TaskKey key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return false;
  active_.erase(OrderKey(key, it->second.priority));
  unschedulable_.erase(key);
  waiting_.erase(it);
  return true;
}

std::optional<TaskKey> SchedulingQueue::Pop() {
  if (active_.empty()) return std::nullopt;
  const TaskKey key = active_.begin()->second;
  active_.erase(active_.begin());
  return key;
}

bool SchedulingQueue::Claim(TaskKey key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return false;
  active_.erase(OrderKey(key, it->second.priority));
  unschedulable_.erase(key);
  return true;
}

bool SchedulingQueue::SetUnschedulable(TaskKey key, std::string reason) {
  Entry& e = waiting_.at(key);
  active_.erase(OrderKey(key, e.priority));
  unschedulable_.insert(key);
  const bool changed = e.reason != reason;
  e.reason = std::move(reason);
  return changed;
}

size_t SchedulingQueue::MoveAllToActive() {
  const size_t n = unschedulable_.size();
  for (TaskKey key : unschedulable_) active_.insert(OrderKey(key, waiting_.at(key).priority));
  unschedulable_.clear();
  return n;
}

void SchedulingQueue::Clear() {
  waiting_.clear();
  active_.clear();
  unschedulable_.clear();
}

const std::string* SchedulingQueue::Reason(TaskKey key) const {
  auto it = waiting_.find(key);
  return it == waiting_.end() ? nullptr : &it->second.reason;
}

std::vector<TaskKey> SchedulingQueue::Ordered() const {
  std::vector<std::pair<int64_t, TaskKey>> order;
  order.reserve(waiting_.size());
  for (const auto& [key, e] : waiting_) order.push_back(OrderKey(key, e.priority));
  std::sort(order.begin(), order.end());
  std::vector<TaskKey> keys;
  keys.reserve(order.size());
  for (const auto& [np, key] : order) keys.push_back(key);
  return keys;
}

}  // namespace hf::framework
