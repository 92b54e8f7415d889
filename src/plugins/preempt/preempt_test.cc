#include "plugins/preempt/preempt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/cluster_state.h"
#include "core/model.h"
#include "framework/framework.h"
#include "framework/plugin.h"
#include "framework/policy.h"
#include "framework/reasons.h"
#include "framework/registry.h"
#include "plugins/fit/fit.h"
#include "plugins/thresholds/thresholds.h"

namespace hf::plugins {
namespace {

// The clock of every case, in ms; running tasks' start times are given
// relative to it.
constexpr int64_t kNow = 10'000'000;
constexpr int64_t kNodeMemoryMib = 65536;
constexpr int64_t kTaskMemoryMib = 1024;

struct NodeRow {
  std::string name;
  int32_t gpus = 1;
  std::string model = "A100";
  int64_t cpu_milli = 16000;
  NodeCondition condition = NodeCondition::kReady;
  // Measured utilisation of every GPU, reported after the tasks are placed
  // (running ones listed as measured); negative: no report.
  double gpu_utilization = -1;
};

struct PlacedRow {
  TaskKey key = 0;
  std::string node;
  int32_t priority = 0;
  TaskState state = TaskState::kScheduled;
  int64_t started_at_ms = 0;
  std::vector<GpuGrant> gpus;
  int64_t cpu_milli = 1000;
  bool preemptible = true;
};

struct Preemptor {
  int32_t priority = 10;
  int32_t gpu = 1;
  int32_t gpu_milli = kWholeGpuMilli;
  int64_t cpu_milli = 1000;
  std::vector<std::string> gpu_models;
};

struct Case {
  std::string name;
  std::string mode;
  double min_runtime_seconds = 60;
  std::vector<NodeRow> nodes;
  std::vector<PlacedRow> placed;
  Preemptor task;
  std::string want_node;  // empty: no plan
  std::vector<TaskKey> want_victims;
  std::vector<GpuGrant> want_gpus;  // checked through the framework when not empty
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<GpuGrant> Whole(std::vector<int32_t> indices) {
  std::vector<GpuGrant> grants;
  for (int32_t i : indices) grants.push_back({i, kWholeGpuMilli, 0});
  return grants;
}

// A task that is scheduled but not yet started, holding whole GPUs.
PlacedRow Scheduled(TaskKey key, std::string node, int32_t priority, std::vector<int32_t> gpus) {
  return {key, std::move(node), priority, TaskState::kScheduled, 0, Whole(std::move(gpus))};
}

// A task that has been running for `age_ms`, holding whole GPUs.
PlacedRow Running(TaskKey key, std::string node, int32_t priority, int64_t age_ms,
                  std::vector<int32_t> gpus) {
  PlacedRow row = Scheduled(key, std::move(node), priority, std::move(gpus));
  row.state = TaskState::kRunning;
  row.started_at_ms = kNow - age_ms;
  return row;
}

// A scheduled task holding `milli` of GPU `index`.
PlacedRow Shared(TaskKey key, std::string node, int32_t priority, int32_t index, int32_t milli) {
  return {key, std::move(node), priority, TaskState::kScheduled, 0, {{index, milli, 0}}};
}

// A scheduled CPU-only task.
PlacedRow Cpu(TaskKey key, std::string node, int32_t priority, int64_t cpu_milli) {
  return {key, std::move(node), priority, TaskState::kScheduled, 0, {}, cpu_milli};
}

PlacedRow NotPreemptible(PlacedRow row) {
  row.preemptible = false;
  return row;
}

NodeRow Draining(NodeRow row) {
  row.condition = NodeCondition::kDraining;
  return row;
}

void BuildCluster(const Case& c, ClusterState& cluster) {
  for (const NodeRow& row : c.nodes) {
    NodeSpec spec;
    spec.name = row.name;
    spec.cpu_milli = row.cpu_milli;
    spec.memory_mib = kNodeMemoryMib;
    for (int32_t i = 0; i < row.gpus; ++i) {
      GpuDevice g;
      g.index = i;
      g.uuid = row.name + "-gpu" + std::to_string(i);
      g.model = row.model;
      g.memory_mib = 81920;
      spec.gpus.push_back(g);
    }
    ASSERT_TRUE(cluster.AddNode(spec).ok()) << row.name;
  }
  for (const PlacedRow& row : c.placed) {
    Task t;
    t.key = row.key;
    t.name = "t" + std::to_string(row.key);
    t.priority = row.priority;
    t.preemptible = row.preemptible;
    Allocation a;
    a.node = cluster.FindNode(row.node);
    a.cpu_milli = row.cpu_milli;
    a.memory_mib = kTaskMemoryMib;
    a.gpus = row.gpus;
    const Status st = cluster.Bind(t, a, row.state, row.started_at_ms);
    ASSERT_TRUE(st.ok()) << t.name << ": " << st.message();
  }
  for (const NodeRow& row : c.nodes) {
    const NodeId n = cluster.FindNode(row.name);
    cluster.SetCondition(n, row.condition);
    if (row.gpu_utilization < 0) continue;
    NodeUsage u;
    for (int32_t i = 0; i < row.gpus; ++i) u.gpus.push_back({i, row.gpu_utilization, 0});
    u.running_tasks.emplace();
    for (const PlacedRow& p : c.placed) {
      if (p.node == row.name && p.state == TaskState::kRunning) u.running_tasks->push_back(p.key);
    }
    ASSERT_TRUE(cluster.ReportUsage(n, u).ok());
  }
}

// The filters preemption consults, as the framework runs them.
struct Probe final : framework::FilterProbe {
  std::vector<framework::FilterPlugin*> filters;
  bool Passes(const Task& t, const ClusterState& c, const NodeWithout& w) const override {
    return std::all_of(filters.begin(), filters.end(),
                       [&](framework::FilterPlugin* f) { return f->PassesWithout(t, c, w); });
  }
};

Task MakePreemptor(const Preemptor& p) {
  Task t;
  t.key = 1000;
  t.name = "preemptor";
  t.priority = p.priority;
  t.requests.cpu_milli = p.cpu_milli;
  t.requests.memory_mib = kTaskMemoryMib;
  t.requests.gpu = p.gpu;
  t.requests.gpu_milli = p.gpu_milli;
  t.requests.gpu_models = p.gpu_models;
  return t;
}

std::vector<TaskKey> Sorted(std::vector<TaskKey> keys) {
  std::sort(keys.begin(), keys.end());
  return keys;
}

const Case kCases[] = {
    {.name = "scheduled_mode_evicts_scheduled_task",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 2}},
     .placed = {Running(1, "n0", 1, 3'600'000, {0}), Scheduled(2, "n0", 1, {1})},
     .want_node = "n0",
     .want_victims = {2}},
    {.name = "scheduled_mode_never_evicts_running",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 2}},
     .placed = {Running(1, "n0", 1, 3'600'000, {0}), Running(2, "n0", 1, 3'600'000, {1})}},
    {.name = "running_mode_prefers_scheduled_victims",
     .mode = "running",
     .nodes = {{.name = "n0"}, {.name = "n1"}},
     .placed = {Running(1, "n0", 1, 3'600'000, {0}), Scheduled(2, "n1", 5, {0})},
     .want_node = "n1",
     .want_victims = {2}},
    {.name = "running_mode_falls_back_to_running",
     .mode = "running",
     .nodes = {{.name = "n0"}, {.name = "n1"}},
     .placed = {Running(1, "n0", 1, 3'600'000, {0}), Scheduled(2, "n1", 10, {0})},
     .want_node = "n0",
     .want_victims = {1}},
    // Pass one frees only GPU 0. In pass two the later-started t3 is given
    // its reprieve first, so t2 (started earlier) and t1 (scheduled) go.
    {.name = "running_mode_keeps_latest_started",
     .mode = "running",
     .nodes = {{.name = "n0", .gpus = 3}},
     .placed = {Scheduled(1, "n0", 1, {0}), Running(2, "n0", 1, 300'000, {1}),
                Running(3, "n0", 1, 200'000, {2})},
     .task = {.gpu = 2},
     .want_node = "n0",
     .want_victims = {1, 2}},
    {.name = "minimal_set_evicts_lowest_of_three",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 3}},
     .placed = {Scheduled(1, "n0", 1, {0}), Scheduled(2, "n0", 2, {1}), Scheduled(3, "n0", 3, {2})},
     .want_node = "n0",
     .want_victims = {1}},
    // Equal priority, none started: the lower keys get their reprieve first.
    {.name = "minimal_set_equal_priority_evicts_highest_key",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 3}},
     .placed = {Scheduled(1, "n0", 1, {0}), Scheduled(2, "n0", 1, {1}), Scheduled(3, "n0", 1, {2})},
     .want_node = "n0",
     .want_victims = {3}},
    // All three removed free 4000; t3 (2000) fits back, then t2 and t1 do not.
    {.name = "minimal_set_cpu_only_node",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 0, .cpu_milli = 4000}},
     .placed = {Cpu(1, "n0", 1, 1000), Cpu(2, "n0", 2, 1000), Cpu(3, "n0", 3, 2000)},
     .task = {.gpu = 0, .cpu_milli = 2000},
     .want_node = "n0",
     .want_victims = {1, 2}},
    {.name = "equal_or_higher_priority_never_evicted",
     .mode = "running",
     .min_runtime_seconds = 0,
     .nodes = {{.name = "n0", .gpus = 2}},
     .placed = {Scheduled(1, "n0", 10, {0}), Running(2, "n0", 11, 3'600'000, {1})}},
    {.name = "non_preemptible_respected",
     .mode = "scheduled",
     .nodes = {{.name = "n0"}, {.name = "n1"}},
     .placed = {NotPreemptible(Scheduled(1, "n0", 1, {0})), Scheduled(2, "n1", 5, {0})},
     .want_node = "n1",
     .want_victims = {2}},
    {.name = "non_preemptible_only_no_plan",
     .mode = "running",
     .min_runtime_seconds = 0,
     .nodes = {{.name = "n0", .gpus = 2}},
     .placed = {NotPreemptible(Scheduled(1, "n0", 1, {0})),
                NotPreemptible(Running(2, "n0", 1, 3'600'000, {1}))}},
    {.name = "min_runtime_young_running_task_kept",
     .mode = "running",
     .nodes = {{.name = "n0"}, {.name = "n1"}},
     .placed = {Running(1, "n0", 1, 50'000, {0}), Running(2, "n1", 5, 70'000, {0})},
     .want_node = "n1",
     .want_victims = {2}},
    {.name = "min_runtime_exactly_reached_is_evictable",
     .mode = "running",
     .nodes = {{.name = "n0"}},
     .placed = {Running(1, "n0", 1, 60'000, {0})},
     .want_node = "n0",
     .want_victims = {1}},
    {.name = "min_runtime_all_too_young_no_plan",
     .mode = "running",
     .nodes = {{.name = "n0"}},
     .placed = {Running(1, "n0", 1, 59'999, {0})}},
    {.name = "min_runtime_zero_evicts_just_started",
     .mode = "running",
     .min_runtime_seconds = 0,
     .nodes = {{.name = "n0"}},
     .placed = {Running(1, "n0", 1, 0, {0})},
     .want_node = "n0",
     .want_victims = {1}},
    {.name = "min_runtime_fractional_seconds",
     .mode = "running",
     .min_runtime_seconds = 1.5,
     .nodes = {{.name = "n0"}, {.name = "n1"}},
     .placed = {Running(1, "n0", 1, 1'499, {0}), Running(2, "n1", 2, 1'500, {0})},
     .want_node = "n1",
     .want_victims = {2}},
    {.name = "node_choice_lowest_highest_victim_priority",
     .mode = "scheduled",
     .nodes = {{.name = "n0"}, {.name = "n1"}, {.name = "n2"}},
     .placed = {Scheduled(1, "n0", 5, {0}), Scheduled(2, "n1", 3, {0}), Scheduled(3, "n2", 4, {0})},
     .want_node = "n1",
     .want_victims = {2}},
    // Both nodes: highest victim 3; sums 6 and 4.
    {.name = "node_choice_then_lowest_sum",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 2}, {.name = "n1", .gpus = 2}},
     .placed = {Scheduled(1, "n0", 3, {0}), Scheduled(2, "n0", 3, {1}), Scheduled(3, "n1", 3, {0}),
                Scheduled(4, "n1", 1, {1})},
     .task = {.gpu = 2},
     .want_node = "n1",
     .want_victims = {3, 4}},
    // Both nodes: highest victim 4, sum 4; two victims on n0, one on n1.
    {.name = "node_choice_then_fewest_victims",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 2}, {.name = "n1", .gpus = 2}},
     .placed = {Scheduled(1, "n0", 4, {0}), Scheduled(2, "n0", 0, {1}),
                Scheduled(3, "n1", 4, {0, 1})},
     .task = {.gpu = 2},
     .want_node = "n1",
     .want_victims = {3}},
    {.name = "node_choice_then_lowest_node_id",
     .mode = "scheduled",
     .nodes = {{.name = "n0"}, {.name = "n1"}, {.name = "n2"}},
     .placed = {Scheduled(1, "n0", 2, {0}), Scheduled(2, "n1", 2, {0}), Scheduled(3, "n2", 2, {0})},
     .want_node = "n0",
     .want_victims = {1}},
    {.name = "node_choice_negative_priorities",
     .mode = "scheduled",
     .nodes = {{.name = "n0"}, {.name = "n1"}},
     .placed = {Scheduled(1, "n0", -3, {0}), Scheduled(2, "n1", -5, {0})},
     .task = {.priority = 0},
     .want_node = "n1",
     .want_victims = {2}},
    {.name = "disabled_mode_does_nothing",
     .mode = "disabled",
     .min_runtime_seconds = 0,
     .nodes = {{.name = "n0", .gpus = 2}},
     .placed = {Scheduled(1, "n0", 1, {0}), Running(2, "n0", 1, 3'600'000, {1})}},
    // n0 would be the cheaper node, but its GPUs are T4s.
    {.name = "gpu_model_mismatch_never_chosen",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .model = "T4"}, {.name = "n1"}},
     .placed = {Scheduled(1, "n0", 1, {0}), Scheduled(2, "n1", 5, {0})},
     .task = {.gpu_models = {"A100"}},
     .want_node = "n1",
     .want_victims = {2}},
    {.name = "gpu_model_mismatch_only_no_plan",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .model = "T4"}},
     .placed = {Scheduled(1, "n0", 1, {0})},
     .task = {.gpu_models = {"A100"}}},
    {.name = "draining_node_never_chosen",
     .mode = "scheduled",
     .nodes = {Draining({.name = "n0"}), {.name = "n1"}},
     .placed = {Scheduled(1, "n0", 1, {0}), Scheduled(2, "n1", 5, {0})},
     .want_node = "n1",
     .want_victims = {2}},
    {.name = "too_few_gpus_in_total_no_plan",
     .mode = "scheduled",
     .nodes = {{.name = "n0"}},
     .placed = {Scheduled(1, "n0", 1, {0})},
     .task = {.gpu = 2}},
    {.name = "shared_gpu_evicts_one_half",
     .mode = "scheduled",
     .nodes = {{.name = "n0"}},
     .placed = {Shared(1, "n0", 1, 0, 500), Shared(2, "n0", 5, 0, 500)},
     .task = {.gpu_milli = 500},
     .want_node = "n0",
     .want_victims = {1},
     .want_gpus = {{0, 500, 0}}},
    // Reprieve t4 (GPU 1 half used), not t3 (no whole GPU left), t2 (GPU 1
    // full, GPU 0 free), not t1: GPU 0 is freed, not the two lowest tasks.
    {.name = "shared_gpu_frees_one_whole_gpu",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 2}},
     .placed = {Shared(1, "n0", 1, 0, 500), Shared(2, "n0", 2, 1, 500), Shared(3, "n0", 3, 0, 500),
                Shared(4, "n0", 4, 1, 500)},
     .want_node = "n0",
     .want_victims = {1, 3},
     .want_gpus = {{0, kWholeGpuMilli, 0}}},
    // A node above gpu_load_threshold (0.95 > 0.9) whose load comes from
    // preemptible tasks: without one of them (a quarter of the node's GPUs,
    // so a quarter of its measured load) it is at 0.70, and it has a free
    // GPU. The one that has run longest goes.
    {.name = "busy_node_sheds_the_load_of_one_victim",
     .mode = "running",
     .min_runtime_seconds = 0,
     .nodes = {{.name = "n0", .gpus = 4, .gpu_utilization = 0.95}},
     .placed = {Running(1, "n0", 1, 400'000, {0}), Running(2, "n0", 1, 300'000, {1}),
                Running(3, "n0", 1, 200'000, {2})},
     .want_node = "n0",
     .want_victims = {1}},
    // The same node loaded by tasks that may not be preempted: no plan.
    {.name = "busy_node_of_non_preemptible_tasks",
     .mode = "running",
     .min_runtime_seconds = 0,
     .nodes = {{.name = "n0", .gpus = 4, .gpu_utilization = 0.95}},
     .placed = {NotPreemptible(Running(1, "n0", 1, 400'000, {0})),
                NotPreemptible(Running(2, "n0", 1, 300'000, {1})),
                NotPreemptible(Running(3, "n0", 1, 200'000, {2}))}},
    // Full and busy: one victim frees both the GPU and enough load.
    {.name = "full_busy_node",
     .mode = "running",
     .min_runtime_seconds = 0,
     .nodes = {{.name = "n0", .gpus = 4, .gpu_utilization = 0.95}},
     .placed = {Running(1, "n0", 1, 400'000, {0}), Running(2, "n0", 1, 300'000, {1}),
                Running(3, "n0", 1, 200'000, {2}), Running(4, "n0", 1, 100'000, {3})},
     .want_node = "n0",
     .want_victims = {1}},
    // At 1.0 on 8 GPUs with 2-GPU tasks: one victim takes 0.25 off (0.75).
    // In the scheduled mode only the scheduled task is a victim: its share
    // is still in flight, on top of the measurement.
    {.name = "busy_node_scheduled_victim_in_flight",
     .mode = "scheduled",
     .nodes = {{.name = "n0", .gpus = 8, .gpu_utilization = 0.85}},
     .placed = {Running(1, "n0", 1, 400'000, {0, 1}), Running(2, "n0", 1, 300'000, {2, 3}),
                Scheduled(3, "n0", 1, {4, 5})},
     .want_node = "n0",
     .want_victims = {3}},
};

class PreemptTableTest : public testing::TestWithParam<Case> {};

TEST_P(PreemptTableTest, Direct) {
  const Case& c = GetParam();
  ClusterState cluster;
  ASSERT_NO_FATAL_FAILURE(BuildCluster(c, cluster));
  framework::ReasonTable reasons;
  ManualClock clock(kNow);
  const framework::PluginDeps deps{&reasons, &clock};
  LoadThreshold threshold(deps);
  Fit fit(deps);
  Preempt preempt(deps);
  ASSERT_TRUE(preempt.Configure({c.mode, {{"min_runtime_seconds", c.min_runtime_seconds}}}).ok());
  Probe probe;
  probe.filters = {&threshold, &fit};

  const Task task = MakePreemptor(c.task);
  std::vector<NodeId> nodes(cluster.node_count());
  std::iota(nodes.begin(), nodes.end(), NodeId{0});
  framework::Rejections rejections;
  rejections.Reset(cluster.node_count(), reasons.size());
  for (framework::FilterPlugin* f : probe.filters) f->Filter(task, cluster, nodes, rejections);
  ASSERT_TRUE(nodes.empty()) << "the preemptor must fit nowhere before preemption";

  const framework::PreemptionPlan plan = preempt.PostFilter(task, cluster, rejections, probe, nullptr);
  if (c.want_node.empty()) {
    EXPECT_EQ(plan.node, kNoNode);
    EXPECT_TRUE(plan.victims.empty());
  } else {
    EXPECT_EQ(plan.node, cluster.FindNode(c.want_node));
    EXPECT_EQ(Sorted(plan.victims), c.want_victims);
  }
}

TEST_P(PreemptTableTest, ThroughFramework) {
  const Case& c = GetParam();
  ClusterState cluster;
  ASSERT_NO_FATAL_FAILURE(BuildCluster(c, cluster));
  ManualClock clock(kNow);
  framework::Policy policy;
  policy.plugins["preempt"] = {{"mode", c.mode}, {"min_runtime_seconds", c.min_runtime_seconds}};
  auto fw = framework::Framework::Create(InTreeRegistry(), policy, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().message();

  const Task task = MakePreemptor(c.task);
  const framework::Decision d = (*fw)->Schedule(task, cluster);
  if (c.want_node.empty()) {
    EXPECT_FALSE(d.scheduled);
    EXPECT_TRUE(d.victims.empty());
    EXPECT_EQ(cluster.FindPlaced(task.key), nullptr);
    for (const PlacedRow& row : c.placed) EXPECT_NE(cluster.FindPlaced(row.key), nullptr);
    return;
  }
  ASSERT_TRUE(d.scheduled) << d.reason;
  const NodeId node = cluster.FindNode(c.want_node);
  EXPECT_EQ(d.alloc.node, node);
  EXPECT_EQ(Sorted(d.victims), c.want_victims);
  if (!c.want_gpus.empty()) {
    EXPECT_EQ(d.alloc.gpus, c.want_gpus);
  }
  const PlacedTask* placed = cluster.FindPlaced(task.key);
  ASSERT_NE(placed, nullptr);
  EXPECT_EQ(placed->alloc.node, node);

  // Victims hold nothing any more; everyone else keeps what they had, so the
  // node's free CPU is its capacity less the survivors and the preemptor.
  int64_t used_cpu = task.requests.cpu_milli;
  for (const PlacedRow& row : c.placed) {
    const bool victim = std::count(c.want_victims.begin(), c.want_victims.end(), row.key) > 0;
    EXPECT_EQ(cluster.FindPlaced(row.key) == nullptr, victim) << "t" << row.key;
    if (!victim && row.node == c.want_node) used_cpu += row.cpu_milli;
  }
  EXPECT_EQ(cluster.free_cpu(node), cluster.total_cpu(node) - used_cpu);
}

INSTANTIATE_TEST_SUITE_P(PreemptCases, PreemptTableTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

// Two nodes with identical victim sets, rejected in reverse order: the lower
// NodeId still wins, so the answer does not depend on filter order.
TEST(PreemptTest, LowestNodeIdWinsWhateverTheRejectionOrder) {
  Case c{.nodes = {{.name = "n0"}, {.name = "n1"}},
         .placed = {Scheduled(1, "n0", 2, {0}), Scheduled(2, "n1", 2, {0})}};
  ClusterState cluster;
  ASSERT_NO_FATAL_FAILURE(BuildCluster(c, cluster));
  framework::ReasonTable reasons;
  ManualClock clock(kNow);
  Preempt preempt({&reasons, &clock});
  const framework::ReasonId gpu = reasons.Intern("insufficient GPU", true);
  framework::Rejections rejections;
  rejections.Reset(cluster.node_count(), reasons.size());
  rejections.Reject(1, gpu);
  rejections.Reject(0, gpu);

  Fit fit({&reasons, &clock});
  Probe probe;
  probe.filters = {&fit};
  const framework::PreemptionPlan plan =
      preempt.PostFilter(MakePreemptor({}), cluster, rejections, probe, nullptr);
  EXPECT_EQ(plan.node, NodeId{0});
  EXPECT_EQ(plan.victims, std::vector<TaskKey>{1});
}

// A node that is not Ready is skipped even when a filter called its
// rejection resolvable, and a node rejected for an unresolvable reason is
// skipped even when eviction would make room.
TEST(PreemptTest, SkipsUnschedulableAndUnresolvableNodes) {
  Case c{.nodes = {{.name = "n0"}, {.name = "n1"}},
         .placed = {Scheduled(1, "n0", 1, {0}), Scheduled(2, "n1", 1, {0})}};
  ClusterState cluster;
  ASSERT_NO_FATAL_FAILURE(BuildCluster(c, cluster));
  cluster.SetCondition(0, NodeCondition::kNotReady);
  framework::ReasonTable reasons;
  ManualClock clock(kNow);
  Preempt preempt({&reasons, &clock});
  const framework::ReasonId gpu = reasons.Intern("insufficient GPU", true);
  const framework::ReasonId rdma = reasons.Intern("no RDMA device", false);
  framework::Rejections rejections;
  rejections.Reset(cluster.node_count(), reasons.size());
  rejections.Reject(0, gpu);
  rejections.Reject(1, rdma);

  Fit fit({&reasons, &clock});
  Probe probe;
  probe.filters = {&fit};
  EXPECT_EQ(preempt.PostFilter(MakePreemptor({}), cluster, rejections, probe, nullptr).node, kNoNode);
}

// The search's bounds (per-node bands, fewest victims, the early end) never
// change the choice: on random clusters, with gangs across nodes, priorities
// below zero in some, scheduled and running tasks of every age, a bounded
// and an exhaustive search pick the same node and victims. The clusters
// change between searches (tasks released and placed), and each node's
// bands stay what its tasks add up to.
TEST(PreemptTest, BoundedSearchChoosesAsExhaustiveSearch) {
  std::mt19937_64 rng(7);
  const auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  size_t plans = 0, searches = 0;
  for (int cluster_round = 0; cluster_round < 60; ++cluster_round) {
    Case c;
    const int node_count = int(uniform(1, 40));
    for (int i = 0; i < node_count; ++i) {
      c.nodes.push_back({.name = "n" + std::to_string(i),
                         .gpus = int32_t(uniform(0, 8)),
                         .cpu_milli = 8000 * uniform(1, 8)});
    }
    ClusterState cluster;
    ASSERT_NO_FATAL_FAILURE(BuildCluster(c, cluster));
    const int32_t lowest_priority = cluster_round % 3 == 0 ? -2 : 0;
    TaskKey next = 1;
    std::vector<TaskKey> placed;
    // Places one random task, or a gang of 2-3 across random nodes.
    const auto place_some = [&] {
      const bool gang = uniform(0, 9) == 0;
      const uint64_t job = gang ? next + 100000 : 0;
      const int members = gang ? int(uniform(2, 3)) : 1;
      const int32_t priority = int32_t(uniform(lowest_priority, 4));
      const bool preemptible = uniform(0, 9) != 0;
      for (int m = 0; m < members; ++m) {
        const NodeId n = NodeId(uniform(0, node_count - 1));
        Task t;
        t.key = next++;
        t.name = "t" + std::to_string(t.key);
        t.priority = priority;
        t.preemptible = preemptible;
        t.job.id = job;
        Allocation a;
        a.node = n;
        a.cpu_milli = 500 * uniform(1, 16);
        a.memory_mib = kTaskMemoryMib;
        const auto free = cluster.gpu_free_milli(n);
        const int want = int(uniform(0, 3));
        for (size_t g = 0; g < free.size() && int(a.gpus.size()) < want; ++g) {
          if (free[g] == 0) continue;
          const int32_t milli = uniform(0, 1) ? free[g] : int32_t(std::min<int64_t>(free[g], 250 * uniform(1, 3)));
          a.gpus.push_back({cluster.spec(n).gpus[g].index, milli, 0});
        }
        const bool running = uniform(0, 1) == 1;
        if (cluster.Bind(t, a, running ? TaskState::kRunning : TaskState::kScheduled,
                         running ? kNow - uniform(0, 120'000) : 0)
                .ok()) {
          placed.push_back(t.key);
        }
      }
    };
    for (int i = 0; i < node_count * 6; ++i) place_some();

    for (int search = 0; search < 25; ++search) {
      // Some change between searches.
      for (int k = 0; k < 3 && !placed.empty(); ++k) {
        const size_t i = size_t(uniform(0, int64_t(placed.size()) - 1));
        if (cluster.FindPlaced(placed[i]) != nullptr) {
          ASSERT_TRUE(cluster.Release(placed[i]).ok());
        }
        placed.erase(placed.begin() + std::ptrdiff_t(i));
        place_some();
      }
      // Each node's bands are what its preemptible tasks add up to.
      for (NodeId n = 0; n < cluster.node_count(); ++n) {
        std::vector<ClusterState::PreemptibleBand> want;
        for (TaskKey k : cluster.TasksOn(n)) {
          const PlacedTask* p = cluster.FindPlaced(k);
          if (!p->preemptible) continue;
          auto b = std::find_if(want.begin(), want.end(),
                                [&](const auto& e) { return e.priority == p->priority; });
          if (b == want.end()) b = want.insert(want.end(), {.priority = p->priority});
          int64_t milli = 0;
          for (const GpuGrant& g : p->alloc.gpus) milli += g.milli;
          ++b->tasks;
          b->held.cpu_milli += p->alloc.cpu_milli;
          b->held.memory_mib += p->alloc.memory_mib;
          b->held.gpu_milli += milli;
          b->largest.cpu_milli = std::max(b->largest.cpu_milli, p->alloc.cpu_milli);
          b->largest.memory_mib = std::max(b->largest.memory_mib, p->alloc.memory_mib);
          b->largest.gpu_milli = std::max(b->largest.gpu_milli, milli);
          b->largest.gpus = std::max(b->largest.gpus, int32_t(p->alloc.gpus.size()));
        }
        std::sort(want.begin(), want.end(),
                  [](const auto& a, const auto& b) { return a.priority < b.priority; });
        const auto& got = cluster.preemptible_bands(n);
        ASSERT_EQ(got.size(), want.size()) << "node " << n;
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_EQ(got[i].priority, want[i].priority);
          EXPECT_EQ(got[i].tasks, want[i].tasks);
          EXPECT_EQ(got[i].held.cpu_milli, want[i].held.cpu_milli);
          EXPECT_EQ(got[i].held.gpu_milli, want[i].held.gpu_milli);
          EXPECT_EQ(got[i].largest.cpu_milli, want[i].largest.cpu_milli);
          EXPECT_EQ(got[i].largest.memory_mib, want[i].largest.memory_mib);
          EXPECT_EQ(got[i].largest.gpu_milli, want[i].largest.gpu_milli);
          EXPECT_EQ(got[i].largest.gpus, want[i].largest.gpus);
        }
        EXPECT_EQ(cluster.lowest_preemptible_priority(n),
                  want.empty() ? INT32_MAX : want.front().priority);
      }

      Preemptor shape{.priority = int32_t(uniform(lowest_priority, 5)),
                      .gpu = int32_t(uniform(0, 4)),
                      .cpu_milli = 1000 * uniform(1, 40)};
      if (shape.gpu == 1 && uniform(0, 1)) shape.gpu_milli = int32_t(250 * uniform(1, 3));
      const Task task = MakePreemptor(shape);
      framework::ReasonTable reasons;
      ManualClock clock(kNow);
      const framework::PluginDeps deps{&reasons, &clock};
      LoadThreshold threshold(deps);
      Fit fit(deps);
      Probe probe;
      probe.filters = {&threshold, &fit};
      std::vector<NodeId> nodes(cluster.node_count());
      std::iota(nodes.begin(), nodes.end(), NodeId{0});
      framework::Rejections rejections;
      rejections.Reset(cluster.node_count(), reasons.size());
      for (framework::FilterPlugin* f : probe.filters) f->Filter(task, cluster, nodes, rejections);

      const std::string mode = uniform(0, 1) ? "running" : "scheduled";
      const double min_runtime = uniform(0, 1) ? 0 : 60;
      Preempt bounded(deps), exhaustive(deps);
      for (Preempt* p : {&bounded, &exhaustive}) {
        ASSERT_TRUE(p->Configure({mode, {{"min_runtime_seconds", min_runtime}}}).ok());
      }
      exhaustive.SetExhaustiveForTesting(true);
      const framework::PreemptionPlan want =
          exhaustive.PostFilter(task, cluster, rejections, probe, nullptr);
      const framework::PreemptionPlan got =
          bounded.PostFilter(task, cluster, rejections, probe, nullptr);
      ++searches;
      plans += want.node != kNoNode;
      ASSERT_EQ(got.node, want.node) << "round " << cluster_round << " search " << search;
      ASSERT_EQ(got.victims, want.victims) << "round " << cluster_round << " search " << search;
    }
  }
  // Enough searches found a plan for the comparison to mean something.
  EXPECT_GT(plans, searches / 5) << plans << " plans in " << searches << " searches";
}

struct ConfigCase {
  std::string name;
  std::string mode;
  nlohmann::json config;
  bool want_ok;
  std::string want_in_message;  // when !want_ok
};

void PrintTo(const ConfigCase& c, std::ostream* os) { *os << c.name; }

constexpr const char* kField = "min_runtime_seconds";

const ConfigCase kConfigCases[] = {
    {"defaults", "scheduled", nlohmann::json::object(), true, ""},
    {"empty_mode_is_scheduled", "", nlohmann::json::object(), true, ""},
    {"running_zero", "running", {{kField, 0}}, true, ""},
    {"disabled_fractional", "disabled", {{kField, 0.25}}, true, ""},
    {"huge_value", "running", {{kField, 1e300}}, true, ""},
    {"unknown_mode", "always", nlohmann::json::object(), false, "mode"},
    {"negative", "running", {{kField, -1}}, false, kField},
    {"negative_fraction", "running", {{kField, -0.001}}, false, kField},
    {"string", "running", {{kField, "60"}}, false, kField},
    {"boolean", "running", {{kField, true}}, false, kField},
    {"null", "running", {{kField, nullptr}}, false, kField},
    {"array", "running", {{kField, nlohmann::json::array({60})}}, false, kField},
};

class PreemptConfigureTest : public testing::TestWithParam<ConfigCase> {};

TEST_P(PreemptConfigureTest, ValidatesSettings) {
  const ConfigCase& c = GetParam();
  framework::ReasonTable reasons;
  ManualClock clock(kNow);
  Preempt preempt({&reasons, &clock});
  const Status st = preempt.Configure({c.mode, c.config});
  EXPECT_EQ(st.ok(), c.want_ok) << st.message();
  if (!c.want_ok) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(c.want_in_message), std::string::npos) << st.message();
  }
}

INSTANTIATE_TEST_SUITE_P(PreemptConfigCases, PreemptConfigureTest, testing::ValuesIn(kConfigCases),
                         [](const testing::TestParamInfo<ConfigCase>& info) {
                           return info.param.name;
                         });

// A refused Configure leaves the previous settings in force: the plugin is
// still in mode running with no minimum runtime.
TEST(PreemptConfigureTest, RefusedSettingsChangeNothing) {
  Case c{.nodes = {{.name = "n0"}}, .placed = {Running(1, "n0", 1, 0, {0})}};
  ClusterState cluster;
  ASSERT_NO_FATAL_FAILURE(BuildCluster(c, cluster));
  framework::ReasonTable reasons;
  ManualClock clock(kNow);
  const framework::PluginDeps deps{&reasons, &clock};
  Fit fit(deps);
  Preempt preempt(deps);
  ASSERT_TRUE(preempt.Configure({"running", {{"min_runtime_seconds", 0}}}).ok());
  EXPECT_FALSE(preempt.Configure({"disabled", {{"min_runtime_seconds", -5}}}).ok());
  EXPECT_FALSE(preempt.Configure({"nonsense", {{"min_runtime_seconds", 3600}}}).ok());

  const Task task = MakePreemptor({});
  std::vector<NodeId> nodes{0};
  framework::Rejections rejections;
  rejections.Reset(cluster.node_count(), reasons.size());
  fit.Filter(task, cluster, nodes, rejections);
  Probe probe;
  probe.filters = {&fit};
  const framework::PreemptionPlan plan = preempt.PostFilter(task, cluster, rejections, probe, nullptr);
  EXPECT_EQ(plan.node, NodeId{0});
  EXPECT_EQ(plan.victims, std::vector<TaskKey>{1});
}

TEST(PreemptFrameworkTest, CreateRefusesNegativeMinRuntime) {
  ManualClock clock(kNow);
  framework::Policy policy;
  policy.plugins["preempt"] = {{"mode", "running"}, {"min_runtime_seconds", -1}};
  auto fw = framework::Framework::Create(InTreeRegistry(), policy, &clock);
  ASSERT_FALSE(fw.ok());
  EXPECT_EQ(fw.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fw.status().message().find("min_runtime_seconds"), std::string::npos);
}

// The default policy preempts scheduled tasks only; switching the mode to
// running at run time lets the next cycle evict a running task.
TEST(PreemptFrameworkTest, ModeChangeAppliesToNextCycle) {
  Case c{.nodes = {{.name = "n0"}}, .placed = {Running(1, "n0", 1, 3'600'000, {0})}};
  ClusterState cluster;
  ASSERT_NO_FATAL_FAILURE(BuildCluster(c, cluster));
  ManualClock clock(kNow);
  auto fw = framework::Framework::Create(InTreeRegistry(), framework::Policy{}, &clock);
  ASSERT_TRUE(fw.ok()) << fw.status().message();
  const Task task = MakePreemptor({});

  EXPECT_FALSE((*fw)->Schedule(task, cluster).scheduled);
  EXPECT_NE(cluster.FindPlaced(1), nullptr);

  framework::PluginPatch patch;
  patch.mode = "running";
  ASSERT_TRUE((*fw)->UpdatePlugin("preempt", patch).ok());
  const framework::Decision d = (*fw)->Schedule(task, cluster);
  ASSERT_TRUE(d.scheduled) << d.reason;
  EXPECT_EQ(d.victims, std::vector<TaskKey>{1});
  EXPECT_EQ(cluster.FindPlaced(1), nullptr);
  EXPECT_EQ(cluster.used_gpu_milli(0), kWholeGpuMilli);
}

}  // namespace
}  // namespace hf::plugins
