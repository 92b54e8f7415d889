#include "cli/output.h"

#include <gtest/gtest.h>

#include "core/time.h"

namespace hf::cli {
namespace {

using nlohmann::json;

// 2026-12-02T14:00:00Z.
constexpr int64_t kNow = 1796220000;

TEST(OutputTest, FormatTableAlignsColumns) {
  EXPECT_EQ(FormatTable({{"NAME", "X", "LAST"}, {"a-long-name", "1", ""}, {"b", "22", "z"}}),
            "NAME          X    LAST\n"
            "a-long-name   1\n"
            "b             22   z\n");
}

TEST(OutputTest, Rfc3339AndAges) {
  EXPECT_EQ(ParseRfc3339("2026-12-02T14:00:00Z"), kNow);
  EXPECT_EQ(ParseRfc3339("2026-12-02T14:00:00.123Z"), kNow);
  EXPECT_EQ(ParseRfc3339("2026-12-02T15:30:00+01:30"), kNow);
  EXPECT_EQ(ParseRfc3339("2026-12-02T14:00:00"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("yesterday"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("2026-13-02T14:00:00Z"), std::nullopt);
  struct Row {
    int64_t s;
    const char* want;
  };
  for (const Row& r : std::initializer_list<Row>{{0, "0s"},
                                                 {119, "119s"},
                                                 {120, "2m"},
                                                 {10799, "179m"},
                                                 {10800, "3h"},
                                                 {172800, "2d"},
                                                 {730 * 86400, "2y"},
                                                 {-5, "<none>"}}) {
    EXPECT_EQ(FormatAge(r.s), r.want) << r.s;
  }
}

TEST(OutputTest, Quantities) {
  EXPECT_EQ(Cores(4000), "4");
  EXPECT_EQ(Cores(1500), "1.5");
  EXPECT_EQ(Cores(250), "0.25");
  EXPECT_EQ(Cores(0), "0");
  EXPECT_EQ(Memory(16384), "16Gi");
  EXPECT_EQ(Memory(1536), "1.5Gi");
  EXPECT_EQ(Memory(500), "500Mi");
  EXPECT_EQ(GpuRequest(json::parse(R"({"gpu":2})")), "2");
  EXPECT_EQ(GpuRequest(json::parse(R"({"gpu":2,"gpu_milli":1000})")), "2");
  EXPECT_EQ(GpuRequest(json::parse(R"({"gpu":1,"gpu_milli":500})")), "500m");
  EXPECT_EQ(GpuRequest(json::parse(R"({"gpu":2,"gpu_milli":250})")), "2x250m");
  EXPECT_EQ(GpuRequest(json::parse(R"({"cpu_milli":100})")), "0");
  EXPECT_EQ(Text(json::parse(R"({"a": 4.0})"), "a"), "4");
  EXPECT_EQ(Text(json::parse(R"({"a": 0.5})"), "a"), "0.5");
}

TEST(OutputTest, TasksTable) {
  const json tasks = json::parse(R"([
    {"id": 17, "name": "train-a", "state": "scheduled", "priority": 5, "node": "gpu-a1",
     "requests": {"gpu": 2, "gpu_milli": 1000}, "created_at": "2026-12-02T13:55:00Z",
     "pending_reason": ""},
    {"id": 18, "name": "infer", "state": "pending", "priority": 0, "node": null,
     "requests": {"gpu": 1, "gpu_milli": 500}, "created_at": "2026-12-02T13:59:30Z",
     "pending_reason": "0/2 nodes available: 2 Insufficient GPU"}])");
  EXPECT_EQ(TasksTable(tasks, kNow),
            "ID   NAME      STATE       PRIORITY   NODE     GPU    AGE   REASON\n"
            "17   train-a   scheduled   5          gpu-a1   2      5m\n"
            "18   infer     pending     0          <none>   500m   30s   0/2 nodes available: 2 "
            "Insufficient GPU\n");
}

TEST(OutputTest, NodesTable) {
  const json nodes = json::parse(R"([
    {"name": "gpu-a1", "condition": "Ready", "cpu_milli": 64000, "memory_mib": 524288,
     "gpus": [{"index": 0, "vendor": "nvidia", "model": "A100-80G", "allocated_milli": 1000},
              {"index": 1, "vendor": "nvidia", "model": "A100-80G", "allocated_milli": 500}],
     "topology": {"zone": "z", "switch": "s", "rack": "r1"},
     "allocated": {"cpu_milli": 4000, "memory_mib": 16384, "gpu_milli": 1500}},
    {"name": "npu-1", "condition": "Ready", "cpu_milli": 8000, "memory_mib": 1024,
     "gpus": [{"index": 0, "vendor": "huawei", "model": "Ascend910B"},
              {"index": 1, "vendor": "huawei", "model": "Ascend910B"}]},
    {"name": "cpu-1", "condition": "Draining", "cpu_milli": 8000, "memory_mib": 1024}])");
  EXPECT_EQ(NodesTable(nodes),
            "NAME     CONDITION   GPUS             VENDOR   MODEL        CPU    MEM          RACK\n"
            "gpu-a1   Ready       2/2 (1 shared)   nvidia   A100-80G     4/64   16Gi/512Gi   r1\n"
            "npu-1    Ready       0/2              huawei   Ascend910B   0/8    0Mi/1Gi      <none>\n"
            "cpu-1    Draining    0/0              <none>   <none>       0/8    0Mi/1Gi      <none>\n");
}

// Three whole GPUs and a memory-only replica's share of 1 on a 4-GPU node
// used to read 3.001/4.
TEST(OutputTest, NodeGpusCountsGpusInUseAndShared) {
  const auto node = [](std::vector<int> milli) {
    json gpus = json::array();
    int64_t sum = 0;
    for (size_t i = 0; i < milli.size(); ++i) {
      gpus.push_back({{"index", i}, {"model", "T4"}, {"allocated_milli", milli[i]}});
      sum += milli[i];
    }
    return json{{"gpus", gpus}, {"allocated", {{"gpu_milli", sum}}}};
  };
  EXPECT_EQ(NodeGpus(node({1000, 1000, 1000, 1})), "4/4 (1 shared)");
  EXPECT_EQ(NodeGpus(node({1000, 1000, 1000, 0})), "3/4");
  EXPECT_EQ(NodeGpus(node({250, 250, 0, 0})), "2/4 (2 shared)");
  EXPECT_EQ(NodeGpus(node({0, 0})), "0/2");
  EXPECT_EQ(NodeGpus(json::object()), "0/0");
  // Without per-GPU figures: the node's share in whole GPUs, rounded up.
  EXPECT_EQ(NodeGpus(json{{"gpus", {{{"index", 0}}, {{"index", 1}}}}, {"allocated", {{"gpu_milli", 1001}}}}),
            "2/2");
}

TEST(OutputTest, GpuCellShowsTheGpuMemoryOfAShare) {
  EXPECT_EQ(GpuCell(json::parse(R"({"gpu":2})")), "2");
  EXPECT_EQ(GpuCell(json::parse(R"({"gpu":1,"gpu_milli":500})")), "500m");
  EXPECT_EQ(GpuCell(json::parse(R"({"gpu":1,"gpu_milli":500,"gpu_memory_mib":20480})")), "500m+20Gi");
  EXPECT_EQ(GpuCell(json::parse(R"({"gpu":1,"gpu_milli":1,"gpu_memory_mib":20480})")), "20Gi");
  EXPECT_EQ(GpuCell(json::parse(R"({"gpu":2,"gpu_milli":1,"gpu_memory_mib":512})")), "2x512Mi");
  EXPECT_EQ(GpuCell(json::parse(R"({"gpu":1,"gpu_milli":1000,"gpu_memory_mib":20480})")), "1");
  EXPECT_EQ(GpuCell(json::parse(R"({"cpu_milli":100})")), "0");
}

TEST(OutputTest, QueuesTable) {
  const json queues = json::parse(R"([
    {"name": "root", "parent": null, "weight": 1.0, "guaranteed": {}, "max": {},
     "usage": {"gpu": {"A100-80G": 12, "T4": 0.5}}, "borrowed": {"gpu": {}},
     "dominant_share": 0.75, "pending": 3, "running": 9},
    {"name": "team-a", "parent": "root", "weight": 2.0,
     "guaranteed": {"gpu": {"A100-80G": 8}}, "max": {"gpu": {"*": 16}},
     "usage": {"gpu": {"A100-80G": 12}}, "borrowed": {"gpu": {"A100-80G": 4}},
     "dominant_share": 0.75, "pending": 3, "running": 9}])");
  EXPECT_EQ(QueuesTable(queues),
            "NAME     PARENT   WEIGHT   GPUS   GUARANTEED   MAX    BORROWED   SHARE   PENDING   RUNNING\n"
            "root              1        12.5   0            -      0          75%     3         9\n"
            "team-a   root     2        12     A100-80G:8   *:16   4          75%     3         9\n");
}

TEST(OutputTest, PluginsTokensAndConfig) {
  const json plugins = json::parse(R"([
    {"name": "binpack", "type": "Score", "enabled": true, "weight": 2, "status": "active"},
    {"name": "topology", "type": "Score", "enabled": false, "weight": 0.5,
     "status": "disabled", "mode": "prefer"}])");
  EXPECT_EQ(PluginsTable(plugins),
            "NAME       TYPE    ENABLED   WEIGHT   STATUS     MODE\n"
            "binpack    Score   true      2        active     <none>\n"
            "topology   Score   false     0.5      disabled   prefer\n");
  const json tokens = json::parse(R"([
    {"id": 1, "name": "admin", "role": "admin", "created_at": "2026-12-01T14:00:00Z",
     "expires_at": null, "revoked_at": null, "active": true}])");
  EXPECT_EQ(TokensTable(tokens, kNow),
            "ID   NAME    ROLE    ACTIVE   AGE   EXPIRES\n"
            "1    admin   admin   true     24h   never\n");
  const json config = json::parse(
      R"({"load_threshold": 0.85, "score_weights": {"binpack": 2, "spread": 0}, "x": "s"})");
  EXPECT_EQ(KeyValueTable(config),
            "KEY                     VALUE\n"
            "load_threshold          0.85\n"
            "score_weights.binpack   2\n"
            "score_weights.spread    0\n"
            "x                       s\n");
}

TEST(OutputTest, ModelsAndEndpointsTables) {
  const json models = json::parse(R"([
    {"name": "qwen", "model": "Qwen/Qwen2-7B", "status": "running", "ready_replicas": 2,
     "desired_replicas": 2, "inflight": 3, "queued": 0, "min_replicas": 1, "max_replicas": 4,
     "autoscaling": {"target_inflight_per_replica": 8.0}, "revision": 2,
     "created_at_ms": 1796219700000},
    {"name": "tiny", "model": "tiny", "status": "deploying", "ready_replicas": 0,
     "desired_replicas": 1, "inflight": 0, "queued": 1, "min_replicas": 1, "max_replicas": 1,
     "revision": 1, "created_at_ms": 1796219970000}])");
  EXPECT_EQ(ModelsTable(models, kNow),
            "NAME   MODEL           STATUS      READY   INFLIGHT   QUEUED   MIN-MAX   AUTOSCALE   "
            "REVISION   AGE\n"
            "qwen   Qwen/Qwen2-7B   running     2/2     3          0        1-4       8           "
            "2          5m\n"
            "tiny   tiny            deploying   0/1     0          1        1-1       -           "
            "1          30s\n");
  const json endpoints = json::parse(R"([
    {"name": "chat", "model": "qwen", "public": false,
     "keys": [{"id": 1, "name": "default", "created_at_ms": 1796219700000}],
     "requests": 120, "errors": 2, "inflight": 1, "requests_per_s": 3.5,
     "latency_ms": {"p50": 41.5, "p99": 980}},
    {"name": "open", "model": "tiny", "public": true, "keys": [], "requests": 0, "errors": 0,
     "inflight": 0, "requests_per_s": 0, "latency_ms": {"p50": 0, "p99": 0}}])");
  EXPECT_EQ(EndpointsTable(endpoints),
            "NAME   MODEL   PUBLIC   KEYS   REQ/S   REQUESTS   ERRORS   P50      P99     INFLIGHT\n"
            "chat   qwen    false    1      3.5     120        2        41.5ms   980ms   1\n"
            "open   tiny    true     0      0       0          0        -        -       0\n");
  EXPECT_EQ(ModelsTable(json::array({json::object()}), kNow),
            "NAME     MODEL    STATUS   READY           INFLIGHT   QUEUED   MIN-MAX         "
            "AUTOSCALE   REVISION   AGE\n"
            "<none>   <none>   <none>   <none>/<none>   <none>     <none>   <none>-<none>   -"
            "           <none>     <none>\n");
  EXPECT_EQ(FormatTimeSeconds(1796220000123), "2026-12-02T14:00:00Z");
  EXPECT_EQ(Millis(3), "3ms");
}

TEST(OutputTest, ToleratesMissingFields) {
  EXPECT_EQ(TasksTable(json::parse(R"([{"id": 1}])"), kNow),
            "ID   NAME     STATE    PRIORITY   NODE     GPU   AGE   REASON\n"
            "1    <none>   <none>   <none>     <none>   0\n");
  EXPECT_NE(NodesTable(json::array({json::object(), 3})).find("<none>"), std::string::npos);
  EXPECT_EQ(TasksTable(json::object(), kNow),
            "ID   NAME   STATE   PRIORITY   NODE   GPU   AGE   REASON\n");
}

TEST(OutputTest, Serialize) {
  const json v = json::parse(R"({"a": [1, "x"]})");
  EXPECT_EQ(Serialize(v, OutputFormat::kJson), "{\n  \"a\": [\n    1,\n    \"x\"\n  ]\n}\n");
  EXPECT_EQ(Serialize(v, OutputFormat::kYaml), "a:\n  - 1\n  - x\n");
  EXPECT_TRUE(ParseOutputFormat("yaml").ok());
  EXPECT_FALSE(ParseOutputFormat("wide").ok());
}

}  // namespace
}  // namespace hf::cli
