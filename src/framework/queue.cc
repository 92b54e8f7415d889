#include "framework/queue.h"

#include <algorithm>

namespace hf::framework {

void SchedulingQueue::Activate(TaskKey key, const Entry& e) {
  auto [q, fresh] = active_.try_emplace(e.queue);
  active_queues_version_ += fresh;
  if (q->second.insert(OrderKey(key, e.priority)).second) ++active_count_;
}

void SchedulingQueue::Deactivate(TaskKey key, const Entry& e) {
  auto q = active_.find(e.queue);
  if (q == active_.end() || q->second.erase(OrderKey(key, e.priority)) == 0) return;
  --active_count_;
  if (q->second.empty()) {
    active_.erase(q);
    ++active_queues_version_;
  }
}

void SchedulingQueue::Add(TaskKey key, int32_t priority, std::string reason,
                          const std::string& queue) {
  Remove(key);
  Entry& e = waiting_[key] = Entry{priority, std::move(reason), queue};
  Activate(key, e);
}

bool SchedulingQueue::Remove(TaskKey key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return false;
  Deactivate(key, it->second);
  unschedulable_.erase(key);
  waiting_.erase(it);
  return true;
}

TaskKey SchedulingQueue::PopFrom(std::map<std::string, Order>::iterator q) {
  const TaskKey key = q->second.begin()->second;
  q->second.erase(q->second.begin());
  --active_count_;
  if (q->second.empty()) {
    active_.erase(q);
    ++active_queues_version_;
  }
  return key;
}

std::optional<TaskKey> SchedulingQueue::Pop() {
  if (active_.empty()) return std::nullopt;
  auto first = active_.begin();
  for (auto q = std::next(first); q != active_.end(); ++q) {
    if (*q->second.begin() < *first->second.begin()) first = q;
  }
  return PopFrom(first);
}

std::optional<TaskKey> SchedulingQueue::Pop(const std::string& queue) {
  auto q = active_.find(queue);
  if (q == active_.end()) return std::nullopt;
  return PopFrom(q);
}

std::vector<std::string_view> SchedulingQueue::ActiveQueues() const {
  std::vector<std::string_view> out;
  out.reserve(active_.size());
  for (const auto& [name, order] : active_) out.push_back(name);
  return out;
}

bool SchedulingQueue::Claim(TaskKey key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return false;
  Deactivate(key, it->second);
  unschedulable_.erase(key);
  return true;
}

bool SchedulingQueue::SetUnschedulable(TaskKey key, std::string reason) {
  Entry& e = waiting_.at(key);
  Deactivate(key, e);
  unschedulable_.insert(key);
  const bool changed = e.reason != reason;
  e.reason = std::move(reason);
  return changed;
}

size_t SchedulingQueue::MoveAllToActive() {
  const size_t n = unschedulable_.size();
  for (TaskKey key : unschedulable_) Activate(key, waiting_.at(key));
  unschedulable_.clear();
  return n;
}

void SchedulingQueue::Clear() {
  waiting_.clear();
  active_.clear();
  ++active_queues_version_;
  active_count_ = 0;
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
