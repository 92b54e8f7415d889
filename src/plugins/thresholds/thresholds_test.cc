#include "plugins/thresholds/thresholds.h"

#include <gtest/gtest.h>

#include "core/testing/nodes.h"

namespace hf::plugins {
namespace {

using hf::testing::AllocFor;
using hf::testing::MakeTask;
using hf::testing::Node;

struct Row {
  const char* name;
  bool measured;
  double cpu_load, memory_used, gpu_util;  // reported
  Task inflight;                           // bound after the report (key 100)
  Task task;
  std::string want;  // "" = passes, else the reason
};

TEST(LoadThresholdTest, Table) {
  // Node: 10 cores, 10000 MiB, 2 GPUs. Thresholds: cpu 0.8, gpu 0.9, memory 0.85.
  const Row rows[] = {
      {"no measurement passes", false, 0, 0, 0, MakeTask(0, 0, 0), MakeTask(1, 0, 0, 1), ""},
      {"cpu 0.81 > 0.8", true, 0.81, 0, 0, MakeTask(0, 0, 0), MakeTask(1, 0, 0), "above load_threshold"},
      {"cpu exactly 0.8 passes", true, 0.8, 0, 0, MakeTask(0, 0, 0), MakeTask(1, 0, 0), ""},
      {"cpu 0.7 + in-flight 2000/10000 = 0.9", true, 0.7, 0, 0, MakeTask(0, 2000, 0),
       MakeTask(1, 0, 0), "above load_threshold"},
      {"memory 0.8 + in-flight 1000/10000 = 0.9", true, 0, 0.8, 0, MakeTask(0, 0, 1000),
       MakeTask(1, 0, 0), "above memory_threshold"},
      {"gpu 0.95 blocks a GPU task", true, 0, 0, 0.95, MakeTask(0, 0, 0), MakeTask(1, 0, 0, 1),
       "above gpu_load_threshold"},
      {"gpu 0.95 lets a CPU task through", true, 0, 0, 0.95, MakeTask(0, 0, 0), MakeTask(1, 0, 0), ""},
      {"gpu 0.5 + in-flight 1000/2000 = 1.0", true, 0, 0, 0.5, MakeTask(0, 0, 0, 1),
       MakeTask(1, 0, 0, 1), "above gpu_load_threshold"},
  };
  for (const Row& row : rows) {
    ClusterState c;
    NodeId n = *c.AddNode(Node("g", 10000, 10000, 2));
    if (row.measured) {
      NodeUsage u;
      u.cpu_load = row.cpu_load;
      u.memory_used = row.memory_used;
      u.gpus = {{0, row.gpu_util, 0}, {1, row.gpu_util, 0}};
      ASSERT_TRUE(c.ReportUsage(n, u).ok());
    }
    Task inflight = row.inflight;
    inflight.key = 100;
    std::vector<GpuGrant> grants;
    if (inflight.requests.gpu) grants.push_back({0, 1000, 0});
    ASSERT_TRUE(c.Bind(inflight, AllocFor(inflight, n, grants)).ok());

    framework::ReasonTable reasons;
    LoadThreshold plugin({&reasons, nullptr});
    ASSERT_TRUE(plugin.Configure({"", {{"load_threshold", 0.8}, {"gpu_load_threshold", 0.9},
                                       {"memory_threshold", 0.85}}})
                    .ok());
    std::vector<NodeId> nodes = {n};
    framework::Rejections rej;
    rej.Reset(1, reasons.size());
    plugin.Filter(row.task, c, nodes, rej);
    if (row.want.empty()) {
      EXPECT_EQ(nodes.size(), 1u) << row.name;
    } else {
      ASSERT_TRUE(nodes.empty()) << row.name;
      EXPECT_EQ(reasons.text(rej.reason(n)), row.want) << row.name;
      // Resolvable: preemption judges the node without its victims' load.
      EXPECT_TRUE(reasons.resolvable(rej.reason(n))) << row.name;
    }
  }
}

TEST(LoadThresholdTest, ConfigureRejectsOutOfRangeWithoutChanging) {
  framework::ReasonTable reasons;
  LoadThreshold plugin({&reasons, nullptr});
  for (const auto& bad : {nlohmann::json{{"load_threshold", 0}}, nlohmann::json{{"memory_threshold", 1.5}},
                          nlohmann::json{{"gpu_load_threshold", "high"}}}) {
    Status st = plugin.Configure({"", bad});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad.dump();
  }
  // A rejected change leaves the defaults: 0.85 CPU load is above 0.8.
  ClusterState c;
  NodeId n = *c.AddNode(Node("g", 10000, 10000));
  NodeUsage u;
  u.cpu_load = 0.85;
  ASSERT_TRUE(c.ReportUsage(n, u).ok());
  std::vector<NodeId> nodes = {n};
  framework::Rejections rej;
  rej.Reset(1, reasons.size());
  plugin.Filter(MakeTask(1, 0, 0), c, nodes, rej);
  EXPECT_TRUE(nodes.empty());
}

}  // namespace
}  // namespace hf::plugins
