#include "core/what_if.h"

#include <gtest/gtest.h>

namespace hf {
namespace {

NodeSpec Node4() {
  NodeSpec s;
  s.name = "n";
  s.cpu_milli = 10000;
  s.memory_mib = 10000;
  for (int i = 0; i < 4; ++i) s.gpus.push_back({i, "", "A100", "nvidia", 81920, 0, 0, 0});
  return s;
}

Task OneGpu(TaskKey key) {
  Task t;
  t.key = key;
  t.name = "t" + std::to_string(key);
  t.requests.gpu = 1;
  t.requests.cpu_milli = 1000;
  return t;
}

Allocation OnGpu(int32_t index) {
  Allocation a;
  a.node = 0;
  a.cpu_milli = 1000;
  a.gpus = {{index, kWholeGpuMilli, 0}};
  return a;
}

TEST(NodeLoadTest, VictimsTakeTheirShareOutOfThePartTheyAreIn) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node4()).ok());
  // Tasks 1 and 2 are running and measured; task 3 is still in flight.
  ASSERT_TRUE(c.Bind(OneGpu(1), OnGpu(0), TaskState::kRunning, 1).ok());
  ASSERT_TRUE(c.Bind(OneGpu(2), OnGpu(1), TaskState::kRunning, 1).ok());
  NodeUsage u;
  u.cpu_load = 0.15;
  u.gpus = {{0, 0.6, 0}, {1, 0.6, 0}};  // the node's GPU load: 0.3
  u.running_tasks = std::vector<uint64_t>{1, 2};
  ASSERT_TRUE(c.ReportUsage(0, u).ok());
  ASSERT_TRUE(c.Bind(OneGpu(3), OnGpu(2)).ok());

  NodeLoad load = NodeLoad::Of(c, 0);
  ASSERT_TRUE(load.measured());
  EXPECT_DOUBLE_EQ(load.estimate().gpu, 0.55);  // 0.3 measured + 0.25 in flight
  EXPECT_DOUBLE_EQ(load.estimate().cpu, 0.25);  // 0.15 + 1000/10000
  load.Remove(c, *c.FindPlaced(1));
  EXPECT_DOUBLE_EQ(load.estimate().gpu, 0.3);   // 0.05 measured + 0.25 in flight
  EXPECT_DOUBLE_EQ(load.estimate().cpu, 0.15);  // 0.05 + 0.1
  // Two measured victims hold half the node but the measurement says 0.3:
  // what they take out is capped at what was measured.
  load.Remove(c, *c.FindPlaced(2));
  EXPECT_DOUBLE_EQ(load.estimate().gpu, 0.25);
  EXPECT_DOUBLE_EQ(load.estimate().cpu, 0.1);
  load.Remove(c, *c.FindPlaced(3));
  EXPECT_NEAR(load.estimate().gpu, 0.0, 1e-12);
  // Add is Remove's inverse.
  load.Add(c, *c.FindPlaced(3));
  load.Add(c, *c.FindPlaced(2));
  load.Add(c, *c.FindPlaced(1));
  EXPECT_DOUBLE_EQ(load.estimate().gpu, 0.55);
  // A node never measured has no estimate.
  ClusterState fresh;
  ASSERT_TRUE(fresh.AddNode(Node4()).ok());
  EXPECT_FALSE(NodeLoad::Of(fresh, 0).measured());
}

}  // namespace
}  // namespace hf
