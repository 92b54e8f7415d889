#include "plugins/rdma/rdma.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/clock.h"
#include "core/cluster_state.h"
#include "framework/framework.h"
#include "framework/reasons.h"

namespace hf::plugins {
namespace {

// An 8-GPU node: GPU i sits on NUMA node i/4 and PCIe switch i/2. NICs: mlx5_0
// on NUMA 0 / switch 0, mlx5_1 on NUMA 1 / switch 3.
NodeSpec RdmaNode(const std::string& name) {
  NodeSpec s;
  s.name = name;
  s.cpu_milli = 64000;
  s.memory_mib = 512 * 1024;
  for (int32_t i = 0; i < 8; ++i) {
    GpuDevice g;
    g.index = i;
    g.model = "A100-80G";
    g.memory_mib = 81920;
    g.numa = i / 4;
    g.pcie_switch = i / 2;
    g.fabric_domain = i / 4;
    s.gpus.push_back(g);
  }
  s.rdma = {{"mlx5_0", 0, 0}, {"mlx5_1", 1, 3}};
  return s;
}

NodeSpec PlainNode(const std::string& name) {
  NodeSpec s = RdmaNode(name);
  s.rdma.clear();
  return s;
}

Task MakeTask(TaskKey key, const std::string& group, bool rdma, int32_t gpus = 0) {
  Task t;
  t.key = key;
  t.name = "task-" + std::to_string(key);
  t.group = group;
  t.rdma_required = rdma;
  t.requests.cpu_milli = 1000;
  t.requests.memory_mib = 1024;
  t.requests.gpu = gpus;
  return t;
}

// Places `task` on `node` without any GPU.
void Place(ClusterState& cluster, const Task& task, NodeId node) {
  Allocation a;
  a.node = node;
  a.cpu_milli = task.requests.cpu_milli;
  a.memory_mib = task.requests.memory_mib;
  ASSERT_TRUE(cluster.Bind(task, a).ok());
}

struct Harness {
  framework::ReasonTable reasons;
  ManualClock clock;
  Rdma rdma{framework::PluginDeps{&reasons, &clock}};
  framework::CycleState state;
};

TEST(RdmaFilterTest, KeepsOnlyRdmaNodesForRdmaTasks) {
  ClusterState cluster;
  for (const NodeSpec& s :
       {PlainNode("cpu-a"), RdmaNode("ib-a"), PlainNode("cpu-b"), RdmaNode("ib-b")}) {
    ASSERT_TRUE(cluster.AddNode(s).ok());
  }
  struct Row {
    const char* name;
    bool rdma_required;
    std::vector<NodeId> kept;
    std::vector<NodeId> rejected;
  };
  const std::vector<Row> rows = {
      {"RDMA task: nodes without a NIC rejected", true, {1, 3}, {0, 2}},
      {"plain task: every node passes", false, {0, 1, 2, 3}, {}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Harness p;
    framework::Rejections rejections;
    rejections.Reset(cluster.node_count(), p.reasons.size());
    std::vector<NodeId> nodes = {0, 1, 2, 3};
    p.rdma.Filter(MakeTask(1, "", row.rdma_required), cluster, nodes, rejections);
    EXPECT_EQ(nodes, row.kept);
    EXPECT_EQ(rejections.rejected(), row.rejected);
    for (NodeId n : row.rejected) {
      EXPECT_EQ(p.reasons.text(rejections.reason(n)), "no RDMA device");
      EXPECT_FALSE(p.reasons.resolvable(rejections.reason(n)));
    }
  }
}

TEST(RdmaFilterTest, UnschedulableSummaryNamesTheReason) {
  ManualClock clock;
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(PlainNode("cpu-a")).ok());
  ASSERT_TRUE(cluster.AddNode(PlainNode("cpu-b")).ok());
  auto fw = framework::Framework::Create(InTreeRegistry(), {}, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().ToString();

  const framework::Decision d = (*fw)->Schedule(MakeTask(1, "", true, 1), cluster);
  EXPECT_FALSE(d.scheduled);
  EXPECT_EQ(d.reason, "0/2 nodes available: 2 no RDMA device");

  const framework::Decision plain = (*fw)->Schedule(MakeTask(2, "", false, 1), cluster);
  EXPECT_TRUE(plain.scheduled) << plain.reason;
}

TEST(RdmaScoreTest, PrefersNodesHostingRdmaTasksOfTheGroup) {
  struct Placed {
    const char* group;
    bool rdma;
    NodeId node;
  };
  struct Row {
    const char* name;
    std::vector<Placed> placed;
    const char* group;
    bool rdma_required;
    bool expected_applies;
    std::vector<double> expected;  // per node 0..3, after normalisation
  };
  const std::vector<Row> rows = {
      {"task without a group", {{"job", true, 1}}, "", true, false, {}},
      {"task without rdma_required", {{"job", true, 1}}, "job", false, false, {}},
      {"group placed, but no RDMA task of it", {{"job", false, 1}}, "job", true, false, {}},
      {"nothing placed yet", {}, "job", true, false, {}},
      // Raw counts {0, 2, 1, 0}: the best node gets 100, the others in proportion.
      {"two on node 1, one on node 2",
       {{"job", true, 1}, {"job", true, 1}, {"job", true, 2}},
       "job",
       true,
       true,
       {0, 100, 50, 0}},
      // Raw {1, 0, 0, 0}: node 1's three non-RDMA tasks and node 3's other group count 0.
      {"only the group's RDMA tasks count",
       {{"job", true, 0},
        {"job", false, 1},
        {"job", false, 1},
        {"job", false, 1},
        {"other", true, 3}},
       "job",
       true,
       true,
       {100, 0, 0, 0}},
      // Raw {3, 0, 0, 1}.
      {"three to one",
       {{"job", true, 0}, {"job", true, 0}, {"job", true, 0}, {"job", true, 3}},
       "job",
       true,
       true,
       {100, 0, 0, 100.0 / 3}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    ClusterState cluster;
    for (int i = 0; i < 4; ++i)
      ASSERT_TRUE(cluster.AddNode(RdmaNode("ib-" + std::to_string(i))).ok());
    TaskKey key = 100;
    for (const Placed& pl : row.placed) Place(cluster, MakeTask(key++, pl.group, pl.rdma), pl.node);

    Harness p;
    const Task task = MakeTask(1, row.group, row.rdma_required);
    const std::vector<NodeId> nodes = {0, 1, 2, 3};
    framework::CycleState state;
    ASSERT_EQ(p.rdma.PreScore(task, cluster, nodes, state), row.expected_applies);
    if (!row.expected_applies) continue;
    std::vector<double> scores(nodes.size(), -1);
    p.rdma.Score(task, cluster, nodes, scores, state);
    p.rdma.NormalizeScores(scores);
    ASSERT_EQ(scores.size(), row.expected.size());
    for (size_t i = 0; i < scores.size(); ++i) EXPECT_DOUBLE_EQ(scores[i], row.expected[i]) << i;
  }
}

TEST(RdmaScoreTest, NormalizeKeepsAllZeroAtZero) {
  Harness p;
  std::vector<double> scores = {0, 0, 0};
  p.rdma.NormalizeScores(scores);
  EXPECT_EQ(scores, (std::vector<double>{0, 0, 0}));
}

TEST(RdmaScoreTest, SecondInstanceJoinsTheGroupThroughTheFramework) {
  ManualClock clock;
  ClusterState cluster;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(cluster.AddNode(RdmaNode("ib-" + std::to_string(i))).ok());
  Place(cluster, MakeTask(100, "job", true), 2);
  // Binpack and topology would also pull the task to node 2; leave only RDMA scoring.
  framework::Policy policy;
  policy.plugins["binpack"] = {{"enabled", false}};
  policy.plugins["topology"] = {{"enabled", false}};
  auto fw = framework::Framework::Create(InTreeRegistry(), policy, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().ToString();

  const framework::Decision d = (*fw)->Schedule(MakeTask(1, "job", true), cluster);
  ASSERT_TRUE(d.scheduled) << d.reason;
  EXPECT_EQ(d.alloc.node, 2u);
  EXPECT_DOUBLE_EQ(d.score, 100);
}

TEST(RdmaBindTest, PicksTheNicNearTheGpus) {
  struct Row {
    const char* name;
    bool rdma_required;
    std::vector<int32_t> gpus;
    const char* expected;
  };
  const std::vector<Row> rows = {
      {"both GPUs on switch 3, as mlx5_1", true, {6, 7}, "mlx5_1"},
      {"two of three GPUs on switch 0", true, {0, 1, 6}, "mlx5_0"},
      {"no NIC on switch 2: NUMA 1", true, {4, 5}, "mlx5_1"},
      {"no NIC on switch 1: NUMA 0", true, {2, 3}, "mlx5_0"},
      {"one GPU near each NIC: the first listed", true, {1, 6}, "mlx5_0"},
      {"no GPUs: the first listed", true, {}, "mlx5_0"},
      {"task without rdma_required gets none", false, {6, 7}, ""},
  };
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(RdmaNode("ib-0")).ok());
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Harness p;
    Allocation alloc;
    alloc.node = 0;
    for (int32_t g : row.gpus) alloc.gpus.push_back({g, 1000, 0});
    ASSERT_TRUE(p.rdma.Bind(MakeTask(1, "", row.rdma_required), cluster, alloc, p.state).ok());
    EXPECT_EQ(alloc.rdma_device, row.expected);
  }
}

TEST(RdmaBindTest, NicWithoutLocalityFallsBackToFirst) {
  ClusterState cluster;
  NodeSpec s = RdmaNode("ib-0");
  s.rdma = {{"mlx5_a", -1, -1}, {"mlx5_b", -1, -1}};
  ASSERT_TRUE(cluster.AddNode(s).ok());
  Harness p;
  Allocation alloc;
  alloc.node = 0;
  alloc.gpus = {{6, 1000, 0}, {7, 1000, 0}};
  ASSERT_TRUE(p.rdma.Bind(MakeTask(1, "", true), cluster, alloc, p.state).ok());
  EXPECT_EQ(alloc.rdma_device, "mlx5_a");
}

TEST(RdmaBindTest, NodeWithoutNicIsAnError) {
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(PlainNode("cpu-a")).ok());
  Harness p;
  Allocation alloc;
  alloc.node = 0;
  const Status st = p.rdma.Bind(MakeTask(1, "", true), cluster, alloc, p.state);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("cpu-a"), std::string::npos) << st.message();
}

TEST(RdmaBindTest, FrameworkExportsTheNicBesideTheChosenGpus) {
  ManualClock clock;
  ClusterState cluster;
  ASSERT_TRUE(cluster.AddNode(RdmaNode("ib-0")).ok());
  // GPUs 0-5 are taken, so the task gets GPUs 6 and 7 on switch 3.
  Task filler = MakeTask(100, "", false);
  Allocation taken;
  taken.node = 0;
  for (int32_t g = 0; g < 6; ++g) taken.gpus.push_back({g, 1000, 0});
  ASSERT_TRUE(cluster.Bind(filler, taken).ok());
  auto fw = framework::Framework::Create(InTreeRegistry(), {}, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().ToString();

  const framework::Decision d = (*fw)->Schedule(MakeTask(1, "job", true, 2), cluster);
  ASSERT_TRUE(d.scheduled) << d.reason;
  EXPECT_EQ(d.alloc.gpus, (std::vector<GpuGrant>{{6, 1000, 0}, {7, 1000, 0}}));
  EXPECT_EQ(d.alloc.rdma_device, "mlx5_1");
  ASSERT_NE(cluster.FindPlaced(1), nullptr);
  EXPECT_EQ(cluster.FindPlaced(1)->alloc.rdma_device, "mlx5_1");
}

}  // namespace
}  // namespace hf::plugins
