#include "framework/framework.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/testing/nodes.h"
#include "framework/registry.h"

namespace hf::framework {
namespace {

using hf::testing::AllocFor;
using hf::testing::MakeTask;
using hf::testing::Node;

constexpr const char* kVisionPolicy = R"(
plugins:
  binpack:  {enabled: true,  weight: 1}
  spread:   {enabled: false, weight: 1}
  preempt:  {enabled: true,  mode: "scheduled", weight: 1}
  rdma:     {enabled: true,  weight: 1}
  topology: {enabled: true,  weight: 1, topology_config: "/nonexistent/heteroflow/topology.yaml"}
)";

std::unique_ptr<Framework> Make(const std::string& yaml, const Clock* clock = nullptr) {
  auto policy = ParsePolicyYaml(yaml, "test.yaml");
  EXPECT_TRUE(policy.ok()) << policy.status().ToString();
  auto fw = Framework::Create(hf::plugins::InTreeRegistry(), *policy, clock);
  EXPECT_TRUE(fw.ok()) << fw.status().ToString();
  return std::move(fw).value();
}

PluginInfo Info(const Framework& fw, const std::string& name) { return *fw.GetPlugin(name); }

TEST(PolicyTest, ExclusiveGpuVendorsFromYaml) {
  auto p = ParsePolicyYaml("scheduler:\n  exclusive_gpu_vendors: [habana]\n", "t.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->scheduler.exclusive_gpu_vendors, (std::vector<std::string>{"habana"}));
  EXPECT_EQ(ParsePolicyYaml("scheduler:\n  load_threshold: 0.5\n", "t.yaml")->scheduler.exclusive_gpu_vendors,
            (std::vector<std::string>{"huawei", "habana"}));  // the default
  for (const char* bad : {"scheduler:\n  exclusive_gpu_vendors: habana\n",
                          "scheduler:\n  exclusive_gpu_vendors: [1]\n"}) {
    auto q = ParsePolicyYaml(bad, "t.yaml");
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_NE(q.status().message().find("exclusive_gpu_vendors"), std::string::npos) << q.status().message();
  }
  // A name that is no vendor name is refused, naming the element.
  auto r = ParsePolicyYaml("scheduler:\n  exclusive_gpu_vendors: [Bad]\n", "t.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exclusive_gpu_vendors[0]"), std::string::npos) << r.status().message();
}

TEST(PolicyTest, ParsesTheVisionBlockExactly) {
  auto fw = Make(kVisionPolicy);
  EXPECT_TRUE(Info(*fw, "binpack").settings.enabled);
  EXPECT_EQ(Info(*fw, "binpack").status, PluginStatus::kActive);
  EXPECT_EQ(Info(*fw, "spread").status, PluginStatus::kInactive);
  EXPECT_EQ(Info(*fw, "preempt").settings.mode, "scheduled");
  EXPECT_EQ(Info(*fw, "topology").settings.config["topology_config"],
            "/nonexistent/heteroflow/topology.yaml");
  // A missing topology file: status error with the reason; the policy still loads.
  EXPECT_EQ(Info(*fw, "topology").status, PluginStatus::kError);
  EXPECT_NE(Info(*fw, "topology").message.find("/nonexistent/heteroflow/topology.yaml"),
            std::string::npos);
  EXPECT_TRUE(Info(*fw, "fit").required);
  EXPECT_TRUE(Info(*fw, "load_threshold").required);
}

TEST(PolicyTest, BadFilesAreRejectedWithFieldAndLine) {
  struct Row {
    const char* name;
    const char* yaml;
    const char* want;
  } rows[] = {
      {"weight not a number", "plugins:\n  binpack: {weight: heavy}\n", "test.yaml:2: plugins.binpack.weight"},
      {"negative weight", "plugins:\n  binpack:\n    weight: -1\n", "test.yaml:3: plugins.binpack.weight"},
      {"enabled not bool", "plugins:\n  rdma: {enabled: 3}\n", "plugins.rdma.enabled"},
      {"threshold out of range", "scheduler:\n  load_threshold: 1.5\n", "load_threshold must be in (0, 1]"},
      {"unknown scheduler key", "scheduler:\n  foo: 1\n", "test.yaml:2: unknown key scheduler.foo"},
      {"percentage not an integer", "scheduler:\n  percentage_of_nodes_to_score: 2.5\n",
       "test.yaml:2: scheduler.percentage_of_nodes_to_score must be an integer"},
      {"percentage out of range", "scheduler:\n  percentage_of_nodes_to_score: 1000\n",
       "percentage_of_nodes_to_score must be an integer in [0, 100]"},
      {"broken yaml", "plugins: [\n", "test.yaml:"},
      // Found by fuzzing (fuzz/regressions/policy_yaml): yaml-cpp threw
      // where a mapping or list stood as a key, and the process ended.
      {"mapping as a plugin's key", "plugins:\n  binpack: {enabled: true, {cpu: 0}: 1}\n",
       "test.yaml:2:"},
      {"list as a top-level key", "[a, b]: 1\n", "expected a plain value"},
      {"mapping as a plugin name", "plugins:\n  {x: 1}: {enabled: true}\n", "test.yaml:2:"},
      {"mapping as a scheduler key", "scheduler:\n  {x: 1}: 2\n", "test.yaml:2:"},
  };
  for (const Row& r : rows) {
    auto p = ParsePolicyYaml(r.yaml, "test.yaml");
    ASSERT_FALSE(p.ok()) << r.name;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << r.name;
    EXPECT_NE(p.status().message().find(r.want), std::string::npos) << r.name << ": " << p.status().message();
  }
}

TEST(PolicyTest, CreateRefusesUnknownPluginsBadModesAndConflicts) {
  struct Row {
    const char* yaml;
    StatusCode code;
    const char* want;
  } rows[] = {
      {"plugins:\n  magic: {enabled: true}\n", StatusCode::kInvalidArgument, "t.yaml:2: plugins.magic: no plugin named magic"},
      {"plugins:\n  preempt: {mode: sometimes}\n", StatusCode::kInvalidArgument,
       "plugins.preempt.mode must be one of scheduled | running | disabled"},
      {"plugins:\n  binpack: {mode: x}\n", StatusCode::kInvalidArgument, "binpack has no mode"},
      {"plugins:\n  binpack: {enabled: true}\n  spread: {enabled: true}\n", StatusCode::kConflict,
       "binpack"},
      {"plugins:\n  fit: {enabled: false}\n", StatusCode::kFailedPrecondition, "required"},
  };
  for (const Row& r : rows) {
    auto p = ParsePolicyYaml(r.yaml, "t.yaml");
    ASSERT_TRUE(p.ok()) << r.yaml;
    auto fw = Framework::Create(hf::plugins::InTreeRegistry(), *p, nullptr);
    ASSERT_FALSE(fw.ok()) << r.yaml;
    EXPECT_EQ(fw.status().code(), r.code) << r.yaml;
    EXPECT_NE(fw.status().message().find(r.want), std::string::npos) << fw.status().message();
  }
  // The conflict message names both plugins.
  auto p = ParsePolicyYaml("plugins:\n  binpack: {enabled: true}\n  spread: {enabled: true}\n", "t");
  auto fw = Framework::Create(hf::plugins::InTreeRegistry(), *p, nullptr);
  EXPECT_NE(fw.status().message().find("spread"), std::string::npos);
  EXPECT_NE(fw.status().message().find("binpack"), std::string::npos);
}

TEST(PolicyTest, CreateChecksTypesOfPoliciesBuiltInCode) {
  for (const auto& bad : {nlohmann::json{{"enabled", "yes"}}, nlohmann::json{{"weight", "2"}},
                          nlohmann::json{{"mode", 1}}, nlohmann::json(3)}) {
    Policy p;
    p.plugins["preempt"] = bad;
    auto fw = Framework::Create(hf::plugins::InTreeRegistry(), p, nullptr);
    ASSERT_FALSE(fw.ok()) << bad.dump();
    EXPECT_EQ(fw.status().code(), StatusCode::kInvalidArgument) << bad.dump();
    EXPECT_NE(fw.status().message().find("plugins.preempt"), std::string::npos) << fw.status().message();
  }
}

TEST(FrameworkTest, RuntimeUpdatesValidateAndApply) {
  auto fw = Make("plugins:\n  topology: {enabled: false}\n");
  // Enabling spread while binpack is on: Conflict naming binpack; nothing changes.
  Status st = fw->UpdatePlugin("spread", {.enabled = true});
  EXPECT_EQ(st.code(), StatusCode::kConflict);
  EXPECT_NE(st.message().find("binpack"), std::string::npos);
  EXPECT_FALSE(Info(*fw, "spread").settings.enabled);
  // Switching in the right order works.
  ASSERT_TRUE(fw->UpdatePlugin("binpack", {.enabled = false}).ok());
  ASSERT_TRUE(fw->UpdatePlugin("spread", {.enabled = true, .weight = 2.5}).ok());
  EXPECT_EQ(Info(*fw, "spread").status, PluginStatus::kActive);
  EXPECT_EQ(Info(*fw, "spread").settings.weight, 2.5);
  EXPECT_EQ(Info(*fw, "binpack").status, PluginStatus::kInactive);
  EXPECT_EQ(fw->UpdatePlugin("spread", {.weight = -1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fw->UpdatePlugin("spread", {.weight = std::nan("")}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Info(*fw, "spread").settings.weight, 2.5);
  EXPECT_EQ(fw->UpdatePlugin("preempt", {.mode = "running"}).code(), StatusCode::kOk);
  EXPECT_EQ(Info(*fw, "preempt").settings.mode, "running");
  EXPECT_EQ(fw->UpdatePlugin("preempt", {.mode = "always"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fw->UpdatePlugin("fit", {.enabled = false}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(fw->UpdatePlugin("nope", {.enabled = true}).code(), StatusCode::kNotFound);
  // The policy round-trips.
  Policy p = fw->CurrentPolicy();
  EXPECT_EQ(p.plugins["spread"]["weight"], 2.5);
  EXPECT_EQ(p.plugins["preempt"]["mode"], "running");
}

TEST(PolicyTest, ScoreWeightsMergeWhateverTheKeyOrder) {
  // Weights under scheduler.score_weights are the plugins' weights, whether
  // the block comes before or after plugins:.
  for (const char* yaml : {"scheduler:\n  score_weights: {binpack: 3}\nplugins:\n  binpack: {enabled: true}\n",
                           "plugins:\n  binpack: {enabled: true}\nscheduler:\n  score_weights: {binpack: 3}\n"}) {
    auto fw = Make(yaml);
    EXPECT_EQ(Info(*fw, "binpack").settings.weight, 3) << yaml;
  }
  // The same weight given twice, differently: an error naming both keys and lines.
  auto p = ParsePolicyYaml(
      "scheduler:\n  score_weights:\n    binpack: 3\nplugins:\n  binpack: {enabled: true, weight: 2}\n",
      "t.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("t.yaml:3: scheduler.score_weights.binpack"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("t.yaml:5: plugins.binpack.weight"), std::string::npos)
      << p.status().message();
  // Given twice, equally: accepted.
  auto same = Make("plugins:\n  binpack: {weight: 2}\nscheduler:\n  score_weights: {binpack: 2.0}\n");
  EXPECT_EQ(Info(*same, "binpack").settings.weight, 2);
  // An unknown plugin under score_weights is named by its key and line.
  auto unknown = ParsePolicyYaml("scheduler:\n  score_weights:\n    bogus: 1\n", "t.yaml");
  ASSERT_TRUE(unknown.ok());
  auto fw = Framework::Create(hf::plugins::InTreeRegistry(), *unknown, nullptr);
  ASSERT_FALSE(fw.ok());
  EXPECT_EQ(fw.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fw.status().message().find("t.yaml:3: scheduler.score_weights.bogus"), std::string::npos)
      << fw.status().message();
}

TEST(FrameworkTest, ScoreWeightsAreSetTogetherOrNotAtAll) {
  auto fw = Make("");
  const double before = Info(*fw, "rdma").settings.weight;
  for (const auto& [weights, key] :
       std::vector<std::pair<std::map<std::string, double>, std::string>>{
           {{{"rdma", 4}, {"bogus", 1}}, "score_weights.bogus"},
           {{{"rdma", 4}, {"fit", 1}}, "score_weights.fit"},
           {{{"rdma", 4}, {"binpack", -1}}, "score_weights.binpack"}}) {
    Status st = fw->SetScoreWeights(weights);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << key;
    EXPECT_NE(st.message().find(key), std::string::npos) << st.message();
    EXPECT_EQ(Info(*fw, "rdma").settings.weight, before) << key;
  }
  ASSERT_TRUE(fw->SetScoreWeights({{"rdma", 4}, {"binpack", 0.5}}).ok());
  EXPECT_EQ(Info(*fw, "rdma").settings.weight, 4);
  EXPECT_EQ(Info(*fw, "binpack").settings.weight, 0.5);
}

TEST(FrameworkTest, FiltersHaveNoWeightAndThresholdsLiveInTheSchedulerConfig) {
  auto fw = Make("");
  // A plugin that only filters has no weight to set.
  for (const char* name : {"fit", "load_threshold"}) {
    Status st = fw->UpdatePlugin(name, {.weight = 7});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(st.message().find("no weight"), std::string::npos) << st.message();
    EXPECT_FALSE(fw->CurrentPolicy().plugins[name].contains("weight")) << name;
  }
  // The thresholds are not the plugin's to change: one stored value, the
  // scheduler config's.
  Status st = fw->UpdatePlugin("load_threshold", {.config = nlohmann::json{{"load_threshold", 0.3}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("PUT /api/v1/scheduler/config"), std::string::npos) << st.message();
  EXPECT_EQ(fw->scheduler_config().load_threshold, 0.8);
  EXPECT_EQ(Info(*fw, "load_threshold").settings.config["load_threshold"], 0.8);
  // The same from a file.
  for (const char* yaml : {"plugins:\n  fit: {weight: 2}\n",
                           "plugins:\n  load_threshold: {load_threshold: 0.3}\n"}) {
    auto p = ParsePolicyYaml(yaml, "t.yaml");
    ASSERT_TRUE(p.ok()) << yaml;
    auto bad = Framework::Create(hf::plugins::InTreeRegistry(), *p, nullptr);
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << yaml;
  }
  // Preempt keeps the weight the product vision's block gives it.
  EXPECT_TRUE(fw->UpdatePlugin("preempt", {.weight = 1}).ok());
}

TEST(FrameworkTest, SchedulerConfigIsValidatedAndFeedsTheThresholdFilter) {
  auto fw = Make("");
  SchedulerConfig bad;
  bad.gpu_load_threshold = 0;
  Status st = fw->SetSchedulerConfig(bad);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("gpu_load_threshold"), std::string::npos);
  EXPECT_EQ(fw->scheduler_config().gpu_load_threshold, 0.9);

  ClusterState c;
  NodeId n = *c.AddNode(Node("g", 10000, 10000, 2));
  NodeUsage u;
  u.gpus = {{0, 0.85, 0}, {1, 0.85, 0}};
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  Decision d = fw->Schedule(MakeTask(1, 0, 0, 1), c);
  EXPECT_TRUE(d.scheduled);  // 0.85 <= 0.9
  ASSERT_TRUE(c.Release(1).ok());
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  SchedulerConfig lower;
  lower.gpu_load_threshold = 0.8;
  ASSERT_TRUE(fw->SetSchedulerConfig(lower).ok());
  d = fw->Schedule(MakeTask(2, 0, 0, 1), c);
  EXPECT_FALSE(d.scheduled);
  EXPECT_EQ(d.reason, "0/1 nodes available: 1 above gpu_load_threshold");
}

TEST(FrameworkTest, FeasibleNodesToFindFollowsThePercentage) {
  EXPECT_EQ(FeasibleNodesToFind(50, 5), 50u);         // small clusters: every node
  EXPECT_EQ(FeasibleNodesToFind(1000, 0), 1000u);     // adaptive: every node up to 5,000
  EXPECT_EQ(FeasibleNodesToFind(5000, 0), 5000u);
  EXPECT_EQ(FeasibleNodesToFind(10000, 0), 500u);     // then 5%
  EXPECT_EQ(FeasibleNodesToFind(50000, 0), 2500u);
  EXPECT_EQ(FeasibleNodesToFind(10000, 100), 10000u); // 100: always every node
  EXPECT_EQ(FeasibleNodesToFind(10000, 30), 3000u);
  EXPECT_EQ(FeasibleNodesToFind(10000, 1), 100u);     // never fewer than 100
}

TEST(FrameworkTest, SamplingScoresTheFirstFeasibleNodesFromWhereTheLastCycleStopped) {
  auto fw = Make("plugins:\n  topology: {enabled: false}\nscheduler:\n  percentage_of_nodes_to_score: 10\n");
  ASSERT_EQ(fw->scheduler_config().percentage_of_nodes_to_score, 10);
  ClusterState c;
  // 1,000 nodes; the odd ones are too small for the tasks below: 500 fit.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(c.AddNode(Node("n" + std::to_string(i), i % 2 ? 500 : 8000, 8000)).ok());
  }
  // 10% of 1,000: 100 feasible nodes are enough, the first 100 from node 0
  // (0, 2, ..., 198); identical nodes tie, and the lowest id wins.
  Decision d = fw->Schedule(MakeTask(1, 1000, 1000), c);
  ASSERT_TRUE(d.scheduled);
  EXPECT_EQ(d.feasible_nodes, 100u);
  EXPECT_EQ(d.alloc.node, 0u);
  // The next cycle starts after node 198: node 0, now the fullest and
  // binpack's choice in a full pass, is not among 200..398.
  d = fw->Schedule(MakeTask(2, 1000, 1000), c);
  ASSERT_TRUE(d.scheduled);
  EXPECT_EQ(d.feasible_nodes, 100u);
  EXPECT_EQ(d.alloc.node, 200u);
  for (TaskKey k = 3; k <= 5; ++k) {  // 400.., 600.., 800..998: the last before the wrap
    d = fw->Schedule(MakeTask(k, 1000, 1000), c);
    ASSERT_TRUE(d.scheduled);
    EXPECT_EQ(d.alloc.node, NodeId(200 * (k - 1)));
  }
  // From node 999 the pass wraps to node 0: the sample is 0..198 again, and
  // node 0 holds a task: binpack takes it.
  d = fw->Schedule(MakeTask(6, 1000, 1000), c);
  ASSERT_TRUE(d.scheduled);
  EXPECT_EQ(d.feasible_nodes, 100u);
  EXPECT_EQ(d.alloc.node, 0u);

  // Started near the end, a sample holds the last nodes and the first ones;
  // in ascending order, a tie still goes to the lowest id.
  ClusterState fresh;  // 900 nodes: 10% is 90, so the floor of 100 holds
  for (int i = 0; i < 900; ++i) {
    ASSERT_TRUE(fresh.AddNode(Node("m" + std::to_string(i), i % 2 ? 500 : 8000, 8000)).ok());
  }
  CycleState st;
  for (TaskKey k = 1; k <= 4; ++k) {  // four cycles over 0..798: a task each on 0, 200, 400, 600
    ASSERT_TRUE(fw->Schedule(MakeTask(k, 1000, 1000), fresh, st).scheduled);
  }
  ASSERT_TRUE(fresh.Release(1).ok());  // node 0 is fresh again
  // From node 799: 800..898 (50 feasible), then 0..98 (50): every one is
  // fresh, and the tie goes to node 0, not to node 800 found first.
  d = fw->Schedule(MakeTask(9, 1000, 1000), fresh, st);
  ASSERT_TRUE(d.scheduled);
  EXPECT_EQ(d.feasible_nodes, 100u);
  EXPECT_EQ(d.alloc.node, 0u);

  // Nothing fits: every node is filtered, and the summary counts them all.
  d = fw->Schedule(MakeTask(10, 9000, 1000), c);
  EXPECT_FALSE(d.scheduled);
  EXPECT_EQ(d.reason, "0/1000 nodes available: 1000 insufficient CPU");

  // 100: every feasible node, every time; explain is always a full pass.
  SchedulerConfig all = fw->scheduler_config();
  all.percentage_of_nodes_to_score = 100;
  ASSERT_TRUE(fw->SetSchedulerConfig(all).ok());
  d = fw->Schedule(MakeTask(11, 1000, 1000), c);
  EXPECT_EQ(d.feasible_nodes, 500u);
  all.percentage_of_nodes_to_score = 10;
  ASSERT_TRUE(fw->SetSchedulerConfig(all).ok());
  d = fw->Schedule(MakeTask(12, 1000, 1000), c, {.explain = true});
  EXPECT_EQ(d.feasible_nodes, 500u);
  all.percentage_of_nodes_to_score = 101;
  EXPECT_EQ(fw->SetSchedulerConfig(all).code(), StatusCode::kInvalidArgument);
}

TEST(FrameworkTest, UnschedulableSummaryCountsEveryReason) {
  auto fw = Make("plugins:\n  preempt: {mode: disabled}\n");
  ClusterState c;
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(c.AddNode(Node("cpu" + std::to_string(i), 4000, 4000)).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.AddNode(Node("t4-" + std::to_string(i), 4000, 4000, 4, "T4")).ok());
  }
  for (int i = 0; i < 2; ++i) {
    NodeId n = *c.AddNode(Node("busy" + std::to_string(i), 4000, 4000, 4, "A100"));
    NodeUsage u;
    u.gpus = {{0, 0.95, 0}, {1, 0.95, 0}, {2, 0.95, 0}, {3, 0.95, 0}};
    ASSERT_TRUE(c.ReportUsage(n, u).ok());
  }
  Task t = MakeTask(1, 1000, 1000, 1);
  t.requests.gpu_models = {"A100"};
  Decision d = fw->Schedule(t, c);
  EXPECT_FALSE(d.scheduled);
  EXPECT_EQ(d.reason,
            "0/12 nodes available for GPU model A100: 7 insufficient GPU, 3 GPU model mismatch (nvidia T4), "
            "2 above gpu_load_threshold");
}

TEST(FrameworkTest, TiesGoToTheFirstNodeAndScoresAreWeighted) {
  auto fw = Make("plugins:\n  topology: {enabled: false}\n");
  ClusterState c;
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(c.AddNode(Node(name, 8000, 8000, 2)).ok());
  // Identical nodes: the first wins, every time.
  Decision d = fw->Schedule(MakeTask(1, 1000, 1000, 1), c);
  ASSERT_TRUE(d.scheduled);
  EXPECT_EQ(d.alloc.node, 0u);
  // Binpack now prefers node a (fuller). Explain shows raw and weighted scores:
  // node a: cpu 2000/8000, mem 2000/8000, gpu 2000/2000 -> (0.25+0.25+1)/3*100 = 50
  // node b: cpu 1000/8000, mem 1000/8000, gpu 1000/2000 -> (0.125+0.125+0.5)/3*100 = 25
  ASSERT_TRUE(fw->UpdatePlugin("binpack", {.weight = 2}).ok());
  d = fw->Schedule(MakeTask(2, 1000, 1000, 1), c, {.explain = true});
  ASSERT_TRUE(d.scheduled);
  EXPECT_EQ(d.alloc.node, 0u);
  ASSERT_TRUE(d.explanation);
  const auto& ex = *d.explanation;
  size_t bp = std::find(ex.score_plugins.begin(), ex.score_plugins.end(), "binpack") -
              ex.score_plugins.begin();
  ASSERT_LT(bp, ex.score_plugins.size());
  EXPECT_NEAR(ex.nodes[0].raw[bp], 50.0, 1e-9);
  EXPECT_NEAR(ex.nodes[0].weighted[bp], 100.0, 1e-9);
  EXPECT_NEAR(ex.nodes[1].raw[bp], 25.0, 1e-9);
  EXPECT_NEAR(d.score, 100.0, 1e-9);
  // The default GPU choice takes the lowest free GPU: GPU 1 (GPU 0 went to task 1).
  ASSERT_EQ(d.alloc.gpus.size(), 1u);
  EXPECT_EQ(d.alloc.gpus[0].index, 1);
}

TEST(FrameworkTest, NoGpuIsEverAllocatedTwice) {
  // Pack a node with shared requests until it is full; the sum per GPU never exceeds 1000.
  auto fw = Make("plugins:\n  topology: {enabled: false}\n");
  ClusterState c;
  NodeId n = *c.AddNode(Node("g", 1000000, 1000000, 4));
  int placed = 0;
  for (TaskKey k = 1; k <= 40; ++k) {
    Decision d = fw->Schedule(MakeTask(k, 10, 10, 1, 300 + int(k % 5) * 70), c);
    placed += d.scheduled;
  }
  // 370+440+510+580+300 repeated: the first eight use 3520 of 4000 milli and
  // leave no GPU with 300 free, whatever the GPU choice.
  EXPECT_EQ(placed, 8);
  int64_t sum = 0;
  for (int32_t f : c.gpu_free_milli(n)) {
    EXPECT_GE(f, 0);
    sum += 1000 - f;
  }
  EXPECT_EQ(sum, c.used_gpu_milli(n));
}

}  // namespace
}  // namespace hf::framework

namespace hf::framework {
namespace {

using hf::testing::MakeTask;
using hf::testing::Node;

// Tasks `first`.. of a job: 4 GPUs each, in job `job`'s group.
std::vector<Task> GangMembers(TaskKey first, int n, uint64_t job, int32_t priority = 0) {
  std::vector<Task> out;
  for (int i = 0; i < n; ++i) {
    Task t = MakeTask(first + i, 1000, 1000, 4);
    t.name = "m-" + std::to_string(i);
    t.group = "j." + std::to_string(job);
    t.priority = priority;
    t.job = {job, "j", "w", i, n, n};
    out.push_back(t);
  }
  return out;
}

std::vector<const Task*> Pointers(const std::vector<Task>& tasks) {
  std::vector<const Task*> out;
  for (const Task& t : tasks) out.push_back(&t);
  return out;
}

TEST(GangTest, AllOrNothingLeavesTheClusterAsItWas) {
  auto fw = Make(kVisionPolicy);
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("n0", 64000, 256000, 4)).ok());
  ASSERT_TRUE(c.AddNode(Node("n1", 64000, 256000, 4)).ok());
  CycleState state;
  const std::vector<Task> three = GangMembers(1, 3, 7);
  GangDecision g = fw->ScheduleGang(Pointers(three), 3, c, state);
  EXPECT_FALSE(g.scheduled);
  EXPECT_EQ(c.placed_count(), 0u);
  EXPECT_EQ(g.reason.rfind("gang 2/3 placeable: m-2: 0/2 nodes available", 0), 0u) << g.reason;
  ASSERT_EQ(g.members.size(), 3u);
  for (const Decision& d : g.members) {
    EXPECT_FALSE(d.scheduled);
    EXPECT_EQ(d.reason, g.reason);
  }
  // Two fit, one per node, in one call.
  const std::vector<Task> two = GangMembers(10, 2, 8);
  g = fw->ScheduleGang(Pointers(two), 2, c, state);
  ASSERT_TRUE(g.scheduled) << g.reason;
  EXPECT_EQ(c.placed_count(), 2u);
  EXPECT_NE(g.members[0].alloc.node, g.members[1].alloc.node);
  // Fewer than all may be enough (min_available): 1 of 2 needed, none fits.
  const std::vector<Task> more = GangMembers(20, 2, 9);
  g = fw->ScheduleGang(Pointers(more), 1, c, state);
  EXPECT_FALSE(g.scheduled);
  EXPECT_EQ(g.reason.rfind("gang 0/1 placeable", 0), 0u) << g.reason;
  EXPECT_EQ(c.placed_count(), 2u);
}

TEST(GangTest, AFailedGangPutsItsVictimsBack) {
  auto fw = Make(kVisionPolicy);  // preempt: scheduled tasks of lower priority
  ClusterState c;
  const NodeId n0 = *c.AddNode(Node("n0", 64000, 256000, 4));
  ASSERT_TRUE(c.AddNode(Node("n1", 64000, 256000, 4)).ok());
  Task low = MakeTask(100, 1000, 1000, 4);
  ASSERT_TRUE(c.Bind(low, hf::testing::AllocFor(low, n0, {{0, 1000, 0}, {1, 1000, 0}, {2, 1000, 0},
                                                         {3, 1000, 0}}))
                  .ok());
  const PlacedTask before = *c.FindPlaced(100);
  CycleState state;
  // Three members of priority 10: one fits beside `low`, one displaces it,
  // the third fits nowhere: nothing changes.
  const std::vector<Task> three = GangMembers(1, 3, 7, 10);
  GangDecision g = fw->ScheduleGang(Pointers(three), 3, c, state);
  EXPECT_FALSE(g.scheduled);
  ASSERT_NE(c.FindPlaced(100), nullptr);
  EXPECT_EQ(c.FindPlaced(100)->alloc.gpus, before.alloc.gpus);
  EXPECT_EQ(c.placed_count(), 1u);
  for (const Decision& d : g.members) EXPECT_TRUE(d.victims.empty());
  // Two members: the second displaces `low`, and says so.
  const std::vector<Task> two = GangMembers(10, 2, 8, 10);
  g = fw->ScheduleGang(Pointers(two), 2, c, state);
  ASSERT_TRUE(g.scheduled) << g.reason;
  EXPECT_EQ(c.FindPlaced(100), nullptr);
  EXPECT_EQ(g.members[0].victims.size() + g.members[1].victims.size(), 1u);
}

TEST(GangTest, AVictimsJobMatesAreEvictedWithIt) {
  auto fw = Make(kVisionPolicy);
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("n0", 64000, 256000, 4)).ok());
  ASSERT_TRUE(c.AddNode(Node("n1", 64000, 256000, 4)).ok());
  CycleState state;
  const std::vector<Task> low = GangMembers(1, 2, 5, 0);
  ASSERT_TRUE(fw->ScheduleGang(Pointers(low), 2, c, state).scheduled);
  // One task that needs one node: both ranks of the running gang go.
  Task high = MakeTask(50, 1000, 1000, 4);
  high.priority = 100;
  Decision d = fw->Schedule(high, c, state);
  ASSERT_TRUE(d.scheduled) << d.reason;
  std::vector<TaskKey> victims = d.victims;
  std::sort(victims.begin(), victims.end());
  EXPECT_EQ(victims, (std::vector<TaskKey>{1, 2}));
  EXPECT_EQ(c.placed_count(), 1u);
  EXPECT_EQ(d.evicted.size(), 2u);
}

TEST(GangTest, AGangCountsWholeAmongVictims) {
  // n0, n1: a 2-member gang; n2: one task; all of priority 0. A node's
  // victims alone tie (one each) and the lowest NodeId would win, evicting
  // the gang; counted whole, the gang costs two, and the task goes.
  auto fw = Make(kVisionPolicy);
  ClusterState c;
  for (const char* name : {"n0", "n1", "n2"}) ASSERT_TRUE(c.AddNode(Node(name, 64000, 256000, 4)).ok());
  CycleState state;
  const std::vector<Task> gang = GangMembers(1, 2, 5, 0);
  ASSERT_TRUE(fw->ScheduleGang(Pointers(gang), 2, c, state).scheduled);
  Task single = MakeTask(30, 1000, 1000, 4);
  ASSERT_TRUE(fw->Schedule(single, c, state).scheduled);
  ASSERT_EQ(c.FindPlaced(30)->alloc.node, 2u);
  Task high = MakeTask(50, 1000, 1000, 4);
  high.priority = 100;
  Decision d = fw->Schedule(high, c, state);
  ASSERT_TRUE(d.scheduled) << d.reason;
  EXPECT_EQ(d.victims, (std::vector<TaskKey>{30}));
  EXPECT_NE(c.FindPlaced(1), nullptr);
  EXPECT_NE(c.FindPlaced(2), nullptr);
}

TEST(GangTest, OnANodeTheGangsMemberIsSparedBeforeALoneTask) {
  // n0 (8 GPUs): a lone task (the lower key, so spared first before gangs
  // counted) and rank 0 of a gang whose rank 1 is on n1. One victim frees
  // enough on n0: the lone task, not the gang.
  auto fw = Make(kVisionPolicy);
  ClusterState c;
  const NodeId n0 = *c.AddNode(Node("n0", 64000, 256000, 8));
  const NodeId n1 = *c.AddNode(Node("n1", 64000, 256000, 4));
  Task lone = MakeTask(1, 1000, 1000, 4);
  ASSERT_TRUE(c.Bind(lone, AllocFor(lone, n0, {{0, 1000, 0}, {1, 1000, 0}, {2, 1000, 0}, {3, 1000, 0}})).ok());
  std::vector<Task> gang = GangMembers(10, 2, 5, 0);
  ASSERT_TRUE(c.Bind(gang[0], AllocFor(gang[0], n0, {{4, 1000, 0}, {5, 1000, 0}, {6, 1000, 0}, {7, 1000, 0}})).ok());
  ASSERT_TRUE(c.Bind(gang[1], AllocFor(gang[1], n1, {{0, 1000, 0}, {1, 1000, 0}, {2, 1000, 0}, {3, 1000, 0}})).ok());
  Task high = MakeTask(50, 1000, 1000, 4);
  high.priority = 100;
  CycleState state;
  Decision d = fw->Schedule(high, c, state);
  ASSERT_TRUE(d.scheduled) << d.reason;
  EXPECT_EQ(d.victims, (std::vector<TaskKey>{1}));
  EXPECT_EQ(c.placed_count(), 3u);
}

TEST(GangTest, AGangThatCannotGoLeavesTheNodesOtherVictims) {
  // n0 (8 GPUs): a lone task and rank 0 of a gang whose rank 1 (on n1) may
  // not be preempted. The gang is no victim, but the lone task still is.
  auto fw = Make(kVisionPolicy);
  ClusterState c;
  const NodeId n0 = *c.AddNode(Node("n0", 64000, 256000, 8));
  const NodeId n1 = *c.AddNode(Node("n1", 64000, 256000, 4));
  std::vector<Task> gang = GangMembers(1, 2, 5, 0);
  gang[1].preemptible = false;
  ASSERT_TRUE(c.Bind(gang[0], AllocFor(gang[0], n0, {{0, 1000, 0}, {1, 1000, 0}, {2, 1000, 0}, {3, 1000, 0}})).ok());
  ASSERT_TRUE(c.Bind(gang[1], AllocFor(gang[1], n1, {{0, 1000, 0}, {1, 1000, 0}, {2, 1000, 0}, {3, 1000, 0}})).ok());
  Task lone = MakeTask(30, 1000, 1000, 4);
  lone.priority = 5;  // spared before the gang's member, were that one a victim
  ASSERT_TRUE(c.Bind(lone, AllocFor(lone, n0, {{4, 1000, 0}, {5, 1000, 0}, {6, 1000, 0}, {7, 1000, 0}})).ok());
  Task high = MakeTask(50, 1000, 1000, 4);
  high.priority = 100;
  CycleState state;
  Decision d = fw->Schedule(high, c, state);
  ASSERT_TRUE(d.scheduled) << d.reason;
  EXPECT_EQ(d.victims, (std::vector<TaskKey>{30}));
}

TEST(GangTest, AGangWithAMemberThatMayNotBePreemptedIsNotEvicted) {
  auto fw = Make(kVisionPolicy);
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("n0", 64000, 256000, 4)).ok());
  ASSERT_TRUE(c.AddNode(Node("n1", 64000, 256000, 4)).ok());
  CycleState state;
  std::vector<Task> low = GangMembers(1, 2, 5, 0);
  low[1].preemptible = false;  // rank 1 must not be stopped
  ASSERT_TRUE(fw->ScheduleGang(Pointers(low), 2, c, state).scheduled);
  Task high = MakeTask(50, 1000, 1000, 4);
  high.priority = 100;
  Decision d = fw->Schedule(high, c, state);
  // Rank 0 alone could go, but not without rank 1: nothing is evicted.
  EXPECT_FALSE(d.scheduled);
  EXPECT_TRUE(d.victims.empty());
  EXPECT_EQ(c.placed_count(), 2u);
  EXPECT_NE(c.FindPlaced(1), nullptr);
  EXPECT_NE(c.FindPlaced(2), nullptr);
}

}  // namespace
}  // namespace hf::framework

namespace hf::framework {
namespace {

using hf::testing::Node;

// Binpack and the topology plugin on the nodes' own positions.
constexpr const char* kGangPolicy = R"(
plugins:
  binpack:  {enabled: true, weight: 1}
  topology: {enabled: true, weight: 1}
)";

// Per member, its node's rack (or switch: &TopologyPosition::switch_name).
std::vector<std::string> PlacesOf(const ClusterState& c, const GangDecision& g,
                                  std::string TopologyPosition::*level = &TopologyPosition::rack) {
  std::vector<std::string> out;
  for (const Decision& d : g.members) out.push_back(c.spec(d.alloc.node).topology.*level);
  return out;
}

std::vector<std::string> ModelsOf(const ClusterState& c, const GangDecision& g) {
  std::vector<std::string> out;
  for (const Decision& d : g.members) out.push_back(c.GpuModelOf(d.alloc));
  return out;
}

TEST(GangPlacementTest, MembersShareOneGpuModelUnlessTheJobAllowsSeveral) {
  // Ties go to the first node: one by one, rank 0 takes n0's A100s and
  // rank 1 the first H100 node, a mixed gang.
  const auto cluster = [] {
    ClusterState c;
    EXPECT_TRUE(c.AddNode(Node("n0", 64000, 256000, 4, "A100")).ok());
    EXPECT_TRUE(c.AddNode(Node("n1", 64000, 256000, 4, "H100")).ok());
    EXPECT_TRUE(c.AddNode(Node("n2", 64000, 256000, 4, "H100")).ok());
    return c;
  };
  auto fw = Make(kGangPolicy);
  const std::vector<Task> two = GangMembers(1, 2, 7);
  ClusterState same = cluster();
  CycleState state;
  GangDecision g = fw->ScheduleGang(Pointers(two), 2, same, state);
  ASSERT_TRUE(g.scheduled) << g.reason;
  EXPECT_EQ(ModelsOf(same, g), (std::vector<std::string>{"H100", "H100"}));

  GangOptions any;
  any.one_gpu_model = false;
  ClusterState mixed = cluster();
  g = fw->ScheduleGang(Pointers(two), 2, mixed, state, {}, any);
  ASSERT_TRUE(g.scheduled) << g.reason;
  EXPECT_EQ(ModelsOf(mixed, g), (std::vector<std::string>{"A100", "H100"}));

  // No model holds the gang: it waits, and says on which model it tried.
  ClusterState small;
  ASSERT_TRUE(small.AddNode(Node("a", 64000, 256000, 4, "A100")).ok());
  ASSERT_TRUE(small.AddNode(Node("h", 64000, 256000, 4, "H100")).ok());
  g = fw->ScheduleGang(Pointers(two), 2, small, state);
  EXPECT_FALSE(g.scheduled);
  EXPECT_EQ(small.placed_count(), 0u);
  EXPECT_EQ(g.reason.rfind("gang 1/2 placeable on one GPU model (A100): m-1: 0/2 nodes available", 0),
            0u)
      << g.reason;
  EXPECT_TRUE(fw->ScheduleGang(Pointers(two), 2, small, state, {}, any).scheduled);
}

TEST(GangPlacementTest, EachMembersGpusShareAnNvlinkDomainAndItsNicTheirPcieSwitch) {
  // Two 8-GPU nodes, GPUs i on NVLink domain and PCIe switch i / 4, a NIC
  // on each switch. GPUs 1 and 2 are taken on both: the lowest free four
  // (0, 3, 4, 5) would cross domains; domain 1 (4..7) has all four free.
  auto fw = Make(R"(
plugins:
  binpack:  {enabled: true, weight: 1}
  rdma:     {enabled: true, weight: 1}
  topology: {enabled: true, weight: 1}
)");
  ClusterState c;
  for (const char* name : {"n0", "n1"}) {
    NodeSpec s = Node(name, 64000, 256000, 8);
    s.rdma = {{"mlx5_0", 0, 0}, {"mlx5_1", 1, 1}};
    const NodeId n = *c.AddNode(s);
    Task busy = MakeTask(100 + n, 1000, 1000, 2);
    ASSERT_TRUE(c.Bind(busy, AllocFor(busy, n, {{1, 1000, 0}, {2, 1000, 0}})).ok());
  }
  std::vector<Task> two = GangMembers(1, 2, 7);
  for (Task& t : two) t.rdma_required = true;
  CycleState state;
  GangDecision g = fw->ScheduleGang(Pointers(two), 2, c, state);
  ASSERT_TRUE(g.scheduled) << g.reason;
  for (const Decision& d : g.members) {
    std::vector<int32_t> gpus;
    for (const GpuGrant& grant : d.alloc.gpus) gpus.push_back(grant.index);
    std::sort(gpus.begin(), gpus.end());
    EXPECT_EQ(gpus, (std::vector<int32_t>{4, 5, 6, 7}));
    EXPECT_EQ(d.alloc.rdma_device, "mlx5_1");
  }
}

TEST(GangPlacementTest, AGangGoesToOneRackWhenOneHoldsIt) {
  // Racks r1 (n0, n1) and r2 (n2, n3) under one switch; n1 is full. One by
  // one, rank 0 takes n0 (the first node) and rank 1 must leave r1.
  const auto cluster = [] {
    ClusterState c;
    for (const char* name : {"n0", "n1", "n2", "n3"}) {
      NodeSpec s = Node(name, 64000, 256000, 4);
      s.topology = {"z", "s1", name[1] < '2' ? "r1" : "r2"};
      EXPECT_TRUE(c.AddNode(s).ok());
    }
    Task full = MakeTask(100, 1000, 1000, 4);
    EXPECT_TRUE(c.Bind(full, AllocFor(full, 1, {{0, 1000, 0}, {1, 1000, 0}, {2, 1000, 0},
                                               {3, 1000, 0}}))
                    .ok());
    return c;
  };
  auto fw = Make(kGangPolicy);
  const std::vector<Task> two = GangMembers(1, 2, 7);
  CycleState state;
  ClusterState racked = cluster();
  GangDecision g = fw->ScheduleGang(Pointers(two), 2, racked, state);
  ASSERT_TRUE(g.scheduled) << g.reason;
  EXPECT_EQ(PlacesOf(racked, g), (std::vector<std::string>{"r2", "r2"}));

  // pack: none tries no rack first: the members land where the policy puts
  // them one by one, across both racks.
  GangOptions none;
  none.domain = GangOptions::Domain::kNone;
  ClusterState loose = cluster();
  g = fw->ScheduleGang(Pointers(two), 2, loose, state, {}, none);
  ASSERT_TRUE(g.scheduled) << g.reason;
  const auto racks = PlacesOf(loose, g);
  EXPECT_NE(racks[0], racks[1]);

  // No rack holds a 3-member gang: it is still placed, across racks.
  const std::vector<Task> three = GangMembers(10, 3, 8);
  ClusterState wide = cluster();
  g = fw->ScheduleGang(Pointers(three), 3, wide, state);
  ASSERT_TRUE(g.scheduled) << g.reason;
}

TEST(GangPlacementTest, LateMembersAreAllPlacedOrTriedEverywhere) {
  // need 0 (the gang is whole already): two late members of 4 GPUs. Rack
  // r1 (n0: 8 GPUs but CPU for one member) fits their GPUs best; a trial
  // there places one and must not count as success: both go to r2.
  ClusterState c;
  NodeSpec n0 = Node("n0", 1500, 256000, 8);
  n0.topology = {"z", "s1", "r1"};
  ASSERT_TRUE(c.AddNode(n0).ok());
  for (const char* name : {"n1", "n2", "n3"}) {
    NodeSpec s = Node(name, 64000, 256000, 4);
    s.topology = {"z", "s1", "r2"};
    ASSERT_TRUE(c.AddNode(s).ok());
  }
  auto fw = Make(kGangPolicy);
  const std::vector<Task> late = GangMembers(1, 2, 7);
  CycleState state;
  GangDecision g = fw->ScheduleGang(Pointers(late), 0, c, state);
  ASSERT_TRUE(g.scheduled) << g.reason;
  for (const Decision& d : g.members) ASSERT_TRUE(d.scheduled) << d.reason;
  EXPECT_EQ(PlacesOf(c, g), (std::vector<std::string>{"r2", "r2"}));
}

TEST(GangPlacementTest, LateMembersJoinTheGangsModel) {
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("a", 64000, 256000, 4, "A100")).ok());
  ASSERT_TRUE(c.AddNode(Node("h", 64000, 256000, 4, "H100")).ok());
  auto fw = Make(kGangPolicy);
  const std::vector<Task> late = GangMembers(1, 1, 7);
  GangOptions joined;
  joined.gpu_model = "H100";  // where the gang's placed members run
  CycleState state;
  GangDecision g = fw->ScheduleGang(Pointers(late), 1, c, state, {}, joined);
  ASSERT_TRUE(g.scheduled) << g.reason;
  EXPECT_EQ(ModelsOf(c, g), (std::vector<std::string>{"H100"}));
}

TEST(GangPlacementTest, AGangGoesToOneSwitchWhenNoRackHoldsIt) {
  // Switch s1: racks r1 (n0, full) and r2 (n1); switch s2: racks r3 (n2),
  // r4 (n3). Two members of 4 GPUs fit in no rack; s2 holds both.
  ClusterState c;
  const char* racks[] = {"r1", "r2", "r3", "r4"};
  for (int i = 0; i < 4; ++i) {
    NodeSpec s = Node("n" + std::to_string(i), 64000, 256000, 4);
    s.topology = {"z", i < 2 ? "s1" : "s2", racks[i]};
    ASSERT_TRUE(c.AddNode(s).ok());
  }
  // n0 keeps one GPU free, so that one by one rank 0 goes to n1 (s1),
  // leaving rank 1 to cross to s2.
  Task busy = MakeTask(100, 1000, 1000, 3);
  ASSERT_TRUE(c.Bind(busy, AllocFor(busy, 0, {{0, 1000, 0}, {1, 1000, 0}, {2, 1000, 0}})).ok());
  auto fw = Make(kGangPolicy);
  const std::vector<Task> two = GangMembers(1, 2, 7);
  CycleState state;
  ClusterState loose = c;
  GangDecision g = fw->ScheduleGang(Pointers(two), 2, c, state);
  ASSERT_TRUE(g.scheduled) << g.reason;
  EXPECT_EQ(PlacesOf(c, g, &TopologyPosition::switch_name), (std::vector<std::string>{"s2", "s2"}));
  // Without the domain trials the gang crosses switches.
  GangOptions none;
  none.domain = GangOptions::Domain::kNone;
  g = fw->ScheduleGang(Pointers(two), 2, loose, state, {}, none);
  ASSERT_TRUE(g.scheduled) << g.reason;
  const auto switches = PlacesOf(loose, g, &TopologyPosition::switch_name);
  EXPECT_NE(switches[0], switches[1]);
}

}  // namespace
}  // namespace hf::framework

namespace hf::framework {
namespace {

// A plugin that records the arrivals it is told of.
class RecordArrivals final : public ScorePlugin, public ArrivalObserver {
 public:
  static std::vector<TaskKey>& seen() {
    static std::vector<TaskKey> v;
    return v;
  }
  explicit RecordArrivals(const PluginDeps&) {}
  std::string_view Name() const override { return "record_arrivals"; }
  uint32_t Points() const override { return kScorePoint; }
  void Observe(const Task& task) override { seen().push_back(task.key); }
  void Score(const Task&, const ClusterState&, std::span<const NodeId>, std::span<double> scores,
             CycleState&) const override {
    std::fill(scores.begin(), scores.end(), 0.0);
  }
};

TEST(ArrivalObserverTest, EveryDecisionTellsTheObserversPlacedOrNot) {
  Registry r;
  for (const PluginFactory& f : hf::plugins::InTreeRegistry().entries()) ASSERT_TRUE(r.Register(f).ok());
  ASSERT_TRUE(r.Register({"record_arrivals", false, {true, 1, "", nlohmann::json::object()},
                          [](const PluginDeps& d) { return std::make_unique<RecordArrivals>(d); }})
                  .ok());
  auto fw = Framework::Create(r, Policy{}, nullptr);
  ASSERT_TRUE(fw.ok()) << fw.status().ToString();
  ClusterState c;
  ASSERT_TRUE(c.AddNode(Node("n", 8000, 65536, 1, "A100")).ok());
  RecordArrivals::seen().clear();
  EXPECT_TRUE((*fw)->Schedule(MakeTask(1, 1000, 1024, 1), c).scheduled);
  EXPECT_FALSE((*fw)->Schedule(MakeTask(2, 1000, 1024, 4), c).scheduled);  // never fits
  EXPECT_FALSE((*fw)->Schedule(MakeTask(2, 1000, 1024, 4), c).scheduled);  // tried again
  EXPECT_EQ(RecordArrivals::seen(), (std::vector<TaskKey>{1, 2, 2}));
  // Disabled: not told.
  ASSERT_TRUE((*fw)->UpdatePlugin("record_arrivals", PluginPatch{.enabled = false}).ok());
  (*fw)->Schedule(MakeTask(3, 0, 0), c);
  EXPECT_EQ(RecordArrivals::seen().size(), 3u);
}

}  // namespace
}  // namespace hf::framework
