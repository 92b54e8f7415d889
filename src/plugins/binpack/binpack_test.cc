#include "plugins/binpack/binpack.h"

#include <gtest/gtest.h>

#include "core/testing/nodes.h"
#include "framework/cycle_state.h"

namespace hf::plugins {
namespace {

using hf::testing::AllocFor;
using hf::testing::MakeTask;
using hf::testing::Node;

// One row: a node with some usage already bound, a task, and the binpack
// score computed by hand from
//   binpack = mean(min(used + req, total) / total) x 100 over resources the node has.
struct ScoreRow {
  const char* name;
  NodeSpec node;
  Task used;  // bound first (key 100), may ask for nothing
  std::vector<GpuGrant> used_gpus;
  Task task;
  double binpack;
};

class BinpackScoreTest : public ::testing::TestWithParam<ScoreRow> {};

TEST_P(BinpackScoreTest, MatchesHandComputedScore) {
  const ScoreRow& row = GetParam();
  ClusterState c;
  NodeId n = *c.AddNode(row.node);
  Task used = row.used;
  used.key = 100;
  ASSERT_TRUE(c.Bind(used, AllocFor(used, n, row.used_gpus)).ok());
  framework::ReasonTable reasons;
  framework::CycleState state;
  framework::PluginDeps deps{&reasons, nullptr};
  Binpack binpack(deps);
  std::vector<NodeId> nodes = {n};
  std::vector<double> score(1);
  binpack.Score(row.task, c, nodes, score, state);
  EXPECT_NEAR(score[0], row.binpack, 1e-9);
}

INSTANTIATE_TEST_SUITE_P(
    Table, BinpackScoreTest,
    ::testing::Values(
        // cpu (2000+3000)/10000 = .5, mem 5000/10000 = .5, gpu (1000+1000)/4000 = .5 -> 50
        ScoreRow{"gpu node, whole GPU",
                 Node("g", 10000, 10000, 4),
                 MakeTask(0, 2000, 5000, 1),
                 {{0, 1000, 0}},
                 MakeTask(1, 3000, 0, 1),
                 50.0},
        // GPU left out: cpu (2000+2000)/8000 = .5, mem (4000+8000)/16000 = .75 -> 62.5
        ScoreRow{"cpu-only node",
                 Node("c", 8000, 16000),
                 MakeTask(0, 2000, 4000),
                 {},
                 MakeTask(1, 2000, 8000),
                 62.5},
        // cpu clamped at 1; mem 0; gpu 0 -> (1 + 0 + 0) / 3 -> 33.33
        ScoreRow{"request above capacity is clamped",
                 Node("g", 10000, 10000, 2),
                 MakeTask(0, 0, 0),
                 {},
                 MakeTask(1, 20000, 0, 0),
                 100.0 / 3},
        // shared GPU: cpu 1000/4000 = .25, mem 0, gpu (300+500)/2000 = .4 -> 21.67
        ScoreRow{"shared GPU share counts in milli",
                 Node("g", 4000, 1000, 2),
                 MakeTask(0, 0, 0, 1, 300),
                 {{0, 300, 0}},
                 MakeTask(1, 1000, 0, 1, 500),
                 65.0 / 3},
        // empty node, empty task: 0 used of everything
        ScoreRow{
            "empty node", Node("g", 4000, 4000, 8), MakeTask(0, 0, 0), {}, MakeTask(1, 0, 0), 0.0}),
    [](const ::testing::TestParamInfo<ScoreRow>& info) { return std::to_string(info.index); });

// Device choice for shared requests: best fit.
struct PickRow {
  const char* name;
  int milli;
  int32_t gpu;
};

TEST(BinpackBindTest, SharedGpuChoiceTable) {
  // Free shares: GPU 0 = 1000, GPU 1 = 400, GPU 2 = 700.
  const PickRow rows[] = {
      {"300 fits best on GPU 1 (400 free)", 300, 1},
      {"500 fits best on GPU 2 (700 free)", 500, 2},
      {"800 fits only GPU 0", 800, 0},
  };
  for (const PickRow& r : rows) {
    ClusterState c;
    NodeId n = *c.AddNode(Node("g", 64000, 64000, 3));
    Task a = MakeTask(100, 0, 0, 1, 600), b = MakeTask(101, 0, 0, 1, 300);
    ASSERT_TRUE(c.Bind(a, AllocFor(a, n, {{1, 600, 0}})).ok());
    ASSERT_TRUE(c.Bind(b, AllocFor(b, n, {{2, 300, 0}})).ok());
    framework::ReasonTable reasons;
    framework::CycleState state;
    framework::PluginDeps deps{&reasons, nullptr};
    Task t = MakeTask(1, 0, 0, 1, r.milli);
    Allocation alloc = AllocFor(t, n);
    ASSERT_TRUE(Binpack(deps).Bind(t, c, alloc, state).ok());
    ASSERT_EQ(alloc.gpus.size(), 1u) << r.name;
    EXPECT_EQ(alloc.gpus[0].index, r.gpu) << r.name;
    EXPECT_EQ(alloc.gpus[0].milli, r.milli) << r.name;
  }
}

TEST(BinpackBindTest, WholeGpuRequestsAreLeftToOthers) {
  ClusterState c;
  NodeId n = *c.AddNode(Node("g", 64000, 64000, 2));
  framework::ReasonTable reasons;
  framework::CycleState state;
  Task t = MakeTask(1, 0, 0, 1, 1000);
  Allocation alloc = AllocFor(t, n);
  ASSERT_TRUE(Binpack({&reasons, nullptr}).Bind(t, c, alloc, state).ok());
  EXPECT_TRUE(alloc.gpus.empty());
}

TEST(BinpackTest, ConflictsWithSpread) {
  framework::ReasonTable reasons;
  EXPECT_EQ(Binpack({&reasons, nullptr}).ConflictsWith(), std::vector<std::string>{"spread"});
}

}  // namespace
}  // namespace hf::plugins

namespace hf::plugins {
namespace {

TEST(BinpackTest, ResourceWeightsTable) {
  // Node: 10 cores, 10000 MiB, 4 GPUs; bound: 2000 mCPU, 5000 MiB, 1 GPU.
  // Task: 1000 mCPU, 1 GPU -> cpu .3, memory .5, gpu .5.
  struct Row {
    const char* name;
    nlohmann::json weights;
    double binpack;
  } rows[] = {
      {"defaults = SPEC formula: (.3 + .5 + .5) / 3", nullptr, 130.0 / 3},
      {"gpu only", {{"cpu", 0}, {"memory", 0}}, 50.0},
      {"cpu 1, memory 0, gpu 2: (.3 + 2 x .5) / 3", {{"memory", 0}, {"gpu", 2}}, 130.0 / 3},
      {"cpu 3, memory 1, gpu 0: (3 x .3 + .5) / 4", {{"cpu", 3}, {"gpu", 0}}, 35.0},
  };
  for (const Row& r : rows) {
    ClusterState c;
    NodeId n = *c.AddNode(Node("g", 10000, 10000, 4));
    Task used = MakeTask(100, 2000, 5000, 1);
    ASSERT_TRUE(c.Bind(used, AllocFor(used, n, {{0, 1000, 0}})).ok());
    framework::ReasonTable reasons;
    framework::CycleState state;
    Binpack binpack({&reasons, nullptr});
    nlohmann::json config = nlohmann::json::object();
    if (!r.weights.is_null()) config["resource_weights"] = r.weights;
    ASSERT_TRUE(binpack.Configure({"", config}).ok()) << r.name;
    std::vector<NodeId> nodes = {n};
    std::vector<double> score(1);
    binpack.Score(MakeTask(1, 1000, 0, 1), c, nodes, score, state);
    EXPECT_NEAR(score[0], r.binpack, 1e-9) << r.name;
  }
}

TEST(BinpackTest, ResourceWeightsAreValidated) {
  struct Row {
    nlohmann::json weights;
    const char* want;
  } rows[] = {
      {"heavy", "plugins.binpack.resource_weights must be a mapping"},
      {{{"disk", 1}}, "unknown resource \"disk\""},
      {{{"gpu", -1}}, "plugins.binpack.resource_weights.gpu must be a finite number >= 0"},
      {{{"gpu", "x"}}, "plugins.binpack.resource_weights.gpu must be a number"},
      {{{"cpu", 0}, {"memory", 0}, {"gpu", 0}}, "must not all be 0"},
  };
  for (const Row& r : rows) {
    framework::ReasonTable reasons;
    framework::CycleState state;
    Binpack binpack({&reasons, nullptr});
    Status st = binpack.Configure({"", {{"resource_weights", r.weights}}});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << r.weights.dump();
    EXPECT_NE(st.message().find(r.want), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace hf::plugins
