#include "plugins/spread/spread.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/testing/nodes.h"
#include "framework/cycle_state.h"

namespace hf::plugins {
namespace {

using hf::testing::AllocFor;
using hf::testing::MakeTask;
using hf::testing::Node;

// The score of `task` on a node where `used` (key 100, with `used_gpus`) is
// bound already.
double ScoreOn(const NodeSpec& node, const Task& used, std::vector<GpuGrant> used_gpus,
               const Task& task, const nlohmann::json& config = nlohmann::json::object()) {
  ClusterState c;
  const NodeId n = *c.AddNode(node);
  Task bound = used;
  bound.key = 100;
  EXPECT_TRUE(c.Bind(bound, AllocFor(bound, n, std::move(used_gpus))).ok());
  framework::ReasonTable reasons;
  framework::CycleState state;
  Spread spread({&reasons, nullptr});
  EXPECT_TRUE(spread.Configure({"", config}).ok());
  const std::vector<NodeId> nodes = {n};
  std::vector<double> score(1);
  spread.Score(task, c, nodes, score, state);
  return score[0];
}

// score = (1 - mean(min(used + request, total) / total)) x 100 over the
// resources the node has, computed by hand for each row.
TEST(SpreadTest, ScoresTheEmptiestNodeHighest) {
  // cpu (2000 + 2000) / 8000 = .5, memory 2000 / 8000 = .25, gpu 1000 / 2000 = .5
  EXPECT_NEAR(ScoreOn(Node("g", 8000, 8000, 2), MakeTask(0, 2000, 2000, 1), {{0, 1000, 0}},
                      MakeTask(1, 2000, 0)),
              100 * (1 - 1.25 / 3), 1e-9);
  // A CPU-only node leaves the GPU out: cpu .25, memory .75.
  EXPECT_NEAR(ScoreOn(Node("c", 4000, 4000), MakeTask(0, 0, 0), {}, MakeTask(1, 1000, 3000)), 50.0,
              1e-9);
  // A full node scores 0, a request beyond capacity is clamped.
  EXPECT_NEAR(ScoreOn(Node("c", 4000, 4000), MakeTask(0, 4000, 4000), {}, MakeTask(1, 1000, 0)),
              0.0, 1e-9);
  // GPU shares count in milli: gpu (500 + 250) / 1000 = .75, cpu and memory 0.
  EXPECT_NEAR(ScoreOn(Node("g", 4000, 4000, 1), MakeTask(0, 0, 0, 1, 500), {{0, 500, 0}},
                      MakeTask(1, 0, 0, 1, 250)),
              75.0, 1e-9);
}

TEST(SpreadTest, ResourceWeightsWeighTheTerms) {
  // cpu .5, memory .25, gpu .5 as above; gpu only: .5; cpu 0, memory 2, gpu 1: (.5 + .5) / 3.
  const NodeSpec node = Node("g", 8000, 8000, 2);
  const Task used = MakeTask(0, 2000, 2000, 1), task = MakeTask(1, 2000, 0);
  EXPECT_NEAR(ScoreOn(node, used, {{0, 1000, 0}}, task,
                      {{"resource_weights", {{"cpu", 0}, {"memory", 0}}}}),
              50.0, 1e-9);
  EXPECT_NEAR(ScoreOn(node, used, {{0, 1000, 0}}, task,
                      {{"resource_weights", {{"cpu", 0}, {"memory", 2}}}}),
              100 * (1 - 1.0 / 3), 1e-9);
  framework::ReasonTable reasons;
  Status st = Spread({&reasons, nullptr}).Configure({"", {{"resource_weights", {{"gpu", -1}}}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("plugins.spread.resource_weights.gpu"), std::string::npos)
      << st.message();
}

TEST(SpreadTest, SharedRequestsGoToTheGpuWithTheMostFreeShare) {
  // Free shares: GPU 0 = 400, GPU 1 = 900, GPU 2 = 700.
  ClusterState c;
  const NodeId n = *c.AddNode(Node("g", 64000, 64000, 3));
  Task a = MakeTask(100, 0, 0, 1, 600), b = MakeTask(101, 0, 0, 1, 100),
       d = MakeTask(102, 0, 0, 1, 300);
  ASSERT_TRUE(c.Bind(a, AllocFor(a, n, {{0, 600, 0}})).ok());
  ASSERT_TRUE(c.Bind(b, AllocFor(b, n, {{1, 100, 0}})).ok());
  ASSERT_TRUE(c.Bind(d, AllocFor(d, n, {{2, 300, 0}})).ok());
  framework::ReasonTable reasons;
  framework::CycleState state;
  for (int milli : {100, 400, 800}) {
    const Task t = MakeTask(1, 0, 0, 1, milli);
    Allocation alloc = AllocFor(t, n);
    ASSERT_TRUE(Spread({&reasons, nullptr}).Bind(t, c, alloc, state).ok());
    ASSERT_EQ(alloc.gpus.size(), 1u) << milli;
    EXPECT_EQ(alloc.gpus[0].index, 1) << milli;
    EXPECT_EQ(alloc.gpus[0].milli, milli);
  }
  // A whole-GPU request is left to the topology plugin or the default choice.
  const Task whole = MakeTask(2, 0, 0, 1);
  Allocation alloc = AllocFor(whole, n);
  ASSERT_TRUE(Spread({&reasons, nullptr}).Bind(whole, c, alloc, state).ok());
  EXPECT_TRUE(alloc.gpus.empty());
}

TEST(SpreadTest, ConflictsWithBinpack) {
  framework::ReasonTable reasons;
  EXPECT_EQ(Spread({&reasons, nullptr}).ConflictsWith(), std::vector<std::string>{"binpack"});
}

}  // namespace
}  // namespace hf::plugins
