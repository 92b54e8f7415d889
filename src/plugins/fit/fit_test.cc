#include "plugins/fit/fit.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "core/fit.h"

#include "core/testing/nodes.h"

namespace hf::plugins {
namespace {

using hf::testing::AllocFor;
using hf::testing::MakeTask;
using hf::testing::Node;

// Cluster for every row:
//   0 a100-8: 8 x A100, GPUs 0-5 taken whole, GPU 6 has 300 milli used
//   1 t4-2:   2 x T4, all free
//   2 cpu:    no GPUs, 4 cores
//   3 down:   8 x A100, NotReady
//   4 drain:  8 x A100, Draining
class FitFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ids_.push_back(*cluster_.AddNode(Node("a100-8", 96000, 786432, 8, "A100")));
    ids_.push_back(*cluster_.AddNode(Node("t4-2", 32000, 131072, 2, "T4")));
    ids_.push_back(*cluster_.AddNode(Node("cpu", 4000, 16384)));
    ids_.push_back(*cluster_.AddNode(Node("down", 96000, 786432, 8)));
    ids_.push_back(*cluster_.AddNode(Node("drain", 96000, 786432, 8)));
    cluster_.SetCondition(3, NodeCondition::kNotReady);
    cluster_.SetCondition(4, NodeCondition::kDraining);
    Task big = MakeTask(100, 1000, 1024, 6);
    ASSERT_TRUE(cluster_.Bind(big, AllocFor(big, 0, {{0, 1000, 0}, {1, 1000, 0}, {2, 1000, 0},
                                                     {3, 1000, 0}, {4, 1000, 0}, {5, 1000, 0}}))
                    .ok());
    Task shared = MakeTask(101, 0, 0, 1, 300);
    ASSERT_TRUE(cluster_.Bind(shared, AllocFor(shared, 0, {{6, 300, 0}})).ok());
  }

  ClusterState cluster_;
  std::vector<NodeId> ids_;
};

struct Row {
  const char* name;
  Task task;
  std::vector<std::string> models;
  std::vector<NodeId> want_pass;
  // Expected reason per rejected node, in node order.
  std::vector<std::pair<NodeId, std::string>> want_rejected;
};

TEST_F(FitFilterTest, Table) {
  Task gpu_mem = MakeTask(5, 0, 0, 1, 500);
  gpu_mem.requests.gpu_memory_mib = 90000;
  const Row rows[] = {
      {"two whole GPUs: only the T4 node has two free",
       MakeTask(1, 1000, 1024, 2), {}, {1},
       {{0, "insufficient GPU"}, {2, "insufficient GPU"}, {3, "node not ready"}, {4, "node draining"}}},
      {"one whole GPU: A100 GPU 7 and both T4s",
       MakeTask(2, 1000, 1024, 1), {}, {0, 1},
       {{2, "insufficient GPU"}, {3, "node not ready"}, {4, "node draining"}}},
      {"shared 700 fits A100 GPU 6 (700 free)",
       MakeTask(3, 0, 0, 1, 700), {"A100"}, {0},
       {{1, "GPU model mismatch (nvidia T4)"}, {2, "insufficient GPU"}, {3, "node not ready"}, {4, "node draining"}}},
      {"CPU task larger than the cpu node",
       MakeTask(4, 8000, 1024), {}, {0, 1},
       {{2, "insufficient CPU"}, {3, "node not ready"}, {4, "node draining"}}},
      {"GPU memory above every GPU's memory",
       gpu_mem, {}, {},
       {{0, "insufficient GPU memory"}, {1, "insufficient GPU memory"}, {2, "insufficient GPU"},
        {3, "node not ready"}, {4, "node draining"}}},
      {"memory",
       MakeTask(6, 0, 200000), {}, {0},
       {{1, "insufficient memory"}, {2, "insufficient memory"}, {3, "node not ready"}, {4, "node draining"}}},
  };
  for (const Row& row : rows) {
    framework::ReasonTable reasons;
    Fit fit({&reasons, nullptr});
    Task t = row.task;
    t.requests.gpu_models = row.models;
    std::vector<NodeId> nodes = ids_;
    framework::Rejections rej;
    rej.Reset(cluster_.node_count(), reasons.size());
    fit.Filter(t, cluster_, nodes, rej);
    EXPECT_EQ(nodes, row.want_pass) << row.name;
    std::vector<std::pair<NodeId, std::string>> got;
    for (NodeId n : rej.rejected()) got.emplace_back(n, reasons.text(rej.reason(n)));
    EXPECT_EQ(got, row.want_rejected) << row.name;
  }
}

TEST_F(FitFilterTest, OnlyReasonsEvictionCanClearAreResolvable) {
  framework::ReasonTable reasons;
  Fit fit({&reasons, nullptr});
  struct Row {
    const char* name;
    Task task;
    NodeId node;
    bool resolvable;
  } rows[] = {
      {"GPUs taken on a8 (eviction frees them)", MakeTask(1, 0, 0, 3), 0, true},
      {"more GPUs than t4-2 has at all", MakeTask(2, 0, 0, 3), 1, false},
      {"no GPU at all on the cpu node", MakeTask(3, 0, 0, 1), 2, false},
      {"CPU", MakeTask(4, 5000, 0), 2, true},
      {"not ready", MakeTask(5, 0, 0), 3, false},
      {"draining", MakeTask(6, 0, 0), 4, false},
  };
  for (const Row& r : rows) {
    std::vector<NodeId> nodes = {r.node};
    framework::Rejections rej;
    rej.Reset(cluster_.node_count(), reasons.size());
    fit.Filter(r.task, cluster_, nodes, rej);
    ASSERT_TRUE(nodes.empty()) << r.name;
    EXPECT_EQ(reasons.resolvable(rej.reason(r.node)), r.resolvable) << r.name;
  }
}

// Vendors: an NVIDIA, an AMD and an Ascend node, the Ascend GPUs exclusive
// by the default policy.
TEST(FitVendorTest, VendorsFilterNameThemselvesAndKeepExclusiveGpusWhole) {
  ClusterState c;
  NodeSpec nv = Node("nv", 64000, 262144, 4, "A100");
  NodeSpec amd = Node("amd", 64000, 262144, 4, "MI300X");
  NodeSpec npu = Node("npu", 64000, 262144, 4, "Ascend910B");
  for (GpuDevice& g : amd.gpus) g.vendor = "amd";
  for (GpuDevice& g : npu.gpus) g.vendor = "huawei";
  for (const NodeSpec& s : {nv, amd, npu}) ASSERT_TRUE(c.AddNode(s).ok());
  c.SetExclusiveVendors({"huawei", "habana"});
  framework::ReasonTable reasons;
  Fit fit({&reasons, nullptr});
  auto run = [&](Task t) {
    std::vector<NodeId> nodes = {0, 1, 2};
    framework::Rejections rej;
    rej.Reset(c.node_count(), reasons.size());
    fit.Filter(t, c, nodes, rej);
    std::vector<std::pair<NodeId, std::string>> got;
    for (NodeId n : rej.rejected()) got.emplace_back(n, reasons.text(rej.reason(n)));
    return std::make_pair(nodes, got);
  };
  Task want_amd = MakeTask(1, 1000, 1024, 2);
  want_amd.requests.gpu_vendors = {"amd"};
  auto [pass, why] = run(want_amd);
  EXPECT_EQ(pass, (std::vector<NodeId>{1}));
  EXPECT_EQ(why, (std::vector<std::pair<NodeId, std::string>>{
                     {0, "GPU model mismatch (nvidia A100)"}, {2, "GPU model mismatch (huawei Ascend910B)"}}));
  // Two vendors accepted; a model narrows within them.
  Task two = MakeTask(2, 1000, 1024, 1);
  two.requests.gpu_vendors = {"amd", "huawei"};
  EXPECT_EQ(run(two).first, (std::vector<NodeId>{1, 2}));
  two.requests.gpu_models = {"Ascend910B"};
  EXPECT_EQ(run(two).first, (std::vector<NodeId>{2}));
  // A vendor no node has.
  Task gaudi = MakeTask(3, 0, 0, 1);
  gaudi.requests.gpu_vendors = {"habana"};
  EXPECT_TRUE(run(gaudi).first.empty());
  // A share: never on the exclusive vendor's GPUs, and the reason says why.
  Task share = MakeTask(4, 0, 0, 1, 500);
  auto [shared_pass, shared_why] = run(share);
  EXPECT_EQ(shared_pass, (std::vector<NodeId>{0, 1}));
  ASSERT_EQ(shared_why.size(), 1u);
  EXPECT_EQ(shared_why[0].second, "GPU not shared (exclusive_gpu_vendors)");
  // The policy changed: Ascend GPUs may be shared.
  c.SetExclusiveVendors({});
  EXPECT_EQ(run(share).first, (std::vector<NodeId>{0, 1, 2}));
}

}  // namespace
}  // namespace hf::plugins

namespace hf::plugins {
namespace {

// The indexes are an optimisation: whatever the state, Fit must keep exactly
// the nodes that a GPU-by-GPU check (NodeFree::Check) says fit, and give a
// reason for every other one.
TEST(FitIndexTest, MatchesBruteForceUnderRandomChurn) {
  ClusterState c;
  std::mt19937 rng(5);
  for (int i = 0; i < 150; ++i) {
    const int gpus = std::vector<int>{0, 1, 2, 4, 8, 16}[rng() % 6];
    NodeSpec s = Node("n" + std::to_string(i), 8000 + 8000 * (rng() % 8), 65536 * (1 + rng() % 8),
                      gpus, rng() % 3 ? "A100" : "T4", 16000 + 16000 * (rng() % 5));
    if (gpus > 1 && rng() % 10 == 0) s.gpus[0].model = "H100";  // mixed
    ASSERT_TRUE(c.AddNode(s).ok());
  }
  framework::ReasonTable reasons;
  Fit fit({&reasons, nullptr});
  const std::vector<std::vector<std::string>> model_sets = {{}, {"A100"}, {"T4", "H100"}, {"V100"}};
  TaskKey next = 1000;
  for (int step = 0; step < 600; ++step) {
    Task t = MakeTask(next++, 1000 * (rng() % 6), 8192 * (rng() % 6));
    switch (rng() % 5) {
      case 0: break;  // CPU only
      case 1: t.requests.gpu = 1; t.requests.gpu_milli = 1 + rng() % 1000; break;
      case 2: t.requests.gpu = 1 + rng() % 10; break;
      case 3: t.requests.gpu = 1 + rng() % 3; t.requests.gpu_milli = 50 + rng() % 900; break;
      case 4: t.requests.gpu = 1 + rng() % 2; t.requests.gpu_memory_mib = 8000 * (rng() % 8); break;
    }
    t.requests.gpu_models = model_sets[rng() % model_sets.size()];
    if (rng() % 7 == 0) c.SetCondition(rng() % c.node_count(), NodeCondition::kDraining);
    if (rng() % 7 == 0) c.SetCondition(rng() % c.node_count(), NodeCondition::kReady);

    std::vector<NodeId> all(c.node_count());
    std::iota(all.begin(), all.end(), 0);
    // Sometimes a subset, as after another filter.
    std::vector<NodeId> input;
    for (NodeId n : all) {
      if (step % 3 != 0 || rng() % 4) input.push_back(n);
    }
    std::vector<NodeId> want;
    const auto allowed = c.MaskOf(t.requests.gpu_models);
    for (NodeId n : input) {
      if (c.schedulable(n) && NodeFree::Of(c, n).Check(t.requests, allowed) == FitFailure::kNone) {
        want.push_back(n);
      }
    }
    std::vector<NodeId> got = input;
    framework::Rejections rej;
    rej.Reset(c.node_count(), reasons.size(), /*recording=*/step % 2 == 0);
    fit.Filter(t, c, got, rej);
    ASSERT_EQ(got, want) << "step " << step;
    if (rej.recording()) {
      ASSERT_EQ(rej.rejected().size(), input.size() - want.size());
    }

    // Place it (lowest eligible GPUs) to move the state on; sometimes release one.
    if (!want.empty()) {
      const NodeId n = want[rng() % want.size()];
      Allocation a = AllocFor(t, n);
      const GpuFreeView free{c.gpu_free_milli(n), c.gpu_free_memory(n), c.gpu_model_bits(n)};
      for (size_t slot = 0; slot < free.milli.size() && a.gpus.size() < size_t(t.requests.gpu); ++slot) {
        if (GpuSlotFits(free, slot, t.requests, allowed)) {
          a.gpus.push_back({c.spec(n).gpus[slot].index, t.requests.gpu_milli, t.requests.gpu_memory_mib});
        }
      }
      ASSERT_TRUE(c.Bind(t, a).ok());
    }
    if (rng() % 3 == 0 && c.placed_count() > 0) {
      for (NodeId n = rng() % c.node_count();; n = (n + 1) % c.node_count()) {
        if (!c.TasksOn(n).empty()) {
          ASSERT_TRUE(c.Release(c.TasksOn(n).front()).ok());
          break;
        }
      }
    }
  }
}

}  // namespace
}  // namespace hf::plugins
