#include "core/cluster_state.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>

#include "core/fit.h"

namespace hf {
namespace {

NodeSpec GpuNode(const std::string& name, int gpus, const std::string& model = "A100",
                 int64_t gpu_mem = 81920) {
  NodeSpec s;
  s.name = name;
  s.cpu_milli = 32000;
  s.memory_mib = 131072;
  for (int i = 0; i < gpus; ++i) s.gpus.push_back({i, "", model, "nvidia", gpu_mem, 0, i / 4, i / 4});
  return s;
}

Task MakeTask(TaskKey key, int gpu, int milli, int64_t gpu_mem = 0) {
  Task t;
  t.key = key;
  t.name = "t" + std::to_string(key);
  t.requests.cpu_milli = 1000;
  t.requests.memory_mib = 1024;
  t.requests.gpu = gpu;
  t.requests.gpu_milli = milli;
  t.requests.gpu_memory_mib = gpu_mem;
  return t;
}

Allocation Alloc(NodeId n, std::vector<GpuGrant> gpus) {
  Allocation a;
  a.node = n;
  a.cpu_milli = 1000;
  a.memory_mib = 1024;
  a.gpus = std::move(gpus);
  return a;
}

TEST(ClusterStateTest, AddNodeRejectsDuplicatesAndBadSpecs) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(GpuNode("a", 2)).ok());
  EXPECT_EQ(c.AddNode(GpuNode("a", 2)).status().code(), StatusCode::kAlreadyExists);
  NodeSpec bad = GpuNode("b", 2);
  bad.gpus[1].index = 0;
  EXPECT_EQ(c.AddNode(bad).status().code(), StatusCode::kInvalidArgument);
  bad = GpuNode("c", 0);
  bad.cpu_milli = -1;
  EXPECT_EQ(c.AddNode(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.node_count(), 1u);
}

TEST(ClusterStateTest, SharedGpuCannotBeOverAllocated) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 1));
  ASSERT_TRUE(c.Bind(MakeTask(1, 1, 600), Alloc(n, {{0, 600, 0}})).ok());
  EXPECT_EQ(c.max_free_milli(n), 400);
  EXPECT_EQ(c.free_whole_gpus(n), 0);
  // 600 + 500 > 1000: refused, and nothing changes.
  Status st = c.Bind(MakeTask(2, 1, 500), Alloc(n, {{0, 500, 0}}));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(c.gpu_free_milli(n)[0], 400);
  EXPECT_EQ(c.free_cpu(n), 31000);
  ASSERT_TRUE(c.Bind(MakeTask(3, 1, 400), Alloc(n, {{0, 400, 0}})).ok());
  EXPECT_EQ(c.gpu_free_milli(n)[0], 0);
  EXPECT_EQ(c.used_gpu_milli(n), 1000);
}

TEST(ClusterStateTest, BindValidatesEveryGrantBeforeChangingAnything) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 2, "A100", 1000));
  struct Row {
    const char* name;
    std::vector<GpuGrant> gpus;
    std::string rdma;
    StatusCode want;
  } rows[] = {
      {"unknown GPU index", {{7, 1000, 0}}, "", StatusCode::kNotFound},
      {"same GPU twice", {{0, 500, 0}, {0, 500, 0}}, "", StatusCode::kInvalidArgument},
      {"zero share", {{0, 0, 0}}, "", StatusCode::kInvalidArgument},
      {"share above 1000", {{0, 1001, 0}}, "", StatusCode::kInvalidArgument},
      {"GPU memory above capacity", {{1, 100, 1001}}, "", StatusCode::kResourceExhausted},
      {"second grant bad", {{0, 1000, 0}, {1, 1000, 2000}}, "", StatusCode::kResourceExhausted},
      {"unknown RDMA device", {{0, 1000, 0}}, "mlx5_9", StatusCode::kNotFound},
  };
  for (const Row& r : rows) {
    Allocation a = Alloc(n, r.gpus);
    a.rdma_device = r.rdma;
    EXPECT_EQ(c.Bind(MakeTask(1, int(r.gpus.size()), 1000), a).code(), r.want) << r.name;
    EXPECT_EQ(c.free_whole_gpus(n), 2) << r.name;
    EXPECT_EQ(c.free_cpu(n), 32000) << r.name;
    EXPECT_EQ(c.placed_count(), 0u) << r.name;
  }
}

TEST(ClusterStateTest, RestoreUndoesARelease) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 2));
  Task t = MakeTask(1, 1, 400);
  t.group = "job";
  t.priority = 7;
  ASSERT_TRUE(c.Bind(t, Alloc(n, {{1, 400, 0}}), TaskState::kRunning, 1234).ok());
  const PlacedTask before = *c.FindPlaced(1);
  ASSERT_TRUE(c.Release(1).ok());
  ASSERT_TRUE(c.Restore(before).ok());
  const PlacedTask* after = c.FindPlaced(1);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->alloc.gpus, before.alloc.gpus);
  EXPECT_EQ(after->state, TaskState::kRunning);
  EXPECT_EQ(after->started_at_ms, 1234);
  EXPECT_EQ(after->priority, 7);
  EXPECT_EQ(c.gpu_free_milli(n)[1], 600);
  EXPECT_EQ(c.GroupNodes("job").size(), 1u);
  // Restoring over a taken share is refused like any bind.
  ASSERT_TRUE(c.Release(1).ok());
  ASSERT_TRUE(c.Bind(MakeTask(2, 1, 700), Alloc(n, {{1, 700, 0}})).ok());
  EXPECT_EQ(c.Restore(before).code(), StatusCode::kResourceExhausted);
}

TEST(ClusterStateTest, ModelRestrictionIsEnforcedAtBind) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 1, "T4"));
  Task t = MakeTask(1, 1, 1000);
  t.requests.gpu_models = {"H100"};
  EXPECT_EQ(c.Bind(t, Alloc(n, {{0, 1000, 0}})).code(), StatusCode::kInvalidArgument);
}

TEST(ClusterStateTest, ModelBitsAreVendorAndModelPairs) {
  ClusterState c;
  NodeSpec nv = GpuNode("nv", 2, "X1");
  NodeSpec amd = GpuNode("amd", 2, "X1");  // the same model name, another vendor
  for (GpuDevice& g : amd.gpus) g.vendor = "amd";
  NodeSpec npu = GpuNode("npu", 2, "Ascend910B");
  for (GpuDevice& g : npu.gpus) g.vendor = "huawei";
  for (const NodeSpec& s : {nv, amd, npu}) ASSERT_TRUE(c.AddNode(s).ok());
  ASSERT_EQ(c.model_count(), 3u);
  EXPECT_EQ(c.model_label(0), "nvidia X1");
  EXPECT_EQ(c.model_label(1), "amd X1");
  EXPECT_EQ(c.MaskOf({"X1"}), 0b011u);  // a model name matches every vendor's
  EXPECT_EQ(c.VendorMask({"amd"}), 0b010u);
  EXPECT_EQ(c.VendorMask({"amd", "huawei"}), 0b110u);
  EXPECT_EQ(c.VendorMask({"habana"}), 0u);
  Requests r;
  r.gpu = 1;
  r.gpu_models = {"X1"};
  r.gpu_vendors = {"amd"};
  EXPECT_EQ(c.AllowedModels(r), 0b010u);
  // Exclusive vendors: only shares lose them, and a model interned later
  // follows the policy set before.
  c.SetExclusiveVendors({"huawei", "habana"});
  Requests share;
  share.gpu = 1;
  share.gpu_milli = 500;
  EXPECT_EQ(c.AllowedModels(share) & 0b111u, 0b011u);
  EXPECT_EQ(c.AcceptedModels(share) & 0b111u, 0b111u);
  NodeSpec hpu = GpuNode("hpu", 2, "HL-225");
  for (GpuDevice& g : hpu.gpus) g.vendor = "habana";
  ASSERT_TRUE(c.AddNode(hpu).ok());
  EXPECT_EQ(c.AllowedModels(share) & 0b1111u, 0b0011u);
  // Bind checks the task's own constraints, not the sharing policy: a share
  // placed before the policy changed is taken back as it was.
  Task t = MakeTask(1, 1, 500);
  t.requests.gpu_milli = 500;
  EXPECT_TRUE(c.Bind(t, Alloc(2, {{0, 500, 0}})).ok());
  Task wrong = MakeTask(2, 1, 1000);
  wrong.requests.gpu_vendors = {"nvidia"};
  EXPECT_EQ(c.Bind(wrong, Alloc(1, {{0, 1000, 0}})).code(), StatusCode::kInvalidArgument);
}

TEST(ClusterStateTest, ReleaseReturnsEverythingAndUpdatesIndexes) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 4));
  Task t = MakeTask(1, 2, 1000);
  t.group = "job";
  t.rdma_required = false;
  ASSERT_TRUE(c.Bind(t, Alloc(n, {{0, 1000, 0}, {1, 1000, 0}})).ok());
  ASSERT_EQ(c.GroupNodes("job").size(), 1u);
  EXPECT_EQ(c.GroupNodes("job")[0].count, 1);
  EXPECT_EQ(c.NameNodes("t1").size(), 1u);
  EXPECT_EQ(c.free_whole_gpus(n), 2);
  EXPECT_EQ(c.Bind(t, Alloc(n, {{2, 1000, 0}})).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(c.Release(1).ok());
  EXPECT_EQ(c.free_whole_gpus(n), 4);
  EXPECT_EQ(c.free_cpu(n), 32000);
  EXPECT_TRUE(c.GroupNodes("job").empty());
  EXPECT_TRUE(c.TasksOn(n).empty());
  EXPECT_EQ(c.Release(1).code(), StatusCode::kNotFound);
}

TEST(ClusterStateTest, GpuMemoryUsedOutsideIsNotHandedOut) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 2));
  auto report = [&](int64_t gpu0_used, int64_t gpu1_used) {
    NodeUsage u;
    u.gpus = {{0, 0.1, gpu0_used}, {1, 0.1, gpu1_used}};
    ASSERT_TRUE(c.ReportUsage(n, u).ok());
  };
  // 30 GiB used on GPU 0 by a process HeteroFlow did not start.
  report(30720, 0);
  EXPECT_EQ(c.gpu_outside_memory(n)[0], 30720);
  EXPECT_EQ(c.gpu_free_memory(n)[0], 81920 - 30720);
  // A 60 GiB replica no longer fits there; a 20 GiB one does.
  EXPECT_EQ(c.Bind(MakeTask(1, 1, 1, 61440), Alloc(n, {{0, 1, 61440}})).code(),
            StatusCode::kResourceExhausted);
  ASSERT_TRUE(c.Bind(MakeTask(2, 1, 1, 20480), Alloc(n, {{0, 1, 20480}})).ok());
  EXPECT_EQ(c.gpu_free_memory(n)[0], 81920 - 30720 - 20480);
  // The replica's own use is not counted outside.
  report(30720 + 20480, 0);
  EXPECT_EQ(c.gpu_outside_memory(n)[0], 30720);
  EXPECT_EQ(c.gpu_free_memory(n)[0], 81920 - 30720 - 20480);
  // The outside process exits: its memory is free again.
  report(20480, 0);
  EXPECT_EQ(c.gpu_outside_memory(n)[0], 0);
  EXPECT_EQ(c.gpu_free_memory(n)[0], 81920 - 20480);
  // A report above the GPU's size cannot make free memory negative.
  report(200000, 0);
  EXPECT_EQ(c.gpu_free_memory(n)[0], 0);
  EXPECT_EQ(c.gpu_outside_memory(n)[0], 81920 - 20480);
  report(20480, 0);
  // A GPU whose whole share is taken keeps its last outside figure: what its
  // task uses is its own.
  report(20480, 10240);
  ASSERT_TRUE(c.Bind(MakeTask(3, 1, 1000), Alloc(n, {{1, 1000, 0}})).ok());
  report(20480, 70000);
  EXPECT_EQ(c.gpu_outside_memory(n)[1], 10240);
  ASSERT_TRUE(c.Release(3).ok());
  EXPECT_EQ(c.gpu_free_memory(n)[1], 81920 - 10240);
  report(20480, 0);
  EXPECT_EQ(c.gpu_free_memory(n)[1], 81920);
}

TEST(ClusterStateTest, InflightEstimateLastsUntilAMeasurementHoldsTheTask) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 2));
  ASSERT_TRUE(c.Bind(MakeTask(1, 1, 1000), Alloc(n, {{0, 1000, 0}})).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 1000);
  EXPECT_EQ(c.inflight_cpu(n), 1000);
  NodeUsage u;
  u.cpu_load = 0.5;
  u.gpus = {{0, 0.9, 0}, {1, 0.1, 0}};
  // Measured before the task started: it is still in flight.
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 1000);
  EXPECT_DOUBLE_EQ(c.measured_gpu_utilization(n), 0.5);
  EXPECT_DOUBLE_EQ(c.Estimate(n).gpu, 1.0);
  EXPECT_TRUE(c.measured(n));
  // Started; a report that says which tasks ran names someone else: kept.
  ASSERT_TRUE(c.MarkRunning(1, 5).ok());
  u.running_tasks = std::vector<uint64_t>{7};
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 1000);
  // A report that holds it: gone.
  u.running_tasks = std::vector<uint64_t>{1};
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 0);
  EXPECT_EQ(c.inflight_cpu(n), 0);
  EXPECT_FALSE(c.FindPlaced(1)->inflight);
  // Without the list, a task marked running before the report leaves it;
  // one not started stays.
  ASSERT_TRUE(c.Bind(MakeTask(2, 1, 1000), Alloc(n, {{1, 1000, 0}})).ok());
  ASSERT_TRUE(c.MarkRunning(2, 6).ok());
  ASSERT_TRUE(c.Release(1).ok());
  ASSERT_TRUE(c.Bind(MakeTask(3, 1, 1000), Alloc(n, {{0, 1000, 0}})).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 2000);
  u.running_tasks.reset();
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 1000);
  EXPECT_TRUE(c.FindPlaced(3)->inflight);
  // A task released while in flight takes its part with it; one measured
  // does not touch the estimate.
  ASSERT_TRUE(c.Release(3).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 0);
  EXPECT_EQ(c.inflight_cpu(n), 0);
  ASSERT_TRUE(c.Release(2).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 0);
  // Restore keeps the in-flight part as it was.
  ASSERT_TRUE(c.Bind(MakeTask(4, 1, 1000), Alloc(n, {{0, 1000, 0}})).ok());
  PlacedTask copy = *c.FindPlaced(4);
  copy.inflight = false;
  ASSERT_TRUE(c.Release(4).ok());
  ASSERT_TRUE(c.Restore(copy).ok());
  EXPECT_EQ(c.inflight_gpu_milli(n), 0);
}

TEST(ClusterStateTest, GpuUtilisationCountsEveryGpuAtItsLastValue) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 4));
  NodeUsage u;
  u.gpus = {{0, 0.96, 100}};
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  // GPUs 1-3 never reported count as idle: 0.96 / 4.
  EXPECT_DOUBLE_EQ(c.measured_gpu_utilization(n), 0.24);
  u.gpus = {{2, 0.5, 200}, {1, 0.2, 0}};
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  // GPU 0 keeps 0.96: (0.96 + 0.2 + 0.5) / 4.
  EXPECT_DOUBLE_EQ(c.measured_gpu_utilization(n), 0.415);
  ASSERT_EQ(c.usage(n).gpus.size(), 3u);
  EXPECT_EQ(c.usage(n).gpus[0].index, 0);
  EXPECT_EQ(c.usage(n).gpus[1].index, 1);
  EXPECT_EQ(c.usage(n).gpus[2].memory_used_mib, 200);
  // A GPU the node does not have, or one reported twice: refused whole.
  NodeUsage bad;
  bad.cpu_load = 0.7;
  bad.gpus = {{0, 0.0, 0}, {9, 0.5, 0}};
  Status st = c.ReportUsage(n, bad);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("usage.gpus[1].index"), std::string::npos) << st.message();
  bad.gpus = {{3, 0.0, 0}, {3, 0.5, 0}};
  EXPECT_EQ(c.ReportUsage(n, bad).code(), StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(c.measured_gpu_utilization(n), 0.415);
  EXPECT_DOUBLE_EQ(c.usage(n).cpu_load, 0);
  EXPECT_DOUBLE_EQ(c.usage(n).gpus[0].utilization, 0.96);
}

// What the load thresholds read of one node: everything but the in-flight
// flags of its tasks, its usage and its outside memory are compared by
// other tests.
void ExpectSameMeasurements(const ClusterState& a, NodeId na, const ClusterState& b, NodeId nb) {
  EXPECT_EQ(a.measured(na), b.measured(nb));
  EXPECT_DOUBLE_EQ(a.usage(na).cpu_load, b.usage(nb).cpu_load);
  EXPECT_DOUBLE_EQ(a.measured_gpu_utilization(na), b.measured_gpu_utilization(nb));
  EXPECT_EQ(a.inflight_gpu_milli(na), b.inflight_gpu_milli(nb));
  EXPECT_DOUBLE_EQ(a.Estimate(na).gpu, b.Estimate(nb).gpu);
  EXPECT_EQ(a.gpu_estimate().value(na), b.gpu_estimate().value(nb));
  ASSERT_EQ(a.gpu_count(na), b.gpu_count(nb));
  for (int32_t i = 0; i < a.gpu_count(na); ++i) {
    EXPECT_EQ(a.gpu_outside_memory(na)[i], b.gpu_outside_memory(nb)[i]) << i;
    EXPECT_EQ(a.gpu_free_memory(na)[i], b.gpu_free_memory(nb)[i]) << i;
    EXPECT_EQ(a.gpu_free_milli(na)[i], b.gpu_free_milli(nb)[i]) << i;
  }
}

ClusterState MeasuredPair(NodeId& a, NodeId& b) {
  ClusterState c;
  a = *c.AddNode(GpuNode("a", 2));
  b = *c.AddNode(GpuNode("b", 4, "T4", 16000));
  EXPECT_TRUE(c.Bind(MakeTask(1, 1, 1000), Alloc(a, {{0, 1000, 0}})).ok());
  EXPECT_TRUE(c.Bind(MakeTask(2, 1, 500, 4000), Alloc(b, {{1, 500, 4000}})).ok());
  EXPECT_TRUE(c.MarkRunning(2, 1).ok());
  NodeUsage u;
  u.cpu_load = 0.4;
  u.gpus = {{0, 0.97, 0}, {1, 0.97, 3000}};
  EXPECT_TRUE(c.ReportUsage(a, u).ok());
  u.gpus = {{1, 0.6, 9000}, {3, 0.2, 2000}};
  EXPECT_TRUE(c.ReportUsage(b, u).ok());
  return c;
}

TEST(ClusterStateTest, NodeOperationsKeepOtherNodesState) {
  NodeId a, b;
  ClusterState c = MeasuredPair(a, b);
  const ClusterState before = c;
  // Adding a node.
  const NodeId d = *c.AddNode(GpuNode("d", 1));
  ExpectSameMeasurements(c, a, before, a);
  ExpectSameMeasurements(c, b, before, b);
  // Replacing another one's spec (more GPUs).
  ASSERT_TRUE(c.UpdateNode(d, GpuNode("d", 3)).ok());
  EXPECT_EQ(c.gpu_count(d), 3);
  ExpectSameMeasurements(c, a, before, a);
  ExpectSameMeasurements(c, b, before, b);
  // Removing the first node: b moves down one id and keeps everything.
  ASSERT_TRUE(c.Release(1).ok());
  ASSERT_TRUE(c.RemoveNode(a).ok());
  EXPECT_EQ(c.node_count(), 2u);
  const NodeId b2 = c.FindNode("b");
  EXPECT_EQ(b2, NodeId{0});
  EXPECT_EQ(c.FindNode("a"), kNoNode);
  ExpectSameMeasurements(c, b2, before, b);
  EXPECT_EQ(c.FindPlaced(2)->alloc.node, b2);
  EXPECT_EQ(c.GroupNodes("").size(), 0u);
  EXPECT_EQ(c.NameNodes("t2")[0].node, b2);
  EXPECT_EQ(c.TasksOn(b2), std::vector<TaskKey>{2});
  EXPECT_TRUE(c.ready_nodes().Test(b2));
  EXPECT_TRUE(c.ready_nodes().Test(c.FindNode("d")));
  EXPECT_FALSE(c.ready_nodes().Test(2));
  // The free-GPU indexes follow the renumbering: b has 3.5 free GPUs, d 3.
  EXPECT_TRUE(c.whole_gpu_nodes(3).Test(b2));
  EXPECT_FALSE(c.whole_gpu_nodes(4).Test(b2));
  EXPECT_TRUE(c.whole_gpu_nodes(3).Test(c.FindNode("d")));
  // A node with tasks is not removed.
  EXPECT_EQ(c.RemoveNode(b2).code(), StatusCode::kFailedPrecondition);
}

TEST(ClusterStateTest, UpdateNodeKeepsItsTasksAndMeasurements) {
  NodeId a, b;
  ClusterState c = MeasuredPair(a, b);
  const ClusterState before = c;
  const uint64_t version = c.nodes_version();
  NodeSpec relabelled = GpuNode("b", 4, "T4", 16000);
  relabelled.labels["pool"] = "inference";
  ASSERT_TRUE(c.UpdateNode(b, relabelled).ok());
  EXPECT_NE(c.nodes_version(), version);
  EXPECT_EQ(c.spec(b).labels.at("pool"), "inference");
  ExpectSameMeasurements(c, b, before, b);
  ExpectSameMeasurements(c, a, before, a);
  EXPECT_EQ(c.FindPlaced(2)->state, TaskState::kRunning);
  EXPECT_EQ(c.FindPlaced(2)->started_at_ms, 1);
  // Two GPUs fewer: GPU 3's measurement goes with it, GPU 1's stays.
  ASSERT_TRUE(c.UpdateNode(b, GpuNode("b", 2, "T4", 16000)).ok());
  EXPECT_EQ(c.gpu_count(b), 2);
  ASSERT_EQ(c.usage(b).gpus.size(), 1u);
  EXPECT_EQ(c.usage(b).gpus[0].index, 1);
  EXPECT_DOUBLE_EQ(c.measured_gpu_utilization(b), 0.3);
  EXPECT_EQ(c.gpu_outside_memory(b)[1], 5000);  // 9000 used - 4000 granted
  EXPECT_EQ(c.gpu_free_memory(b)[1], 16000 - 4000 - 5000);
  EXPECT_EQ(c.free_cpu(b), 32000 - 1000);
  // Checked before anything changes: GPU 1 holds a grant.
  const ClusterState kept = c;
  Status st = c.UpdateNode(b, GpuNode("b", 1, "T4", 16000));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("GPU 1"), std::string::npos) << st.message();
  NodeSpec small = GpuNode("b", 2, "T4", 16000);
  small.cpu_milli = 500;
  EXPECT_EQ(c.UpdateNode(b, small).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.UpdateNode(b, GpuNode("other", 2)).code(), StatusCode::kInvalidArgument);
  ExpectSameMeasurements(c, b, kept, b);
  EXPECT_EQ(c.gpu_count(b), 2);
}

TEST(ClusterStateTest, AdoptMeasurementsCarriesWhatOnlyReportsTell) {
  NodeId a, b;
  const ClusterState old = MeasuredPair(a, b);
  // A rebuild from the store: the same nodes and placements, nothing measured.
  ClusterState fresh;
  ASSERT_EQ(*fresh.AddNode(GpuNode("b", 4, "T4", 16000)), 0u);
  ASSERT_EQ(*fresh.AddNode(GpuNode("a", 2)), 1u);
  ASSERT_TRUE(fresh.Bind(MakeTask(1, 1, 1000), Alloc(1, {{0, 1000, 0}})).ok());
  ASSERT_TRUE(fresh.Bind(MakeTask(2, 1, 500, 4000), Alloc(0, {{1, 500, 4000}}), TaskState::kRunning, 1).ok());
  EXPECT_FALSE(fresh.measured(0));
  fresh.AdoptMeasurements(old);
  ExpectSameMeasurements(fresh, 1, old, a);
  ExpectSameMeasurements(fresh, 0, old, b);
  EXPECT_TRUE(fresh.FindPlaced(1)->inflight);
  EXPECT_FALSE(fresh.FindPlaced(2)->inflight);
}

TEST(FitTest, GpuFitReasonsTable) {
  // One 4-GPU T4 node; GPU 0 half used, GPU 1 fully used.
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 4, "T4", 16000));
  ASSERT_TRUE(c.Bind(MakeTask(1, 1, 500, 8000), Alloc(n, {{0, 500, 8000}})).ok());
  ASSERT_TRUE(c.Bind(MakeTask(2, 1, 1000), Alloc(n, {{1, 1000, 0}})).ok());
  struct Row {
    const char* name;
    int gpu, milli;
    int64_t mem;
    std::vector<std::string> models;
    FitFailure want;
  } rows[] = {
      {"two whole GPUs fit (2 and 3 free)", 2, 1000, 0, {}, FitFailure::kNone},
      {"three whole GPUs do not", 3, 1000, 0, {}, FitFailure::kInsufficientGpu},
      {"five GPUs exceed the node", 5, 1000, 0, {}, FitFailure::kInsufficientGpu},
      {"shares of 500 on 3 GPUs (0,2,3)", 3, 500, 0, {}, FitFailure::kNone},
      {"shares of 600 on 3 GPUs: GPU 0 too full", 3, 600, 0, {}, FitFailure::kInsufficientGpu},
      {"model allowed", 1, 1000, 0, {"H100", "T4"}, FitFailure::kNone},
      {"model not allowed", 1, 1000, 0, {"H100"}, FitFailure::kGpuModelMismatch},
      {"memory 9000 on 3 GPUs: GPU 0 has 8000", 3, 400, 9000, {}, FitFailure::kInsufficientGpuMemory},
      {"memory 8000 on 3 GPUs", 3, 400, 8000, {}, FitFailure::kNone},
  };
  for (const Row& r : rows) {
    Requests req;
    req.gpu = r.gpu;
    req.gpu_milli = r.milli;
    req.gpu_memory_mib = r.mem;
    req.gpu_models = r.models;
    EXPECT_EQ(NodeFree::Of(c, n).Check(req, c.MaskOf(req.gpu_models)), r.want) << r.name;
  }
}

TEST(FitTest, NodeFreeReturnUndoesAllocation) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 1));
  ASSERT_TRUE(c.Bind(MakeTask(1, 1, 700), Alloc(n, {{0, 700, 0}})).ok());
  Requests req;
  req.gpu = 1;
  req.gpu_milli = 800;
  NodeFree f = NodeFree::Of(c, n);
  EXPECT_EQ(f.Check(req, ClusterState::kAnyModel), FitFailure::kInsufficientGpu);
  f.Return(c, c.FindPlaced(1)->alloc);
  EXPECT_EQ(f.Check(req, ClusterState::kAnyModel), FitFailure::kNone);
  // The live state is untouched by what-if evaluation.
  EXPECT_EQ(c.gpu_free_milli(n)[0], 300);
}

TEST(FitTest, UtilizationLeavesOutMissingResources) {
  ClusterState c;
  NodeSpec cpu_only;
  cpu_only.name = "cpu";
  cpu_only.cpu_milli = 10000;
  cpu_only.memory_mib = 1000;
  NodeId n = *c.AddNode(cpu_only);
  Requests req;
  req.cpu_milli = 2500;  // 0.25
  req.memory_mib = 500;  // 0.5
  // GPU is left out: (0.25 + 0.5) / 2.
  EXPECT_DOUBLE_EQ(UtilizationWithTask(c, n, req), 0.375);
  req.cpu_milli = 20000;  // clamped at 1.0
  EXPECT_DOUBLE_EQ(UtilizationWithTask(c, n, req), 0.75);
}

}  // namespace
}  // namespace hf

namespace hf {
namespace {

TEST(ClusterStateTest, PreemptionSummariesFollowBindReleaseAndStart) {
  ClusterState c;
  NodeId n = *c.AddNode(GpuNode("a", 4));
  EXPECT_EQ(c.lowest_preemptible_priority(n), INT32_MAX);
  Task low = MakeTask(1, 1, 1000), mid = MakeTask(2, 1, 1000), pinned = MakeTask(3, 1, 1000);
  low.priority = 1;
  mid.priority = 5;
  pinned.priority = -3;
  pinned.preemptible = false;
  ASSERT_TRUE(c.Bind(mid, Alloc(n, {{0, 1000, 0}})).ok());
  ASSERT_TRUE(c.Bind(low, Alloc(n, {{1, 1000, 0}})).ok());
  ASSERT_TRUE(c.Bind(pinned, Alloc(n, {{2, 1000, 0}})).ok());
  EXPECT_EQ(c.lowest_preemptible_priority(n), 1);  // the non-preemptible -3 does not count
  EXPECT_EQ(c.scheduled_preemptible(n), 2);
  // Bands by priority: low (1), then mid (5); pinned is not in any.
  ASSERT_EQ(c.preemptible_bands(n).size(), 2u);
  EXPECT_EQ(c.preemptible_bands(n)[0].priority, 1);
  EXPECT_EQ(c.preemptible_bands(n)[0].held.gpu_milli, 1000);
  EXPECT_EQ(c.preemptible_bands(n)[1].priority, 5);
  EXPECT_EQ(c.preemptible_bands(n)[1].held.cpu_milli, 1000);
  EXPECT_EQ(c.lowest_preemptible_priority(), 1);  // over the cluster
  EXPECT_EQ(c.scheduled_preemptible(), 2);
  ASSERT_TRUE(c.MarkRunning(1, 100).ok());
  EXPECT_EQ(c.scheduled_preemptible(n), 1);
  EXPECT_EQ(c.scheduled_preemptible(), 1);
  ASSERT_TRUE(c.Release(1).ok());
  EXPECT_EQ(c.lowest_preemptible_priority(n), 5);
  EXPECT_EQ(c.lowest_preemptible_priority(), 5);
  EXPECT_EQ(c.scheduled_preemptible(n), 1);
  ASSERT_EQ(c.preemptible_bands(n).size(), 1u);
  EXPECT_EQ(c.preemptible_bands(n)[0].held.gpu_milli, 1000);
  // A second task in mid's band, larger: the band's largest follows it in
  // and back out.
  Task big = MakeTask(4, 2, 1000);
  big.priority = 5;
  ASSERT_TRUE(c.Bind(big, Alloc(n, {{1, 1000, 0}, {3, 1000, 0}})).ok());
  EXPECT_EQ(c.preemptible_bands(n)[0].largest.gpus, 2);
  EXPECT_EQ(c.preemptible_bands(n)[0].largest.gpu_milli, 2000);
  ASSERT_TRUE(c.Release(4).ok());
  EXPECT_EQ(c.preemptible_bands(n)[0].largest.gpus, 1);
  EXPECT_EQ(c.preemptible_bands(n)[0].largest.gpu_milli, 1000);
  ASSERT_TRUE(c.Release(2).ok());
  EXPECT_TRUE(c.preemptible_bands(n).empty());
  EXPECT_EQ(c.lowest_preemptible_priority(n), INT32_MAX);
  EXPECT_EQ(c.lowest_preemptible_priority(), INT32_MAX);
  EXPECT_EQ(c.scheduled_preemptible(n), 0);
  EXPECT_EQ(c.scheduled_preemptible(), 0);
}

TEST(NodeIndexTest, MaxTreeFindsExactlyTheNodesAbove) {
  MaxTree t;
  std::vector<double> values;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> d(0, 1);
  for (uint32_t n = 0; n < 300; ++n) {  // grows through several doublings
    t.Resize(n + 1);
    values.push_back(n % 7 == 0 ? MaxTree::kNone : d(rng));
    t.Set(n, values.back());
  }
  for (int round = 0; round < 200; ++round) {
    const uint32_t n = rng() % values.size();
    values[n] = d(rng);
    t.Set(n, values[n]);
    const double bound = d(rng);
    std::vector<uint32_t> got, want;
    t.CollectAbove(bound, got);
    for (uint32_t i = 0; i < values.size(); ++i) {
      if (values[i] > bound) want.push_back(i);
    }
    ASSERT_EQ(got, want) << "round " << round;
    // Within a range of nodes: exactly those of `want` in it.
    const uint32_t first = rng() % values.size(), last = first + rng() % (values.size() - first);
    std::vector<uint32_t> in_range, want_in_range;
    t.CollectAbove(bound, first, last, in_range);
    for (uint32_t i : want) {
      if (i >= first && i <= last) want_in_range.push_back(i);
    }
    ASSERT_EQ(in_range, want_in_range) << "round " << round << " [" << first << ", " << last << "]";
  }
}

TEST(NodeIndexTest, BitmapsAgreeWithNodeStateUnderRandomChurn) {
  // Random binds and releases of whole and shared GPUs on mixed shapes; after
  // each step every index must equal a recomputation from the per-GPU state.
  ClusterState c;
  for (int i = 0; i < 40; ++i) {
    NodeSpec s = GpuNode("n" + std::to_string(i), i % 4 == 0 ? 0 : (i % 3 == 0 ? 2 : 8),
                         i % 5 == 0 ? "T4" : "A100");
    if (i == 7) s.gpus[1].model = "H100";  // one mixed-model node
    ASSERT_TRUE(c.AddNode(s).ok());
  }
  std::mt19937 rng(11);
  std::vector<TaskKey> placed;
  TaskKey next = 1;
  for (int step = 0; step < 3000; ++step) {
    if (!placed.empty() && rng() % 3 == 0) {
      const size_t i = rng() % placed.size();
      ASSERT_TRUE(c.Release(placed[i]).ok());
      placed.erase(placed.begin() + i);
    } else {
      const NodeId n = rng() % c.node_count();
      const auto free = c.gpu_free_milli(n);
      if (free.empty()) continue;
      const size_t slot = rng() % free.size();
      const int milli = rng() % 2 ? 1000 : 1 + int(rng() % 999);
      if (free[slot] < milli) continue;
      Task t = MakeTask(next, 1, milli);
      ASSERT_TRUE(c.Bind(t, Alloc(n, {{c.spec(n).gpus[slot].index, milli, 0}})).ok());
      placed.push_back(next++);
    }
    c.SetCondition(rng() % c.node_count(), rng() % 5 ? NodeCondition::kReady : NodeCondition::kDraining);
    for (NodeId n = 0; n < c.node_count(); ++n) {
      int whole = 0, max_free = 0;
      for (int32_t f : c.gpu_free_milli(n)) {
        whole += f == 1000;
        max_free = std::max(max_free, f);
      }
      for (int k = 1; k <= ClusterState::kIndexedWholeGpus; ++k) {
        ASSERT_EQ(c.whole_gpu_nodes(k).Test(n), whole >= k) << "node " << n << " k " << k;
      }
      for (int b = 1; b <= 10; ++b) ASSERT_EQ(c.share_nodes(b).Test(n), max_free >= b * 100);
      ASSERT_EQ(c.ready_nodes().Test(n), c.condition(n) == NodeCondition::kReady);
    }
  }
  EXPECT_TRUE(c.mixed_model_nodes().Test(7));
  EXPECT_FALSE(c.mixed_model_nodes().Test(8));
}

TEST(ClusterStateTest, ModelFreeMilliFollowsEveryChange) {
  // Random binds and releases of whole and shared GPUs, node additions,
  // updates (a model swapped on an empty node, a GPU added to a busy one)
  // and removals; after each step every model's free milli must equal the
  // sum over its GPUs.
  ClusterState c;
  std::mt19937 rng(5);
  int named = 0;
  const auto add = [&] {
    NodeSpec s =
        GpuNode("n" + std::to_string(named++), 1 + int(rng() % 8), rng() % 3 ? "A100" : "T4");
    if (rng() % 7 == 0) s.gpus[0].model = "H100";
    ASSERT_TRUE(c.AddNode(s).ok());
  };
  for (int i = 0; i < 12; ++i) add();
  std::vector<TaskKey> placed;
  TaskKey next = 1;
  for (int step = 0; step < 2000; ++step) {
    const int op = int(rng() % 20);
    const NodeId n = NodeId(rng() % c.node_count());
    if (op == 0) {
      add();
    } else if (op == 1 && c.TasksOn(n).empty() && c.node_count() > 1) {
      ASSERT_TRUE(c.RemoveNode(n).ok());
    } else if (op == 2) {
      NodeSpec s = c.spec(n);
      if (c.TasksOn(n).empty()) {
        for (GpuDevice& g : s.gpus) g.model = g.model == "T4" ? "A100" : "T4";
      } else {
        GpuDevice g = s.gpus.back();
        g.index = s.gpus.back().index + 1;
        s.gpus.push_back(g);
      }
      ASSERT_TRUE(c.UpdateNode(n, s).ok());
    } else if (op < 9 && !placed.empty()) {
      const size_t i = rng() % placed.size();
      ASSERT_TRUE(c.Release(placed[i]).ok());
      placed.erase(placed.begin() + ptrdiff_t(i));
    } else {
      const auto free = c.gpu_free_milli(n);
      const size_t slot = rng() % free.size();
      const int milli = rng() % 2 ? 1000 : 1 + int(rng() % 999);
      if (free[slot] < milli) continue;
      ASSERT_TRUE(
          c.Bind(MakeTask(next, 1, milli), Alloc(n, {{c.spec(n).gpus[slot].index, milli, 0}}))
              .ok());
      placed.push_back(next++);
    }
    std::vector<int64_t> want(c.model_count(), 0);
    for (NodeId m = 0; m < c.node_count(); ++m) {
      const auto free = c.gpu_free_milli(m);
      const auto bits = c.gpu_model_bits(m);
      for (size_t g = 0; g < free.size(); ++g) want[size_t(std::countr_zero(bits[g]))] += free[g];
    }
    for (size_t b = 0; b < want.size(); ++b) {
      ASSERT_EQ(c.model_free_milli(b), want[b]) << "step " << step << " model " << c.model_name(b);
    }
  }
}

TEST(ClusterStateTest, BriefsFollowEveryTaskOnItsNode) {
  // Random binds (one or two grants, some running), starts and releases;
  // after each step every node's briefs say what its placed tasks say.
  ClusterState c;
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(c.AddNode(GpuNode("n" + std::to_string(i), 4, "A100")).ok());
  std::mt19937 rng(5);
  std::vector<TaskKey> placed;
  TaskKey next = 1;
  for (int step = 0; step < 2000; ++step) {
    const int op = int(rng() % 4);
    if (!placed.empty() && op == 0) {
      const size_t i = rng() % placed.size();
      ASSERT_TRUE(c.Release(placed[i]).ok());
      placed.erase(placed.begin() + i);
    } else if (!placed.empty() && op == 1) {
      ASSERT_TRUE(c.MarkRunning(placed[rng() % placed.size()], step).ok());
    } else {
      const NodeId n = rng() % c.node_count();
      const auto free = c.gpu_free_milli(n);
      const int milli = rng() % 2 ? 1000 : 100 * (1 + int(rng() % 5));
      std::vector<GpuGrant> grants;
      for (size_t g = rng() % free.size(); g < free.size() && grants.size() < 1 + rng() % 2; ++g) {
        if (free[g] >= milli) grants.push_back({c.spec(n).gpus[g].index, milli, int64_t{milli} * 8});
      }
      if (grants.empty()) continue;
      Task t = MakeTask(next, int(grants.size()), milli);
      t.priority = int32_t(rng() % 3);
      t.preemptible = rng() % 4 != 0;
      Allocation a = Alloc(n, grants);
      a.cpu_milli = 10 * int64_t(next % 50);
      a.memory_mib = 1;
      const Status st = c.Bind(t, a, rng() % 2 ? TaskState::kRunning : TaskState::kScheduled, step);
      ASSERT_TRUE(st.ok()) << st.ToString();
      placed.push_back(next++);
    }
    for (NodeId n = 0; n < c.node_count(); ++n) {
      const auto& keys = c.TasksOn(n);
      const auto& briefs = c.BriefsOn(n);
      ASSERT_EQ(briefs.size(), keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        const PlacedTask& p = *c.FindPlaced(keys[i]);
        const ClusterState::PlacedBrief& b = briefs[i];
        ASSERT_EQ(b.key, p.key);
        EXPECT_EQ(b.priority, p.priority);
        EXPECT_EQ(b.preemptible, p.preemptible);
        EXPECT_EQ(b.state, p.state);
        EXPECT_EQ(b.started_at_ms, p.started_at_ms);
        EXPECT_EQ(b.cpu_milli, p.alloc.cpu_milli);
        EXPECT_EQ(b.memory_mib, p.alloc.memory_mib);
        ASSERT_TRUE(b.gpus_in_mask);
        uint64_t mask = 0;
        for (const GpuGrant& g : p.alloc.gpus) {
          mask |= uint64_t{1} << g.index;  // GpuNode lists GPUs by index
          EXPECT_EQ(b.grant_milli, g.milli);
          EXPECT_EQ(b.grant_memory_mib, g.memory_mib);
        }
        EXPECT_EQ(b.gpu_mask, mask);
      }
    }
  }
}

}  // namespace
}  // namespace hf
