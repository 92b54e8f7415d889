#include "framework/queue.h"

#include <gtest/gtest.h>

namespace hf::framework {
namespace {

// Pops every active task, in order.
std::vector<TaskKey> Drain(SchedulingQueue& q) {
  std::vector<TaskKey> out;
  while (std::optional<TaskKey> k = q.Pop()) out.push_back(*k);
  return out;
}

TEST(SchedulingQueueTest, PopsByPriorityThenAge) {
  SchedulingQueue q;
  q.Add(5, 0, "");
  q.Add(3, 10, "");
  q.Add(9, 10, "");
  q.Add(1, -5, "");
  q.Add(2, 0, "");
  EXPECT_EQ(Drain(q), (std::vector<TaskKey>{3, 9, 2, 5, 1}));
  EXPECT_TRUE(q.active_empty());
  // Popped tasks are in flight: still waiting, in order.
  EXPECT_EQ(q.Ordered(), (std::vector<TaskKey>{3, 9, 2, 5, 1}));
}

TEST(SchedulingQueueTest, UnschedulableTasksWaitAsideUntilMovedBack) {
  SchedulingQueue q;
  q.Add(1, 0, "");
  q.Add(2, 5, "");
  ASSERT_EQ(q.Pop(), std::optional<TaskKey>(2));
  EXPECT_TRUE(q.SetUnschedulable(2, "0/3 nodes available"));
  EXPECT_EQ(q.unschedulable_size(), 1u);
  EXPECT_EQ(Drain(q), std::vector<TaskKey>{1});
  ASSERT_TRUE(q.Remove(1));  // placed
  EXPECT_EQ(q.MoveAllToActive(), 1u);
  EXPECT_EQ(q.unschedulable_size(), 0u);
  ASSERT_EQ(q.Pop(), std::optional<TaskKey>(2));
  // The same reason again is not a change; another one is.
  EXPECT_FALSE(q.SetUnschedulable(2, "0/3 nodes available"));
  EXPECT_TRUE(q.SetUnschedulable(2, "0/4 nodes available"));
  ASSERT_NE(q.Reason(2), nullptr);
  EXPECT_EQ(*q.Reason(2), "0/4 nodes available");
}

TEST(SchedulingQueueTest, ClaimTakesATaskInFlightFromWhereverItWaits) {
  SchedulingQueue q;
  q.Add(1, 0, "");
  q.Add(2, 0, "");
  q.Add(3, 0, "");
  ASSERT_EQ(q.Pop(), std::optional<TaskKey>(1));
  q.SetUnschedulable(1, "full");
  EXPECT_TRUE(q.Claim(1));  // unschedulable
  EXPECT_TRUE(q.Claim(3));  // active
  EXPECT_FALSE(q.Claim(4));
  EXPECT_EQ(q.unschedulable_size(), 0u);
  EXPECT_EQ(Drain(q), std::vector<TaskKey>{2});
  EXPECT_EQ(q.Ordered(), (std::vector<TaskKey>{1, 2, 3}));  // in flight: still waiting
}

TEST(SchedulingQueueTest, RemoveAndAddWorkFromEveryPlace) {
  SchedulingQueue q;
  q.Add(1, 0, "submitted");
  q.Add(2, 0, "");
  q.Add(3, 0, "");
  ASSERT_EQ(q.Pop(), std::optional<TaskKey>(1));
  q.SetUnschedulable(1, "full");
  ASSERT_EQ(q.Pop(), std::optional<TaskKey>(2));  // in flight
  EXPECT_TRUE(q.Remove(1));                       // unschedulable
  EXPECT_TRUE(q.Remove(2));                       // in flight
  EXPECT_TRUE(q.Remove(3));                       // active
  EXPECT_FALSE(q.Remove(3));
  EXPECT_EQ(q.Reason(1), nullptr);
  EXPECT_TRUE(q.Ordered().empty());
  EXPECT_EQ(q.MoveAllToActive(), 0u);
  // Adding a task that waits already moves it, with its new priority, once.
  q.Add(4, 0, "");
  q.Add(5, 0, "");
  q.Add(5, 9, "preempted by task 7");
  EXPECT_EQ(q.active_size(), 2u);
  EXPECT_EQ(Drain(q), (std::vector<TaskKey>{5, 4}));
  EXPECT_EQ(*q.Reason(5), "preempted by task 7");
  q.Clear();
  EXPECT_TRUE(q.Ordered().empty());
}

}  // namespace
}  // namespace hf::framework
