#include "sim/simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "sim/yaml_workload.h"

namespace hf::sim {
namespace {

using ::testing::HasSubstr;

SimNode Node(const std::string& name, int gpus, const std::string& model = "T4",
             int64_t cpu = 64000, int64_t mem = 262144) {
  SimNode n;
  n.spec.name = name;
  n.spec.cpu_milli = cpu;
  n.spec.memory_mib = mem;
  for (int i = 0; i < gpus; ++i) {
    GpuDevice g;
    g.index = i;
    g.model = model;
    n.spec.gpus.push_back(g);
  }
  return n;
}

SimTask Pod(const std::string& name, int gpu, int milli,
            std::optional<int64_t> create_s = std::nullopt,
            std::optional<int64_t> delete_s = std::nullopt, int priority = 0) {
  SimTask t;
  t.task.name = name;
  t.task.priority = priority;
  t.task.requests.cpu_milli = 1000;
  t.task.requests.memory_mib = 1024;
  t.task.requests.gpu = gpu;
  t.task.requests.gpu_milli = milli;
  if (create_s) t.create_ms = *create_s * 1000;
  if (delete_s) t.delete_ms = *delete_s * 1000;
  t.origin = "test:" + name;
  return t;
}

Workload Make(std::vector<SimNode> nodes, std::vector<SimTask> tasks) {
  Workload w;
  w.nodes = std::move(nodes);
  w.tasks = std::move(tasks);
  for (size_t i = 0; i < w.tasks.size(); ++i) w.tasks[i].task.key = i;
  w.nodes_source = w.tasks_source = "test";
  return w;
}

// A cluster of mixed nodes and a pod list with whole, shared and CPU pods.
Workload Mixed() {
  std::vector<SimNode> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(Node("t4-" + std::to_string(i), 2, "T4"));
  for (int i = 0; i < 4; ++i) nodes.push_back(Node("v100-" + std::to_string(i), 8, "V100"));
  nodes.push_back(Node("cpu-0", 0, ""));
  std::vector<SimTask> pods;
  const int shares[] = {1000, 500, 250, 810, 1000, 0};
  for (int i = 0; i < 30; ++i) {
    const int s = shares[i % 6];
    pods.push_back(
        Pod("p" + std::to_string(i), s == 0 ? 0 : (i % 7 == 0 ? 4 : 1), s == 0 ? 1000 : s));
  }
  pods[3].task.requests.gpu_models = {"T4"};
  return Make(std::move(nodes), std::move(pods));
}

// Re-adds the placements per GPU and node, as the e2e checker does.
void ExpectWithinCapacity(const Workload& w, const SimReport& r,
                          const std::map<std::string, const SimTask*>& by_name) {
  std::map<std::string, const SimNode*> nodes;
  for (const auto& n : w.nodes) nodes[n.spec.name] = &n;
  std::map<std::pair<std::string, int>, int> gpu;
  std::map<std::string, int64_t> cpu;
  for (const PodPlacement& p : r.placements) {
    if (p.node.empty()) continue;
    const SimTask* t = by_name.at(p.pod);
    ASSERT_EQ(p.gpus.size(), size_t(t->task.requests.gpu)) << p.pod;
    cpu[p.node] += t->task.requests.cpu_milli;
    for (const GpuGrant& g : p.gpus) {
      EXPECT_EQ(g.milli, t->task.requests.gpu_milli) << p.pod;
      int& held = gpu[std::make_pair(p.node, g.index)];
      held += g.milli;
      EXPECT_LE(held, 1000) << p.node << " GPU " << g.index;
    }
  }
  for (const auto& [node, used] : cpu) EXPECT_LE(used, nodes.at(node)->spec.cpu_milli);
}

TEST(SimulatorTest, MethodNames) {
  EXPECT_EQ(ParseMethod("fgd"), Method::kFgd);
  EXPECT_EQ(ParseMethod("replay"), Method::kReplay);
  EXPECT_FALSE(ParseMethod("FGD").has_value());
  EXPECT_STREQ(MethodName(Method::kReplay), "replay");
}

TEST(SimulatorTest, FgdSamplesUntilDemandReachesTuneTimesCapacity) {
  const Workload w = Mixed();
  SimOptions o;
  o.tune = 1.3;
  auto r = Simulate(w, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->gpu_capacity_milli, (6 * 2 + 4 * 8) * 1000);
  EXPECT_EQ(r->gpus_total, 44);
  EXPECT_EQ(r->nodes, 11u);
  EXPECT_EQ(r->source_tasks, 30u);
  EXPECT_EQ(r->decisions, r->pods_total);
  EXPECT_EQ(r->placements.size(), r->pods_total);
  EXPECT_EQ(r->pods_scheduled + r->pods_failed, r->pods_total);

  // Demand reaches 1.3 x capacity and the last sample is what crossed it.
  std::map<std::string, const SimTask*> by_name;
  int64_t demand = 0, last = 0;
  std::vector<std::pair<uint64_t, int64_t>> by_sample;
  for (const PodPlacement& p : r->placements) {
    const size_t dash = p.pod.rfind('-');
    const std::string orig = p.pod.substr(0, dash);
    const SimTask* t = nullptr;
    for (const auto& s : w.tasks) {
      if (s.task.name == orig) t = &s;
    }
    ASSERT_NE(t, nullptr) << p.pod;
    by_name[p.pod] = t;
    const int64_t d =
        t->task.requests.gpu * int64_t{t->task.requests.gpu_milli} * (t->task.requests.gpu > 0);
    demand += d;
    by_sample.emplace_back(std::stoull(p.pod.substr(dash + 1)), d);
  }
  std::sort(by_sample.begin(), by_sample.end());
  for (size_t i = 0; i < by_sample.size(); ++i) EXPECT_EQ(by_sample[i].first, i);  // keys 0..n-1
  last = by_sample.back().second;
  EXPECT_GE(double(demand), 1.3 * double(r->gpu_capacity_milli));
  EXPECT_LT(double(demand - last), 1.3 * double(r->gpu_capacity_milli));

  EXPECT_TRUE(r->arrived_100_reached);
  EXPECT_GT(r->gpu_alloc_ratio_at_arrived_100, 0.5);
  EXPECT_LE(r->gpu_alloc_ratio_at_arrived_100, r->gpu_alloc_ratio_final);
  EXPECT_LE(r->gpu_alloc_ratio_final, 1.0);
  // A point per 5% step of arrived demand at most; the first at or past 100%
  // carries the at-100% ratio.
  ASSERT_FALSE(r->curve.empty());
  EXPECT_LE(r->curve.size(), size_t(r->arrived_ratio_final * 20 + 1e-9));
  const auto at_100 = std::find_if(r->curve.begin(), r->curve.end(),
                                   [](const CurvePoint& p) { return p.arrived >= 1.0; });
  ASSERT_NE(at_100, r->curve.end());
  EXPECT_DOUBLE_EQ(at_100->allocated, r->gpu_alloc_ratio_at_arrived_100);
  for (size_t i = 1; i < r->curve.size(); ++i) {
    EXPECT_GT(r->curve[i].arrived, r->curve[i - 1].arrived);
    EXPECT_GE(int(r->curve[i].arrived * 20 + 1e-9), int(r->curve[i - 1].arrived * 20 + 1e-9) + 1);
  }
  EXPECT_LE(r->latency_p50_us, r->latency_p99_us);
  ExpectWithinCapacity(w, *r, by_name);
}

TEST(SimulatorTest, FgdIsReproducibleAndSeedDependent) {
  const Workload w = Mixed();
  SimOptions o;
  auto a = Simulate(w, o);
  auto b = Simulate(w, o);
  o.seed = 43;
  auto c = Simulate(w, o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const auto flat = [](const SimReport& r) {
    std::string s;
    for (const auto& p : r.placements) {
      s += p.pod + "@" + p.node;
      for (const auto& g : p.gpus) s += ":" + std::to_string(g.index);
      s += ";";
    }
    return s;
  };
  EXPECT_EQ(flat(*a), flat(*b));
  EXPECT_NE(flat(*a), flat(*c));
}

TEST(SimulatorTest, FgdBelowFullDemandReportsTheFinalRatio) {
  SimOptions o;
  o.tune = 0.5;
  auto r = Simulate(Mixed(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->arrived_100_reached);
  EXPECT_DOUBLE_EQ(r->gpu_alloc_ratio_at_arrived_100, r->gpu_alloc_ratio_final);
  EXPECT_LE(r->curve.size(), 10u);
  EXPECT_LT(r->curve.back().arrived, 1.0);
}

TEST(SimulatorTest, FgdNeedsGpusAndGpuDemand) {
  auto r = Simulate(Make({Node("c", 0, "")}, {Pod("p", 1, 1000)}), SimOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("no GPUs"));
  r = Simulate(Make({Node("g", 1)}, {Pod("p", 0, 1000)}), SimOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("no task requests a GPU"));
  SimOptions bad;
  bad.tune = 0;
  EXPECT_FALSE(Simulate(Mixed(), bad).ok());
}

TEST(SimulatorTest, RefusesABadPolicy) {
  SimOptions o;
  o.policy.plugins["spread"] = {{"enabled", true}};  // binpack is on by default
  auto r = Simulate(Mixed(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("policy: "));
}

SimOptions Replay() {
  SimOptions o;
  o.method = Method::kReplay;
  return o;
}

TEST(SimulatorTest, ReplayWaitsForFreedResources) {
  // One GPU: b arrives while a holds it and runs once a leaves.
  auto r = Simulate(Make({Node("n", 1)}, {Pod("a", 1, 1000, 0, 100), Pod("b", 1, 1000, 50, 300)}),
                    Replay());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pods_total, 2u);
  EXPECT_EQ(r->pods_scheduled, 2u);
  EXPECT_EQ(r->pods_failed, 0u);
  EXPECT_EQ(r->placements[1].node, "n");
  EXPECT_EQ(r->placements[1].placed_ms, 100'000);
  EXPECT_EQ(r->placements[1].released_ms, 300'000);
  EXPECT_EQ(r->placements[0].released_ms, 100'000);
  EXPECT_DOUBLE_EQ(r->gpu_alloc_ratio_final, 0.0);
  EXPECT_DOUBLE_EQ(r->gpu_alloc_ratio_peak, 1.0);
  // Held over [0, 100) and [100, 300) of a 300 s trace.
  EXPECT_DOUBLE_EQ(r->gpu_alloc_ratio_time_avg, 1.0);
  EXPECT_EQ(r->trace_span_ms, 300'000);
}

TEST(SimulatorTest, ReplayDeletesBeforeCreatingAtTheSameTime) {
  auto r =
      Simulate(Make({Node("n", 1)}, {Pod("a", 1, 1000, 0, 100), Pod("b", 1, 1000, 100)}), Replay());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->placements[1].placed_ms, 100'000);
  EXPECT_FALSE(r->placements[1].released_ms.has_value());
  EXPECT_DOUBLE_EQ(r->gpu_alloc_ratio_final, 1.0);
}

TEST(SimulatorTest, ReplayDropsTasksDeletedWhilePending) {
  auto r = Simulate(Make({Node("n", 1)}, {Pod("a", 1, 1000, 0, 100), Pod("b", 1, 1000, 10, 50)}),
                    Replay());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pods_scheduled, 1u);
  EXPECT_EQ(r->pods_failed, 1u);
  EXPECT_EQ(r->dropped_pending, 1u);
  EXPECT_TRUE(r->placements[1].node.empty());
}

TEST(SimulatorTest, ReplayServesHigherPriorityFirst) {
  // Both wait for the one GPU; c arrives last but has the higher priority.
  auto r = Simulate(Make({Node("n", 1)}, {Pod("a", 1, 1000, 0, 100), Pod("b", 1, 1000, 10, 500, 1),
                                          Pod("c", 1, 1000, 20, 500, 5)}),
                    Replay());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->placements[2].placed_ms, 100'000);
  EXPECT_TRUE(r->placements[1].node.empty());
}

TEST(SimulatorTest, ReplayPreemptsAndRequeuesVictims) {
  SimOptions o = Replay();
  o.policy.plugins["preempt"] = {{"mode", "running"}, {"min_runtime_seconds", 60}};
  // low runs from 0; high (priority 10) arrives at 100, past low's minimum
  // runtime, and evicts it; low gets the GPU back when high leaves at 200.
  auto r = Simulate(
      Make({Node("n", 1)}, {Pod("low", 1, 1000, 0, 1000, 0), Pod("high", 1, 1000, 100, 200, 10)}),
      o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->preemptions, 1u);
  EXPECT_EQ(r->pods_scheduled, 2u);
  EXPECT_EQ(r->placements[1].placed_ms, 100'000);
  EXPECT_EQ(r->placements[0].placed_ms, 200'000);
  EXPECT_EQ(r->placements[0].released_ms, 1'000'000);
}

TEST(SimulatorTest, ReplayRespectsMinimumRuntime) {
  SimOptions o = Replay();
  o.policy.plugins["preempt"] = {{"mode", "running"}, {"min_runtime_seconds", 60}};
  // high arrives 30 s after low started: too early to evict; it runs when low ends.
  auto r = Simulate(
      Make({Node("n", 1)}, {Pod("low", 1, 1000, 0, 100, 0), Pod("high", 1, 1000, 30, 200, 10)}), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->preemptions, 0u);
  EXPECT_EQ(r->placements[1].placed_ms, 100'000);
}

TEST(SimulatorTest, ReplayNeedsCreationTimes) {
  auto r = Simulate(Make({Node("n", 1)}, {Pod("a", 1, 1000), Pod("b", 1, 1000)}), Replay());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("no creation times"));
  r = Simulate(Make({Node("n", 1)}, {Pod("a", 1, 1000, 0), Pod("b", 1, 1000)}), Replay());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("test:b: no creation time"));
}

TEST(SimulatorTest, YamlWorkloadWithRdmaUsageAndTopology) {
  auto w = ParseYamlWorkload(R"(
plugins:
  preempt: {enabled: true, mode: running, min_runtime_seconds: 0}
nodes:
  - name: plain
    cpu_milli: 64000
    memory_mib: 262144
    gpus: [{model: A100}, {model: A100}, {model: A100}, {model: A100}]
  - name: busy
    cpu_milli: 64000
    memory_mib: 262144
    gpus: [{model: A100}, {model: A100}, {model: A100}, {model: A100}]
    rdma: [{name: mlx5_0}]
    usage: {gpus: [{index: 0, utilization: 0.99}, {index: 1, utilization: 0.99},
                   {index: 2, utilization: 0.99}, {index: 3, utilization: 0.99}]}
  - name: fabric
    cpu_milli: 64000
    memory_mib: 262144
    gpus:
      - {model: A100, fabric_domain: 0}
      - {model: A100, fabric_domain: 1}
      - {model: A100, fabric_domain: 0}
      - {model: A100, fabric_domain: 1}
    rdma: [{name: mlx5_0, pcie_switch: 0}]
tasks:
  - {name: train, group: g, priority: 5, rdma_required: true, requests: {gpu: 2}}
  - {name: cpu-only, requests: {cpu_milli: 1000}}
  - {name: filler, priority: 0, create_time: 1, requests: {gpu: 4}}
  - {name: urgent, priority: 9, create_time: 2, requests: {gpu: 4}}
)",
                             "w.yaml");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(w->policy.has_value());
  SimOptions o = Replay();
  o.policy = *w->policy;
  auto r = Simulate(*w, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // RDMA: only busy and fabric have NICs, and busy is above the GPU load threshold.
  EXPECT_EQ(r->placements[0].node, "fabric");
  ASSERT_EQ(r->placements[0].gpus.size(), 2u);
  // Two GPUs in one NVLink domain: indices 0 and 2 or 1 and 3.
  EXPECT_EQ((r->placements[0].gpus[0].index + r->placements[0].gpus[1].index) % 2, 0);
  EXPECT_EQ(r->placements[1].node.empty(), false);
  EXPECT_TRUE(r->placements[1].gpus.empty());
  // filler takes plain (fabric is half used); urgent can only get 4 GPUs by evicting it.
  EXPECT_EQ(r->placements[3].node, "plain");
  EXPECT_EQ(r->preemptions, 1u);
  EXPECT_EQ(r->pods_scheduled, 4u);
}

}  // namespace
}  // namespace hf::sim
