#include "plugins/fragment/fragment.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <tuple>

#include "core/testing/nodes.h"
#include "framework/args.h"

namespace hf::plugins {
namespace {

using hf::testing::AllocFor;
using hf::testing::MakeTask;
using hf::testing::Node;
using nlohmann::json;

// A configured workload of two shapes, equally likely:
//   half: 1 GPU x 500 milli, 1 core, 1 GiB;
//   pair: 2 whole GPUs, 2 cores, 2 GiB.
// In F, half weighs 0.5 and pair 0.25 (a shape of k GPUs counts 1/k of its
// share).
json TwoShapes() {
  return json::parse(R"({"workload": [
    {"gpu": 1, "gpu_milli": 500, "cpu_milli": 1000, "memory_mib": 1024, "weight": 1},
    {"gpu": 2, "gpu_milli": 1000, "cpu_milli": 2000, "memory_mib": 2048, "weight": 1}]})");
}

Fragment Configured(const json& config) {
  Fragment f({nullptr, nullptr});
  framework::PluginArgs args;
  args.config = config;
  EXPECT_TRUE(f.Configure(args).ok());
  return f;
}

// The raw scores of `task` on every node of `c`, in node order.
std::vector<double> RawScores(const Fragment& f, const Task& task, const ClusterState& c) {
  std::vector<NodeId> nodes(c.node_count());
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i] = NodeId(i);
  std::vector<double> scores(nodes.size());
  framework::CycleState state;
  f.Score(task, c, nodes, scores, state);
  return scores;
}

// The GPUs Bind gives `task` on node `n`.
std::vector<GpuGrant> BoundGpus(const Fragment& f, const Task& task, const ClusterState& c,
                                NodeId n) {
  Allocation alloc = AllocFor(task, n);
  framework::CycleState state;
  EXPECT_TRUE(f.Bind(task, c, alloc, state).ok());
  return alloc.gpus;
}

TEST(FragmentTest, ExpectedFragmentationByHand) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("a", 8000, 65536, 2, "A100")).ok());
  const ClusterState::ModelMask a100 = c.MaskOf({"A100"});
  const Fragment f = Configured(TwoShapes());
  struct Row {
    const char* name;
    std::vector<int32_t> free;  // per GPU
    int64_t cpu, memory;
    double want;
  } rows[] = {
      // half fits (GPU 0), GPU 1's 300 unusable for it; pair does not fit:
      // all 1300 free. 0.5 x 300 + 0.25 x 1300.
      {"one whole, one 300 left", {1000, 300}, 8000, 65536, 475},
      // Both fit, nothing unusable.
      {"empty node", {1000, 1000}, 8000, 65536, 0},
      // half fits on both (no GPU below 500); pair needs whole GPUs: none
      // fits, all 1200 free unusable: 0.25 x 1200.
      {"two 600s", {600, 600}, 8000, 65536, 300},
      // Half a core left: neither fits, every free milli counts for both:
      // 0.5 x 2000 + 0.25 x 2000.
      {"CPU gone", {1000, 1000}, 500, 65536, 1500},
      // 1.5 GiB left: half fits (nothing unusable); pair does not: 0.25 x 2000.
      {"memory short for pair", {1000, 1000}, 8000, 1536, 500},
      {"full node", {0, 0}, 8000, 65536, 0},
  };
  for (const Row& r : rows) {
    Fragment::NodeState s;
    s.free_cpu = r.cpu;
    s.free_memory = r.memory;
    for (int32_t m : r.free) s.gpus.emplace_back(a100, m);
    EXPECT_DOUBLE_EQ(f.Expected(c, s), r.want) << r.name;
  }
}

TEST(FragmentTest, ModelsAndVendorsOfAShape) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("a", 8000, 65536, 1, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("t", 8000, 65536, 1, "T4")).ok());
  const Fragment f = Configured(json::parse(R"({"workload": [
    {"gpu": 1, "gpu_milli": 500, "gpu_models": ["T4"], "weight": 3},
    {"gpu": 1, "gpu_milli": 200, "weight": 1}]})"));
  Fragment::NodeState a100{{{c.MaskOf({"A100"}), 400}}, 8000, 65536};
  Fragment::NodeState t4{{{c.MaskOf({"T4"}), 400}}, 8000, 65536};
  // On the A100 the T4 shape finds no GPU of its model: all 400 count, x 3/4;
  // the 200 shape fits: nothing.
  EXPECT_DOUBLE_EQ(f.Expected(c, a100), 300);
  // On the T4: 400 < 500, the T4 shape cannot use it either.
  EXPECT_DOUBLE_EQ(f.Expected(c, t4), 300);
  t4.gpus[0].second = 500;
  EXPECT_DOUBLE_EQ(f.Expected(c, t4), 0);
}

TEST(FragmentTest, PlacesWhereFragmentationGrowsLeastAndBindsThatGpu) {
  // Node 0: GPUs with 1000 and 500 free; node 1: two whole GPUs. A 500-milli
  // task: on node 0's half GPU it fills it (F unchanged: 0.5 x 0 for half,
  // pair still cannot fit); on a whole GPU anywhere it leaves 500 that pair
  // cannot use.
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("n0", 8000, 65536, 2, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("n1", 8000, 65536, 2, "A100")).ok());
  Task filler = MakeTask(100, 0, 0, 1, 500);
  ASSERT_TRUE(c.Bind(filler, AllocFor(filler, 0, {{1, 500, 0}})).ok());
  Fragment f = Configured(TwoShapes());
  Task t = MakeTask(1, 1000, 1024, 1, 500);
  std::vector<NodeId> nodes = {0, 1};
  std::vector<double> scores(2);
  framework::CycleState state;
  f.Score(t, c, nodes, scores, state);
  f.NormalizeScores(scores);
  EXPECT_GT(scores[0], scores[1]);
  Allocation alloc;
  alloc.node = 0;
  ASSERT_TRUE(f.Bind(t, c, alloc, state).ok());
  ASSERT_EQ(alloc.gpus.size(), 1u);
  EXPECT_EQ(alloc.gpus[0].index, 1);  // the half-used GPU, not the whole one
  // A whole-GPU pair: node 1 keeps... only node 1 can take it; node 0 is
  // left to Filter. Scores are finite for both.
  Task pair = MakeTask(2, 2000, 2048, 2);
  f.Score(pair, c, nodes, scores, state);
  EXPECT_LT(scores[0], scores[1]);  // does not fit node 0: the worst
}

TEST(FragmentTest, NodesOfOneStateButDifferentCpuLeftAreTold) {
  // Both nodes: four free GPUs, CPU past both thresholds (1000, 2000). A task
  // of one GPU and 2 cores leaves node a 1 core (the pair no longer fits: its
  // three free GPUs fragment, 0.25 x 3000) and node b 6 (nothing changes).
  // The memo of increases must not hand one node's answer to the other.
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("a", 3000, 65536, 4, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("b", 8000, 65536, 4, "A100")).ok());
  Fragment f = Configured(TwoShapes());
  Task t = MakeTask(1, 2000, 1024, 1);
  std::vector<double> scores(2);
  framework::CycleState state;
  for (const std::vector<NodeId>& order : {std::vector<NodeId>{0, 1}, std::vector<NodeId>{1, 0}}) {
    f.Score(t, c, order, scores, state);
    const double a = scores[order[0] == 0 ? 0 : 1], b = scores[order[0] == 0 ? 1 : 0];
    EXPECT_GT(b, a) << "node a scored first: " << (order[0] == 0);
  }
}

TEST(FragmentTest, ExclusiveVendorsAndConfiguredWorkloadsTakeEffect) {
  ClusterState c;
  NodeSpec npu = Node("npu", 8000, 65536, 1, "Ascend910B");
  npu.gpus[0].vendor = "huawei";
  ASSERT_TRUE(c.AddNode(npu).ok());
  c.SetExclusiveVendors({"huawei"});
  Fragment f = Configured(json::parse(R"({"workload": [{"gpu": 1, "gpu_milli": 500, "weight": 1}]})"));
  Fragment::NodeState s{{{c.MaskOf({"Ascend910B"}), 1000}}, 8000, 65536};
  // A share cannot use an exclusive vendor's GPU: all of it fragments.
  EXPECT_DOUBLE_EQ(f.Expected(c, s), 1000);
  c.SetExclusiveVendors({});
  EXPECT_DOUBLE_EQ(f.Expected(c, s), 0);
  // A configured workload edited, however little, is the one used.
  framework::PluginArgs args;
  args.config = json::parse(R"({"workload": [{"gpu": 1, "gpu_milli": 500, "weight": 99},
                                             {"gpu": 1, "gpu_milli": 1000, "weight": 1}]})");
  ASSERT_TRUE(f.Configure(args).ok());
  s.gpus[0].second = 600;  // the whole-GPU shape (1%) cannot use it
  EXPECT_DOUBLE_EQ(f.Expected(c, s), 6);
}

TEST(FragmentTest, ModelPressureByHand) {
  // Two A100 nodes and one T4 node of two GPUs each (6,000 milli). The
  // workload: whole T4s (weight 1, 1,000 milli of demand each), shares of
  // 500 anywhere (weight 2), and pairs of A100|T4 (weight 1, 2,000 milli):
  // limited demand is T4 1000 / 4000 = 0.25 (A100|T4 is every model there
  // is: not limited).
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("a0", 8000, 65536, 2, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("a1", 8000, 65536, 2, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("t", 8000, 65536, 2, "T4")).ok());
  const size_t a100 = size_t(std::countr_zero(c.MaskOf({"A100"})));
  const size_t t4 = size_t(std::countr_zero(c.MaskOf({"T4"})));
  const Fragment f = Configured(json::parse(R"({"workload": [
    {"gpu": 1, "gpu_milli": 1000, "gpu_models": ["T4"], "weight": 1},
    {"gpu": 1, "gpu_milli": 500, "weight": 2},
    {"gpu": 2, "gpu_milli": 1000, "gpu_models": ["A100", "T4"], "weight": 1}]})"));
  struct Row {
    const char* name;
    std::vector<std::pair<NodeId, int32_t>> taken;  // (node, milli on its GPU 0)
    double t4;
  } rows[] = {
      // T4 holds 2000 of 6000 free: 0.25 / (1/3).
      {"all free", {}, 0.75},
      // 1000 taken on an A100: T4 2000 of 5000 free: 0.25 / 0.4.
      {"an A100 GPU taken", {{0, 1000}}, 0.625},
      // Then 500 on the T4: 1500 of 4500: 0.25 / (1/3).
      {"and half a T4", {{2, 500}}, 0.75},
      // Then the rest of that T4 GPU: 1000 of 4000: 0.25 / 0.25.
      {"and the rest of it", {{2, 500}}, 1.0},
  };
  TaskKey key = 1;
  for (const Row& r : rows) {
    for (const auto& [node, milli] : r.taken) {
      Task t = MakeTask(key++, 0, 0, 1, milli);
      ASSERT_TRUE(c.Bind(t, AllocFor(t, node, {{0, milli, 0}})).ok()) << r.name;
    }
    const std::vector<double> p = f.ModelPressure(c);
    ASSERT_EQ(p.size(), 2u);
    EXPECT_DOUBLE_EQ(p[t4], r.t4) << r.name;
    EXPECT_DOUBLE_EQ(p[a100], 0) << r.name;
  }
  // No T4 left at all: the pressure is capped.
  Task rest = MakeTask(key++, 0, 0, 1);
  ASSERT_TRUE(c.Bind(rest, AllocFor(rest, 2, {{1, 1000, 0}})).ok());
  EXPECT_DOUBLE_EQ(f.ModelPressure(c)[t4], Fragment::kMaxPressure);
}

TEST(FragmentTest, WorkThatRunsAnywhereLeavesTheScarceModel) {
  // Workload: shares of 500 anywhere, and whole T4s, half and half. Node t
  // (T4) has GPUs of 500 and 1000 free; node a (A100) two whole ones. A
  // share of 500 increases F alike on both (-250: on t it fills the hole
  // the whole T4s could not use; on a the whole T4s could use nothing
  // anyway), and t is fuller. The T4's pressure: (2/3 of the demand) /
  // (3/7 of the free capacity) = 14/9. With scarcity 20 the share goes to
  // the A100; with scarcity 0, to the fuller T4 node.
  for (double scarcity : {20.0, 0.0}) {
    ClusterState c;
    ASSERT_TRUE(c.AddNode(Node("a", 8000, 65536, 2, "A100")).ok());
    ASSERT_TRUE(c.AddNode(Node("t", 8000, 65536, 2, "T4")).ok());
    Task filler = MakeTask(100, 0, 0, 1, 500);
    ASSERT_TRUE(c.Bind(filler, AllocFor(filler, 1, {{0, 500, 0}})).ok());
    json config = json::parse(R"({"workload": [
      {"gpu": 1, "gpu_milli": 500, "weight": 1},
      {"gpu": 1, "gpu_milli": 1000, "gpu_models": ["T4"], "weight": 1}]})");
    config["scarcity"] = scarcity;
    const Fragment f = Configured(config);
    EXPECT_DOUBLE_EQ(f.ModelPressure(c)[size_t(std::countr_zero(c.MaskOf({"T4"})))], 14.0 / 9);
    std::vector<NodeId> nodes = {0, 1};
    std::vector<double> scores(2);
    framework::CycleState state;
    f.Score(MakeTask(1, 1000, 1024, 1, 500), c, nodes, scores, state);
    if (scarcity > 0) {
      EXPECT_GT(scores[0], scores[1]);
    } else {
      EXPECT_LT(scores[0], scores[1]);
    }
    // A whole T4 task has one choice; the pressure does not stop it.
    Task limited = MakeTask(2, 1000, 1024, 1);
    limited.requests.gpu_models = {"T4"};
    f.Score(limited, c, nodes, scores, state);
    EXPECT_EQ(scores[0], Fragment::kNoScore);
    EXPECT_NE(scores[1], Fragment::kNoScore);
  }
}

TEST(FragmentTest, TasksWithoutGpusGoWhereLeastGpuCapacityIsFree) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("busy", 8000, 65536, 2, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("idle", 8000, 65536, 2, "A100")).ok());
  Task gpu = MakeTask(100, 0, 0, 2);
  ASSERT_TRUE(c.Bind(gpu, AllocFor(gpu, 0, {{0, 1000, 0}, {1, 1000, 0}})).ok());
  Fragment f = Configured(TwoShapes());
  const std::vector<double> scores = RawScores(f, MakeTask(1, 4000, 1024), c);
  EXPECT_GT(scores[0], scores[1]);  // its CPU strands no GPU on the busy node
}

TEST(FragmentTest, TasksWithoutGpusDoNotTakeTheCpuOfFreeGpus) {
  // Node "short": one GPU taken, one free, 3 cores. Node "roomy": two free
  // GPUs, 8 cores. A task of 2.5 cores and no GPU: on "short" it leaves half
  // a core, so the half shape can no longer use the free GPU (F 250 -> 750,
  // ten steps); on "roomy" both shapes still fit (F stays 0). It goes to
  // "roomy" although "short" has less GPU capacity free.
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("short", 3000, 65536, 2, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("roomy", 8000, 65536, 2, "A100")).ok());
  Task gpu = MakeTask(100, 0, 0, 1);
  ASSERT_TRUE(c.Bind(gpu, AllocFor(gpu, 0, {{0, 1000, 0}})).ok());
  Fragment f = Configured(TwoShapes());
  std::vector<double> scores = RawScores(f, MakeTask(1, 2500, 1024), c);
  EXPECT_LT(scores[0], scores[1]);
  // A task small enough to leave "short" its core goes there (F unchanged on
  // both; less GPU capacity free).
  scores = RawScores(f, MakeTask(2, 1500, 1024), c);
  EXPECT_GT(scores[0], scores[1]);
}

TEST(FragmentTest, TasksWithoutGpusPreferLessFreeGpuCapacityOnLargeNodesToo) {
  // Node "fewer": 40 idle GPUs, 40,000 milli free. Node "more": 256 GPUs,
  // all but 40,001 milli taken, so its GPUs are far fuller. F does not move
  // on either (CPU and memory to spare), so the node with less free GPU
  // capacity wins, by one milli, whatever the fullness of its GPUs.
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("fewer", 1'000'000, 1 << 20, 40, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("more", 1'000'000, 1 << 20, 256, "A100")).ok());
  Task whole = MakeTask(100, 0, 0, 215);
  std::vector<GpuGrant> grants;
  for (int32_t i = 0; i < 215; ++i) grants.push_back({i, 1000, 0});
  ASSERT_TRUE(c.Bind(whole, AllocFor(whole, 1, grants)).ok());
  Task share = MakeTask(101, 0, 0, 1, 999);
  ASSERT_TRUE(c.Bind(share, AllocFor(share, 1, {{215, 999, 0}})).ok());
  Fragment f = Configured(TwoShapes());
  const std::vector<double> scores = RawScores(f, MakeTask(1, 1000, 1024), c);
  EXPECT_GT(scores[0], scores[1]);
}

TEST(FragmentTest, SeveralSharesAreBoundWhereTheyWereScored) {
  // Node 0: four GPUs, slots 2 and 3 half taken (F 250: the pair shape
  // cannot use their 1,000 milli). A task of two 500-milli shares scores
  // there as filling those two (F 250 -> 0), and is bound to them, not to
  // the first two slots (which would leave F at 500).
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("n0", 8000, 65536, 4, "A100")).ok());
  for (int32_t slot : {2, 3}) {
    Task half = MakeTask(100 + slot, 0, 0, 1, 500);
    ASSERT_TRUE(c.Bind(half, AllocFor(half, 0, {{slot, 500, 0}})).ok());
  }
  Fragment f = Configured(TwoShapes());
  const Task task = MakeTask(1, 2000, 2048, 2, 500);
  EXPECT_GE(RawScores(f, task, c)[0], 5);  // 250 milli of F gone: five steps
  const std::vector<GpuGrant> gpus = BoundGpus(f, task, c, 0);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, 2);
  EXPECT_EQ(gpus[1].index, 3);
}

TEST(FragmentTest, OneWholeGpuOnANodeOfTwoModelsTakesTheOneFWouldSpend) {
  // Node "m": slot 0 a T4, slot 1 an A100. Half the workload is whole
  // GPUs of one model only: a whole-GPU task that runs on either takes
  // the other model, whatever the slot order.
  for (const char* limited : {"T4", "A100"}) {
    ClusterState c;
    NodeSpec m = Node("m", 8000, 65536, 2, "A100");
    m.gpus[0].model = "T4";
    ASSERT_TRUE(c.AddNode(m).ok());
    Fragment f = Configured(json{
        {"workload",
         {{{"gpu", 1}, {"gpu_models", {limited}}, {"weight", 1}}, {{"gpu", 1}, {"weight", 1}}}}});
    const std::vector<GpuGrant> gpus = BoundGpus(f, MakeTask(1, 1000, 1024, 1), c, 0);
    ASSERT_EQ(gpus.size(), 1u) << limited;
    EXPECT_EQ(gpus[0].index, std::string(limited) == "T4" ? 1 : 0) << limited;
  }
}

TEST(FragmentTest, NodesOfManyGpusChooseTheGpuAsSmallNodesDo) {
  // Past kMaxSigGpus GPUs a node is worked out unpacked; it must still
  // choose as the packed path does. Node "big": 20 GPUs, the last half
  // taken (F 125: the pair shape cannot use its 500). A share of 500 fills
  // that GPU (F -> 0, up 2.5 steps) rather than breaking a whole one.
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("big", 64000, 1 << 20, 20, "A100")).ok());
  ASSERT_GT(c.gpu_free_milli(0).size(), Fragment::kMaxSigGpus);
  Task half = MakeTask(100, 0, 0, 1, 500);
  ASSERT_TRUE(c.Bind(half, AllocFor(half, 0, {{19, 500, 0}})).ok());
  Fragment f = Configured(TwoShapes());
  const Task task = MakeTask(1, 1000, 1024, 1, 500);
  EXPECT_GE(RawScores(f, task, c)[0], 3);
  const std::vector<GpuGrant> gpus = BoundGpus(f, task, c, 0);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].index, 19);
}

TEST(FragmentTest, NodesOfManyGpusAgreeWithFComputedWhole) {
  // Random nodes of 17-64 GPUs of two models, partly taken; tasks of one
  // share, one whole GPU or two shares. The score and the bound GPU must be
  // those of F computed over the whole node after each possible choice.
  std::mt19937 rng(7);
  const Fragment f = Configured(json::parse(R"({"workload": [
    {"gpu": 1, "gpu_milli": 250, "cpu_milli": 1000, "memory_mib": 1024, "weight": 3},
    {"gpu": 1, "gpu_milli": 600, "cpu_milli": 4000, "memory_mib": 1024, "weight": 2},
    {"gpu": 1, "gpu_milli": 1000, "gpu_models": ["T4"], "weight": 1},
    {"gpu": 4, "gpu_milli": 1000, "cpu_milli": 8000, "memory_mib": 4096, "weight": 1}],
    "scarcity": 0})"));
  int checked = 0;
  for (int round = 0; round < 200; ++round) {
    ClusterState c;
    const int gpus = std::uniform_int_distribution<int>(17, 64)(rng);
    NodeSpec spec = Node("big", std::uniform_int_distribution<int64_t>(2000, 40000)(rng), 1 << 20,
                         gpus, "A100");
    for (GpuDevice& g : spec.gpus) g.model = rng() % 3 == 0 ? "T4" : "A100";
    ASSERT_TRUE(c.AddNode(spec).ok());
    TaskKey key = 1000;
    for (int32_t slot = 0; slot < gpus; ++slot) {
      const int32_t milli = int32_t(rng() % 5) * 250;
      if (milli == 0) continue;
      Task t = MakeTask(key++, 0, 0, 1, milli);
      ASSERT_TRUE(c.Bind(t, AllocFor(t, 0, {{slot, milli, 0}})).ok());
    }
    const int32_t shares[] = {250, 600, 1000};
    const int32_t milli = shares[rng() % 3];
    const int count = milli < 1000 && rng() % 2 == 0 ? 2 : 1;
    const Task task = MakeTask(1, 1000 * int64_t(rng() % 4), 1024, count, milli);
    // F after taking `slots`, computed on the whole node.
    const std::span<const int32_t> free = c.gpu_free_milli(0);
    const std::span<const ClusterState::ModelMask> bits = c.gpu_model_bits(0);
    const auto state = [&](const std::vector<size_t>& slots, bool with_task) {
      Fragment::NodeState s;
      s.free_cpu = c.arrays().free_cpu[0] - (with_task ? task.requests.cpu_milli : 0);
      s.free_memory = c.arrays().free_memory[0] - (with_task ? task.requests.memory_mib : 0);
      for (size_t i = 0; i < free.size(); ++i) s.gpus.emplace_back(bits[i], free[i]);
      for (size_t i : slots) s.gpus[i].second -= milli;
      return f.Expected(c, s);
    };
    std::vector<size_t> fit;
    for (size_t i = 0; i < free.size(); ++i) {
      if (free[i] >= milli) fit.push_back(i);
    }
    if (fit.size() < size_t(count)) continue;
    ++checked;
    std::vector<size_t> expected;
    double delta = 0;
    if (count == 1) {
      // The least increase, then the fullest GPU, then the lowest model bit.
      std::optional<std::tuple<double, int32_t, int, size_t>> best;
      for (size_t i : fit) {
        const std::tuple<double, int32_t, int, size_t> k(state({i}, true) - state({}, false),
                                                         free[i], std::countr_zero(bits[i]), i);
        if (!best || k < *best) best = k;
      }
      expected = {std::get<3>(*best)};
      delta = std::get<0>(*best);
    } else {
      std::sort(fit.begin(), fit.end(), [&](size_t x, size_t y) {
        return std::tuple(std::countr_zero(bits[x]), free[x], x) <
               std::tuple(std::countr_zero(bits[y]), free[y], y);
      });
      expected.assign(fit.begin(), fit.begin() + count);
      delta = state(expected, true) - state({}, false);
    }
    EXPECT_DOUBLE_EQ(RawScores(f, task, c)[0],
                     -std::round(delta / 50) + 0.5 * c.arrays().util_gpu[0])
        << round;
    const std::vector<GpuGrant> bound = BoundGpus(f, task, c, 0);
    ASSERT_EQ(bound.size(), expected.size()) << round;
    for (size_t k = 0; k < expected.size(); ++k) {
      EXPECT_EQ(bound[k].index, int32_t(expected[k])) << round;
    }
  }
  EXPECT_GT(checked, 150);  // most rounds have room for the task
}

TEST(FragmentTest, ShapesThatFadedToNothingLeaveTheWorkload) {
  // With a half-life of one arrival, a V100-only shape seen once fades to
  // zero weight (underflow) after a couple of thousand other arrivals. It
  // is no longer part of the workload, and puts no pressure on the V100s,
  // even when none is free.
  Fragment f({nullptr, nullptr});
  framework::PluginArgs args;
  args.config = json::parse(R"({"half_life": 1})");
  ASSERT_TRUE(f.Configure(args).ok());
  Task v100 = MakeTask(1, 1000, 1024, 1);
  v100.requests.gpu_models = {"V100"};
  f.Observe(v100);
  for (TaskKey k = 2; k < 2500; ++k) f.Observe(MakeTask(k, 1000, 1024, 1, 500));
  const std::vector<Fragment::Shape> workload = f.Workload();
  ASSERT_FALSE(workload.empty());
  for (const Fragment::Shape& s : workload) {
    EXPECT_GT(s.weight, 0);
    EXPECT_TRUE(s.gpu_models.empty());
  }
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("v", 8000, 65536, 1, "V100")).ok());
  ASSERT_TRUE(c.AddNode(Node("a", 8000, 65536, 1, "A100")).ok());
  Task full = MakeTask(100, 0, 0, 1);
  ASSERT_TRUE(c.Bind(full, AllocFor(full, 0, {{0, 1000, 0}})).ok());
  EXPECT_TRUE(f.ModelPressure(c).empty());  // no shape is model-limited
}

TEST(FragmentTest, LearnsTheWorkloadOnceATaskWithDecay) {
  Fragment f({nullptr, nullptr});
  framework::PluginArgs args;
  args.config = json::parse(R"({"half_life": 1})");
  ASSERT_TRUE(f.Configure(args).ok());
  Task a = MakeTask(1, 1000, 1024, 1, 500);
  Task b = MakeTask(2, 2000, 2048, 2);
  f.Observe(a);
  f.Observe(a);  // a retry of the same task: counted once
  f.Observe(b);
  f.Observe(MakeTask(3, 1000, 0));  // no GPU: not a GPU shape
  std::vector<Fragment::Shape> w = f.Workload();
  ASSERT_EQ(w.size(), 2u);
  // Half-life of one arrival: b, the later one, weighs twice a.
  EXPECT_EQ(w[0].gpus, 2);
  EXPECT_DOUBLE_EQ(w[0].weight, 2 * w[1].weight);
}

TEST(FragmentTest, ConfigIsCheckedNamingTheField) {
  Fragment f({nullptr, nullptr});
  for (const auto& [config, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"workload": {}})", "plugins.fragment.workload"},
           {R"({"workload": [{"gpu": 1}]})", "plugins.fragment.workload[0].weight"},
           {R"({"workload": [{"gpu": 0, "weight": 1}]})", "plugins.fragment.workload[0].gpu"},
           {R"({"workload": [{"gpu": 1, "gpu_milli": 1001, "weight": 1}]})",
            "plugins.fragment.workload[0].gpu_milli"},
           {R"({"workload": [{"gpu": 1, "weight": -1}]})", "plugins.fragment.workload[0].weight"},
           {R"({"workload": [{"gpu": 1, "weight": 1, "bogus": 1}]})", "bogus"},
           {R"({"half_life": 0})", "plugins.fragment.half_life"},
           {R"({"resolution": "fine"})", "plugins.fragment.resolution"},
           {R"({"scarcity": -1})", "plugins.fragment.scarcity"},
           {R"({"scarcity": "high"})", "plugins.fragment.scarcity"}}) {
    framework::PluginArgs args;
    args.config = json::parse(config);
    const Status s = f.Configure(args);
    EXPECT_FALSE(s.ok()) << config;
    EXPECT_NE(s.message().find(field), std::string::npos) << config << ": " << s.message();
  }
}

}  // namespace
}  // namespace hf::plugins
